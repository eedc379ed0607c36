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

/// Whether `a` and `b` are the same pipe, socket or file (`2>&1`).
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    let (_, a) = kind_of(a);
    a.is_some() && a == kind_of(b).1
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

/// A standard stream: read or written through the reactor (a pipe, `P`, or
/// a socket), or tokio's blocking stdio (`B`).
#[derive(Debug)]
pub enum Stdio<P: AsFd, B> {
    Pipe(P),
    Socket(UnixStream),
    Blocking(B),
}

/// The process's stdin, for reading lines of a protocol.
pub type Input = Stdio<pipe::Receiver, tokio::io::Stdin>;
/// The process's stdout, for writing frames of a protocol.
pub type Output = Stdio<pipe::Sender, tokio::io::Stdout>;

impl<P: AsFd, B> Stdio<P, B> {
    /// `fd` through the reactor when it is a pipe or a socket and `shared`
    /// is false, else `blocking()`. Must be called within the runtime.
    fn open(
        name: &str,
        fd: BorrowedFd<'_>,
        shared: bool,
        pipe: fn(OwnedFd) -> io::Result<P>,
        blocking: fn() -> B,
    ) -> Self {
        let (kind, _) = kind_of(fd);
        if blocking_wanted() || shared {
            return Stdio::Blocking(blocking());
        }
        let opened = match kind {
            Kind::Pipe => fd.try_clone_to_owned().and_then(pipe).map(Stdio::Pipe),
            Kind::Socket => fd.try_clone_to_owned().and_then(socket).map(Stdio::Socket),
            Kind::Other => return Stdio::Blocking(blocking()),
        };
        opened.unwrap_or_else(|e| {
            tracing::debug!("{name} stays blocking: {e}");
            Stdio::Blocking(blocking())
        })
    }
}

/// Stdin, non-blocking on the runtime when it is a pipe or a socket. Must
/// be called within the runtime.
pub fn stdin() -> Input {
    let stdin = io::stdin();
    Stdio::open(
        "stdin",
        stdin.as_fd(),
        false,
        pipe::Receiver::from_owned_fd,
        tokio::io::stdin,
    )
}

/// Stdout, non-blocking on the runtime when it is a pipe or a socket that
/// stderr does not share. Must be called within the runtime.
pub fn stdout() -> Output {
    let stdout = io::stdout();
    let shared = same_file(stdout.as_fd(), io::stderr().as_fd());
    Stdio::open(
        "stdout",
        stdout.as_fd(),
        shared,
        pipe::Sender::from_owned_fd,
        tokio::io::stdout,
    )
}

impl<P: AsFd, B> Drop for Stdio<P, B> {
    fn drop(&mut self) {
        match self {
            Stdio::Pipe(p) => restore_blocking(p.as_fd()),
            Stdio::Socket(s) => restore_blocking(s.as_fd()),
            Stdio::Blocking(_) => {}
        }
    }
}

impl<P, B> AsyncRead for Stdio<P, B>
where
    P: AsFd + AsyncRead + Unpin,
    B: AsyncRead + Unpin,
{
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stdio::Pipe(p) => Pin::new(p).poll_read(cx, buf),
            Stdio::Socket(s) => Pin::new(s).poll_read(cx, buf),
            Stdio::Blocking(b) => Pin::new(b).poll_read(cx, buf),
        }
    }
}

impl<P, B> AsyncWrite for Stdio<P, B>
where
    P: AsFd + AsyncWrite + Unpin,
    B: AsyncWrite + Unpin,
{
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stdio::Pipe(p) => Pin::new(p).poll_write(cx, buf),
            Stdio::Socket(s) => Pin::new(s).poll_write(cx, buf),
            Stdio::Blocking(b) => Pin::new(b).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stdio::Pipe(p) => Pin::new(p).poll_flush(cx),
            Stdio::Socket(s) => Pin::new(s).poll_flush(cx),
            Stdio::Blocking(b) => Pin::new(b).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stdio::Pipe(p) => Pin::new(p).poll_shutdown(cx),
            // Shutting a socket down would end the host's reading of the
            // other half too when stdin is the same socket: only flush.
            Stdio::Socket(s) => Pin::new(s).poll_flush(cx),
            Stdio::Blocking(b) => Pin::new(b).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stdio::Pipe(p) => Pin::new(p).poll_write_vectored(cx, bufs),
            Stdio::Socket(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stdio::Blocking(b) => Pin::new(b).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stdio::Pipe(p) => p.is_write_vectored(),
            Stdio::Socket(s) => s.is_write_vectored(),
            Stdio::Blocking(b) => b.is_write_vectored(),
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
        let mut output: Output = Stdio::Pipe(pipe::Sender::from_owned_fd(write_end).unwrap());
        let mut input: Input = Stdio::Pipe(pipe::Receiver::from_owned_fd(read_end).unwrap());
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
        let Stdio::Pipe(sender) = &wrote else {
            unreachable!()
        };
        let dup = sender.as_fd().try_clone_to_owned().unwrap();
        assert!(nonblocking(dup.as_fd()));
        drop(wrote);
        assert!(!nonblocking(dup.as_fd()), "the flag is cleared when let go");
        drop(input);
    }

    #[test]
    fn stderr_on_the_same_pipe_is_told_apart_from_another_pipe() {
        let (_read_end, write_end) = nix::unistd::pipe().unwrap();
        let dup = write_end.try_clone().unwrap();
        let (_other_read, other) = nix::unistd::pipe().unwrap();
        assert!(same_file(write_end.as_fd(), dup.as_fd()));
        assert!(!same_file(write_end.as_fd(), other.as_fd()));
    }

    #[tokio::test]
    async fn a_write_to_a_pipe_nobody_reads_any_more_fails_instead_of_waiting() {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        let mut output: Output = Stdio::Pipe(pipe::Sender::from_owned_fd(write_end).unwrap());
        drop(read_end);
        let written = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            output.write_all(&[b'x'; 100 * 1024]),
        )
        .await
        .expect("the write waited on a dead reader");
        assert_eq!(written.unwrap_err().kind(), io::ErrorKind::BrokenPipe);
    }

    #[tokio::test]
    async fn a_socket_is_used_both_ways() {
        let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
        let fd = OwnedFd::from(ours);
        let mut output: Output = Stdio::Socket(socket(fd.try_clone().unwrap()).unwrap());
        let mut input: Input = Stdio::Socket(socket(fd).unwrap());
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
