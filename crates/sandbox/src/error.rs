//! The crate's error type: why the walls of a command could not be built.

/// What went wrong while preparing a sandbox.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel lacks what the policy needs (the message names it).
    #[error("{0}")]
    Unsupported(String),
    /// Building the walls failed (the message names the step).
    #[error("{0}")]
    Setup(String),
}

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
