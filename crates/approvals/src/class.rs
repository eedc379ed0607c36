//! Approval classes and the one table that gives every tool call its class.
//!
//! Owns [`Class`] (`read < write < send < money`), the table of built-in
//! tools ([`BUILTIN_TOOLS`]), how host and MCP tools declare a class, and
//! [`classify`]: tool name + arguments (+ where the tool comes from) → class,
//! reason and the target a rule can be scoped to (a path, a host, a parsed
//! shell command). Unknown tools are send. It must not know about modes,
//! rules, storage or the agent loop.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::places::{Place, Places};
use crate::shell::{self, ShellAnalysis};

pub use crate::class_kind::Class;

/// How a built-in tool is classed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinKind {
    /// Always read.
    Read,
    /// Changes the file named by its `path` argument.
    WritesPath,
    /// Runs its `command` argument through the shell analyser.
    Shell,
}

/// Every built-in tool and how it is classed. A tool missing here is send.
pub const BUILTIN_TOOLS: &[(&str, BuiltinKind)] = &[
    ("read", BuiltinKind::Read),
    ("grep", BuiltinKind::Read),
    ("find", BuiltinKind::Read),
    ("ls", BuiltinKind::Read),
    ("write", BuiltinKind::WritesPath),
    ("edit", BuiltinKind::WritesPath),
    ("bash", BuiltinKind::Shell),
];

/// Argument names that hold a URL, in the order they are looked at.
pub const URL_FIELDS: &[&str] = &["url", "uri", "href", "endpoint", "address"];

/// Argument names that name an operation of a host tool.
pub const OPERATION_FIELDS: &[&str] = &["operation", "action", "method"];

/// Where a tool comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ToolOrigin {
    /// keel's own tools, classed by [`BUILTIN_TOOLS`].
    #[default]
    Builtin,
    /// A host tool or MCP tool, with the class its definition declares
    /// (`approvalClass`, or [`Class::from_mcp_hints`]); undeclared is send.
    Host { class: Option<Class> },
}

/// What a call acts on, as far as rules are concerned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Target {
    None,
    /// A file: its absolute path and, when inside the workspace, its path
    /// relative to the workspace root (with `/` separators).
    Path {
        absolute: PathBuf,
        relative: Option<String>,
    },
    /// A URL's host (lower case).
    Host {
        host: String,
        url: String,
    },
    /// A shell command line, analysed.
    Shell {
        analysis: ShellAnalysis,
    },
}

/// The class of one call and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    pub tool: String,
    pub class: Class,
    /// False when part of the call could not be seen through (shell only).
    pub understood: bool,
    pub reason: String,
    /// The host tool's operation (`operation`/`action`/`method` argument).
    pub operation: Option<String>,
    pub target: Target,
    /// It changes files beyond the workspace: held in every mode, never
    /// covered by a rule.
    #[serde(default)]
    pub escapes: bool,
}

/// Classes one call. `cwd` is the workspace root paths resolve against;
/// nothing is protected beyond it (see [`classify_in`]).
pub fn classify(tool: &str, args: &Value, origin: ToolOrigin, cwd: &Path) -> Classification {
    classify_in(tool, args, origin, &Places::new(cwd))
}

/// Classes one call against `places`: the workspace root paths resolve
/// against, and keel's protected state.
pub fn classify_in(
    tool: &str,
    args: &Value,
    origin: ToolOrigin,
    places: &Places,
) -> Classification {
    classify_judged(tool, args, origin, places, None)
}

/// The argument with which a call asks to run beyond the sandbox:
/// `{"network": true, "writable": ["/abs"], "unconfined": true}` (any of
/// them). Such a call is at least send (asked as the mode asks for send;
/// a rule may cover network access); asking to write paths or to run
/// without walls is held in every mode and never covered by a rule, as a
/// write outside the workspace is. The card's reason names what it asks
/// for.
pub const SANDBOX_PERMISSIONS_ARG: &str = "sandbox_permissions";

