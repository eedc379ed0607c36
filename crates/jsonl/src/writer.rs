//! Writing frames: one JSON value per line.
//!
//! Owns serialising values as compact JSON, appending the LF and flushing
//! (after each burst of frames, so a host sees every frame promptly). It
//! does not decide which frames exist or their order beyond first come,
//! first written.

use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::{Error, Result, WRITE_CHANNEL_CAPACITY};

/// Writes frames to an `AsyncWrite`.
pub struct FrameWriter<W> {
    inner: W,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub fn new(writer: W) -> Self {
        Self { inner: writer }
    }

    /// Writes one frame (its LF is added). Does not flush.
    pub async fn write_frame(&mut self, frame: &[u8]) -> Result<()> {
        if frame.contains(&b'\n') {
            return Err(Error::EmbeddedNewline);
        }
        self.inner.write_all(frame).await?;
        self.inner.write_all(b"\n").await?;
        Ok(())
    }

    /// Serialises `value` and writes it as one frame. Does not flush.
    pub async fn write_json<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec(value)?;
        self.write_frame(&bytes).await
    }

    pub async fn flush(&mut self) -> Result<()> {
        self.inner.flush().await?;
        Ok(())
    }
}

/// A cloneable handle that queues frames for the writer task.
#[derive(Clone, Debug)]
pub struct FrameSender {
    tx: mpsc::Sender<Vec<u8>>,
}

impl FrameSender {
    /// Serialises `value` (compact JSON, so without line breaks) and queues
    /// it. Waits when the queue is full.
    pub async fn send_json<T: Serialize + ?Sized>(&self, value: &T) -> Result<()> {
        let bytes = serde_json::to_vec(value)?;
        self.send_bytes(bytes).await
    }

    /// Queues one frame's bytes (without the LF).
    pub async fn send_bytes(&self, frame: Vec<u8>) -> Result<()> {
        if frame.contains(&b'\n') {
            return Err(Error::EmbeddedNewline);
        }
        self.tx.send(frame).await.map_err(|_| Error::WriterClosed)
    }
}

/// Runs a [`FrameWriter`] as a task. The task ends, after writing and
/// flushing everything queued, once every [`FrameSender`] is dropped; it
/// returns the first write error (after which queued frames are dropped).
pub fn spawn_writer<W>(writer: W) -> (FrameSender, JoinHandle<Result<()>>)
where
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(WRITE_CHANNEL_CAPACITY);
    let task = tokio::spawn(async move {
        let mut out = FrameWriter::new(writer);
        while let Some(frame) = rx.recv().await {
            out.write_frame(&frame).await?;
            // Flush once the burst is written.
            while let Ok(next) = rx.try_recv() {
                out.write_frame(&next).await?;
            }
            out.flush().await?;
        }
        out.flush().await
    });
    (FrameSender { tx }, task)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn writes_one_compact_line_per_value() {
        let (w, mut r) = tokio::io::duplex(1024);
        let (sender, task) = spawn_writer(w);
        sender.send_json(&json!({"a":"x\ny"})).await.unwrap();
        sender.send_json(&json!([1, 2])).await.unwrap();
        drop(sender);
        task.await.unwrap().unwrap();
        let mut s = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut r, &mut s)
            .await
            .unwrap();
        assert_eq!(s, "{\"a\":\"x\\ny\"}\n[1,2]\n");
    }

    #[tokio::test]
    async fn refuses_embedded_newlines() {
        let (w, _r) = tokio::io::duplex(64);
        let (sender, _task) = spawn_writer(w);
        let err = sender.send_bytes(b"a\nb".to_vec()).await.unwrap_err();
        assert!(matches!(err, Error::EmbeddedNewline));
    }
}
