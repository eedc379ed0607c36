//! One WebSocket connection (over TCP or a unix stream), after the upgrade:
//! text messages in, one JSON-RPC frame each, into
//! [`crate::connection::serve`]; the connection's outbound queue out, one
//! text message per frame.
//!
//! The connection uses the [`SlowClientPolicy::Disconnect`] policy: when
//! its outbound queue (of [`crate::outbound::OUTBOUND_QUEUE_CAPACITY`]
//! frames) is full, it is closed. How it ends, and the close frame sent:
//!
//! | why | close code | reason |
//! | --- | --- | --- |
//! | a message longer than `--max-frame-bytes` | 1009 | `message too big` |
//! | the client does not read (queue full) | 1008 | `slow client: outbound queue full` |
//! | the server shuts down | 1001 | `server shutting down` |
//! | the client closed | (the close handshake is answered) | |
//!
//! Binary messages are ignored (logged); pings are answered by the
//! WebSocket layer. Malformed JSON is handled like on stdio (logged, no
//! reply).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite;

use crate::connection::{INBOUND_QUEUE_CAPACITY, Inbound, serve};
use crate::outbound::{Connection, SlowClientPolicy};
use crate::runtime::Runtime;

/// Close code for an oversize message (RFC 6455 "Message Too Big").
pub const CLOSE_TOO_BIG: u16 = 1009;
/// Close code for a client that does not read its frames ("Policy Violation").
pub const CLOSE_SLOW_CLIENT: u16 = 1008;
/// Close code when the server stops ("Going Away").
pub const CLOSE_GOING_AWAY: u16 = 1001;
/// Reason sent with [`CLOSE_SLOW_CLIENT`].
pub const SLOW_CLIENT_REASON: &str = "slow client: outbound queue full";
/// How long the close frame may take to leave before the socket is dropped.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the reader side ended the connection.
type CloseReason = OnceLock<(u16, &'static str)>;

/// Serves one upgraded WebSocket until either side closes it.
pub async fn run(runtime: Arc<Runtime>, socket: WebSocket, peer: String) {
    let (conn, outbound) =
        Connection::new(runtime.next_connection_id(), SlowClientPolicy::Disconnect);
    let conn = Arc::new(conn);
    tracing::info!(connection = conn.id, %peer, "websocket client connected");
    let (sink, stream) = socket.split();
    let reason = Arc::new(CloseReason::new());
    let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_QUEUE_CAPACITY);
    let reader = tokio::spawn(read_loop(stream, inbound_tx, conn.clone(), reason.clone()));
    let writer = tokio::spawn(write_loop(
        sink,
        outbound,
        conn.clone(),
        runtime.clone(),
        reason,
    ));
    serve(runtime, conn.clone(), inbound_rx).await;
    conn.closed.cancel();
    let _ = reader.await;
    let _ = writer.await;
    tracing::info!(connection = conn.id, %peer, "websocket client disconnected");
}

async fn read_loop(
    mut stream: SplitStream<WebSocket>,
    tx: mpsc::Sender<Inbound>,
    conn: Arc<Connection>,
    reason: Arc<CloseReason>,
) {
    loop {
        let msg = tokio::select! {
            msg = stream.next() => msg,
            _ = conn.closed.cancelled() => return,
        };
        let bytes = match msg {
            None | Some(Ok(Message::Close(_))) => return,
            Some(Ok(Message::Text(text))) => text.as_str().as_bytes().to_vec(),
            Some(Ok(Message::Binary(_))) => {
                tracing::warn!(connection = conn.id, "binary websocket message ignored");
                continue;
            }
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => continue,
            Some(Err(e)) => {
                let inner = e.into_inner();
                if let Some(tungstenite::Error::Capacity(c)) =
                    inner.downcast_ref::<tungstenite::Error>()
                {
                    tracing::warn!(connection = conn.id, error = %c, "oversize websocket message; closing");
                    let _ = reason.set((CLOSE_TOO_BIG, "message too big"));
                } else {
                    tracing::debug!(connection = conn.id, error = %inner, "websocket read failed");
                }
                return;
            }
        };
        tokio::select! {
            r = tx.send(Inbound::Frame(bytes)) => if r.is_err() { return },
            _ = conn.closed.cancelled() => return,
        }
    }
}

async fn write_loop(
    mut sink: SplitSink<WebSocket, Message>,
    mut outbound: mpsc::Receiver<Vec<u8>>,
    conn: Arc<Connection>,
    runtime: Arc<Runtime>,
    reason: Arc<CloseReason>,
) {
    loop {
        let frame = tokio::select! {
            biased;
            _ = conn.closed.cancelled() => break,
            f = outbound.recv() => f,
        };
        let Some(frame) = frame else { break };
        let text = match String::from_utf8(frame) {
            Ok(t) => t,
            Err(e) => {
                tracing::error!(error = %e, "an outbound frame is not UTF-8");
                continue;
            }
        };
        tokio::select! {
            r = sink.send(Message::Text(Utf8Bytes::from(text))) => if r.is_err() {
                conn.closed.cancel();
                return;
            },
            _ = conn.closed.cancelled() => break,
        }
    }
    let close = if conn.overflowed() {
        tracing::warn!(connection = conn.id, "closing a slow websocket client");
        Some((CLOSE_SLOW_CLIENT, SLOW_CLIENT_REASON))
    } else if let Some(r) = reason.get() {
        Some(*r)
    } else if runtime.shutdown.is_cancelled() {
        Some((CLOSE_GOING_AWAY, "server shutting down"))
    } else {
        None
    };
    let finish = async {
        if let Some((code, why)) = close {
            let frame = CloseFrame {
                code,
                reason: Utf8Bytes::from_static(why),
            };
            let _ = sink.send(Message::Close(Some(frame))).await;
        }
        let _ = sink.close().await;
    };
    let _ = tokio::time::timeout(CLOSE_TIMEOUT, finish).await;
}
