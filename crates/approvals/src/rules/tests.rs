//! Tests of rule validation, coverage and suggestions.

use std::path::Path;

use serde_json::json;

use super::*;
use crate::class::{ToolOrigin, classify};

fn bash(cmd: &str) -> Classification {
    classify(
        "bash",
        &json!({ "command": cmd }),
        ToolOrigin::Builtin,
        Path::new("/ws"),
    )
}

fn new_rule(tool: &str, scope: RuleScope) -> NewRule {
    NewRule {
        workspace: "/ws".to_owned(),
        tool: tool.to_owned(),
        operation: None,
        scope,
        lifetime: Lifetime::Permanent,
        label: None,
        created_from: None,
    }
}

fn rule(id: &str, tool: &str, scope: RuleScope) -> Rule {
    Rule {
        id: id.to_owned(),
        workspace: "/ws".to_owned(),
        tool: tool.to_owned(),
        operation: None,
        label: default_label(tool, None, &scope),
        scope,
        lifetime: Lifetime::Permanent,
        created_at: 0,
        created_from: None,
        last_matched_at: None,
        match_count: 0,
    }
}

fn prefix(words: &[&str]) -> RuleScope {
    RuleScope::Command {
        prefix: words.iter().map(|w| (*w).to_owned()).collect(),
    }
}

#[test]
fn validation_refuses_money_interpreters_wrappers_and_bad_scopes() {
    let ok = |tool: &str, scope: RuleScope| validate(&new_rule(tool, scope), None);
    assert!(ok("bash", prefix(&["cargo", "test"])).is_ok());
    assert!(ok("bash", prefix(&["RUST_LOG=debug", "cargo", "test"])).is_ok());
    assert!(ok("bash", prefix(&["python3", "-m", "pytest"])).is_ok());
    assert!(ok("bash", prefix(&["bash", "scripts/check.sh"])).is_ok());
    assert!(ok("bash", RuleScope::Tool).is_ok());
    assert!(
        ok(
            "write",
            RuleScope::PathGlob {
                glob: "src/**".to_owned()
            }
        )
        .is_ok()
    );
    assert!(
        ok(
            "fetch",
            RuleScope::Host {
                host: "api.example.com".to_owned()
            }
        )
        .is_ok()
    );

    for (tool, scope) in [
        ("bash", prefix(&["rm"])),
        ("bash", prefix(&["git", "push", "--force"])),
        ("bash", prefix(&["python3"])),
        ("bash", prefix(&["bash", "-c"])),
        ("bash", prefix(&["sudo", "apt"])),
        ("bash", prefix(&["xargs"])),
        ("bash", prefix(&["eval"])),
        ("bash", prefix(&["PATH=.", "ls"])),
        ("bash", prefix(&[])),
        ("bash", prefix(&["cargo", ""])),
        ("bash", prefix(&["ls && rm -rf /"])),
        ("write", prefix(&["ls"])),
        (
            "bash",
            RuleScope::Host {
                host: "x.com".to_owned(),
            },
        ),
        (
            "fetch",
            RuleScope::Host {
                host: "X.com".to_owned(),
            },
        ),
        (
            "fetch",
            RuleScope::Host {
                host: "x.com/path".to_owned(),
            },
        ),
        (
            "write",
            RuleScope::PathGlob {
                glob: "/etc/**".to_owned(),
            },
        ),
        (
            "write",
            RuleScope::PathGlob {
                glob: "../**".to_owned(),
            },
        ),
        (
            "write",
            RuleScope::PathGlob {
                glob: "src/[".to_owned(),
            },
        ),
        ("", RuleScope::Tool),
    ] {
        let r = ok(tool, scope.clone());
        assert!(
            matches!(r, Err(Error::RuleRefused(_))),
            "{tool} {scope:?}: {r:?}"
        );
    }
    let money = validate(&new_rule("stripe", RuleScope::Tool), Some(Class::Money));
    assert!(matches!(money, Err(Error::RuleRefused(m)) if m.contains("money")));
}

