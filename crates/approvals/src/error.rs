//! The crate's error type.
//!
//! Owns [`Error`]: what the store, the engine and rule validation report.
//! Messages are written for a person at a host or a terminal. It must not know
//! about the agent loop or any wire format.

/// What went wrong in the approvals crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No approval request with this id.
    #[error("no approval request with id {0}")]
    RequestNotFound(String),
    /// A request's id is already stored for another call (ids are random:
    /// a bug, never a retry).
    #[error("approval request id {0} is already taken by another call")]
    RequestIdTaken(String),
    /// No always-allow rule with this id.
    #[error("no always-allow rule with id {0}")]
    RuleNotFound(String),
    /// A second, different decision on a request that is no longer pending.
    #[error("approval request {id} was already {status}{}", by.as_deref().map(|b| format!(" by {b}")).unwrap_or_default())]
    AlreadyDecided {
        id: String,
        status: String,
        by: Option<String>,
    },
    /// The row changed between read and write (compare-and-swap lost) and
    /// could not be resolved by re-reading.
    #[error("approval request {id} changed concurrently (expected revision {expected})")]
    Conflict { id: String, expected: i64 },
    /// An always-allow rule was refused (money, not understood, bad scope, ...).
    #[error("always-allow rule refused: {0}")]
    RuleRefused(String),
    /// A value that could not be parsed (mode, class, status, scope kind).
    #[error("invalid {what}: {value:?}")]
    Invalid { what: &'static str, value: String },
    /// A draft was asked to run but is not an approved, unclaimed draft.
    #[error("approval request {id} cannot be claimed: {reason}")]
    NotClaimable { id: String, reason: String },
    /// The database file was written by a newer keel.
    #[error(
        "the approvals database is at schema version {found}, newer than this keel ({supported})"
    )]
    SchemaTooNew { found: i64, supported: i64 },
    /// SQLite failed.
    #[error("approvals database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed (the message never holds the connection string).
    #[error("approvals database error: {0}")]
    Postgres(String),
    /// The PostgreSQL connection was lost mid-way (the server restarted,
    /// dropped it, or is starting up): the same work may succeed once it
    /// is back. See [`Error::is_unavailable`].
    #[error("approvals database unreachable: {0}")]
    Unavailable(String),
    /// The approvals store setting is wrong, or its server cannot be
    /// reached (any password in it is hidden).
    #[error("{0}")]
    Config(String),
    /// JSON (de)serialisation of stored args or offers failed.
    #[error("approvals JSON error: {0}")]
    Json(#[from] serde_json::Error),
    /// A blocking store task panicked or was cancelled.
    #[error("approvals store task failed: {0}")]
    Task(String),
    /// An I/O failure (creating the database's folder).
    #[error("approvals I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        if keel_pg::lost(&e) {
            Error::Unavailable(keel_pg::describe(&e))
        } else {
            Error::Postgres(keel_pg::describe(&e))
        }
    }
}

impl Error {
    /// Whether the store could not be reached, rather than refusing the
    /// work: a wait may go on and look again later.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Error::Unavailable(_))
    }
}

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
