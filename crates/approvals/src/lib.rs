//! keel's approval gate: what may run unasked, and durable waits for a
//! person's decision on the rest.
//!
//! This crate owns the class of a tool call (`read < write < send < money`,
//! one table: [`class`]), shell-command analysis with tree-sitter-bash
//! ([`shell`]), the per-workspace [`Mode`], always-allow [`rules`], the
//! approval [`store`] (SQLite embedded or a PostgreSQL server, behind the
//! [`ApprovalStore`] trait, picked by [`StoreLocation`]),
//! and the [`ApprovalEngine`] that enforces the decision order, stores held
//! calls before anyone hears of them, waits on the stored row (so a wait
//! survives a restart and sees decisions written by another process),
//! applies decisions by compare-and-swap, parks drafts for unattended runs,
//! and writes an audit line for every evaluation and decision. It must not
//! know about the agent loop, sessions' contents, or any wire format.
//!
//! # The decision order
//!
//! [`ApprovalEngine::gate_check`] is the one place a call is judged, and it
//! fails closed (any error denies):
//!
//! 1. **read** runs (`approved_by: auto`);
//! 2. a matching **always-allow rule** runs (`approved_by: rule`, with the
//!    rule ids); money and calls not fully understood never match a rule;
//! 3. if the workspace's **mode** asks for the class, the call is **held**
//!    (stored as a pending request; a draft when the run is unattended);
//! 4. otherwise it runs (`approved_by: auto`).
//!
//! # Integration point
//!
//! The agent core wraps the engine in `keel_core::EngineGate`, its
//! `ApprovalGate`: `check` maps a tool call onto a [`CallContext`] (built-in
//! tools by name, host tools as [`ToolOrigin::Host`] with their declared
//! class) and calls [`ApprovalEngine::gate_check`]; a
//! [`GateOutcome::Held`] call is stored before anyone hears of it, the loop
//! flushes its session log, then the gate announces the [`PendingRequest`]
//! through its front end (an RPC frame, a terminal question, a line on
//! stderr) and waits with [`ApprovalEngine::wait`] and
//! [`ApprovalEngine::settle`]. After an approved call ran, the loop reports
//! it ([`ApprovalEngine::finish`]) so a crash between claiming and finishing
//! is reported as "may or may not have happened" instead of running twice.
//! ([`ApprovalEngine::gate`] does check and wait in one step, for callers
//! that announce nothing; `tests/adapter.rs` exercises that shape.)
//!
//! Decisions come from anywhere that opens the same store (RPC, the CLI,
//! another keel process; [`ApprovalEngine::open_home`] opens the one
//! configured for a keel home): [`ApprovalEngine::decide`] with a [`Decision`];
//! [`ApprovalEngine::decline_waiting`] when a new user message arrives;
//! [`ApprovalEngine::cancel_session`] on abort; [`ApprovalEngine::pending`]
//! lists what waits (also after a restart); [`ApprovalEngine::explain`]
//! answers "why did this run?" from the audit table.

pub mod card;
pub mod class;
mod class_kind;
pub mod clock;
mod engine;
mod error;
pub mod mode;
mod notify_settings;
pub mod places;
pub mod rules;
pub mod settings;
pub mod shell;
mod shell_places;
pub mod store;

pub use card::{PendingRequest, messages, title as card_title};
pub use class::{
    Class, Classification, SANDBOX_PERMISSIONS_ARG, Target, ToolOrigin, classify, classify_in,
    classify_judged, sandbox_permissions,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use engine::{
    ApprovalEngine, CallContext, Decision, DraftOutcome, EngineConfig, GateOutcome, Look,
    Resolution, call_digest,
};
pub use error::{Error, Result};
pub use mode::Mode;
pub use notify_settings::{
    DEFAULT_NOTIFY_RETRIES, DEFAULT_NOTIFY_TIMEOUT, NotifyFormat, NotifySettings,
};
pub use places::Places;
pub use rules::{AlwaysOffer, Lifetime, NewRule, Rule, RuleScope};
pub use settings::{format_expiry, parse_expiry};
pub use shell::{ShellAnalysis, ShellCommand, ShellWord, analyze};
pub use store::{
    ApprovalRecord, ApprovalStore, ApprovedBy, AuditEntry, AuditFilter, ChangeFeed, DATABASE_ENV,
    Delivery, Given, PostgresStore, RequestFilter, STORE_ENV, SqliteStore, Status, StoreLocation,
    StoreSource, Subscription, redact_dsn, set_command_line_database,
};
