//! keel's durable driver on Temporal.
//!
//! Owns what keel runs on a Temporal cluster and how the other processes
//! reach it: the settings (`settings`), the ids keel's workflows carry
//! (`ids`), and behind the `engine` feature the approval wait as a workflow
//! of its own (`approval`: RFC §4.6, a nudge signal, a durable timer at
//! the row's expiry and a re-read of the row), the worker that runs it
//! (`worker`) and the client other processes nudge and start it with
//! (`client`); and an agent turn as a workflow (`turn`: one activity that
//! runs the turn through the binary's [`TurnRunner`], heartbeating, and
//! moves to another worker when its worker dies; `turn_types`: what it
//! carries). The database row stays the only record of a decision: the
//! workflow learns nothing from a signal but that it should look again.
//! It must not know any wire protocol, and it never prints.
//!
//! Without the `engine` feature the crate is only its settings, so a keel
//! built without Temporal can still read the configuration and say how to
//! get a build that runs it ([`NOT_BUILT`]).

mod error;
mod ids;
mod settings;
mod turn_types;

#[cfg(feature = "engine")]
mod approval;
#[cfg(feature = "engine")]
mod client;
#[cfg(feature = "engine")]
mod turn;
#[cfg(feature = "engine")]
mod worker;

pub use error::{Error, Result};
pub use ids::{approval_workflow_id, turn_workflow_id};
pub use settings::{
    ADDRESS_ENV, DEFAULT_NAMESPACE, DEFAULT_TASK_QUEUE, NAMESPACE_ENV, TASK_QUEUE_ENV,
    TemporalSettings,
};
pub use turn_types::{
    FrontEndScheme, FrontEndTool, RunningTurn, TurnInput, TurnOutcome, TurnRunner,
};

#[cfg(feature = "engine")]
pub use approval::{ApprovalActivities, ApprovalWorkflow};
#[cfg(feature = "engine")]
pub use client::TemporalClient;
#[cfg(feature = "engine")]
pub use turn::{HEARTBEAT_EVERY, HEARTBEAT_TIMEOUT, TURN_ATTEMPTS, TurnActivities, TurnWorkflow};
#[cfg(feature = "engine")]
pub use worker::{RECONCILE_AFTER, RECONCILE_EVERY, WorkerConfig, run_worker};

/// Whether this build can talk to Temporal at all.
pub const BUILT: bool = cfg!(feature = "engine");

/// What a keel built without the feature says when asked to use Temporal.
pub const NOT_BUILT: &str = "this keel was built without Temporal support; \
     rebuild with `cargo build --release -p keel-cli --features temporal`";
