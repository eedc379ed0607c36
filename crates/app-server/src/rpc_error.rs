//! The one place where failures become JSON-RPC error codes.
//!
//! The Codex server answers almost everything with `-32600` (it
//! deserialises whole requests with serde): not initialized, unknown
//! methods, bad params, unknown threads, experimental gating, wrong turn
//! ids. `-32603` is for I/O failures (`fs/*`), `-32601` for methods keel
//! knows but does not implement. No error carries `data`.

use keel_app_server_protocol::ErrorObject;

/// `-32600`: the request is not acceptable.
pub const INVALID_REQUEST: i64 = -32600;
/// `-32601`: a method that keel does not implement.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// `-32603`: the request was fine but doing it failed (I/O and the like).
pub const INTERNAL_ERROR: i64 = -32603;

/// An error answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `-32600 <message>` as is.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, message)
    }

    /// `-32600 Invalid request: <serde error>`.
    pub fn invalid_params(detail: impl std::fmt::Display) -> Self {
        Self::new(INVALID_REQUEST, format!("Invalid request: {detail}"))
    }

    pub fn not_initialized() -> Self {
        Self::invalid("Not initialized")
    }

    pub fn already_initialized() -> Self {
        Self::invalid("Already initialized")
    }

    /// `<what> requires experimentalApi capability` (a method or a field).
    pub fn requires_experimental(what: &str) -> Self {
        Self::invalid(format!("{what} requires experimentalApi capability"))
    }

    pub fn thread_not_found(id: &str) -> Self {
        Self::invalid(format!("thread not found: {id}"))
    }

    /// A method of the protocol that keel has not implemented.
    pub fn not_implemented(method: &str) -> Self {
        Self::new(
            METHOD_NOT_FOUND,
            format!("{method} is not implemented by keel (see docs/app-server.md)"),
        )
    }

    /// `-32603` with the failure's text (`No such file or directory (os error 2)`).
    pub fn internal(message: impl std::fmt::Display) -> Self {
        Self::new(INTERNAL_ERROR, message.to_string())
    }

    /// The error object on the wire (never with `data`).
    pub fn to_object(&self) -> ErrorObject {
        ErrorObject {
            code: self.code,
            message: self.message.clone(),
            data: None,
        }
    }
}

impl From<std::io::Error> for RpcError {
    fn from(e: std::io::Error) -> Self {
        RpcError::internal(e)
    }
}

/// The error for an oversize inbound frame: `-32600` with `id: null`.
pub fn oversize(len: usize, max: usize) -> RpcError {
    RpcError::invalid(format!(
        "Invalid request: frame of {len} bytes exceeds the maximum frame size of {max} bytes"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(RpcError::not_initialized().code, -32600);
        assert_eq!(RpcError::internal("x").code, -32603);
        assert_eq!(RpcError::not_implemented("a/b").code, -32601);
        assert_eq!(
            RpcError::requires_experimental("thread/queue/list").message,
            "thread/queue/list requires experimentalApi capability"
        );
        assert!(RpcError::invalid("x").to_object().data.is_none());
    }
}
