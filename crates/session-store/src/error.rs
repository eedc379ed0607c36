//! The crate's error type.
//!
//! Owns [`Error`] and [`Result`]. It knows paths, line numbers and I/O
//! failures; it must not know how callers present errors to users or any wire
//! protocol.

use std::io;
use std::path::PathBuf;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong while reading or writing session files.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on `path` failed.
    #[error("session I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// A line that is not the last one of the file could not be parsed.
    /// (A malformed *last* line is a write cut by a crash and is ignored.)
    #[error("corrupt session file {} at line {line}: {message}", path.display())]
    Corrupt {
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        message: String,
    },
    /// The first line is missing or is not a valid session header.
    #[error("invalid session header in {}: {message}", path.display())]
    InvalidHeader { path: PathBuf, message: String },
    /// The file was written by a newer format version than this build reads.
    #[error(
        "session file {} has format version {version}; this build reads up to {supported}",
        path.display()
    )]
    UnsupportedVersion {
        path: PathBuf,
        version: u32,
        supported: u32,
    },
    /// No session file, id or id prefix matches the query.
    #[error("no session matches `{query}`")]
    NotFound { query: String },
    /// A session id a caller chose is not a UUID, or is one a session has.
    #[error("session id `{id}`: {why}")]
    BadId { id: String, why: &'static str },
    /// An id prefix matches several sessions.
    #[error("session id prefix `{query}` is ambiguous; it matches: {}", candidates.join(", "))]
    Ambiguous {
        query: String,
        /// The matching session ids.
        candidates: Vec<String>,
    },
    /// `set_leaf` named an entry that does not exist in the session.
    #[error("no entry `{id}` in session {}", path.display())]
    UnknownEntry { path: PathBuf, id: String },
    /// The writer was closed (or its task is gone) and accepts no more commands.
    #[error("the writer of session {} is closed", path.display())]
    WriterClosed { path: PathBuf },
    /// The file changed on disk between loading it and reopening it for
    /// appending (another writer?); nothing was modified.
    #[error("session file {} changed on disk since it was loaded", path.display())]
    Modified { path: PathBuf },
    /// The event log of the sessions database failed ([`crate::events`]).
    #[error("the session event log: {0}")]
    Events(String),
    /// An entry could not be serialised to JSON.
    #[error("cannot serialise a session entry: {0}")]
    Serialize(#[from] serde_json::Error),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
