//! One client connection, whatever its transport: reads its frames in
//! order, answers requests (through [`crate::dispatch`]), routes answers
//! to server requests to the broker, and cleans up when it closes.
//!
//! Malformed JSON, batches and unknown client notifications get no reply
//! and are logged; an oversize frame gets one `-32600` with `id: null`.

use std::sync::Arc;

use keel_app_server_protocol::{Incoming, IncomingError, parse_incoming};
use tokio::sync::mpsc;

use crate::approvals::{self, Answer};
use crate::dispatch;
use crate::outbound::Connection;
use crate::rpc_error::{RpcError, oversize};
use crate::runtime::Runtime;

/// Inbound frames waiting for the connection loop.
pub const INBOUND_QUEUE_CAPACITY: usize = 64;

/// One inbound frame from a transport.
#[derive(Debug)]
pub enum Inbound {
    Frame(Vec<u8>),
    /// A frame longer than the limit (already skipped).
    Oversize {
        len: usize,
        max: usize,
    },
}

/// Serves one connection until its inbound side ends, it is closed, or the
/// server shuts down.
pub async fn serve(
    runtime: Arc<Runtime>,
    conn: Arc<Connection>,
    mut inbound: mpsc::Receiver<Inbound>,
) {
    runtime.add_connection(conn.clone());
    loop {
        let item = tokio::select! {
            item = inbound.recv() => item,
            _ = conn.closed.cancelled() => None,
            _ = runtime.shutdown.cancelled() => None,
        };
        let Some(item) = item else { break };
        match item {
            Inbound::Oversize { len, max } => {
                tracing::warn!(len, max, "oversize frame skipped");
                conn.respond_error(None, &oversize(len, max)).await;
            }
            Inbound::Frame(bytes) => on_frame(&runtime, &conn, &bytes).await,
        }
    }
    conn.closed.cancel();
    runtime.remove_connection(conn.id).await;
}

async fn on_frame(runtime: &Arc<Runtime>, conn: &Arc<Connection>, bytes: &[u8]) {
    match parse_incoming(bytes) {
        Err(IncomingError::Batch) => {
            tracing::warn!("Failed to deserialize JSONRPCMessage: batches are not supported");
        }
        Err(IncomingError::DuplicateKey { key, id }) => {
            // Nothing runs. A request is told which key, on its id when it
            // gave one (else `id: null`, as for any unreadable request); a
            // notification or a response gets no reply, as when malformed.
            tracing::warn!("Failed to deserialize JSONRPCMessage: duplicate key {key:?}");
            if is_a_request(bytes) {
                let error = RpcError::invalid(format!(
                    "Invalid request: duplicate key {key:?}; a member may be given once"
                ));
                conn.respond_error(id, &error).await;
            }
        }
        Err(IncomingError::Malformed(why)) => {
            tracing::warn!("Failed to deserialize JSONRPCMessage: {why}");
            // A request whose id is unusable (a float, a bool, an object,
            // null, beyond i64) would leave its client waiting forever: it
            // gets the JSON-RPC answer for an invalid request, with id null.
            if let Some(id) = unusable_request_id(bytes) {
                refuse_id(conn, &id).await;
            }
        }
        Ok(Incoming::Request { id, method, params }) => {
            dispatch::handle_request(runtime, conn, id, method, params).await;
        }
        Ok(Incoming::Notification { method, .. }) => {
            if let Some(id) = unusable_request_id(bytes) {
                refuse_id(conn, &id).await;
            } else if method == "initialized" {
                crate::handlers::mcp::announce_to(runtime, conn).await;
            } else {
                tracing::warn!(%method, "unknown client notification ignored");
            }
        }
        Ok(Incoming::Response { id, result }) => {
            approvals::answer(runtime, conn, &id, Answer::Result(result)).await;
        }
        Ok(Incoming::Error { id, error }) => {
            approvals::answer(runtime, conn, &id, Answer::Error(error)).await;
        }
    }
}

/// Whether a frame (read leniently) means to be a request: it names a
/// `method` and an `id`.
fn is_a_request(bytes: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(bytes)
        .is_ok_and(|v| v.get("method").is_some() && v.get("id").is_some())
}

/// The id text of a frame that is a request (it names a `method`) whose
/// `id` is not a string or an i64.
fn unusable_request_id(bytes: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(bytes).ok()?;
    let obj = v.as_object()?;
    obj.get("method")?.as_str()?;
    let id = obj.get("id")?;
    match id {
        serde_json::Value::String(_) => None,
        serde_json::Value::Number(n) if n.is_i64() => None,
        other => Some(other.to_string()),
    }
}

async fn refuse_id(conn: &Connection, id: &str) {
    let error = RpcError::invalid(format!(
        "Invalid request: id {id} is not a string or an integer (i64)"
    ));
    conn.respond_error(None, &error).await;
}
