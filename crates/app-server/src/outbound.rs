//! One connection's outbound side: its capabilities (set by `initialize`)
//! and its bounded queue of frames, shared by responses, notifications and
//! server requests so they leave in the order they were produced.
//!
//! Slow-client policy ([`SlowClientPolicy`]): on stdio there is one client
//! and it owns the process, so a full queue applies back-pressure (the
//! producers wait, which in the end slows the turn down). On WebSocket and
//! unix sockets a full queue means the client is not keeping up; rather
//! than block every other client or drop frames (which would leave it with
//! a corrupt picture of the turn), the connection is closed. Its pending
//! approvals stay pending for the other connections or a reconnect.
//!
//! This module does not know transports: a writer task drains the queue.

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use keel_app_server_protocol::RequestId;
use keel_app_server_protocol::jsonrpc::{
    ErrorFrame, NotificationFrame, RequestFrame, ResponseFrame,
};
use keel_app_server_protocol::methods::{Stability, server_notification};
use keel_app_server_protocol::v2::{ServerNotification, ServerRequest};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::rpc_error::RpcError;

/// Limit on one frame written to a client, the same on every transport.
use keel_jsonl::MAX_OUT_FRAME_BYTES;

/// Frames waiting to be written to one connection.
pub const OUTBOUND_QUEUE_CAPACITY: usize = 1024;

/// A connection's id within this process.
pub type ConnectionId = u64;

/// What to do when a connection's outbound queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlowClientPolicy {
    /// Wait for room (stdio: the only client).
    Backpressure,
    /// Close the connection (WebSocket, unix socket).
    Disconnect,
}

/// What a connection asked for in `initialize`.
#[derive(Debug, Clone, Default)]
pub struct ClientCaps {
    pub initialized: bool,
    pub experimental: bool,
    pub opt_out: HashSet<String>,
    pub client_name: String,
}

/// The sending half of a connection, shared with the runtime.
pub struct Connection {
    pub id: ConnectionId,
    tx: mpsc::Sender<Vec<u8>>,
    policy: SlowClientPolicy,
    caps: Mutex<ClientCaps>,
    /// Set when a full queue closed the connection (slow client).
    overflowed: AtomicBool,
    /// Cancelled when the connection is closed (by either side).
    pub closed: CancellationToken,
}

