//! Approvals as server requests: the core [`ApprovalGate`] of every
//! app-server thread.
//!
//! Before a tool runs, the gate classifies the call ([`ApprovalRules`]),
//! decides from the thread's `approvalPolicy` whether to ask, and if so
//! sends `item/commandExecution/requestApproval` (for `bash` and other
//! tools) or `item/fileChange/requestApproval` (for `write`/`edit`)
//! through the broker, after the call's `item/started`. Decisions:
//! `accept` runs the call once; `acceptForSession` (and the amendment
//! variants) also grants the same call for the rest of the session;
//! `decline` refuses it (an optional `note` is passed to the model) and
//! the turn goes on; `cancel` refuses it and interrupts the turn.
//!
//! Policy → keel approval mode: `never` → nothing asks; `on-request` →
//! `outside` (asks for calls that reach outside: shell commands that are
//! not read-only or local changes, unknown tools, deletes); `untrusted`
//! and `granular` → `everything` (also asks for file writes). Reads never
//! ask.
//!
//! Calls are classed by [`BuiltinRules`] (every shell command sends).
//! [`EngineRules`] classes them as RPC mode and `keel exec` do, with the
//! approvals engine's table and shell analysis (`ls` or `echo` read, `touch`
//! writes, `rm -rf` is money and asks like a send); a thread gate built
//! with [`AppServerGate::with_rules`] uses it. Decisions travel as server
//! requests through the broker either way; the engine's durable rows, modes
//! and always-allow rules are not used here yet.

use std::sync::{Arc, Weak};
use std::time::Duration;

use keel_app_server_protocol::v2::{
    ApprovalDecision, ApprovalPolicyName, ApprovalResponse, AskForApproval,
    CommandExecutionRequestApprovalParams, FileChangeRequestApprovalParams, ServerNotification,
    ServerRequest, ThreadStatusChangedNotification,
};
use keel_core::{ApprovalGate, GateDecision, ToolCallInfo};
use keel_protocol::Op;

use crate::broker::BrokerOutcome;
use crate::items::{bash_command, command_actions};
use crate::runtime::Runtime;
use crate::thread_state::LoadedThread;

/// How long the gate waits for the pump to announce a call's item.
const ITEM_ANNOUNCE_WAIT: Duration = Duration::from_secs(5);

/// What a tool call can do, as far as approvals care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolClass {
    Read,
    Write,
    /// Reaches outside the workspace, or is not understood (fail closed).
    Send,
}

/// Classifies tool calls. The default is [`BuiltinRules`].
pub trait ApprovalRules: Send + Sync {
    fn class(&self, call: &ToolCallInfo) -> ToolClass;
}

/// keel's built-in tools: `read`/`grep`/`find`/`ls` read, `write`/`edit`
/// write, everything else (including every shell command) sends.
#[derive(Debug, Clone, Copy, Default)]
pub struct BuiltinRules;

impl ApprovalRules for BuiltinRules {
    fn class(&self, call: &ToolCallInfo) -> ToolClass {
        match call.tool_name.as_str() {
            "read" | "grep" | "find" | "ls" => ToolClass::Read,
            "write" | "edit" => ToolClass::Write,
            _ => ToolClass::Send,
        }
    }
}

/// The approvals engine's classes (`keel_approvals::classify`): built-in
/// tools by name, shell commands parsed; money counts as send here (both
/// ask under every policy but `never`).
#[derive(Debug, Clone, Copy, Default)]
pub struct EngineRules;

impl ApprovalRules for EngineRules {
    fn class(&self, call: &ToolCallInfo) -> ToolClass {
        use keel_core::keel_approvals::{Class, ToolOrigin, classify};
        match classify(&call.tool_name, &call.args, ToolOrigin::Builtin, &call.cwd).class {
            Class::Read => ToolClass::Read,
            Class::Write => ToolClass::Write,
            Class::Send | Class::Money => ToolClass::Send,
        }
    }
}

/// Whether `policy` asks for a call of `class`.
pub fn asks(policy: &AskForApproval, class: ToolClass) -> bool {
    match (policy, class) {
        (_, ToolClass::Read) => false,
        (AskForApproval::Named(ApprovalPolicyName::Never), _) => false,
        (AskForApproval::Named(ApprovalPolicyName::OnRequest), c) => c == ToolClass::Send,
        (AskForApproval::Named(ApprovalPolicyName::Untrusted), _) => true,
        (AskForApproval::Granular { .. }, _) => true,
    }
}