#[test]
fn a_prefix_covers_its_command_and_nothing_else() {
    let rules = [rule("r1", "bash", prefix(&["cargo", "test"]))];
    let covered = |cmd: &str| coverage(&rules, &bash(cmd), "s1");
    let c = covered("cargo test --all").expect("covered");
    assert_eq!(c.rule_ids, ["r1"]);
    assert_eq!(c.residual, Class::Read);
    assert_eq!(
        covered("cd crates && cargo test").map(|c| c.residual),
        Some(Class::Read)
    );
    assert_eq!(
        covered("cargo test > log.txt").map(|c| c.residual),
        Some(Class::Write)
    );
    assert_eq!(
        covered("cargo test && curl x").map(|c| c.residual),
        Some(Class::Send)
    );
    assert_eq!(covered("cargo testx"), None);
    assert_eq!(covered("cargo build"), None);
    assert_eq!(
        covered("cargo test && rm -rf x"),
        None,
        "money is never covered"
    );
    assert_eq!(
        covered("cargo test $(whoami)"),
        None,
        "not understood is never covered"
    );
    assert_eq!(
        covered("FOO=1 cargo test"),
        None,
        "env prefixes must be spelled out"
    );
    assert_eq!(covered("/usr/bin/cargo test"), None);
    assert_eq!(covered("time cargo test"), None);
    assert_eq!(covered("ls"), None, "read is not a rule's business");
}

#[test]
fn every_command_of_a_list_must_be_covered_or_read() {
    let rules = [
        rule("r1", "bash", prefix(&["cargo", "test"])),
        rule("r2", "bash", prefix(&["cargo", "clippy"])),
    ];
    let c = coverage(
        &rules,
        &bash("cargo test && cargo clippy && git status"),
        "s",
    )
    .unwrap();
    assert_eq!(c.rule_ids, ["r1", "r2"]);
    assert_eq!(c.residual, Class::Read);
    let c = coverage(&rules, &bash("cargo test; npm publish"), "s").unwrap();
    assert_eq!(c.residual, Class::Send, "npm publish is left uncovered");
}

#[test]
fn the_bypass_corpus_never_matches_rules() {
    let rules = [
        rule("tool", "bash", RuleScope::Tool),
        rule("ls", "bash", prefix(&["ls"])),
        rule("cat", "bash", prefix(&["cat"])),
        rule("echo", "bash", prefix(&["echo"])),
        rule("git", "bash", prefix(&["git"])),
        rule("find", "bash", prefix(&["find"])),
        rule("curl", "bash", prefix(&["curl"])),
        rule("cargo", "bash", prefix(&["cargo", "test"])),
    ];
    for (cmd, _) in crate::shell::tests::BYPASSES {
        let call = bash(cmd);
        assert_eq!(
            coverage(&rules, &call, "s"),
            None,
            "{cmd:?} matched a rule ({})",
            call.reason
        );
        assert_eq!(suggest(&call), None, "{cmd:?} offered a rule");
    }
}

#[test]
fn lifetimes_operations_hosts_globs_and_whole_tools() {
    let mut session_rule = rule("r1", "bash", prefix(&["make"]));
    session_rule.lifetime = Lifetime::Session {
        session_id: "s1".to_owned(),
    };
    let rules = [session_rule];
    assert!(coverage(&rules, &bash("make all"), "s1").is_some());
    assert!(coverage(&rules, &bash("make all"), "s2").is_none());

    let host_call = classify(
        "fetch",
        &json!({"url": "https://api.example.com/v1", "method": "GET"}),
        ToolOrigin::Host { class: None },
        Path::new("/ws"),
    );
    let mut get_rule = rule(
        "h1",
        "fetch",
        RuleScope::Host {
            host: "api.example.com".to_owned(),
        },
    );
    get_rule.operation = Some("GET".to_owned());
    assert!(coverage(std::slice::from_ref(&get_rule), &host_call, "s").is_some());
    let mut post_rule = get_rule.clone();
    post_rule.operation = Some("POST".to_owned());
    assert!(coverage(&[post_rule], &host_call, "s").is_none());
    let other_host = rule(
        "h2",
        "fetch",
        RuleScope::Host {
            host: "evil.example.com".to_owned(),
        },
    );
    assert!(coverage(&[other_host], &host_call, "s").is_none());
    assert!(coverage(&[rule("t", "fetch", RuleScope::Tool)], &host_call, "s").is_some());
    assert!(coverage(&[rule("t", "other", RuleScope::Tool)], &host_call, "s").is_none());

    let write = |p: &str| {
        classify(
            "write",
            &json!({"path": p}),
            ToolOrigin::Builtin,
            Path::new("/ws"),
        )
    };
    let glob = [rule(
        "g",
        "write",
        RuleScope::PathGlob {
            glob: "src/**".to_owned(),
        },
    )];
    assert!(coverage(&glob, &write("src/a/b.rs"), "s").is_some());
    assert!(coverage(&glob, &write("/ws/src/lib.rs"), "s").is_some());
    assert!(coverage(&glob, &write("tests/a.rs"), "s").is_none());
    assert!(coverage(&glob, &write("/elsewhere/src/a.rs"), "s").is_none());
    let star = [rule(
        "g",
        "write",
        RuleScope::PathGlob {
            glob: "*.md".to_owned(),
        },
    )];
    assert!(coverage(&star, &write("README.md"), "s").is_some());
    assert!(
        coverage(&star, &write("docs/x.md"), "s").is_none(),
        "`*` stays in one folder"
    );
    let all = [rule(
        "g",
        "write",
        RuleScope::PathGlob {
            glob: "**".to_owned(),
        },
    )];
    assert!(coverage(&all, &write(".git/hooks/pre-commit"), "s").is_none());
}

