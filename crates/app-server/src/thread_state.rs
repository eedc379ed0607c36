//! A loaded thread: a running keel session plus what the protocol adds to
//! it (approval policy, sandbox, the active turn, status flags, the calls
//! a client declined, the pump's control channel), and the `Thread` object
//! built from it.
//!
//! It must not know connections: fan-out goes through the runtime.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use keel_app_server_protocol::RequestId;
use keel_app_server_protocol::v2::{
    AskForApproval, SandboxPolicy, Thread, ThreadActiveFlag, ThreadStatus, Turn,
};
use keel_core::{ModelInfo, SessionHandle, shutdown_split};
use keel_session_store::SessionWriter;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::outbound::ConnectionId;

/// What other tasks ask the pump to send, in order with the turn's events.
#[derive(Debug)]
pub enum Control {
    /// A held tool call (core emits its start only once it is decided):
    /// announce its item now; `done` fires once it is sent.
    AnnounceHeld {
        call_id: String,
        tool: String,
        args: serde_json::Value,
        done: oneshot::Sender<()>,
    },
}

/// How long the event pump waits for a `turn/start` response to be queued
/// before it announces the turn anyway.
pub const TURN_READY_WAIT: Duration = Duration::from_secs(5);

/// The turn in progress.
#[derive(Debug)]
pub struct ActiveTurn {
    pub id: String,
    pub started_at_ms: i64,
    /// Fires once the response that created the turn is queued.
    pub ready: Option<oneshot::Receiver<()>>,
    /// `turn/interrupt` or a `cancel` decision was received.
    pub interrupted: bool,
    /// Approval requests waiting for an answer.
    pub waiting_on_approval: usize,
    /// MCP servers' questions waiting for an answer.
    pub waiting_on_input: usize,
    /// `turn/interrupt` requests not answered yet: the event pump answers
    /// them once the turn has ended, before `turn/completed` (as Codex
    /// does), so a client sees the response first.
    pub interrupt_requests: Vec<(ConnectionId, RequestId)>,
}

impl ActiveTurn {
    /// A turn starting now; `ready` fires once the response that created
    /// it is queued (`None`: nothing to wait for).
    pub fn new(id: String, ready: Option<oneshot::Receiver<()>>) -> Self {
        Self {
            id,
            started_at_ms: chrono::Utc::now().timestamp_millis(),
            ready,
            interrupted: false,
            waiting_on_approval: 0,
            waiting_on_input: 0,
            interrupt_requests: Vec::new(),
        }
    }
}

/// Mutable protocol-side state of a thread.
#[derive(Debug)]
pub struct ThreadState {
    pub cwd: PathBuf,
    pub model: ModelInfo,
    pub approval_policy: AskForApproval,
    pub sandbox: SandboxPolicy,
    pub ephemeral: bool,
    pub path: Option<PathBuf>,
    /// Unix seconds.
    pub created_at: i64,
    pub updated_at: i64,
    pub name: Option<String>,
    pub preview: String,
    pub originator: Option<String>,
    pub forked_from: Option<String>,
    pub status: ThreadStatus,
    pub active: Option<ActiveTurn>,
    /// Turns this process ran (newest last), summaries only.
    pub turns: Vec<Turn>,
    /// Tool calls a client declined.
    pub declined: HashSet<String>,
}

/// A thread with a running session.
pub struct LoadedThread {
    pub id: String,
    pub handle: SessionHandle,
    pub writer: Option<SessionWriter>,
    /// The MCP servers the thread's own config named (stopped with it).
    pub mcp: Option<std::sync::Arc<keel_mcp::McpServers>>,
    state: Mutex<ThreadState>,
    /// Asks the event pump for things only it may send (in order).
    control: Mutex<Option<mpsc::Sender<Control>>>,
    task: Mutex<Option<JoinHandle<()>>>,
    pump: Mutex<Option<JoinHandle<()>>>,
}

impl LoadedThread {
    pub fn new(
        id: String,
        handle: SessionHandle,
        writer: Option<SessionWriter>,
        mcp: Option<std::sync::Arc<keel_mcp::McpServers>>,
        state: ThreadState,
        task: JoinHandle<()>,
    ) -> Self {
        Self {
            id,
            handle,
            writer,
            mcp,
            state: Mutex::new(state),
            control: Mutex::new(None),
            task: Mutex::new(Some(task)),
            pump: Mutex::new(None),
        }
    }