/// The scope an `acceptForSession` grant covers: the exact shell command,
/// the file, or the whole tool.
pub fn grant_key(call: &ToolCallInfo) -> String {
    match call.tool_name.as_str() {
        "bash" => format!("bash\0{}", bash_command(&call.args)),
        "write" | "edit" => format!("file\0{}", call.args["path"].as_str().unwrap_or_default()),
        other => format!("tool\0{other}"),
    }
}

/// The gate of app-server threads.
pub struct AppServerGate {
    runtime: Weak<Runtime>,
    rules: Arc<dyn ApprovalRules>,
}

impl AppServerGate {
    pub fn new(runtime: Weak<Runtime>) -> Self {
        Self::with_rules(runtime, Arc::new(BuiltinRules))
    }

    /// A gate that classes calls with `rules` (for example [`EngineRules`]).
    pub fn with_rules(runtime: Weak<Runtime>, rules: Arc<dyn ApprovalRules>) -> Self {
        Self { runtime, rules }
    }
}

/// Counts a thread as waiting on approval while alive.
struct Waiting {
    thread: Arc<LoadedThread>,
}

impl Waiting {
    fn new(thread: Arc<LoadedThread>) -> Self {
        if let Some(t) = thread.state().active.as_mut() {
            t.waiting_on_approval += 1;
        }
        Self { thread }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(t) = self.thread.state().active.as_mut() {
            t.waiting_on_approval = t.waiting_on_approval.saturating_sub(1);
        }
    }
}

async fn announce_status(runtime: &Runtime, thread: &LoadedThread) {
    if let Some(status) = thread.refresh_status() {
        runtime
            .notify_thread(
                &thread.id,
                &ServerNotification::ThreadStatusChanged(ThreadStatusChangedNotification {
                    thread_id: thread.id.clone(),
                    status,
                }),
            )
            .await;
    }
}

async fn wait_announced(thread: &LoadedThread, call_id: &str) {
    let deadline = tokio::time::Instant::now() + ITEM_ANNOUNCE_WAIT;
    loop {
        let notified = thread.item_started.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if thread.state().started_items.contains(call_id) {
            return;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            tracing::warn!(call = call_id, "the tool item was not announced in time");
            return;
        }
    }
}

fn request_for(call: &ToolCallInfo, turn_id: String) -> ServerRequest {
    let started_at_ms = chrono::Utc::now().timestamp_millis();
    match call.tool_name.as_str() {
        "write" | "edit" => {
            ServerRequest::FileChangeRequestApproval(FileChangeRequestApprovalParams {
                thread_id: call.session_id.clone(),
                turn_id,
                item_id: call.call_id.clone(),
                started_at_ms,
                reason: None,
                grant_root: None,
            })
        }
        tool => {
            let command = if tool == "bash" {
                bash_command(&call.args)
            } else {
                format!("{tool} {}", call.args)
            };
            ServerRequest::CommandExecutionRequestApproval(CommandExecutionRequestApprovalParams {
                thread_id: call.session_id.clone(),
                turn_id,
                item_id: call.call_id.clone(),
                started_at_ms,
                reason: (tool != "bash").then(|| format!("keel tool `{tool}`")),
                command_actions: Some(command_actions(&command)),
                command: Some(command),
                cwd: Some(call.cwd.display().to_string()),
                proposed_execpolicy_amendment: None,
            })
        }
    }
}

fn deny(message: impl Into<String>) -> GateDecision {
    GateDecision::deny(message)
}

