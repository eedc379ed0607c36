//! Splitting a byte stream into frames.
//!
//! Owns line splitting with a size limit. A frame is the bytes before an LF,
//! minus one trailing CR. A final line without an LF at end of input is a
//! frame too (a host that forgets the last newline still gets an answer).
//! It does not parse JSON.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{Error, READ_CHANNEL_CAPACITY, Result};

/// One item read: a frame's bytes, or why a line was not a frame.
pub type ReadItem = Result<Vec<u8>>;

/// Reads frames from an `AsyncRead`.
pub struct FrameReader<R> {
    inner: BufReader<R>,
    max: usize,
    buf: Vec<u8>,
    /// Bytes of an oversize line seen so far, while skipping it.
    skipping: Option<usize>,
    done: bool,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader that refuses frames longer than `max_frame_bytes`.
    pub fn new(reader: R, max_frame_bytes: usize) -> Self {
        Self {
            inner: BufReader::new(reader),
            max: max_frame_bytes,
            buf: Vec::new(),
            skipping: None,
            done: false,
        }
    }

    /// The next frame; `None` at end of input. Blank lines are skipped.
    /// After an `Err(Oversize)` reading continues with the next line; after
    /// an `Err(Io)` the reader is done.
    pub async fn next_frame(&mut self) -> Option<ReadItem> {
        loop {
            if self.done {
                return None;
            }
            let chunk = match self.inner.fill_buf().await {
                Ok(c) => c,
                Err(e) => {
                    self.done = true;
                    return Some(Err(Error::Io(e)));
                }
            };
            if chunk.is_empty() {
                self.done = true;
                if let Some(len) = self.skipping.take() {
                    return Some(Err(Error::Oversize { len, max: self.max }));
                }
                let line = std::mem::take(&mut self.buf);
                return finish_line(line).map(|frame| self.checked(frame));
            }
            let (taken, newline) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, Some(i)),
                None => (chunk.len(), None),
            };
            let body = &chunk[..newline.unwrap_or(taken)];
            if let Some(seen) = self.skipping.as_mut() {
                *seen += body.len();
            } else if self.buf.len() + body.len() > self.max + 1 {
                // One byte of slack for a CR that the LF will make legal.
                self.skipping = Some(self.buf.len() + body.len());
                self.buf = Vec::new();
            } else {
                self.buf.extend_from_slice(body);
            }
            self.inner.consume(taken);
            if newline.is_none() {
                continue;
            }
            if let Some(len) = self.skipping.take() {
                return Some(Err(Error::Oversize { len, max: self.max }));
            }
            let line = std::mem::take(&mut self.buf);
            if let Some(frame) = finish_line(line) {
                return Some(self.checked(frame));
            }
        }
    }

    fn checked(&self, frame: Vec<u8>) -> ReadItem {
        if frame.len() > self.max {
            return Err(Error::Oversize {
                len: frame.len(),
                max: self.max,
            });
        }
        Ok(frame)
    }
}

/// Drops one trailing CR; `None` for a blank line.
fn finish_line(mut line: Vec<u8>) -> Option<Vec<u8>> {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    Some(line)
}

/// Runs a [`FrameReader`] as a task. The channel closes at end of input,
/// after an I/O error (sent first), or when `cancel` fires.
pub fn spawn_reader<R>(
    reader: R,
    max_frame_bytes: usize,
    cancel: CancellationToken,
) -> (mpsc::Receiver<ReadItem>, JoinHandle<()>)
where
    R: AsyncRead + Unpin + Send + 'static,
{
    let (tx, rx) = mpsc::channel(READ_CHANNEL_CAPACITY);
    let task = tokio::spawn(async move {
        let mut frames = FrameReader::new(reader, max_frame_bytes);
        loop {
            let item = tokio::select! {
                _ = cancel.cancelled() => break,
                item = frames.next_frame() => item,
            };
            let Some(item) = item else { break };
            let stop = matches!(item, Err(Error::Io(_)));
            if tx.send(item).await.is_err() || stop {
                break;
            }
        }
    });
    (rx, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn all(input: &[u8], max: usize) -> Vec<std::result::Result<String, String>> {
        let mut r = FrameReader::new(input, max);
        let mut out = Vec::new();
        while let Some(item) = r.next_frame().await {
            out.push(
                item.map(|b| String::from_utf8(b).unwrap())
                    .map_err(|e| e.to_string()),
            );
        }
        out
    }

    #[tokio::test]
    async fn splits_on_lf_and_tolerates_crlf() {
        let got = all(b"{\"a\":1}\n{\"b\":2}\r\n\n  \r\n{\"c\":3}", 100).await;
        assert_eq!(
            got,
            vec![
                Ok("{\"a\":1}".into()),
                Ok("{\"b\":2}".into()),
                Ok("{\"c\":3}".into())
            ]
        );
    }

    #[tokio::test]
    async fn oversize_line_is_reported_once_and_the_rest_parses() {
        let mut input = b"ok1\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 50));
        input.extend(b"\nok2\n");
        input.extend(std::iter::repeat_n(b'y', 11));
        let got = all(&input, 10).await;
        assert_eq!(got[0], Ok("ok1".into()));
        assert_eq!(
            got[1],
            Err("frame of 50 bytes exceeds the maximum frame size of 10 bytes".into())
        );
        assert_eq!(got[2], Ok("ok2".into()));
        assert!(got[3].as_ref().unwrap_err().contains("11 bytes"));
        assert_eq!(got.len(), 4);
    }

    #[tokio::test]
    async fn exact_limit_with_cr_is_accepted() {
        let got = all(b"0123456789\r\n01234567890\n", 10).await;
        assert_eq!(got[0], Ok("0123456789".into()));
        assert!(got[1].is_err());
    }

    #[tokio::test]
    async fn long_lines_across_small_reads() {
        // A reader that hands out 3 bytes at a time.
        let (mut w, r) = tokio::io::duplex(3);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            w.write_all(b"abcdefghij\nshort\n0123456789ABCDEF\nend\n")
                .await
                .unwrap();
        });
        let mut fr = FrameReader::new(r, 12);
        let mut got = Vec::new();
        while let Some(item) = fr.next_frame().await {
            got.push(item.map_err(|e| e.to_string()));
        }
        writer.await.unwrap();
        assert_eq!(got[0].as_deref().unwrap(), b"abcdefghij");
        assert_eq!(got[1].as_deref().unwrap(), b"short");
        assert!(got[2].as_ref().unwrap_err().contains("16 bytes"));
        assert_eq!(got[3].as_deref().unwrap(), b"end");
    }

    #[tokio::test]
    async fn task_delivers_and_closes_at_eof() {
        let (mut rx, task) = spawn_reader(&b"a\nb\n"[..], 10, CancellationToken::new());
        assert_eq!(rx.recv().await.unwrap().unwrap(), b"a");
        assert_eq!(rx.recv().await.unwrap().unwrap(), b"b");
        assert!(rx.recv().await.is_none());
        task.await.unwrap();
    }
}
