//! The crate's error type: what went wrong with a server, in words the
//! model and the user can read.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server's table is not usable.
    #[error("invalid MCP server configuration: {0}")]
    Config(String),
    /// The server did not start or finish the handshake.
    #[error("{0}")]
    Start(String),
    /// A request to the server failed.
    #[error("{0}")]
    Call(String),
    /// A call or the startup took longer than allowed.
    #[error("no answer within {}s", .0.as_secs_f64())]
    Timeout(Duration),
}

pub type Result<T> = std::result::Result<T, Error>;
