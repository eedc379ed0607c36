//! Errors of the RPC crate (setup and transport failures; a command's
//! failure is a response frame, see [`crate::wire_errors`]).

/// What stops RPC mode.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The first session could not be opened.
    #[error("cannot open the session: {0}")]
    Open(String),
    /// Writing frames failed.
    #[error("cannot write frames: {0}")]
    Frames(#[from] keel_jsonl::Error),
    /// A task of the server failed.
    #[error("internal task failed: {0}")]
    Task(String),
}

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
