//! stdio: one client, newline-delimited JSON on stdin/stdout (framing by
//! `keel-jsonl`). A full outbound queue applies back-pressure. When stdin
//! ends, the server stops its threads and returns.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::connection::{INBOUND_QUEUE_CAPACITY, Inbound, serve};
use crate::error::{Error, Result};
use crate::outbound::{Connection, SlowClientPolicy};
use crate::runtime::Runtime;

/// Serves one client on `reader`/`writer` until `reader` ends.
pub async fn serve_stdio<R, W>(runtime: Arc<Runtime>, reader: R, writer: W) -> Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (conn, outbound) =
        Connection::new(runtime.next_connection_id(), SlowClientPolicy::Backpressure);
    let conn = Arc::new(conn);
    let cancel = CancellationToken::new();
    let (frames, reader_task) =
        keel_jsonl::spawn_reader(reader, runtime.config.max_frame_bytes, cancel.clone());
    let (inbound_tx, inbound_rx) = mpsc::channel(INBOUND_QUEUE_CAPACITY);
    let feeder = tokio::spawn(feed(frames, inbound_tx));
    let writer_task = tokio::spawn(write_frames(outbound, writer));
    serve(runtime.clone(), conn.clone(), inbound_rx).await;
    runtime.shutdown_threads().await;
    cancel.cancel();
    drop(conn);
    let _ = feeder.await;
    let _ = reader_task.await;
    match writer_task.await {
        Ok(r) => r,
        Err(e) => Err(Error::io("stdout", std::io::Error::other(e.to_string()))),
    }
}

async fn feed(mut frames: mpsc::Receiver<keel_jsonl::ReadItem>, tx: mpsc::Sender<Inbound>) {
    while let Some(item) = frames.recv().await {
        let inbound = match item {
            Ok(bytes) => Inbound::Frame(bytes),
            Err(keel_jsonl::Error::Oversize { len, max }) => Inbound::Oversize { len, max },
            Err(e) => {
                tracing::error!(error = %e, "reading stdin failed");
                break;
            }
        };
        if tx.send(inbound).await.is_err() {
            break;
        }
    }
}

/// Drains a connection's outbound queue into `writer`, one line per frame.
pub async fn write_frames<W>(mut outbound: mpsc::Receiver<Vec<u8>>, mut writer: W) -> Result<()>
where
    W: AsyncWrite + Unpin,
{
    while let Some(mut frame) = outbound.recv().await {
        frame.push(b'\n');
        let io = |e| Error::io("stdout", e);
        writer.write_all(&frame).await.map_err(io)?;
        if outbound.is_empty() {
            writer.flush().await.map_err(io)?;
        }
    }
    writer.flush().await.map_err(|e| Error::io("stdout", e))
}
