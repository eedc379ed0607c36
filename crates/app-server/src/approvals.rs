//! Approvals as server requests, through keel's approvals engine
//! (`$KEEL_HOME/keel.db`): the front end of core's approval gate for every
//! app-server thread ([`AppServerFrontend`]), the answers clients send,
//! and the replay of pending requests to a connection that resumes a
//! thread. Judging, waiting, crash recovery, expiry and audit are core's
//! gate's; this module only says what the app-server adds.
//!
//! Before a tool runs, the gate asks the engine under the mode the
//! thread's `approvalPolicy` maps onto ([`mode_for`]).
//! A held call is a stored row first; core flushes the session log; then
//! the front end has the pump announce the call's item (`item/started`, with
//! `thread/status/changed` `waitingOnApproval`) and sends
//! `item/commandExecution/requestApproval` (for `bash` and other tools) or
//! `item/fileChange/requestApproval` (for `write`/`edit`) through the
//! broker, and waits on the row ([`ApprovalEngine::wait`]). An answer is a
//! compare-and-swap on the row ([`ApprovalEngine::decide`]), so the first
//! valid answer wins wherever it comes from (another connection, `keel
//! approvals` on the command line, another keel process):
//!
//! | decision | engine |
//! | --- | --- |
//! | `accept` | approve once |
//! | `acceptForSession` (and the two amendment variants) | approve, with an always-allow rule for this session (money and calls the analyser does not fully understand get none: approved once) |
//! | `decline` (+ keel's optional `note`) | decline; the turn goes on |
//! | `cancel` | decline and stop the turn |
//! | an error reply | decline |
//!
//! Policy → mode: `untrusted` and `granular` → `everything`; `on-request`
//! → `outside`; `never` → `money_only` (keel has no mode that lets money
//! or deletes run unasked). A thread that names no policy gets the one its
//! workspace's stored mode maps back to ([`policy_for`]).
//!
//! Rows outlive the process: after a restart, `thread/resume` sends the
//! thread's pending rows again (new wire ids), and an answer is recorded on
//! the row.

use std::sync::{Arc, Weak};
use std::time::Duration;

use keel_app_server_protocol::RequestId;
use keel_app_server_protocol::v2::{
    ApprovalDecision, ApprovalPolicyName, ApprovalResponse, AskForApproval,
    CommandExecutionRequestApprovalParams, FileChangeRequestApprovalParams, ServerNotification,
    ServerRequest, ServerRequestResolvedNotification, ThreadStatusChangedNotification,
};
use keel_core::keel_approvals::{
    self as engine, ApprovalEngine, Class, Decision, Delivery, Lifetime, Mode, RequestFilter,
    Resolution, Status,
};
use keel_core::{ApprovalFrontend, ToolCallInfo, WaitGuard, workspace_key};
use serde_json::Value;

use crate::items::{bash_command, command_actions};
use crate::notify::Notifier;
use crate::outbound::Connection;
use crate::runtime::Runtime;
use crate::thread_state::LoadedThread;

/// Who app-server decisions are recorded as.
pub const DECIDER: &str = "app-server";
/// How long the gate waits for the pump to announce a held call's item.
const ANNOUNCE_WAIT: Duration = Duration::from_secs(5);

/// The keel mode an approval policy maps onto.
pub fn mode_for(policy: &AskForApproval) -> Mode {
    match policy {
        AskForApproval::Named(ApprovalPolicyName::Untrusted) | AskForApproval::Granular { .. } => {
            Mode::Everything
        }
        AskForApproval::Named(ApprovalPolicyName::OnRequest) => Mode::Outside,
        AskForApproval::Named(ApprovalPolicyName::Never) => Mode::MoneyOnly,
    }
}

/// The approval policy a `permissions` profile id (a mode of
/// `permissionProfile/list`) selects; an unknown id is refused.
pub fn mode_for_profile(id: &str) -> Result<AskForApproval, crate::rpc_error::RpcError> {
    Mode::ALL
        .into_iter()
        .find(|m| m.as_str() == id)
        .map(policy_for)
        .ok_or_else(|| {
            crate::rpc_error::RpcError::invalid(format!(
                "unknown permission profile {id:?}: permissionProfile/list names them"
            ))
        })
}

/// The policy a keel mode is reported as.
pub fn policy_for(mode: Mode) -> AskForApproval {
    AskForApproval::Named(match mode {
        Mode::Everything => ApprovalPolicyName::Untrusted,
        Mode::Outside => ApprovalPolicyName::OnRequest,
        Mode::MoneyOnly => ApprovalPolicyName::Never,
    })
}

