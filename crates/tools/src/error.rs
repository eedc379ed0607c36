//! The crate's error type.
//!
//! Owns [`Error`], the failures a tool or backend reports, and how an
//! `std::io::Error` on a path becomes one. Every variant's message is written
//! for the model to read (it is turned into an error tool result by the
//! caller). It must not know about specific tools.

use std::io;
use std::path::{Path, PathBuf};

/// What went wrong while running a tool or touching a backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The arguments did not match the tool's schema (the message names the field).
    #[error("Invalid arguments: {0}")]
    InvalidArguments(String),
    /// A path argument was unusable (empty, contains NUL, ...).
    #[error("Invalid path: {0}")]
    InvalidPath(String),
    /// The file or directory does not exist.
    #[error("File not found: {}", path.display())]
    NotFound { path: PathBuf },
    /// A directory was given where a file was expected.
    #[error("{} is a directory, not a file", path.display())]
    IsADirectory { path: PathBuf },
    /// A file was given where a directory was expected.
    #[error("Not a directory: {}", path.display())]
    NotADirectory { path: PathBuf },
    /// The tool ran but could not do what was asked; the message explains why.
    #[error("{0}")]
    Failed(String),
    /// An I/O failure on a path.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// An I/O failure not tied to one path (spawning a process, a pipe).
    #[error("I/O error: {0}")]
    Other(#[from] io::Error),
    /// The sandbox the command must run in cannot be set up; it did not run.
    #[error("The command did not run: the sandbox cannot be set up: {0}")]
    Sandbox(String),
    /// The run was cancelled.
    #[error("Operation aborted")]
    Aborted,
}

impl Error {
    /// Wraps an I/O error on `path`, mapping "not found" to [`Error::NotFound`].
    pub fn io(path: &Path, source: io::Error) -> Self {
        match source.kind() {
            io::ErrorKind::NotFound => Error::NotFound {
                path: path.to_path_buf(),
            },
            io::ErrorKind::IsADirectory => Error::IsADirectory {
                path: path.to_path_buf(),
            },
            io::ErrorKind::NotADirectory => Error::NotADirectory {
                path: path.to_path_buf(),
            },
            _ => Error::Io {
                path: path.to_path_buf(),
                source,
            },
        }
    }
}

/// Result with the crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
