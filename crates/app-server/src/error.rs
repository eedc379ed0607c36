//! Errors of the app-server crate (setup and transports). Errors a client
//! sees are JSON-RPC errors, built in [`crate::rpc_error`].

use std::path::PathBuf;

/// A failure that stops a transport or the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("I/O error on {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid --listen value {0:?}: use stdio://, ws://HOST:PORT, unix://[PATH] or off")]
    InvalidListen(String),
    #[error("cannot read the token file {path}: {source}")]
    TokenFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Config(String),
}

impl Error {
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
