//! What a turn run on a worker is given and gives back.
//!
//! Owns [`TurnInput`], [`TurnOutcome`] and the [`TurnRunner`] seam through
//! which the worker runs a turn: the workflow and its activity
//! (`turn.rs`) only carry these, and the binary, which knows the
//! configuration, the models and the session store, implements the
//! runner. Kept outside the `engine` feature so a build without Temporal
//! still names them. It must not know how a turn runs.

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

/// One turn for a worker to run, as the front-end that started it asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnInput {
    /// The session the turn runs in; it exists in the shared database.
    pub session_id: String,
    /// The workspace, a path every worker sees the same.
    pub cwd: String,
    /// This turn (events carry it).
    pub turn_id: String,
    /// The user's message; `None` goes on with what the session holds (a
    /// turn a crash cut off, a prompt the model never answered).
    #[serde(default)]
    pub prompt: Option<String>,
    /// The session's last entry when the turn was started: whether the
    /// prompt is already stored is read from what follows it.
    #[serde(default)]
    pub base_leaf: Option<String>,
    /// The sequence number of the session's event log when the turn was
    /// started: the turn's records (an interrupt) come after it.
    #[serde(default)]
    pub log_from: u64,
    /// The model id the front-end was asked for (`None`: the worker's).
    #[serde(default)]
    pub model: Option<String>,
    /// The thinking level the front-end's session has (`off`, `low`, …;
    /// `None`: the worker's).
    #[serde(default)]
    pub thinking: Option<String>,
    /// The approval mode the front-end was asked for (`None`: the
    /// workspace's stored mode).
    #[serde(default)]
    pub approval_mode: Option<String>,
    /// Tools only the front-end can run (its host's, its MCP servers'):
    /// the worker offers them to the model and asks the front-end, through
    /// the session's event log, when the model calls one.
    #[serde(default)]
    pub tools: Vec<FrontEndTool>,
    /// URI schemes the front-end's host serves: the worker's `read`,
    /// `write` and `edit` of `scheme://…` go to the front-end the same way.
    #[serde(default)]
    pub host_schemes: Vec<FrontEndScheme>,
}

/// A URI scheme the host of the front-end that started a turn serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontEndScheme {
    /// Lowercase.
    pub scheme: String,
    #[serde(default)]
    pub writable: bool,
    #[serde(default)]
    pub immutable: bool,
}

/// A tool the front-end that started a turn runs for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrontEndTool {
    pub name: String,
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: serde_json::Value,
    /// The class the approval gate judges it by (`read`, `write`, `send`,
    /// `money`); `None`: from the MCP annotations below.
    #[serde(default)]
    pub class: Option<String>,
    #[serde(default)]
    pub read_only: Option<bool>,
    #[serde(default)]
    pub destructive: Option<bool>,
    #[serde(default)]
    pub open_world: Option<bool>,
    /// The MCP server it comes from, for the approval card.
    #[serde(default)]
    pub server: Option<String>,
}

/// The turn a session runs now, as a front-end that did not start it
/// finds it (kept with the turn's workflow, so it needs no table of its
/// own): where its events begin in the session's event log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningTurn {
    /// The turn's id (its events carry it).
    pub turn_id: String,
    /// The log's sequence number when it was started: its events follow.
    pub log_from: u64,
    /// The session's last entry when it was started (`None`: the session
    /// was empty): what it stores follows.
    #[serde(default)]
    pub base_leaf: Option<String>,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnOutcome {
    /// `done`, `aborted` or `failed`.
    pub status: String,
    /// Why it failed, for `failed`.
    #[serde(default)]
    pub error: Option<String>,
    /// The sequence number of the turn's last event in the session's
    /// event log: a follower has seen the whole turn once it has read it.
    pub last_seq: u64,
}

/// Runs turns for the worker's activity.
#[async_trait::async_trait]
pub trait TurnRunner: Send + Sync + 'static {
    /// Runs (or, for `attempt` > 1, goes on with) `turn` until it ends.
    /// `stop` fires when this try must stop where it is, touching nothing
    /// (the server took the activity back: it timed out or was
    /// cancelled); another try goes on from the session. An interrupt is
    /// not a stop: it reaches the runner through the session's event log.
    /// An error is retried on any worker; a turn that ended badly (a model
    /// failure, an abort) is an outcome, not an error.
    async fn run(
        &self,
        turn: TurnInput,
        attempt: u32,
        stop: CancellationToken,
    ) -> crate::Result<TurnOutcome>;
}