#[async_trait::async_trait]
impl ApprovalGate for AppServerGate {
    async fn check(&self, call: &ToolCallInfo) -> GateDecision {
        let Some(runtime) = self.runtime.upgrade() else {
            return deny("the app-server is shutting down");
        };
        let Some(thread) = runtime.thread(&call.session_id) else {
            return deny("the thread is not loaded");
        };
        let class = self.rules.class(call);
        let key = grant_key(call);
        let (policy, granted) = {
            let s = thread.state();
            (s.approval_policy.clone(), s.session_grants.contains(&key))
        };
        if granted || !asks(&policy, class) {
            return GateDecision::Allow;
        }
        wait_announced(&thread, &call.call_id).await;
        let turn_id = thread.active_turn_id().unwrap_or_default();
        let waiting = Waiting::new(thread.clone());
        announce_status(&runtime, &thread).await;
        let outcome = runtime
            .broker
            .request(
                &runtime,
                request_for(call, turn_id),
                runtime.config.approval_timeout,
            )
            .await;
        drop(waiting);
        announce_status(&runtime, &thread).await;
        let response = match outcome {
            BrokerOutcome::Answered(value) => {
                match serde_json::from_value::<ApprovalResponse>(value) {
                    Ok(r) => r,
                    Err(e) => {
                        thread.state().declined.insert(call.call_id.clone());
                        return deny(format!(
                            "The approval answer was not understood ({e}); the tool call was not run."
                        ));
                    }
                }
            }
            BrokerOutcome::Refused(error) => {
                thread.state().declined.insert(call.call_id.clone());
                return deny(format!(
                    "The client refused the approval request ({}); the tool call was not run.",
                    error.message
                ));
            }
            BrokerOutcome::TimedOut => {
                return deny(
                    "Nobody answered the approval request in time; the tool call was not run.",
                );
            }
            BrokerOutcome::Withdrawn => return deny("The approval request was withdrawn."),
        };
        match response.decision {
            ApprovalDecision::Accept => GateDecision::Allow,
            ApprovalDecision::AcceptForSession
            | ApprovalDecision::AcceptWithExecpolicyAmendment { .. }
            | ApprovalDecision::ApplyNetworkPolicyAmendment { .. } => {
                thread.state().session_grants.insert(key);
                GateDecision::Allow
            }
            ApprovalDecision::Decline => {
                thread.state().declined.insert(call.call_id.clone());
                deny(match response.note {
                    Some(note) => format!("The user declined this tool call: {note}"),
                    None => "The user declined this tool call.".to_owned(),
                })
            }
            ApprovalDecision::Cancel => {
                {
                    let mut s = thread.state();
                    s.declined.insert(call.call_id.clone());
                    if let Some(t) = s.active.as_mut() {
                        t.interrupted = true;
                    }
                }
                if let Err(e) = thread.handle.submit(Op::Abort).await {
                    tracing::warn!(error = %e, "cannot interrupt the turn after a cancel");
                }
                deny("The user cancelled this tool call and stopped the turn.")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(tool: &str, args: serde_json::Value) -> ToolCallInfo {
        ToolCallInfo {
            session_id: "t".into(),
            call_id: "c".into(),
            tool_name: tool.into(),
            args,
            cwd: "/w".into(),
        }
    }

    #[test]
    fn policies_map_onto_modes() {
        let never = AskForApproval::Named(ApprovalPolicyName::Never);
        let on_request = AskForApproval::Named(ApprovalPolicyName::OnRequest);
        let untrusted = AskForApproval::Named(ApprovalPolicyName::Untrusted);
        assert!(!asks(&never, ToolClass::Send));
        assert!(asks(&on_request, ToolClass::Send));
        assert!(!asks(&on_request, ToolClass::Write));
        assert!(asks(&untrusted, ToolClass::Write));
        assert!(!asks(&untrusted, ToolClass::Read));
        let rules = BuiltinRules;
        assert_eq!(
            rules.class(&call("bash", json!({"command": "ls"}))),
            ToolClass::Send
        );
        assert_eq!(rules.class(&call("edit", json!({}))), ToolClass::Write);
        assert_eq!(rules.class(&call("mystery", json!({}))), ToolClass::Send);
        let engine = EngineRules;
        assert_eq!(
            engine.class(&call("bash", json!({"command": "ls"}))),
            ToolClass::Read
        );
        assert_eq!(
            engine.class(&call("bash", json!({"command": "ls && rm -rf /"}))),
            ToolClass::Send
        );
        assert_eq!(
            engine.class(&call("write", json!({"path": "a.txt"}))),
            ToolClass::Write
        );
        assert_eq!(engine.class(&call("mystery", json!({}))), ToolClass::Send);
        assert_ne!(
            grant_key(&call("bash", json!({"command": "ls"}))),
            grant_key(&call("bash", json!({"command": "rm -rf /"})))
        );
    }

    #[test]
    fn requests_by_tool() {
        let r = request_for(&call("write", json!({"path": "a"})), "turn".into());
        assert_eq!(r.method(), "item/fileChange/requestApproval");
        let r = request_for(&call("bash", json!({"command": "echo hi"})), "turn".into());
        let ServerRequest::CommandExecutionRequestApproval(p) = r else {
            panic!()
        };
        assert_eq!(p.command.as_deref(), Some("echo hi"));
    }
}
