//! Stdin and stdout of the protocol modes (RPC, the app-server's stdio
//! transport, Claude headless).
//!
//! tokio's own `stdin()`/`stdout()` hand every read and every write to a
//! blocking thread and back: two thread wake-ups on the way of each prompt
//! in and each burst of frames out, and a few dozen context switches per
//! turn. When the host gave keel a pipe or a socket (every host library
//! does: Node's `spawn`, Python's `subprocess`, Rust's `Command`), keel
//! reads and writes it non-blocking on the runtime's own thread instead,
//! through the reactor, as Node does with its own stdio pipes.
//!
//! Non-blocking is a property of the open file, which other processes may
//! share. So it is used only for a pipe or socket (never a terminal or a
//! file), not for stdout when stderr is the same pipe (`2>&1`: keel's log
//! lines are blocking writes and must not fail), and the flag is cleared
//! again when the reader or writer is dropped. `KEEL_BLOCKING_STDIO=1` keeps
//! tokio's blocking stdio. This module must not know any protocol.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::pin::Pin;
use std::task::{Context, Poll};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::UnixStream;
use tokio::net::unix::pipe;

/// What a standard stream is, as far as this module cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pipe,
    Socket,
    Other,
}

fn kind_of(fd: BorrowedFd<'_>) -> (Kind, Option<(u64, u64)>) {
    let Ok(owned) = fd.try_clone_to_owned() else {
        return (Kind::Other, None);
    };
    let Ok(meta) = std::fs::File::from(owned).metadata() else {
        return (Kind::Other, None);
    };
    let kind = if meta.file_type().is_fifo() {
        Kind::Pipe
    } else if meta.file_type().is_socket() {
        Kind::Socket
    } else {
        Kind::Other
    };
    (kind, Some((meta.dev(), meta.ino())))
}

fn blocking_wanted() -> bool {
    std::env::var_os("KEEL_BLOCKING_STDIO").is_some_and(|v| v != "0")
}

/// Clears `O_NONBLOCK` again (best effort: the stream is being let go).
fn restore_blocking(fd: BorrowedFd<'_>) {
    if let Ok(bits) = fcntl(fd, FcntlArg::F_GETFL) {
        let flags = OFlag::from_bits_truncate(bits) - OFlag::O_NONBLOCK;
        let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
    }
}

fn socket(fd: OwnedFd) -> io::Result<UnixStream> {
    let std = std::os::unix::net::UnixStream::from(fd);
    std.set_nonblocking(true)?;
    UnixStream::from_std(std)
}

/// The process's stdin, for reading lines of a protocol.
#[derive(Debug)]
pub enum Input {
    Pipe(pipe::Receiver),
    Socket(UnixStream),
    Blocking(tokio::io::Stdin),
}

/// Stdin, non-blocking on the runtime when it is a pipe or a socket. Must
/// be called within the runtime.
pub fn stdin() -> Input {
    let stdin = io::stdin();
    let (kind, _) = kind_of(stdin.as_fd());
    if blocking_wanted() || kind == Kind::Other {
        return Input::Blocking(tokio::io::stdin());
    }
    let opened = stdin
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| match kind {
            Kind::Pipe => pipe::Receiver::from_owned_fd(fd).map(Input::Pipe),
            Kind::Socket | Kind::Other => socket(fd).map(Input::Socket),
        });
    opened.unwrap_or_else(|e| {
        tracing::debug!("stdin stays blocking: {e}");
        Input::Blocking(tokio::io::stdin())
    })
}

impl Drop for Input {
    fn drop(&mut self) {
        match self {
            Input::Pipe(p) => restore_blocking(p.as_fd()),
            Input::Socket(s) => restore_blocking(s.as_fd()),
            Input::Blocking(_) => {}
        }
    }
}

impl AsyncRead for Input {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Input::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            Input::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Input::Blocking(b) => Pin::new(b).poll_read(cx, buf),
        }
    }
}

/// The process's stdout, for writing frames of a protocol.
#[derive(Debug)]
pub enum Output {
    Pipe(pipe::Sender),
    Socket(UnixStream),
    Blocking(tokio::io::Stdout),
}

