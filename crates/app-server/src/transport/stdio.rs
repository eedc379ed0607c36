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
    let writer_task = tokio::spawn(write_frames(outbound, writer, conn.closed.clone()));
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

/// Drains a connection's outbound queue into `writer`, one line per frame,
/// until every sender is gone or `closed` is cancelled; then writes what
/// was already queued and flushes. Ending on `closed` means the process
/// exits when stdin ends even if some task still holds the connection.
pub async fn write_frames<W>(
    mut outbound: mpsc::Receiver<Vec<u8>>,
    mut writer: W,
    closed: CancellationToken,
) -> Result<()>
where
    W: AsyncWrite + Unpin,
{
    let io = |e| Error::io("stdout", e);
    loop {
        let frame = tokio::select! {
            biased;
            frame = outbound.recv() => frame,
            () = closed.cancelled() => break,
        };
        let Some(frame) = frame else { break };
        write_line(&mut writer, frame).await?;
        if outbound.is_empty() {
            writer.flush().await.map_err(io)?;
        }
    }
    while let Ok(frame) = outbound.try_recv() {
        write_line(&mut writer, frame).await?;
    }
    writer.flush().await.map_err(io)
}

async fn write_line<W: AsyncWrite + Unpin>(writer: &mut W, mut frame: Vec<u8>) -> Result<()> {
    frame.push(b'\n');
    writer
        .write_all(&frame)
        .await
        .map_err(|e| Error::io("stdout", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_writer_ends_on_close_after_writing_what_was_queued() {
        let (tx, rx) = mpsc::channel(8);
        let closed = CancellationToken::new();
        tx.send(b"one".to_vec()).await.unwrap();
        tx.send(b"two".to_vec()).await.unwrap();
        closed.cancel();
        let mut out = Vec::new();
        // `tx` is still alive: only the cancellation can end the writer.
        let written = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            write_frames(rx, &mut out, closed),
        )
        .await
        .expect("the writer did not end on close");
        written.unwrap();
        assert_eq!(out, b"one\ntwo\n");
        drop(tx);
    }

    #[tokio::test]
    async fn the_writer_ends_when_every_sender_is_gone() {
        let (tx, rx) = mpsc::channel(8);
        tx.send(b"{}".to_vec()).await.unwrap();
        drop(tx);
        let mut out = Vec::new();
        write_frames(rx, &mut out, CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out, b"{}\n");
    }
}