/// [`classify_in`] for a call whose written file the caller already
/// resolved (`write_target`, physical): that file is classed, not the
/// `path` argument resolved again.
pub fn classify_judged(
    tool: &str,
    args: &Value,
    origin: ToolOrigin,
    places: &Places,
    write_target: Option<&Path>,
) -> Classification {
    let mut c = classify_call(tool, args, origin, places, write_target);
    if let Some(asked) = sandbox_permissions(args) {
        c.class = c.class.max(Class::Send);
        let widens_files = args[SANDBOX_PERMISSIONS_ARG]
            .get("writable")
            .and_then(Value::as_array)
            .is_some_and(|w| !w.is_empty())
            || args[SANDBOX_PERMISSIONS_ARG].get("unconfined") == Some(&Value::Bool(true));
        if widens_files {
            c.escapes = true;
            c.understood = false;
        }
        c.reason = format!("asks to run beyond the sandbox: {asked}; {}", c.reason);
    }
    c
}

/// What a `sandbox_permissions` argument asks for, in words.
pub fn sandbox_permissions(args: &Value) -> Option<String> {
    let asked = args.get(SANDBOX_PERMISSIONS_ARG)?.as_object()?;
    let mut parts = Vec::new();
    if asked.get("unconfined").and_then(Value::as_bool) == Some(true) {
        parts.push("no sandbox at all (danger-full-access)".to_owned());
    }
    if asked.get("network").and_then(Value::as_bool) == Some(true) {
        parts.push("network access".to_owned());
    }
    for p in asked
        .get("writable")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        parts.push(format!("writing {p}"));
    }
    Some(if parts.is_empty() {
        "nothing named".to_owned()
    } else {
        parts.join(", ")
    })
}

fn classify_call(
    tool: &str,
    args: &Value,
    origin: ToolOrigin,
    places: &Places,
    write_target: Option<&Path>,
) -> Classification {
    let base = |class: Class, reason: String| Classification {
        tool: tool.to_owned(),
        class,
        understood: true,
        reason,
        operation: None,
        target: Target::None,
        escapes: false,
    };
    match origin {
        ToolOrigin::Host { class } => {
            let mut c = match class {
                Some(class) => base(class, format!("the host declares `{tool}` as {class}")),
                None => base(
                    Class::Send,
                    format!("`{tool}` is a host tool that declares no class"),
                ),
            };
            c.operation = operation_of(args);
            if let Some((host, url)) = url_of(args) {
                c.target = Target::Host { host, url };
            }
            c
        }
        ToolOrigin::Builtin => match BUILTIN_TOOLS.iter().find(|(n, _)| *n == tool) {
            None => base(Class::Send, format!("`{tool}` is not a known tool")),
            Some((_, BuiltinKind::Read)) => base(Class::Read, format!("`{tool}` only reads")),
            Some((_, BuiltinKind::WritesPath)) => {
                classify_path_write(tool, args, places, write_target)
            }
            Some((_, BuiltinKind::Shell)) => {
                let Some(command) = args.get("command").and_then(Value::as_str) else {
                    let mut c = base(Class::Send, "the shell call has no command".to_owned());
                    c.understood = false;
                    return c;
                };
                let mut analysis = shell::analyze(command);
                let escapes = crate::shell_places::place(&mut analysis, places);
                Classification {
                    tool: tool.to_owned(),
                    class: analysis.class,
                    understood: analysis.understood,
                    reason: analysis.reason(),
                    operation: None,
                    target: Target::Shell { analysis },
                    escapes,
                }
            }
        },
    }
}