/// Stdout, non-blocking on the runtime when it is a pipe or a socket that
/// stderr does not share. Must be called within the runtime.
pub fn stdout() -> Output {
    let stdout = io::stdout();
    let (kind, id) = kind_of(stdout.as_fd());
    let (_, stderr_id) = kind_of(io::stderr().as_fd());
    if blocking_wanted() || kind == Kind::Other || (id.is_some() && id == stderr_id) {
        return Output::Blocking(tokio::io::stdout());
    }
    let opened = stdout
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| match kind {
            Kind::Pipe => pipe::Sender::from_owned_fd(fd).map(Output::Pipe),
            Kind::Socket | Kind::Other => socket(fd).map(Output::Socket),
        });
    opened.unwrap_or_else(|e| {
        tracing::debug!("stdout stays blocking: {e}");
        Output::Blocking(tokio::io::stdout())
    })
}

impl Drop for Output {
    fn drop(&mut self) {
        match self {
            Output::Pipe(p) => restore_blocking(p.as_fd()),
            Output::Socket(s) => restore_blocking(s.as_fd()),
            Output::Blocking(_) => {}
        }
    }
}

impl AsyncWrite for Output {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Output::Pipe(p) => Pin::new(p).poll_write(cx, buf),
            Output::Socket(s) => Pin::new(s).poll_write(cx, buf),
            Output::Blocking(b) => Pin::new(b).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(p) => Pin::new(p).poll_flush(cx),
            Output::Socket(s) => Pin::new(s).poll_flush(cx),
            Output::Blocking(b) => Pin::new(b).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Output::Pipe(p) => Pin::new(p).poll_shutdown(cx),
            // Shutting a socket down would end the host's reading of the
            // other half too when stdin is the same socket: only flush.
            Output::Socket(s) => Pin::new(s).poll_flush(cx),
            Output::Blocking(b) => Pin::new(b).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Output::Pipe(p) => Pin::new(p).poll_write_vectored(cx, bufs),
            Output::Socket(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Output::Blocking(b) => Pin::new(b).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Output::Pipe(p) => p.is_write_vectored(),
            Output::Socket(s) => s.is_write_vectored(),
            Output::Blocking(b) => b.is_write_vectored(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn nonblocking(fd: BorrowedFd<'_>) -> bool {
        let bits = fcntl(fd, FcntlArg::F_GETFL).unwrap();
        OFlag::from_bits_truncate(bits).contains(OFlag::O_NONBLOCK)
    }

    #[tokio::test]
    async fn a_pipe_is_read_and_written_on_the_runtime_and_left_blocking() {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        let mut output = Output::Pipe(pipe::Sender::from_owned_fd(write_end).unwrap());
        let mut input = Input::Pipe(pipe::Receiver::from_owned_fd(read_end).unwrap());
        // More than a pipe holds: the write waits for the reader, on one thread.
        let frame = vec![b'x'; 200 * 1024];
        let (wrote, read) = tokio::join!(
            async {
                output.write_all(&frame).await.unwrap();
                output.flush().await.unwrap();
                output
            },
            async {
                let mut got = vec![0; frame.len()];
                input.read_exact(&mut got).await.unwrap();
                (input, got)
            }
        );
        let (input, got) = read;
        assert_eq!(got, frame);
        let Output::Pipe(sender) = &wrote else {
            unreachable!()
        };
        let dup = sender.as_fd().try_clone_to_owned().unwrap();
        assert!(nonblocking(dup.as_fd()));
        drop(wrote);
        assert!(!nonblocking(dup.as_fd()), "the flag is cleared when let go");
        drop(input);
    }

    #[tokio::test]
    async fn a_socket_is_used_both_ways() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = OwnedFd::from(ours);
        let mut output = Output::Socket(socket(fd.try_clone().unwrap()).unwrap());
        let mut input = Input::Socket(socket(fd).unwrap());
        let mut theirs = UnixStream::from_std({
            theirs.set_nonblocking(true).unwrap();
            theirs
        })
        .unwrap();
        output.write_all(b"out\n").await.unwrap();
        output.shutdown().await.unwrap();
        let mut got = [0; 4];
        theirs.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"out\n");
        // Shutting our writing down did not end our reading.
        theirs.write_all(b"in\n").await.unwrap();
        let mut got = [0; 3];
        input.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"in\n");
    }
}
