//! Writing frames: one JSON value per line.
//!
//! Owns serialising values as compact JSON, appending the LF and flushing
//! (after each burst of frames, so a host sees every frame promptly). A
//! frame and its LF, and the frames of one burst, go out in one write: on
//! tokio's stdout every write is a trip through the blocking pool. It does
//! not decide which frames exist or their order beyond first come, first
//! written.

use serde::Serialize;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::{Error, MAX_OUT_FRAME_BYTES, Result, WRITE_CHANNEL_CAPACITY};

/// A burst is written once it holds this many bytes.
const BURST_BYTES: usize = 64 * 1024;
/// The burst buffer is given back to the allocator above this capacity.
const KEEP_CAPACITY: usize = 256 * 1024;

/// Writes frames to an `AsyncWrite`.
pub struct FrameWriter<W> {
    inner: W,
    /// Frames (each with its LF) not yet handed to `inner`.
    queued: Vec<u8>,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    pub fn new(writer: W) -> Self {
        Self {
            inner: writer,
            queued: Vec::new(),
        }
    }

    /// Writes one frame (its LF is added). Does not flush.
    pub async fn write_frame(&mut self, frame: &[u8]) -> Result<()> {
        check_frame(frame)?;
        self.queue(frame);
        self.write_queued().await
    }

    /// Appends a frame known to hold no LF to the pending burst.
    fn queue(&mut self, frame: &[u8]) {
        self.queued.reserve(frame.len() + 1);
        self.queued.extend_from_slice(frame);
        self.queued.push(b'\n');
    }

    /// Hands the pending burst to the writer in one write.
    async fn write_queued(&mut self) -> Result<()> {
        let written = self.inner.write_all(&self.queued).await;
        self.queued.clear();
        if self.queued.capacity() > KEEP_CAPACITY {
            self.queued = Vec::new();
        }
        written?;
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

/// Refuses a frame with a line break or over [`MAX_OUT_FRAME_BYTES`].
fn check_frame(frame: &[u8]) -> Result<()> {
    if frame.len() > MAX_OUT_FRAME_BYTES {
        return Err(Error::OversizeOut {
            len: frame.len(),
            max: MAX_OUT_FRAME_BYTES,
        });
    }
    if frame.contains(&b'\n') {
        return Err(Error::EmbeddedNewline);
    }
    Ok(())
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
        check_frame(&frame)?;
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
        // Senders refuse frames with an LF, so frames are queued unchecked.
        while let Some(frame) = rx.recv().await {
            out.queue(&frame);
            // Everything already waiting joins the burst, then one write
            // and one flush.
            while out.queued.len() < BURST_BYTES
                && let Ok(next) = rx.try_recv()
            {
                out.queue(&next);
            }
            out.write_queued().await?;
            if rx.is_empty() {
                out.flush().await?;
            }
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
    async fn refuses_an_oversize_frame_and_goes_on() {
        let (w, mut r) = tokio::io::duplex(1024);
        let (sender, task) = spawn_writer(w);
        let big = vec![b'a'; MAX_OUT_FRAME_BYTES + 1];
        let err = sender.send_bytes(big).await.unwrap_err();
        assert!(
            matches!(err, Error::OversizeOut { len, max } if len == max + 1),
            "{err}"
        );
        sender.send_bytes(b"{}".to_vec()).await.unwrap();
        drop(sender);
        task.await.unwrap().unwrap();
        let mut s = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut r, &mut s)
            .await
            .unwrap();
        assert_eq!(s, "{}\n");
    }

    #[tokio::test]
    async fn refuses_embedded_newlines() {
        let (w, _r) = tokio::io::duplex(64);
        let (sender, _task) = spawn_writer(w);
        let err = sender.send_bytes(b"a\nb".to_vec()).await.unwrap_err();
        assert!(matches!(err, Error::EmbeddedNewline));
    }
}
