//! Unattended mode (`negotiate_unattended`): a host running keel with no
//! person watching declares its budget, scopes and action allowlist up
//! front, and keel fails closed outside them.
//!
//! Owns the declaration's validation (missing or partial → refused, also
//! unknown scopes or actions), and the checks made once it is accepted:
//! every command against the scopes (`scope_denied`), every tool call
//! against the action allowlist (`action_denied`) and the tool-call budget,
//! tokens, cost and wall time against the budget (`budget_exhausted`; the
//! running run is aborted when the budget runs out mid-run). Each decision
//! is one line in `audit.jsonl` in RPC mode's state directory (a row of
//! the shared database when there is one, through
//! `keel_session_store::home_files`) and a log event. Whether a `bash` call is `bash.readonly` is the approvals shell
//! analyser's verdict (class read). It does not know how commands or tools
//! work.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use keel_protocol::Usage;
use keel_tools::{Tool, ToolContext, ToolOutput};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::wire_errors::{self, WireError};

/// Scopes of commands, and the commands in each. Reading state is always
/// allowed.
const SCOPES: &[(&str, &[&str])] = &[
    (
        "prompt",
        &["prompt", "steer", "follow_up", "abort_and_prompt"],
    ),
    (
        "control",
        &[
            "abort",
            "set_steering_mode",
            "set_follow_up_mode",
            "set_interrupt_mode",
            "set_thinking_level",
            "cycle_thinking_level",
            "set_model",
            "cycle_model",
            "set_todos",
            "set_session_name",
            "workflow_gate_response",
            "approval_response",
            "set_approval_mode",
            "add_approval_rule",
            "remove_approval_rule",
            "compact",
            "set_auto_compaction",
            "set_auto_retry",
            "abort_retry",
        ],
    ),
    ("bash", &["bash", "abort_bash"]),
    (
        "session",
        &["new_session", "switch_session", "branch", "export_html"],
    ),
    (
        "host",
        &["set_host_tools", "set_host_uri_schemes", "set_mcp_servers"],
    ),
];

/// Actions a tool call may need.
const ACTIONS: &[&str] = &[
    "bash",
    "bash.readonly",
    "file.read",
    "file.write",
    "host_tool",
    "host_uri.read",
    "host_uri.write",
    "ask_host",
];

/// The budget of an unattended run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub(crate) struct Budget {
    pub max_tokens: u64,
    pub max_tool_calls: u64,
    pub max_wall_time_ms: u64,
    pub max_cost_usd: f64,
}

/// An accepted declaration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Declaration {
    pub actor: String,
    pub budget: Budget,
    pub scopes: Vec<String>,
    pub action_allowlist: Vec<String>,
}