/// The policy of a thread that names none: its workspace's stored mode.
pub async fn default_policy(runtime: &Runtime, cwd: &std::path::Path) -> AskForApproval {
    match runtime.approvals().await {
        Ok(engine) => match engine.effective_mode(&workspace_key(cwd)).await {
            Ok(mode) => policy_for(mode),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the workspace's approval mode");
                policy_for(Mode::default())
            }
        },
        Err(_) => policy_for(Mode::default()),
    }
}

/// The front end of the app-server's approval gate (core's
/// [`keel_core::EngineGate`], one per server): announces a held call to
/// the thread's clients as a server request and reports its resolution.
pub struct AppServerFrontend {
    runtime: Weak<Runtime>,
}

/// The app-server's front end for `runtime` (what [`Runtime::new`] takes).
pub fn frontend(runtime: Weak<Runtime>) -> Arc<dyn ApprovalFrontend> {
    Arc::new(AppServerFrontend { runtime })
}

impl AppServerFrontend {
    fn parts(&self, session_id: &str) -> Option<(Arc<Runtime>, Arc<LoadedThread>)> {
        let runtime = self.runtime.upgrade()?;
        let thread = runtime.thread(session_id)?;
        Some((runtime, thread))
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

/// Announces `thread/status/changed` when the thread's flags changed.
pub(crate) async fn announce_status(runtime: &Runtime, thread: &LoadedThread) {
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

/// Announces `serverRequest/resolved` for wire id `id` of `thread_id`.
pub(crate) async fn announce_resolved(runtime: &Runtime, id: i64, thread_id: String) {
    runtime
        .notify_thread(
            &thread_id.clone(),
            &ServerNotification::ServerRequestResolved(ServerRequestResolvedNotification {
                thread_id,
                request_id: RequestId::Integer(id),
            }),
        )
        .await;
}

/// The request for a call of `tool` with `args`.
#[allow(clippy::too_many_arguments)]
fn request_of(
    thread_id: &str,
    turn_id: String,
    call_id: &str,
    tool: &str,
    args: &Value,
    cwd: &str,
    started_at_ms: i64,
    reason: Option<String>,
) -> ServerRequest {
    match tool {
        "write" | "edit" => {
            ServerRequest::FileChangeRequestApproval(FileChangeRequestApprovalParams {
                thread_id: thread_id.to_owned(),
                turn_id,
                item_id: call_id.to_owned(),
                started_at_ms,
                reason,
                grant_root: None,
            })
        }
        _ => {
            let command = if tool == "bash" {
                bash_command(args)
            } else {
                format!("{tool} {args}")
            };
            ServerRequest::CommandExecutionRequestApproval(CommandExecutionRequestApprovalParams {
                thread_id: thread_id.to_owned(),
                turn_id,
                item_id: call_id.to_owned(),
                started_at_ms,
                reason,
                command_actions: Some(command_actions(&command)),
                command: Some(command),
                cwd: Some(cwd.to_owned()),
                proposed_execpolicy_amendment: None,
            })
        }
    }
}

/// The request for a stored row.
fn request_for_row(
    row: &engine::PendingRequest,
    args: &Value,
    turn_id: String,
    cwd: &str,
) -> ServerRequest {
    request_of(
        &row.session_id,
        turn_id,
        &row.call_id,
        &row.tool,
        args,
        cwd,
        row.created_at,
        Some(format!("{}: {}", row.class_label, row.reason)),
    )
}

#[async_trait::async_trait]
impl ApprovalFrontend for AppServerFrontend {
    /// Drafts: never made here (no thread is unattended).
    async fn requested(&self, request: &engine::PendingRequest) {
        tracing::info!(id = %request.id, "tool call drafted");
    }

    async fn held(&self, request: &engine::PendingRequest, call: &ToolCallInfo) -> WaitGuard {
        let Some((runtime, thread)) = self.parts(&call.session_id) else {
            return Box::new(());
        };
        // The row is stored and the session log flushed: announce. A call
        // held by a turn another server started (its thread runs no turn
        // here) is only offered for a decision.
        let waiting = Waiting::new(thread.clone());
        let turn_id = thread.active_turn_id();
        if turn_id.is_some() {
            if tokio::time::timeout(
                ANNOUNCE_WAIT,
                thread.announce_held(&call.call_id, &call.tool_name, &call.args),
            )
            .await
            .is_err()
            {
                tracing::warn!(call = %call.call_id, "the held call's item was not announced in time");
            }
            announce_status(&runtime, &thread).await;
        }
        let turn_id = match turn_id {
            Some(id) => id,
            None => runtime.unnamed_turn_id(&thread, None).await,
        };
        let cwd = call.cwd.display().to_string();
        runtime
            .broker
            .announce(
                runtime.as_ref(),
                &request.id,
                request_for_row(request, &call.args, turn_id, &cwd),
            )
            .await;
        Box::new(waiting)
    }

    async fn resolved(&self, request: &engine::PendingRequest, resolution: &Resolution) {
        let Some((runtime, thread)) = self.parts(&request.session_id) else {
            return;
        };
        if let Some((id, thread_id)) = runtime.broker.finish(&request.id) {
            announce_resolved(&runtime, id, thread_id).await;
        }
        announce_status(&runtime, &thread).await;
        let call_id = request.call_id.clone();
        match resolution {
            Resolution::Approved { .. } => {}
            Resolution::Declined { stop_turn, .. } => {
                let mut s = thread.state();
                s.declined.insert(call_id);
                if *stop_turn && let Some(t) = s.active.as_mut() {
                    t.interrupted = true;
                }
            }
            Resolution::Expired { .. } | Resolution::Cancelled { .. } => {
                thread.state().declined.insert(call_id);
            }
        }
    }

    /// An interrupted turn drops its wait; the turn's end reports it.
    async fn cancelled(&self, _request: &engine::PendingRequest) {}

    fn refuse(&self, call: &ToolCallInfo) -> Option<String> {
        self.parts(&call.session_id)
            .is_none()
            .then(|| "The app-server is shutting down; the call did not run.".to_owned())
    }

    fn host_class(&self, tool: &str) -> Option<Option<Class>> {
        // keel's app-server tools that only report to the client.
        (tool == crate::plan::PLAN_TOOL).then_some(Some(Class::Read))
    }

    fn mode(&self, call: &ToolCallInfo) -> Option<Mode> {
        let (_, thread) = self.parts(&call.session_id)?;
        Some(mode_for(&thread.state().approval_policy))
    }

    fn decider(&self) -> &str {
        DECIDER
    }
}

/// A client's answer to a server request.
#[derive(Debug, Clone)]
pub enum Answer {
    Result(Value),
    Error(keel_app_server_protocol::ErrorObject),
}

/// Records a client's answer on the row the request stands for: the
/// first valid answer wins (a second one is logged and ignored, as is an
/// answer that cannot be read: the request stays pending).
pub async fn answer(runtime: &Arc<Runtime>, conn: &Connection, id: &RequestId, answer: Answer) {
    // An MCP server's question: the answer goes to the call that asked.
    if let Some(waiter) = runtime.broker.take_question(conn.id, id) {
        match waiter {
            Some(tx) => {
                let _ = tx.send(match answer {
                    Answer::Result(v) => Ok(v),
                    Answer::Error(e) => Err(e),
                });
            }
            None => {
                tracing::info!(%id, "the question was already answered: this answer is ignored")
            }
        }
        return;
    }
    let Some(entry) = runtime.broker.eligible(conn.id, id) else {
        return;
    };
    let engine = match runtime.approvals().await {
        Ok(e) => e,
        Err(reason) => {
            tracing::error!(%id, "cannot record the answer: {reason}");
            return;
        }
    };
    let decision = match answer {
        Answer::Error(e) => Decision::Decline {
            note: Some(format!("The client refused the request: {}", e.message)),
            stop_turn: false,
        },
        Answer::Result(value) => match serde_json::from_value::<ApprovalResponse>(value) {
            Ok(r) => engine_decision(&r, &entry.thread_id),
            Err(e) => {
                tracing::warn!(%id, error = %e, "an approval answer that cannot be read: ignored");
                return;
            }
        },
    };
    let always = matches!(decision, Decision::ApproveAlways { .. });
    let mut result = engine
        .decide(&entry.approval_id, decision, DECIDER, None)
        .await;
    if always && let Err(engine::Error::RuleRefused(why)) = &result {
        tracing::info!(%id, "no always-allow for this call ({why}); approved once");
        result = engine
            .decide(&entry.approval_id, Decision::Approve, DECIDER, None)
            .await;
    }
    match result {
        Ok(_) => {}
        Err(engine::Error::AlreadyDecided { .. }) => {
            tracing::info!(%id, "the request was already decided: this answer is ignored");
        }
        Err(e) => {
            tracing::error!(%id, error = %e, "recording the answer failed");
            return;
        }
    }
    // A live wait announces the resolution itself, in order with the turn.
    if !entry.live
        && let Some((wire, thread_id)) = runtime.broker.finish(&entry.approval_id)
    {
        announce_resolved(runtime, wire, thread_id).await;
    }
}

fn engine_decision(r: &ApprovalResponse, thread_id: &str) -> Decision {
    match &r.decision {
        ApprovalDecision::Accept => Decision::Approve,
        ApprovalDecision::AcceptForSession
        | ApprovalDecision::AcceptWithExecpolicyAmendment { .. }
        | ApprovalDecision::ApplyNetworkPolicyAmendment { .. } => Decision::ApproveAlways {
            scope: None,
            lifetime: Lifetime::Session {
                session_id: thread_id.to_owned(),
            },
        },
        ApprovalDecision::Decline => Decision::Decline {
            note: r.note.clone(),
            stop_turn: false,
        },
        ApprovalDecision::Cancel => Decision::Decline {
            note: r.note.clone(),
            stop_turn: true,
        },
    }
}

/// Sends the thread's pending requests to a connection that just resumed
/// it (which becomes eligible to answer them): the ones a turn waits on
/// now, and the rows a previous keel process left pending.
pub async fn replay(runtime: &Arc<Runtime>, thread_id: &str, conn: &Arc<Connection>) {
    let Ok(engine) = runtime.approvals().await else {
        return;
    };
    let rows = match pending_rows(engine, thread_id).await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::error!(error = %e, "listing the thread's pending approvals failed");
            return;
        }
    };
    let thread = runtime.thread(thread_id);
    for row in rows {
        let card = engine::PendingRequest::from_record(&row);
        let (turn_id, cwd) = match &thread {
            Some(t) => {
                // Stored with its turn, or held by the turn that runs now.
                let stored = crate::history::turn_of_call(
                    thread_id,
                    &crate::history::steps(&t.handle.tree()),
                    &row.call_id,
                );
                let turn_id = match stored.or_else(|| t.active_turn_id()) {
                    Some(id) => id,
                    None => runtime.unnamed_turn_id(t, None).await,
                };
                (turn_id, t.state().cwd.display().to_string())
            }
            None => (String::new(), row.workspace.clone()),
        };
        runtime
            .broker
            .send_to(conn, &row.id, || {
                request_for_row(&card, &row.args, turn_id, &cwd)
            })
            .await;
    }
}

async fn pending_rows(
    engine: &ApprovalEngine,
    thread_id: &str,
) -> engine::Result<Vec<engine::ApprovalRecord>> {
    engine.expire_due().await?;
    let mut rows = engine
        .requests(RequestFilter {
            session_id: Some(thread_id.to_owned()),
            status: Some(Status::Pending),
            delivery: Some(Delivery::Wait),
            ..Default::default()
        })
        .await?;
    rows.sort_by_key(|r| r.created_at);
    Ok(rows)
}

/// Cancels the pending rows of a thread that is being deleted.
pub async fn cancel_thread(runtime: &Runtime, thread_id: &str) {
    if let Ok(engine) = runtime.approvals().await
        && let Err(e) = engine.cancel_session(thread_id, DECIDER).await
    {
        tracing::warn!(error = %e, "cancelling a deleted thread's approvals failed");
    }
    runtime.broker.forget_thread(thread_id);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn policies_map_onto_modes_and_back() {
        for name in [
            ApprovalPolicyName::Untrusted,
            ApprovalPolicyName::OnRequest,
            ApprovalPolicyName::Never,
        ] {
            let p = AskForApproval::Named(name);
            assert_eq!(policy_for(mode_for(&p)), p);
        }
        assert_eq!(
            mode_for(&AskForApproval::Granular {
                granular: json!({})
            }),
            Mode::Everything
        );
    }

    #[test]
    fn decisions_map_onto_the_engine() {
        let r = |v: Value| {
            serde_json::from_value::<ApprovalResponse>(v).unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(
            engine_decision(&r(json!({"decision": "accept"})), "t"),
            Decision::Approve
        );
        assert!(matches!(
            engine_decision(&r(json!({"decision": "acceptForSession"})), "t"),
            Decision::ApproveAlways { lifetime: Lifetime::Session { session_id }, .. } if session_id == "t"
        ));
        assert_eq!(
            engine_decision(&r(json!({"decision": "decline", "note": "no"})), "t"),
            Decision::Decline {
                note: Some("no".into()),
                stop_turn: false
            }
        );
        assert!(matches!(
            engine_decision(&r(json!({"decision": "cancel"})), "t"),
            Decision::Decline {
                stop_turn: true,
                ..
            }
        ));
    }

    #[test]
    fn requests_by_tool() {
        let r = request_of(
            "t",
            "u".into(),
            "c",
            "write",
            &json!({"path": "a"}),
            "/w",
            0,
            None,
        );
        assert_eq!(r.method(), "item/fileChange/requestApproval");
        let r = request_of(
            "t",
            "u".into(),
            "c",
            "bash",
            &json!({"command": "echo hi"}),
            "/w",
            0,
            None,
        );
        let ServerRequest::CommandExecutionRequestApproval(p) = r else {
            panic!("not a command request")
        };
        assert_eq!(p.command.as_deref(), Some("echo hi"));
    }
}
