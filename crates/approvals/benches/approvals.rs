//! Micro-benchmarks of the approval gate's pure hot paths: shell analysis of
//! a command line ([`analyze`], tree-sitter-bash plus the program tables)
//! and always-allow rule matching ([`classify`] + [`rules::coverage`])
//! against a workspace's rule list. No database is involved.
//! Run with `cargo bench -p keel-approvals --bench approvals`.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_approvals::rules::{self, Lifetime, Rule, RuleScope};
use keel_approvals::{ToolOrigin, analyze, classify};
use serde_json::json;

/// Command lines as agents write them, from trivial to busy.
const COMMANDS: &[(&str, &str)] = &[
    ("simple", "ls -la src"),
    ("pipeline", "grep -rn 'fn main' crates | sort | head -20"),
    (
        "compound",
        "cd crates/core && cargo test --lib -- --nocapture 2>&1 | tail -n 50",
    ),
    (
        "script",
        "for f in $(git diff --name-only HEAD~1); do if [ -f \"$f\" ]; then wc -l \"$f\"; fi; done > /tmp/counts.txt",
    ),
];

fn rule(n: usize, tool: &str, scope: RuleScope) -> Rule {
    Rule {
        id: format!("rule_{n}"),
        workspace: "/work/project".to_owned(),
        tool: tool.to_owned(),
        operation: None,
        scope,
        lifetime: Lifetime::Permanent,
        label: format!("rule {n}"),
        created_at: 0,
        created_from: None,
        last_matched_at: None,
        match_count: 0,
    }
}

/// 40 rules of every kind; the matching one for each probe comes last.
fn rule_set() -> Vec<Rule> {
    let mut out = Vec::new();
    let programs = [
        "npm", "make", "docker", "pytest", "go", "yarn", "pnpm", "just",
    ];
    for (i, p) in programs.iter().enumerate() {
        for sub in ["test", "build", "run"] {
            out.push(rule(
                out.len() + i,
                "bash",
                RuleScope::Command {
                    prefix: vec![(*p).to_owned(), sub.to_owned()],
                },
            ));
        }
    }
    for g in ["docs/**", "*.md", "tests/fixtures/**", "web/src/**/*.ts"] {
        out.push(rule(
            out.len(),
            "write",
            RuleScope::PathGlob { glob: g.to_owned() },
        ));
    }
    for h in ["api.github.com", "registry.npmjs.org", "pypi.org"] {
        out.push(rule(
            out.len(),
            "fetch",
            RuleScope::Host { host: h.to_owned() },
        ));
    }
    out.push(rule(
        out.len(),
        "bash",
        RuleScope::Command {
            prefix: vec!["cargo".to_owned(), "test".to_owned()],
        },
    ));
    out.push(rule(
        out.len(),
        "write",
        RuleScope::PathGlob {
            glob: "crates/**/*.rs".to_owned(),
        },
    ));
    out
}

fn bench_analyze(c: &mut Criterion) {
    let mut g = c.benchmark_group("approvals/analyze");
    for (name, cmd) in COMMANDS {
        g.bench_function(*name, |b| b.iter(|| analyze(black_box(cmd))));
    }
    g.finish();
}

fn bench_rules(c: &mut Criterion) {
    let rules = rule_set();
    let cwd = Path::new("/work/project");
    let mut g = c.benchmark_group("approvals/rules");

    let bash = json!({"command": "cargo test -p keel-core --lib 2>&1 | tail -n 40"});
    let call = classify("bash", &bash, ToolOrigin::Builtin, cwd);
    assert!(rules::coverage(&rules, &call, "s1").is_some());
    g.bench_function("coverage/bash_prefix", |b| {
        b.iter(|| rules::coverage(black_box(&rules), black_box(&call), "s1"))
    });
    g.bench_function("classify_and_cover/bash_prefix", |b| {
        b.iter(|| {
            let call = classify("bash", black_box(&bash), ToolOrigin::Builtin, cwd);
            rules::coverage(&rules, &call, "s1").is_some()
        })
    });

    let write = json!({"path": "crates/core/src/run.rs", "content": "fn main() {}\n"});
    let call = classify("write", &write, ToolOrigin::Builtin, cwd);
    assert!(rules::coverage(&rules, &call, "s1").is_some());
    g.bench_function("coverage/path_glob", |b| {
        b.iter(|| rules::coverage(black_box(&rules), black_box(&call), "s1"))
    });

    let miss = json!({"command": "curl -sSL https://example.com/install.sh -o install.sh"});
    let call = classify("bash", &miss, ToolOrigin::Builtin, cwd);
    g.bench_function("coverage/bash_no_match", |b| {
        b.iter(|| rules::coverage(black_box(&rules), black_box(&call), "s1"))
    });
    g.finish();
}

criterion_group!(benches, bench_analyze, bench_rules);
criterion_main!(benches);