    pub fn state(&self) -> MutexGuard<'_, ThreadState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn set_pump(&self, pump: JoinHandle<()>, control: mpsc::Sender<Control>) {
        if let Ok(mut p) = self.pump.lock() {
            *p = Some(pump);
        }
        if let Ok(mut c) = self.control.lock() {
            *c = Some(control);
        }
    }

    /// Has the pump announce a held tool call's item (after every event
    /// core emitted before it); returns once it is sent.
    pub async fn announce_held(&self, call_id: &str, tool: &str, args: &serde_json::Value) {
        let control = self.control.lock().ok().and_then(|c| c.clone());
        let Some(control) = control else { return };
        let (done, announced) = oneshot::channel();
        let sent = control
            .send(Control::AnnounceHeld {
                call_id: call_id.to_owned(),
                tool: tool.to_owned(),
                args: args.clone(),
                done,
            })
            .await;
        if sent.is_ok() {
            let _ = announced.await;
        }
    }

    /// The active turn's id, if a turn runs.
    pub fn active_turn_id(&self) -> Option<String> {
        self.state().active.as_ref().map(|t| t.id.clone())
    }

    /// Takes the active turn's unanswered `turn/interrupt` requests.
    pub fn take_interrupt_requests(&self) -> Vec<(ConnectionId, RequestId)> {
        self.state()
            .active
            .as_mut()
            .map(|t| std::mem::take(&mut t.interrupt_requests))
            .unwrap_or_default()
    }

    /// The status with the current flags.
    pub fn status(&self) -> ThreadStatus {
        self.state().status.clone()
    }

    /// Recomputes `status` from the active turn; returns it when it changed.
    pub fn refresh_status(&self) -> Option<ThreadStatus> {
        let mut s = self.state();
        let next = match &s.active {
            Some(turn) => ThreadStatus::Active {
                active_flags: [
                    (turn.waiting_on_approval > 0).then_some(ThreadActiveFlag::WaitingOnApproval),
                    (turn.waiting_on_input > 0).then_some(ThreadActiveFlag::WaitingOnUserInput),
                ]
                .into_iter()
                .flatten()
                .collect(),
            },
            None => match s.status {
                ThreadStatus::SystemError => ThreadStatus::SystemError,
                _ => ThreadStatus::Idle,
            },
        };
        if next == s.status {
            None
        } else {
            s.status = next.clone();
            Some(next)
        }
    }

    /// The `Thread` object; `turns` as given.
    pub fn to_thread(&self, version: &str, turns: Vec<Turn>) -> Thread {
        let s = self.state();
        Thread {
            id: self.id.clone(),
            session_id: self.id.clone(),
            forked_from_id: s.forked_from.clone(),
            parent_thread_id: None,
            preview: s.preview.clone(),
            ephemeral: s.ephemeral,
            model_provider: s.model.provider.clone(),
            model: (!s.model.id.is_empty()).then(|| s.model.id.clone()),
            reasoning_effort: None,
            created_at: s.created_at,
            updated_at: s.updated_at,
            status: s.status.clone(),
            path: s.path.as_ref().map(|p| p.display().to_string()),
            cwd: s.cwd.display().to_string(),
            cli_version: version.to_owned(),
            originator: s.originator.clone(),
            source: "appServer".to_owned(),
            thread_source: None,
            agent_nickname: None,
            agent_role: None,
            git_info: None,
            name: s.name.clone(),
            project_id: None,
            turns,
            history_mode: Default::default(),
        }
    }

    /// Stops the session (aborting a run), the pump, and closes the file.
    pub async fn stop(&self) {
        let task = self.task.lock().ok().and_then(|mut t| t.take());
        if let Some(task) = task {
            shutdown_split(&self.handle, task).await;
        }
        let pump = self.pump.lock().ok().and_then(|mut p| p.take());
        if let Some(pump) = pump
            && tokio::time::timeout(Duration::from_secs(5), pump)
                .await
                .is_err()
        {
            tracing::warn!(thread = %self.id, "the event pump did not stop in time");
        }
        if let Some(servers) = &self.mcp {
            servers.stop().await;
        }
        if let Some(w) = &self.writer
            && let Err(e) = w.close().await
        {
            tracing::error!(thread = %self.id, error = %e, "closing the session file failed");
        }
    }
}
