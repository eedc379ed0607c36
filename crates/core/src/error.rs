//! Errors of the core crate.

/// Errors returned by [`crate::Session`] methods.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A prompt was submitted while a run is in progress.
    #[error("agent is already processing a prompt; use steer or follow_up, or abort first")]
    Busy,
    /// The session task has stopped.
    #[error("session is closed")]
    Closed,
    /// The session log failed.
    #[error("session log: {0}")]
    Log(String),
    /// Compacting the conversation failed or was aborted; the session is
    /// as it was.
    #[error("{0}")]
    Compaction(String),
    /// An entry id that cannot be used for what was asked.
    #[error("{0}")]
    InvalidEntry(String),
}

pub type Result<T> = std::result::Result<T, Error>;
