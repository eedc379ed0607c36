//! Transports: how frames reach a connection. Each one feeds
//! [`crate::connection::serve`] with inbound frames and drains the
//! connection's outbound queue. They share one [`crate::runtime::Runtime`].
//!
//! [`stdio`] serves one client on stdin/stdout; [`network`] serves
//! WebSocket clients on `ws://` and `unix://` listeners ([`ws`] is one such
//! connection, [`unix`] the socket file, [`listener`] the cap on open
//! sockets), authenticated by [`auth`] (with [`jwt`] for signed bearer
//! tokens).

pub mod auth;
pub mod jwt;
pub mod listener;
pub mod network;
pub mod stdio;
pub mod unix;
pub mod ws;

use std::path::PathBuf;

use crate::error::{Error, Result};

/// Where `keel app-server` listens (`--listen`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// `stdio://` (the default): one client on stdin/stdout.
    Stdio,
    /// `ws://HOST:PORT`.
    Ws(String),
    /// `unix://PATH` (`unix://` alone: the default socket path).
    Unix(Option<PathBuf>),
    /// `off`: no transport.
    Off,
}

/// Parses a `--listen` value.
pub fn parse_listen(value: &str) -> Result<Listen> {
    let v = value.trim();
    if v == "stdio://" || v == "stdio" {
        return Ok(Listen::Stdio);
    }
    if v == "off" {
        return Ok(Listen::Off);
    }
    if let Some(addr) = v.strip_prefix("ws://") {
        let addr = addr.trim_end_matches('/');
        if addr.is_empty() || !addr.contains(':') {
            return Err(Error::InvalidListen(value.to_owned()));
        }
        return Ok(Listen::Ws(addr.to_owned()));
    }
    if let Some(path) = v.strip_prefix("unix://") {
        return Ok(Listen::Unix(
            (!path.is_empty()).then(|| PathBuf::from(path)),
        ));
    }
    Err(Error::InvalidListen(value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_values() {
        assert_eq!(parse_listen("stdio://").ok(), Some(Listen::Stdio));
        assert_eq!(
            parse_listen("ws://127.0.0.1:4500").ok(),
            Some(Listen::Ws("127.0.0.1:4500".into()))
        );
        assert_eq!(parse_listen("unix://").ok(), Some(Listen::Unix(None)));
        assert_eq!(parse_listen("off").ok(), Some(Listen::Off));
        assert!(parse_listen("http://x").is_err());
        assert!(parse_listen("ws://").is_err());
    }
}
