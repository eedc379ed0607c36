//! Request handlers, one module per resource, and what they share with
//! the dispatcher: the request being handled ([`RequestCtx`]), what a
//! handler gives back ([`Reply`]) and what runs once the response is
//! queued ([`After`]). Each handler deserialises its params ([`parse`])
//! before any side effect.

use std::sync::Arc;

use keel_app_server_protocol::RequestId;
use keel_app_server_protocol::v2::ServerNotification;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::outbound::Connection;
use crate::rpc_error::RpcError;
use crate::runtime::Runtime;

pub mod command;
pub mod fs;
pub mod initialize;
pub mod mcp;
pub mod mcp_login;
pub mod misc;
pub mod thread;
pub mod thread_admin;
pub mod turn;

/// What a handler gives back.
pub enum Reply {
    /// The result, answered now.
    Now(Value),
    /// The handler answers by itself later (long-running requests).
    Later,
}

/// Something to do once the response is queued.
pub enum After {
    /// Fire a signal (the event pump waits for it before `turn/started`).
    Signal(oneshot::Sender<()>),
    /// Notify a thread's subscribers.
    NotifyThread(String, Box<ServerNotification>),
    /// Send the thread's pending server requests to this connection.
    ReplayApprovals(String),
    /// Go on with the thread's turn that a crash or kill cut off.
    ResumeInterrupted(String),
    /// Notify these connections (a thread they were subscribed to was
    /// unloaded).
    NotifyConns(Vec<Arc<Connection>>, Box<ServerNotification>),
}

/// One request being handled.
pub struct RequestCtx {
    pub runtime: Arc<Runtime>,
    pub conn: Arc<Connection>,
    pub id: RequestId,
    pub after: Vec<After>,
}

/// Deserialises params; a failure is `-32600 Invalid request: …`.
pub fn parse<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(RpcError::invalid_params)
}

/// Serialises a result.
pub fn ok<T: Serialize>(result: &T) -> Result<Reply, RpcError> {
    serde_json::to_value(result)
        .map(Reply::Now)
        .map_err(RpcError::internal)
}
