//! A listener that holds at most a fixed number of accepted sockets at
//! once ([`MAX_SOCKETS`]): each accepted socket carries a semaphore permit
//! until it is closed (an upgraded WebSocket keeps it for its lifetime).
//! Beyond the cap, new connections wait in the kernel's backlog, so peers
//! that connect and never finish their request cannot exhaust file
//! descriptors or tasks. A socket that has not authenticated is *pending*:
//! it is closed when it has not authenticated within [`PENDING_TIMEOUT`],
//! and when more than [`MAX_PENDING`] are pending the oldest is closed to
//! make room, so idle or slow peers that never authenticate cannot keep
//! `/healthz` or an authenticated upgrade waiting. Also names the peer of
//! each socket ([`Peer`]) for logs and lets the upgrade handler mark it
//! authenticated ([`Peer::authenticated`]).

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::extract::connect_info::Connected;
use axum::serve::{IncomingStream, Listener};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Sleep;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// Most sockets one listener holds open at once (authenticated or not).
pub const MAX_SOCKETS: usize = 512;

/// Most sockets that have not authenticated yet, at once.
pub const MAX_PENDING: usize = 128;

/// How long a socket may stay open without authenticating.
pub const PENDING_TIMEOUT: Duration = Duration::from_secs(10);

/// A listener with a cap on open sockets.
pub struct Capped<L> {
    inner: L,
    slots: Arc<Semaphore>,
    pending: VecDeque<Weak<SlotState>>,
    max_pending: usize,
    timeout: Duration,
}

impl<L> Capped<L> {
    pub fn new(inner: L, max: usize) -> Self {
        Self::with_pending(inner, max, MAX_PENDING, PENDING_TIMEOUT)
    }

    pub fn with_pending(inner: L, max: usize, max_pending: usize, timeout: Duration) -> Self {
        Self {
            inner,
            slots: Arc::new(Semaphore::new(max)),
            pending: VecDeque::new(),
            max_pending: max_pending.max(1),
            timeout,
        }
    }

    /// Forgets closed and authenticated sockets; closes the oldest pending
    /// ones while there are too many.
    fn make_room(&mut self) {
        self.pending.retain(|w| {
            w.upgrade()
                .is_some_and(|s| !s.authed.load(Ordering::Relaxed))
        });
        while self.pending.len() >= self.max_pending {
            if let Some(oldest) = self.pending.pop_front().and_then(|w| w.upgrade()) {
                oldest.evict.cancel();
            }
        }
    }
}

/// What the listener and the handlers share about one socket.
#[derive(Debug, Default)]
pub struct SlotState {
    authed: AtomicBool,
    evict: CancellationToken,
}

/// An accepted socket and its slot.
pub struct Slotted<S> {
    io: S,
    _slot: OwnedSemaphorePermit,
    state: Arc<SlotState>,
    deadline: Pin<Box<Sleep>>,
    evicted: Pin<Box<WaitForCancellationFutureOwned>>,
}

impl<S> Slotted<S> {
    /// An error once a pending socket is past its time or was evicted.
    fn expired(&mut self, cx: &mut Context<'_>) -> Option<io::Error> {
        if self.state.authed.load(Ordering::Relaxed) {
            return None;
        }
        let late = self.deadline.as_mut().poll(cx).is_ready();
        let evicted = self.evicted.as_mut().poll(cx).is_ready();
        (late || evicted).then(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                if late {
                    "no authentication in time"
                } else {
                    "closed to make room for other connections"
                },
            )
        })
    }
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
        self.make_room();
        let state = Arc::new(SlotState::default());
        self.pending.push_back(Arc::downgrade(&state));
        let slotted = Slotted {
            io,
            _slot: slot,
            evicted: Box::pin(state.evict.clone().cancelled_owned()),
            state,
            deadline: Box::pin(tokio::time::sleep(self.timeout)),
        };
        (slotted, addr)
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
        if let Some(e) = self.expired(cx) {
            return Poll::Ready(Err(e));
        }
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

/// Who is on the other end of a socket, for logs, and its slot.
#[derive(Debug, Clone)]
pub struct Peer(pub String, Arc<SlotState>);

impl Peer {
    /// The socket authenticated: it is no longer pending.
    pub fn authenticated(&self) {
        self.1.authed.store(true, Ordering::Relaxed);
    }
}

impl Connected<IncomingStream<'_, Capped<TcpListener>>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Capped<TcpListener>>) -> Self {
        Peer(stream.remote_addr().to_string(), stream.io().state.clone())
    }
}

impl Connected<IncomingStream<'_, Capped<UnixListener>>> for Peer {
    fn connect_info(stream: IncomingStream<'_, Capped<UnixListener>>) -> Self {
        Peer("unix".to_owned(), stream.io().state.clone())
    }
}

#[cfg(test)]
mod tests {
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

    #[tokio::test]
    async fn pending_sockets_time_out_and_the_oldest_makes_room() {
        use tokio::io::AsyncReadExt;
        let tcp = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = tcp.local_addr().unwrap();
        let mut capped = Capped::with_pending(tcp, 8, 2, Duration::from_millis(300));
        let mut conns = Vec::new();
        let mut accepted = Vec::new();
        for _ in 0..3 {
            conns.push(tokio::net::TcpStream::connect(addr).await.unwrap());
            accepted.push(capped.accept().await.0);
        }
        let mut buf = [0u8; 1];
        // The first was closed to make room for the third.
        let e = accepted[0].read(&mut buf).await.unwrap_err();
        assert!(e.to_string().contains("make room"), "{e}");
        // The second times out; an authenticated one does not.
        accepted[2].state.authed.store(true, Ordering::Relaxed);
        let e = tokio::time::timeout(Duration::from_secs(5), accepted[1].read(&mut buf))
            .await
            .unwrap()
            .unwrap_err();
        assert!(e.to_string().contains("in time"), "{e}");
        assert!(
            tokio::time::timeout(Duration::from_millis(500), accepted[2].read(&mut buf))
                .await
                .is_err(),
            "an authenticated socket stays open"
        );
    }
}
