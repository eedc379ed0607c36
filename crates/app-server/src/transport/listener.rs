//! A listener that holds at most a fixed number of accepted sockets at
//! once ([`MAX_SOCKETS`]): each accepted socket carries a semaphore permit
//! until it is closed (an upgraded WebSocket keeps it for its lifetime).
//! Beyond the cap, new connections wait in the kernel's backlog, so peers
//! that connect and never finish their request cannot exhaust file
//! descriptors or tasks. Also names the peer of each socket ([`Peer`]) for
//! logs.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Most sockets one listener holds open at once (authenticated or not).
pub const MAX_SOCKETS: usize = 512;

/// A listener with a cap on open sockets.
pub struct Capped<L> {
    inner: L,
    slots: Arc<Semaphore>,
}

impl<L> Capped<L> {
    pub fn new(inner: L, max: usize) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new(max)),
        }
    }
}

/// An accepted socket and its slot.
pub struct Slotted<S> {
    io: S,
    _slot: OwnedSemaphorePermit,
}

impl<L> Listener for Capped<L>
where
    L: Listener,
    L::Io: Unpin,
{
    type Io = Slotted<L::Io>;
    type Addr = L::Addr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let slot = loop {
            match self.slots.clone().acquire_owned().await {
                Ok(p) => break p,
                // The semaphore is never closed; wait for a slot anyway.
                Err(_) => tokio::task::yield_now().await,
            }
        };
        let (io, addr) = self.inner.accept().await;
        (Slotted { io, _slot: slot }, addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Slotted<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Slotted<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

/// Who is on the other end of a socket, for logs.
#[derive(Debug, Clone)]
pub struct Peer(pub String);

impl Connected<IncomingStream<'_, Capped<TcpListener>>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Capped<TcpListener>>) -> Self {
        Peer(stream.remote_addr().to_string())
    }
}

impl Connected<IncomingStream<'_, Capped<UnixListener>>> for Peer {
    fn connect_info(_stream: IncomingStream<'_, Capped<UnixListener>>) -> Self {
        Peer("unix".to_owned())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn sockets_beyond_the_cap_wait_for_a_slot() {
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut capped = Capped::new(tcp, 1);
        let _c1 = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _c2 = tokio::net::TcpStream::connect(addr).await.unwrap();
        let (first, _) = tokio::time::timeout(Duration::from_secs(5), capped.accept())
            .await
            .unwrap();
        // The only slot is taken: the second socket stays in the backlog.
        assert!(
            tokio::time::timeout(Duration::from_millis(100), capped.accept())
                .await
                .is_err()
        );
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), capped.accept())
            .await
            .unwrap();
    }
}