fn classify_path_write(
    tool: &str,
    args: &Value,
    places: &Places,
    write_target: Option<&Path>,
) -> Classification {
    let cwd = places.workspace.as_path();
    let mut c = Classification {
        tool: tool.to_owned(),
        class: Class::Write,
        understood: true,
        reason: format!("`{tool}` changes a file"),
        operation: None,
        target: Target::None,
        escapes: false,
    };
    let Some(raw) = args.get("path").and_then(Value::as_str) else {
        c.reason = format!("`{tool}` changes a file (no path given)");
        return c;
    };
    let Ok(absolute) = keel_tools::resolve_path(cwd, raw) else {
        c.reason = format!("`{tool}` changes a file (unusable path {raw:?})");
        return c;
    };
    let (place, real) = match write_target {
        Some(real) => (places.place_of(real), real.to_path_buf()),
        None => places.locate(&absolute),
    };
    let relative = match &place {
        Place::Inside(rel) => Some(rel.clone()),
        Place::Outside | Place::Protected => None,
    };
    let shown = relative
        .clone()
        .unwrap_or_else(|| absolute.display().to_string());
    let via = if real == absolute {
        String::new()
    } else {
        format!(" (really `{}`)", real.display())
    };
    if place == Place::Protected {
        c.class = Class::Money;
        c.understood = false;
        c.escapes = true;
        c.reason = format!("`{tool}` changes `{shown}`{via}: {PROTECTED_WHY}");
    } else if let Some(why) = crate::shell::sensitive_path(&real.to_string_lossy()) {
        c.class = Class::Send;
        c.understood = false;
        c.reason = format!("`{tool}` changes `{shown}`{via}: {why}; never covered by rules");
    } else if relative.is_some() {
        c.reason = format!("`{tool}` changes `{shown}` in the workspace");
    } else {
        c.class = Class::Send;
        c.understood = false;
        c.escapes = true;
        c.reason = format!("`{tool}` changes `{shown}`{via}, {OUTSIDE_WHY}");
    }
    c.target = Target::Path { absolute, relative };
    c
}

pub(crate) use crate::class_kind::{OUTSIDE_WHY, PROTECTED_WHY};

/// A host tool's operation, if its arguments name one.
pub fn operation_of(args: &Value) -> Option<String> {
    OPERATION_FIELDS.iter().find_map(|f| {
        args.get(*f).and_then(Value::as_str).map(|v| {
            if *f == "method" {
                v.to_ascii_uppercase()
            } else {
                v.to_owned()
            }
        })
    })
}

/// The first URL argument and its host.
pub fn url_of(args: &Value) -> Option<(String, String)> {
    URL_FIELDS.iter().find_map(|f| {
        let url = args.get(*f).and_then(Value::as_str)?;
        url_host(url).map(|h| (h, url.to_owned()))
    })
}