/// Checks a declaration; every problem is listed.
fn parse_declaration(v: Option<&Value>) -> Result<Declaration, Vec<String>> {
    let mut problems = Vec::new();
    let Some(obj) = v.and_then(Value::as_object) else {
        return Err(vec!["declaration: missing or not an object".to_owned()]);
    };
    let actor = match obj.get("actor").and_then(Value::as_str).map(str::trim) {
        Some(a) if !a.is_empty() => a.to_owned(),
        _ => {
            problems.push("declaration.actor: missing or empty".to_owned());
            String::new()
        }
    };
    let budget_obj = obj.get("budget").and_then(Value::as_object);
    if budget_obj.is_none() {
        problems.push("declaration.budget: missing or not an object".to_owned());
    }
    let mut int = |key: &str| -> u64 {
        match budget_obj.and_then(|b| b.get(key)).and_then(Value::as_u64) {
            Some(n) if n > 0 => n,
            _ => {
                if budget_obj.is_some() {
                    problems.push(format!(
                        "declaration.budget.{key}: missing or not a positive integer"
                    ));
                }
                0
            }
        }
    };
    let max_tokens = int("max_tokens");
    let max_tool_calls = int("max_tool_calls");
    let max_wall_time_ms = int("max_wall_time_ms");
    let max_cost_usd = match budget_obj
        .and_then(|b| b.get("max_cost_usd"))
        .and_then(Value::as_f64)
    {
        Some(c) if c > 0.0 && c.is_finite() => c,
        _ => {
            if budget_obj.is_some() {
                problems.push(
                    "declaration.budget.max_cost_usd: missing or not a positive number".to_owned(),
                );
            }
            0.0
        }
    };
    let mut list = |key: &str, known: &[&str]| -> Vec<String> {
        let Some(items) = obj.get(key).and_then(Value::as_array) else {
            problems.push(format!("declaration.{key}: missing or not an array"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items {
            match item.as_str() {
                Some(s)
                    if known.contains(&s)
                        || (key == "action_allowlist" && s.starts_with("host_tool.")) =>
                {
                    out.push(s.to_owned())
                }
                _ => problems.push(format!("declaration.{key}: unknown entry {item}")),
            }
        }
        out
    };
    let scope_names: Vec<&str> = SCOPES.iter().map(|(s, _)| *s).collect();
    let scopes = list("scopes", &scope_names);
    let action_allowlist = list("action_allowlist", ACTIONS);
    if problems.is_empty() {
        Ok(Declaration {
            actor,
            budget: Budget {
                max_tokens,
                max_tool_calls,
                max_wall_time_ms,
                max_cost_usd,
            },
            scopes,
            action_allowlist,
        })
    } else {
        Err(problems)
    }
}

/// The scope a command belongs to (`None`: always allowed).
fn scope_of(command: &str) -> Option<&'static str> {
    SCOPES
        .iter()
        .find(|(_, cmds)| cmds.contains(&command))
        .map(|(s, _)| *s)
}

/// Whether a shell command only reads: exactly when the approvals shell
/// analyser (tree-sitter-bash; every simple command, redirect, env prefix
/// and substitution judged) classes the whole line as read and understood
/// all of it. Anything it cannot see through (`$(…)`, `bash -c`, `eval`,
/// variables as programs, parse errors) is at least send, so not read.
pub(crate) fn bash_is_readonly(command: &str) -> bool {
    let analysis = keel_core::keel_approvals::analyze(command);
    analysis.class == keel_core::keel_approvals::Class::Read
        && analysis.understood
        && !analysis.commands.is_empty()
}

/// One audit line.
#[derive(Debug, Serialize)]
struct AuditLine<'a> {
    ts: String,
    actor: &'a str,
    subject: &'a str,
    name: &'a str,
    decision: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    detail: Option<&'a str>,
}

struct State {
    declaration: Declaration,
    started: Instant,
    tokens: u64,
    cost: f64,
    tool_calls: u64,
}

/// The unattended control plane of this process.
pub(crate) struct Unattended {
    audit: Option<PathBuf>,
    state: Mutex<Option<State>>,
}

impl Unattended {
    pub fn new(state_dir: Option<&Path>) -> Self {
        Self {
            audit: state_dir.map(|d| d.join("audit.jsonl")),
            state: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Option<State>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn active(&self) -> bool {
        self.lock().is_some()
    }

    fn audit(&self, subject: &str, name: &str, denied: Option<(&str, &str)>) {
        let actor = self
            .lock()
            .as_ref()
            .map(|s| s.declaration.actor.clone())
            .unwrap_or_default();
        let line = AuditLine {
            ts: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            actor: &actor,
            subject,
            name,
            decision: if denied.is_some() { "deny" } else { "allow" },
            code: denied.map(|(c, _)| c),
            detail: denied.map(|(_, d)| d),
        };
        tracing::info!(subject, name, decision = line.decision, code = ?line.code, "unattended decision");
        let Some(path) = &self.audit else { return };
        let Ok(mut bytes) = serde_json::to_vec(&line) else {
            return;
        };
        bytes.push(b'\n');
        let result = keel_session_store::home_files::append_blocking(path, &bytes);
        if let Err(e) = result {
            tracing::error!(error = %e, "cannot write the unattended audit log");
        }
    }

    /// `negotiate_unattended`.
    pub fn negotiate(&self, declaration: Option<&Value>) -> Result<Value, WireError> {
        if self.active() {
            let e = wire_errors::unattended::already();
            self.audit_result("negotiation", "negotiate_unattended", &Err(e.clone()));
            return Err(e);
        }
        let declaration = match parse_declaration(declaration) {
            Ok(d) => d,
            Err(problems) => {
                let detail = problems.join("; ");
                self.audit(
                    "negotiation",
                    "negotiate_unattended",
                    Some(("unattended_refused", &detail)),
                );
                return Err(wire_errors::unattended::refused(&problems));
            }
        };
        let now = chrono::Utc::now();
        let expires =
            now + chrono::Duration::milliseconds(declaration.budget.max_wall_time_ms as i64);
        let data = json!({
            "status": "accepted",
            "actor": declaration.actor,
            "budget": declaration.budget,
            "scopes": declaration.scopes,
            "action_allowlist": declaration.action_allowlist,
            "negotiated_at": now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            "expires_at": expires.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        });
        *self.lock() = Some(State {
            declaration,
            started: Instant::now(),
            tokens: 0,
            cost: 0.0,
            tool_calls: 0,
        });
        self.audit("negotiation", "negotiate_unattended", None);
        Ok(data)
    }

    /// The budget failure now, if any.
    fn exhausted(state: &State) -> Option<WireError> {
        let b = &state.declaration.budget;
        let elapsed = state.started.elapsed().as_millis() as u64;
        let (which, used, limit) = if state.tokens >= b.max_tokens {
            ("max_tokens", json!(state.tokens), json!(b.max_tokens))
        } else if state.cost >= b.max_cost_usd {
            ("max_cost_usd", json!(state.cost), json!(b.max_cost_usd))
        } else if elapsed >= b.max_wall_time_ms {
            (
                "max_wall_time_ms",
                json!(elapsed),
                json!(b.max_wall_time_ms),
            )
        } else {
            return None;
        };
        Some(wire_errors::unattended::budget_exhausted(
            which, used, limit,
        ))
    }

    /// Checks a command against the scopes and (for commands that start
    /// work) the budget. Always `Ok` when unattended mode is off.
    pub fn check_command(&self, command: &str) -> Result<(), WireError> {
        let verdict = {
            let guard = self.lock();
            let Some(state) = guard.as_ref() else {
                return Ok(());
            };
            match scope_of(command) {
                Some(scope) if !state.declaration.scopes.iter().any(|s| s == scope) => {
                    Err(wire_errors::unattended::scope_denied(command, scope))
                }
                Some("prompt" | "bash") => Self::exhausted(state).map_or(Ok(()), Err),
                _ => Ok(()),
            }
        };
        self.audit_result("command", command, &verdict);
        verdict
    }

    fn audit_result(&self, subject: &str, name: &str, verdict: &Result<(), WireError>) {
        match verdict {
            Ok(()) => self.audit(subject, name, None),
            Err(e) => {
                let v = e.to_value();
                let code = v["code"].as_str().unwrap_or("denied").to_owned();
                let msg = v["message"].as_str().unwrap_or_default().to_owned();
                self.audit(subject, name, Some((&code, &msg)));
            }
        }
    }

    /// Counts a model call's usage; `true` when the budget is now used up.
    pub fn record_usage(&self, usage: &Usage) -> bool {
        let mut guard = self.lock();
        let Some(state) = guard.as_mut() else {
            return false;
        };
        state.tokens += usage.input + usage.output + usage.cache_read + usage.cache_write;
        state.cost += usage.cost.total;
        let out = Self::exhausted(state).is_some();
        drop(guard);
        if out {
            self.audit(
                "budget",
                "model_usage",
                Some(("budget_exhausted", "the run is aborted")),
            );
        }
        out
    }

    /// The wall-time left, when unattended mode is on.
    pub fn time_left(&self) -> Option<Duration> {
        self.lock().as_ref().map(|s| {
            Duration::from_millis(s.declaration.budget.max_wall_time_ms)
                .saturating_sub(s.started.elapsed())
        })
    }

    /// Checks one tool call against the allowlist and the budget.
    fn check_tool(&self, action: &str, tool: &str) -> Result<(), WireError> {
        let verdict = {
            let mut guard = self.lock();
            let Some(state) = guard.as_mut() else {
                return Ok(());
            };
            if !allows(&state.declaration, action) {
                Err(wire_errors::unattended::action_denied(tool, action))
            } else if state.tool_calls >= state.declaration.budget.max_tool_calls {
                Err(wire_errors::unattended::budget_exhausted(
                    "max_tool_calls",
                    json!(state.tool_calls),
                    json!(state.declaration.budget.max_tool_calls),
                ))
            } else if let Some(e) = Self::exhausted(state) {
                Err(e)
            } else {
                state.tool_calls += 1;
                Ok(())
            }
        };
        self.audit_result("tool", tool, &verdict);
        verdict
    }
}

impl Unattended {
    /// The refusal of a call whose action the declaration does not allow,
    /// checked before the approvals (so such a call is refused, not drafted
    /// for a person); written to the audit log like the tools' own checks.
    /// `None` when unattended mode is off or the action is allowed (the
    /// budget is still checked when the tool runs).
    pub fn refuse_action(
        &self,
        tool: &str,
        args: &Value,
        host_scheme: &dyn Fn(&str) -> bool,
    ) -> Option<String> {
        let action = action_of(tool, args, host_scheme);
        let denied = {
            let guard = self.lock();
            let state = guard.as_ref()?;
            (!allows(&state.declaration, &action))
                .then(|| wire_errors::unattended::action_denied(tool, &action))
        }?;
        self.audit_result("tool", tool, &Err(denied.clone()));
        Some(wire_errors::tool_text::unattended_refusal(&denied))
    }
}

/// Whether the declaration's allowlist covers `action`.
fn allows(declaration: &Declaration, action: &str) -> bool {
    declaration.action_allowlist.iter().any(|a| {
        a == action
            || (action == "bash.readonly" && a == "bash")
            || (action.starts_with("host_tool.") && a == "host_tool")
    })
}

/// The action a tool call needs.
fn action_of(tool: &str, args: &Value, host_scheme: &dyn Fn(&str) -> bool) -> String {
    let path_is_host = keel_tools::host::path_scheme(args).is_some_and(|s| host_scheme(&s));
    match tool {
        "read" | "grep" | "find" | "ls" if path_is_host => "host_uri.read".to_owned(),
        "write" | "edit" if path_is_host => "host_uri.write".to_owned(),
        "read" | "grep" | "find" | "ls" => "file.read".to_owned(),
        "write" | "edit" => "file.write".to_owned(),
        "bash" => {
            let cmd = args
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or_default();
            if bash_is_readonly(cmd) {
                "bash.readonly".to_owned()
            } else {
                "bash".to_owned()
            }
        }
        crate::gates::tool::NAME => "ask_host".to_owned(),
        other => format!("host_tool.{other}"),
    }
}

/// A tool that asks the unattended control plane first.
pub(crate) struct Guarded {
    pub inner: Arc<dyn Tool>,
    pub policy: Arc<Unattended>,
    pub host_scheme: Arc<dyn Fn(&str) -> bool + Send + Sync>,
}

#[async_trait::async_trait]
impl Tool for Guarded {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }
    fn write_target(&self, cwd: &std::path::Path, args: &Value) -> Option<std::path::PathBuf> {
        self.inner.write_target(cwd, args)
    }
    async fn execute(&self, ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        let action = action_of(self.inner.name(), &args, self.host_scheme.as_ref());
        if let Err(e) = self.policy.check_tool(&action, self.inner.name()) {
            return Err(keel_tools::Error::Failed(
                crate::wire_errors::tool_text::unattended_refusal(&e),
            ));
        }
        self.inner.execute(ctx, args).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full() -> Value {
        json!({"actor": "openclaw/hermes",
            "budget": {"max_tokens": 1000, "max_tool_calls": 2, "max_wall_time_ms": 3_600_000, "max_cost_usd": 20},
            "scopes": ["prompt", "control"],
            "action_allowlist": ["bash.readonly", "file.write"]})
    }

    fn code(e: WireError) -> String {
        e.to_value()["code"].as_str().unwrap_or_default().to_owned()
    }

    #[test]
    fn partial_declarations_are_refused() {
        let u = Unattended::new(None);
        assert_eq!(code(u.negotiate(None).unwrap_err()), "unattended_refused");
        let mut partial = full();
        partial["budget"]
            .as_object_mut()
            .unwrap()
            .remove("max_cost_usd");
        let err = u.negotiate(Some(&partial)).unwrap_err().to_value();
        assert_eq!(err["code"], "unattended_refused");
        assert!(
            err["problems"][0]
                .as_str()
                .unwrap()
                .contains("max_cost_usd")
        );
        let mut unknown = full();
        unknown["scopes"] = json!(["prompt", "everything"]);
        assert!(u.negotiate(Some(&unknown)).is_err());
        assert!(!u.active());
        let ok = u.negotiate(Some(&full())).unwrap();
        assert_eq!(ok["status"], "accepted");
        assert_eq!(
            code(u.negotiate(Some(&full())).unwrap_err()),
            "already_unattended"
        );
    }

    #[test]
    fn scopes_actions_and_budgets_fail_closed() {
        let u = Unattended::new(None);
        assert!(u.check_command("bash").is_ok(), "attended: everything goes");
        u.negotiate(Some(&full())).unwrap();
        assert!(u.check_command("prompt").is_ok());
        assert!(u.check_command("get_state").is_ok());
        assert_eq!(code(u.check_command("bash").unwrap_err()), "scope_denied");
        assert_eq!(
            code(u.check_command("new_session").unwrap_err()),
            "scope_denied"
        );
        assert_eq!(
            code(u.check_tool("bash", "bash").unwrap_err()),
            "action_denied"
        );
        assert!(u.check_tool("bash.readonly", "bash").is_ok());
        assert!(u.check_tool("file.write", "write").is_ok());
        assert_eq!(
            code(u.check_tool("file.write", "write").unwrap_err()),
            "budget_exhausted"
        );
        assert!(u.record_usage(&Usage {
            input: 990,
            output: 20,
            ..Usage::default()
        }));
        assert_eq!(
            code(u.check_command("prompt").unwrap_err()),
            "budget_exhausted"
        );
    }

    #[test]
    fn readonly_bash_is_what_the_analyser_calls_read() {
        for ok in [
            "ls -la",
            "git status",
            "grep -rn foo src | head -5",
            "find . -name '*.rs'",
            "cat Cargo.toml && wc -l README.md",
            "echo hi > /dev/null",
        ] {
            assert!(bash_is_readonly(ok), "{ok}");
        }
    }

    #[test]
    fn readonly_bash_refuses_bypass_attempts() {
        for no in [
            "",
            "   ",
            "rm -rf x",
            "ls && rm -rf x",
            "ls || rm -rf x",
            "ls; rm x",
            "ls\nrm x",
            "ls | xargs rm",
            "echo hi > f",
            "cat < f >> g",
            "ls 2> err.txt",
            "cat $(which sh)",
            "echo `rm -rf x`",
            "ls $(touch pwned)",
            "bash -c 'rm -rf x'",
            "sh -c ls",
            "eval 'rm -rf x'",
            "env rm -rf x",
            "PATH=/tmp ls",
            "LD_PRELOAD=/tmp/x.so ls",
            "GIT_DIR=/tmp/x git status",
            "$CMD",
            "x=rm; $x -rf y",
            "find . -delete",
            "find . -exec rm {} +",
            "git push",
            "git -c core.pager=sh status",
            "sed -i s/a/b/ f",
            "tee out.txt",
            "ls && touch x",
            "(cd /; rm -rf x)",
            "{ ls; rm x; }",
            "if true; then rm x; fi",
            "for f in *; do rm $f; done",
            "python3 -c 'import os'",
            "xargs -a list rm",
            "ls 'unterminated",
        ] {
            assert!(!bash_is_readonly(no), "{no:?} must not be bash.readonly");
        }
    }

    #[test]
    fn actions_of_tools() {
        let none = |_: &str| false;
        let db = |s: &str| s == "db";
        assert_eq!(action_of("read", &json!({"path": "a"}), &none), "file.read");
        assert_eq!(
            action_of("read", &json!({"path": "db://x"}), &db),
            "host_uri.read"
        );
        assert_eq!(
            action_of("edit", &json!({"path": "db://x"}), &db),
            "host_uri.write"
        );
        assert_eq!(
            action_of("bash", &json!({"command": "ls"}), &none),
            "bash.readonly"
        );
        assert_eq!(
            action_of("echo_host", &json!({}), &none),
            "host_tool.echo_host"
        );
    }
}
