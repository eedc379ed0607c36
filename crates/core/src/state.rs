//! The state a session shares between its handle, its task and a running
//! run ([`Shared`] behind [`SharedState`]), and what the loop reaches
//! through traits ([`SessionDeps`]). A leaf of the loop: it holds data and
//! the lock, no behaviour.

use std::sync::{Arc, Mutex, MutexGuard};

use keel_llm::Provider;
use keel_protocol::{TodoPhase, UserInput};
use keel_tools::{FileSystem, ProcessRunner, Tool};
use tokio_util::sync::CancellationToken;

use crate::config::SessionConfig;
use crate::deps::{ApprovalGate, Clock, SessionLog};
use crate::queue::Queues;

/// Everything the loop reaches through a trait.
#[derive(Clone)]
pub struct SessionDeps {
    /// The initial provider (replaced by `SessionHandle::set_model`).
    pub provider: Arc<dyn Provider>,
    /// The initial tools (replaced by `SessionHandle::set_tools`).
    pub tools: Vec<Arc<dyn Tool>>,
    pub fs: Arc<dyn FileSystem>,
    pub process: Arc<dyn ProcessRunner>,
    pub gate: Arc<dyn ApprovalGate>,
    pub clock: Arc<dyn Clock>,
    pub log: Arc<dyn SessionLog>,
    /// The walls of the session's commands and of keel's own writes for
    /// it (`None`: none; `process` must then confine nothing).
    pub sandbox: Option<Arc<keel_sandbox::Sandbox>>,
    /// Where runs run when not here (`None`: here; see `crate::elsewhere`).
    pub elsewhere: Option<Arc<dyn crate::elsewhere::RunsElsewhere>>,
    /// Asked before each call that passed the gate runs (`None`: none).
    pub fence: Option<Arc<dyn crate::deps::RunFence>>,
    /// Who a running tool's question goes to (`None`: nobody attends the
    /// session; see `keel_tools::Asker`).
    pub asker: Option<Arc<dyn keel_tools::Asker>>,
}

/// State shared between the handle, the session task and a running run.
pub(crate) struct Shared {
    pub config: SessionConfig,
    /// The messages the model sees: the context of the tree's active
    /// branch (read from the tree until the loop needs its own copy).
    pub context: crate::context::ModelContext,
    pub queues: Queues,
    pub running: bool,
    /// The tree could not be read again after a run elsewhere (the
    /// database was away for longer than a reload keeps trying): it is
    /// read before the next run starts, which must not begin after a
    /// stale leaf.
    pub tree_stale: bool,
    pub provider: Arc<dyn Provider>,
    pub tools: Vec<Arc<dyn Tool>>,
    pub session_name: Option<String>,
    pub todos: Vec<TodoPhase>,
    /// What the todo list does when a run is about to stop.
    pub todo_policy: crate::config::TodoPolicy,
    /// User messages (for example a host's shell output) that go into the
    /// conversation ahead of the next prompt.
    pub pending_context: Vec<UserInput>,
    /// Whether failed model calls are retried (starts as
    /// `config.retry.enabled`; toggled by `SessionHandle::set_auto_retry`).
    pub auto_retry: bool,
    /// Set while a run waits before a retry; cancelling it gives up the
    /// retry (`SessionHandle::abort_retry`).
    pub retry_wait: Option<CancellationToken>,
    /// The user aborted the current run (as opposed to a shutdown): calls
    /// its turn waits on are cancelled, not left pending.
    pub abort_requested: bool,
    /// Every entry of the session (a mirror of the log) and the leaf;
    /// `context` is the context of its active branch.
    pub tree: keel_session_store::SessionTree,
    /// Keeps the tree's order the log's order.
    pub record_lock: Arc<tokio::sync::Mutex<()>>,
    /// Whether the conversation is compacted automatically.
    pub auto_compaction: bool,
    /// Cancels the compaction asked for with `SessionHandle::compact`.
    pub compacting: Option<CancellationToken>,
    /// A compaction (automatic or asked for) is running.
    pub is_compacting: bool,
    /// How many runs elsewhere have a settled start: durably started
    /// there, or ended (see `SessionHandle::run_starts`).
    pub run_starts: tokio::sync::watch::Sender<u64>,
}

pub(crate) type SharedState = Arc<Mutex<Shared>>;

/// Locks the shared state, recovering from a poisoned lock (a panicking
/// task must not take the whole session down).
pub(crate) fn lock(shared: &SharedState) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}