/// The host of an absolute URL (`scheme://[user@]host[:port]/...`), lower case.
pub fn url_host(url: &str) -> Option<String> {
    let (_, rest) = url.trim().split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_builtin_tool_is_in_the_table() {
        let names: Vec<String> = keel_tools::builtin_tools()
            .iter()
            .map(|t| t.name().to_owned())
            .collect();
        assert!(!names.is_empty());
        for name in &names {
            assert!(
                BUILTIN_TOOLS.iter().any(|(n, _)| n == name),
                "built-in tool `{name}` is missing from BUILTIN_TOOLS"
            );
        }
        assert_eq!(
            names.len(),
            BUILTIN_TOOLS.len(),
            "stale entries in BUILTIN_TOOLS"
        );
    }

    #[test]
    fn builtin_classes_follow_the_design() {
        let cwd = Path::new("/ws");
        let c = |tool: &str, args: Value| classify(tool, &args, ToolOrigin::Builtin, cwd).class;
        for t in ["read", "grep", "find", "ls"] {
            assert_eq!(
                c(t, json!({"path": "/etc/passwd", "pattern": "x"})),
                Class::Read,
                "{t}"
            );
        }
        assert_eq!(
            c("write", json!({"path": "src/a.rs", "content": ""})),
            Class::Write
        );
        assert_eq!(c("edit", json!({"path": "src/a.rs"})), Class::Write);
        assert_eq!(c("bash", json!({"command": "ls -la"})), Class::Read);
        assert_eq!(c("bash", json!({"command": "cargo test"})), Class::Send);
        assert_eq!(c("bash", json!({"command": "rm -rf target"})), Class::Money);
        assert_eq!(c("bash", json!({})), Class::Send);
        assert_eq!(c("frobnicate", json!({})), Class::Send);
    }

    #[test]
    fn writes_into_git_internals_are_send() {
        let cwd = Path::new("/ws");
        for p in [
            ".git/hooks/pre-commit",
            "/ws/.git/config",
            "sub/.git/hooks/post-checkout",
        ] {
            let c = classify("write", &json!({"path": p}), ToolOrigin::Builtin, cwd);
            assert_eq!(c.class, Class::Send, "{p}: {}", c.reason);
            assert!(
                !c.understood,
                "{p}: path rules must never match git internals"
            );
        }
        let c = classify(
            "edit",
            &json!({"path": "../elsewhere.txt"}),
            ToolOrigin::Builtin,
            cwd,
        );
        assert_eq!(
            c.class,
            Class::Send,
            "a write outside the workspace is held"
        );
        assert!(c.escapes && !c.understood, "never covered by a rule");
        assert!(c.reason.contains("outside the workspace"), "{}", c.reason);
        assert_eq!(
            c.target,
            Target::Path {
                absolute: PathBuf::from("/elsewhere.txt"),
                relative: None
            }
        );
        let c = classify(
            "edit",
            &json!({"path": "./src/lib.rs"}),
            ToolOrigin::Builtin,
            cwd,
        );
        assert_eq!(
            c.target,
            Target::Path {
                absolute: PathBuf::from("/ws/src/lib.rs"),
                relative: Some("src/lib.rs".to_owned())
            }
        );
    }

    #[test]
    fn host_tools_use_their_declared_class_else_send() {
        let cwd = Path::new("/ws");
        let declared = classify(
            "read",
            &json!({}),
            ToolOrigin::Host {
                class: Some(Class::Write),
            },
            cwd,
        );
        assert_eq!(
            declared.class,
            Class::Write,
            "a host tool never takes a built-in's class"
        );
        let undeclared = classify(
            "fetch",
            &json!({"url": "https://API.Example.com:8443/v1?q=1", "method": "get"}),
            ToolOrigin::Host { class: None },
            cwd,
        );
        assert_eq!(undeclared.class, Class::Send);
        assert_eq!(undeclared.operation.as_deref(), Some("GET"));
        assert_eq!(
            undeclared.target,
            Target::Host {
                host: "api.example.com".to_owned(),
                url: "https://API.Example.com:8443/v1?q=1".to_owned()
            }
        );
    }

    #[test]
    fn mcp_hints() {
        assert_eq!(
            Class::from_mcp_hints(Some(true), Some(true), None),
            Class::Read
        );
        assert_eq!(Class::from_mcp_hints(None, Some(true), None), Class::Money);
        assert_eq!(
            Class::from_mcp_hints(Some(false), Some(false), Some(false)),
            Class::Write
        );
        assert_eq!(
            Class::from_mcp_hints(Some(false), Some(false), None),
            Class::Send
        );
        assert_eq!(Class::from_mcp_hints(None, None, None), Class::Send);
    }

    #[test]
    fn class_order_and_names() {
        assert!(
            Class::Read < Class::Write && Class::Write < Class::Send && Class::Send < Class::Money
        );
        for c in Class::ALL {
            assert_eq!(c.as_str().parse::<Class>().unwrap(), c);
            assert_eq!(serde_json::to_value(c).unwrap(), c.as_str());
        }
        assert!("huge".parse::<Class>().is_err());
    }

    #[test]
    fn url_hosts() {
        assert_eq!(
            url_host("https://user:pw@Example.org./x").as_deref(),
            Some("example.org")
        );
        assert_eq!(url_host("http://[::1]:80/").as_deref(), Some("::1"));
        assert_eq!(url_host("example.org/x"), None);
        assert_eq!(url_host("https:///x"), None);
    }

    #[test]
    fn asking_beyond_the_sandbox_is_send_and_files_are_never_ruled() {
        let places = Places::new(Path::new("/ws"));
        let ls = |asked: Value| {
            classify_judged(
                "bash",
                &serde_json::json!({"command": "ls", "sandbox_permissions": asked}),
                ToolOrigin::Builtin,
                &places,
                None,
            )
        };
        let net = ls(serde_json::json!({"network": true}));
        assert_eq!(net.class, Class::Send);
        assert!(!net.escapes, "network may be covered by a rule");
        assert!(net.reason.contains("network access"), "{}", net.reason);
        let file = ls(serde_json::json!({"writable": ["/etc/hosts"]}));
        assert!(file.escapes && file.reason.contains("writing /etc/hosts"));
        let all = ls(serde_json::json!({"unconfined": true}));
        assert!(all.escapes && all.reason.contains("danger-full-access"));
    }
}
