//! Errors of the Temporal driver.
//!
//! Owns [`Error`] and the [`Result`] alias. Temporal's own error types stay
//! behind the feature: they are carried here as text, so callers built
//! without it compile the same.

/// Everything that can go wrong talking to Temporal.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting that cannot be used (`[temporal]`, `--temporal`).
    #[error("invalid Temporal setting: {0}")]
    Config(String),
    /// The server could not be reached.
    #[error("cannot connect to the Temporal server at {address}: {message}")]
    Connect { address: String, message: String },
    /// The server answered with an error.
    #[error("Temporal: {0}")]
    Server(String),
    /// A workflow this process looked for does not exist (or has closed
    /// and been removed).
    #[error("no Temporal workflow {0}")]
    NotFound(String),
    /// A turn is already running in the session.
    #[error("a turn is already running in session {0}")]
    Busy(String),
    /// Running a turn failed (the worker tries it again).
    #[error("the turn failed: {0}")]
    Turn(String),
    /// The approval store failed.
    #[error(transparent)]
    Approvals(#[from] keel_approvals::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
