//! The keel agent.
//!
//! This crate owns sessions and the turn loop: a [`Session`] handle takes
//! [`Op`](keel_protocol::Op)s through `submit` and yields
//! [`AgentEvent`](keel_protocol::AgentEvent)s through `next_event`. Inside, a
//! run streams the assistant message from the model, runs its tool calls
//! (each one passing the [`ApprovalGate`] first), appends results and loops
//! until the model stops; steering and follow-up queues feed it; abort
//! cancels the model stream and any running tool and leaves the history
//! consistent. A model call that fails with a transient error is retried
//! with backoff ([`RetryPolicy`]), announced with `auto_retry_start/end`.
//!
//! The loop does no I/O itself: it reaches the model ([`keel_llm::Provider`]),
//! the tools ([`keel_tools::Tool`] over injected backends), the approval gate,
//! the clock and the session log only through traits collected in
//! [`SessionDeps`]. It must not know about stdout, JSON-RPC or JSONL framing.
//!
//! [`EngineGate`] is the gate keel's front ends use: the approvals engine
//! (re-exported as [`keel_approvals`]) behind the [`ApprovalGate`] trait, with
//! an [`ApprovalFrontend`] that announces held calls.

mod approval_entry;
mod assemble;
mod builder;
pub mod compaction;
mod config;
mod context;
mod ctx;
mod deps;
mod drafts;
mod durable;
mod elsewhere;
mod engine_gate;
mod error;
mod event;
mod history;
mod models;
pub mod notify;
pub mod prompt;
mod queue;
mod resume;
mod retry;
mod run;
pub mod sandboxed;
mod session;
mod state;
mod todo;
mod tool_exec;
mod tries;

#[cfg(test)]
mod tests;

pub use approval_entry::describe as describe_approval;
pub use builder::{PROJECT_INSTRUCTION_FILES, SessionBuilder, project_instructions, scratch_dir};
pub use compaction::CompactionSettings;
pub use config::{ModelInfo, ModelPricing, SessionConfig};
pub use context::{context_tokens, estimate_tokens};
pub use deps::{
    AllowAll, ApprovalGate, Clock, GateDecision, MemoryLog, NullLog, Recovery, RunFence,
    SessionLog, SystemClock, ToolCallInfo,
};
pub use drafts::send_draft;
pub use durable::{DurableWaits, set_durable_waits};
pub use elsewhere::{RemoteEvents, RemoteRun, RemoteTool, RunningThere, RunsElsewhere, Watched};
pub use engine_gate::{
    ApprovalFrontend, DRAFT_NOTE_PREFIX, EngineGate, LogFrontend, WaitGuard, hinted_origin,
    recover_from, workspace_key,
};
pub use error::{Error, Result};
pub use event::SessionEvent;
pub use history::{ContextUsage, SessionStats, TokenTotals};
pub use keel_approvals;
pub use models::{ModelSource, NO_MODEL_HINT};
pub use retry::{DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY, DEFAULT_MAX_RETRIES, RetryPolicy};
pub use session::{Delivery, QueueKind, Session, SessionHandle, SessionSnapshot, shutdown_split};
pub use state::SessionDeps;
pub use todo::{DEFAULT_TODO_REMINDERS, TodoPolicy};
pub use tries::{Joined, RunEnd, TryJoin};

/// Capacity of the op channel into a session task.
pub const OP_CHANNEL_CAPACITY: usize = 64;
/// Capacity of the event channel out of a session task. A slow consumer
/// applies back-pressure to the turn loop rather than growing memory.
pub const EVENT_CHANNEL_CAPACITY: usize = 1024;
/// Capacity of the per-tool-run channel carrying partial results.
pub const TOOL_UPDATE_CAPACITY: usize = 256;