impl Connection {
    /// A connection and the receiving end its writer task drains.
    pub fn new(id: ConnectionId, policy: SlowClientPolicy) -> (Self, mpsc::Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE_CAPACITY);
        (
            Self {
                id,
                tx,
                policy,
                caps: Mutex::new(ClientCaps::default()),
                overflowed: AtomicBool::new(false),
                closed: CancellationToken::new(),
            },
            rx,
        )
    }

    pub fn caps(&self) -> ClientCaps {
        self.caps.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Whether the connection was closed because its queue was full.
    pub fn overflowed(&self) -> bool {
        self.overflowed.load(Ordering::Acquire)
    }

    pub fn set_caps(&self, caps: ClientCaps) {
        if let Ok(mut c) = self.caps.lock() {
            *c = caps;
        }
    }

    async fn send<T: Serialize>(&self, frame: &T) -> bool {
        match self.try_send(frame).await {
            Ok(sent) => sent,
            Err(len) => {
                tracing::error!(
                    connection = self.id,
                    len,
                    max = MAX_OUT_FRAME_BYTES,
                    "dropping a frame that is too large to write"
                );
                false
            }
        }
    }

    /// [`Self::send`], or `Err(len)` when the frame is over
    /// [`MAX_OUT_FRAME_BYTES`] (nothing was queued).
    async fn try_send<T: Serialize>(&self, frame: &T) -> Result<bool, usize> {
        let bytes = match serde_json::to_vec(frame) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "cannot serialise an outbound frame");
                return Ok(false);
            }
        };
        if bytes.len() > MAX_OUT_FRAME_BYTES {
            return Err(bytes.len());
        }
        Ok(self.queue(bytes).await)
    }

    async fn queue(&self, bytes: Vec<u8>) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        match self.policy {
            SlowClientPolicy::Backpressure => self.tx.send(bytes).await.is_ok(),
            SlowClientPolicy::Disconnect => match self.tx.try_send(bytes) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    tracing::warn!(
                        connection = self.id,
                        capacity = OUTBOUND_QUEUE_CAPACITY,
                        "client is not reading its frames; closing the connection"
                    );
                    self.overflowed.store(true, Ordering::Release);
                    self.closed.cancel();
                    false
                }
                Err(mpsc::error::TrySendError::Closed(_)) => false,
            },
        }
    }

    /// Sends a result; one over [`MAX_OUT_FRAME_BYTES`] is answered with
    /// an internal error naming its size instead.
    pub async fn respond(&self, id: RequestId, result: Value) -> bool {
        match self
            .try_send(&ResponseFrame {
                id: id.clone(),
                result,
            })
            .await
        {
            Ok(sent) => sent,
            Err(len) => {
                let error = RpcError::internal(format!(
                    "the response is {len} bytes, over the limit of {MAX_OUT_FRAME_BYTES} bytes on one frame; nothing was written"
                ));
                self.respond_error(Some(id), &error).await
            }
        }
    }

    pub async fn respond_error(&self, id: Option<RequestId>, error: &RpcError) -> bool {
        self.send(&ErrorFrame {
            id,
            error: error.to_object(),
        })
        .await
    }

    /// Sends a notification unless this connection opted out of it, or it
    /// is experimental and the connection did not opt in.
    pub async fn notify(&self, notification: &ServerNotification) -> bool {
        let method = notification.method();
        {
            let caps = self.caps();
            if !caps.initialized || caps.opt_out.contains(method) {
                return false;
            }
            if server_notification(method) == Some(Stability::Experimental) && !caps.experimental {
                return false;
            }
        }
        let params = match serde_json::to_value(notification) {
            Ok(mut v) => v.get_mut("params").map(Value::take).unwrap_or(Value::Null),
            Err(e) => {
                tracing::error!(error = %e, method, "cannot serialise a notification");
                return false;
            }
        };
        self.send(&NotificationFrame {
            method: method.to_owned(),
            params,
            emitted_at_ms: chrono::Utc::now().timestamp_millis(),
        })
        .await
    }

    pub async fn request(&self, id: i64, request: &ServerRequest) -> bool {
        let params = match serde_json::to_value(request) {
            Ok(mut v) => v.get_mut("params").map(Value::take).unwrap_or(Value::Null),
            Err(e) => {
                tracing::error!(error = %e, "cannot serialise a server request");
                return false;
            }
        };
        self.send(&RequestFrame {
            id: RequestId::Integer(id),
            method: request.method().to_owned(),
            params,
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_app_server_protocol::v2::WarningNotification;

    fn warning() -> ServerNotification {
        ServerNotification::Warning(WarningNotification {
            thread_id: None,
            message: "w".into(),
        })
    }

    #[tokio::test]
    async fn opt_out_and_initialization_gate_notifications() {
        let (conn, mut rx) = Connection::new(1, SlowClientPolicy::Backpressure);
        assert!(!conn.notify(&warning()).await, "not initialized yet");
        conn.set_caps(ClientCaps {
            initialized: true,
            ..ClientCaps::default()
        });
        assert!(conn.notify(&warning()).await);
        let frame: Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(frame["method"], "warning");
        assert!(frame["emittedAtMs"].is_i64());
        assert!(frame.get("jsonrpc").is_none());
        conn.set_caps(ClientCaps {
            initialized: true,
            opt_out: ["warning".to_owned()].into(),
            ..ClientCaps::default()
        });
        assert!(!conn.notify(&warning()).await);
    }

    #[tokio::test]
    async fn a_full_queue_closes_a_disconnect_policy_connection() {
        let (conn, _rx) = Connection::new(2, SlowClientPolicy::Disconnect);
        for _ in 0..OUTBOUND_QUEUE_CAPACITY {
            assert!(conn.respond(RequestId::Integer(1), Value::Null).await);
        }
        assert!(!conn.overflowed());
        assert!(!conn.respond(RequestId::Integer(1), Value::Null).await);
        assert!(conn.closed.is_cancelled());
        assert!(conn.overflowed());
    }
}
