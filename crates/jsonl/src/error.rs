//! Errors of the framing layer.

/// What went wrong while reading or writing frames.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A line was longer than the limit; it was skipped up to its end.
    #[error("frame of {len} bytes exceeds the maximum frame size of {max} bytes")]
    Oversize { len: usize, max: usize },
    /// A frame to write was longer than [`crate::MAX_OUT_FRAME_BYTES`]; it
    /// was not written.
    #[error("an outgoing frame of {len} bytes exceeds the limit of {max} bytes on one frame")]
    OversizeOut { len: usize, max: usize },
    /// Reading or writing the underlying stream failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// A value could not be serialised as JSON.
    #[error("cannot serialise frame: {0}")]
    Serialize(#[from] serde_json::Error),
    /// A frame to write contained a line break.
    #[error("frame contains a line break")]
    EmbeddedNewline,
    /// The writer task has stopped (the output was closed).
    #[error("the frame writer has stopped")]
    WriterClosed,
}

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