#[test]
fn suggestions_name_what_they_allow() {
    let scope = |cmd: &str| suggest(&bash(cmd)).map(|o| o.scope);
    assert_eq!(scope("cargo test --all"), Some(prefix(&["cargo", "test"])));
    assert_eq!(
        scope("npm run build -- --prod"),
        Some(prefix(&["npm", "run", "build"]))
    );
    assert_eq!(
        scope("cd crates && cargo test 2>&1 | tail -5"),
        Some(prefix(&["cargo", "test"]))
    );
    assert_eq!(
        scope("./scripts/check.sh --fast"),
        Some(prefix(&["./scripts/check.sh"]))
    );
    assert_eq!(
        scope("RUST_LOG=1 cargo run"),
        Some(prefix(&["RUST_LOG=1", "cargo", "run"]))
    );
    assert_eq!(
        scope("cargo test && cargo clippy"),
        None,
        "one rule cannot name both"
    );
    assert_eq!(
        scope("cargo test -p x && cargo test -p y"),
        Some(prefix(&["cargo", "test"]))
    );
    assert_eq!(scope("rm -rf target"), None);
    assert_eq!(scope("python3 gen.py"), None);
    assert_eq!(scope("sudo make install"), None);
    assert_eq!(scope("ls"), None);
    assert_eq!(
        scope("echo hi > out.txt"),
        None,
        "write redirects alone are not a program to allow"
    );
    let label = suggest(&bash("cargo test")).unwrap().label;
    assert_eq!(label, "Always allow `cargo test …`");

    let write = |p: &str| {
        suggest(&classify(
            "edit",
            &json!({"path": p}),
            ToolOrigin::Builtin,
            Path::new("/ws"),
        ))
        .map(|o| o.scope)
    };
    assert_eq!(
        write("src/a/b.rs"),
        Some(RuleScope::PathGlob {
            glob: "src/a/**".to_owned()
        })
    );
    assert_eq!(
        write("README.md"),
        Some(RuleScope::PathGlob {
            glob: "README.md".to_owned()
        })
    );
    assert_eq!(write("/etc/hosts"), None);
    assert_eq!(write(".git/config"), None);

    let host = suggest(&classify(
        "fetch",
        &json!({"url": "https://docs.rs/x", "method": "get"}),
        ToolOrigin::Host { class: None },
        Path::new("/ws"),
    ))
    .unwrap();
    assert_eq!(
        host.scope,
        RuleScope::Host {
            host: "docs.rs".to_owned()
        }
    );
    assert_eq!(host.operation.as_deref(), Some("GET"));
    assert_eq!(host.label, "Always allow fetch: GET on docs.rs");
    let money = classify(
        "pay",
        &json!({}),
        ToolOrigin::Host {
            class: Some(Class::Money),
        },
        Path::new("/ws"),
    );
    assert_eq!(suggest(&money), None);
    let tool = classify(
        "notify",
        &json!({}),
        ToolOrigin::Host { class: None },
        Path::new("/ws"),
    );
    assert_eq!(suggest(&tool).map(|o| o.scope), Some(RuleScope::Tool));
}

#[test]
fn scopes_round_trip_through_storage_parts() {
    for s in [
        prefix(&["cargo", "test"]),
        RuleScope::Host {
            host: "x.org".to_owned(),
        },
        RuleScope::PathGlob {
            glob: "src/**".to_owned(),
        },
        RuleScope::Tool,
    ] {
        assert_eq!(RuleScope::from_parts(s.kind(), &s.value()).unwrap(), s);
        assert!(!s.describe().is_empty());
    }
    assert!(RuleScope::from_parts("nope", "").is_err());
}
