//! The connections to the sessions database.
//!
//! Owns the sessions database's share of [`keel_pg::Pool`]: a few
//! connections ([`POOL_SIZE`]) that the threads blocking on the database
//! share, so one slow read (a long session) or a busy writer does not hold
//! up every other session of the process, made again when the server
//! dropped them; the process's notification channel; and the mapping of
//! the driver's errors to `io::Error`. It must not know the schema.

use std::io;

use tokio_postgres::{Client, Config};

/// Connections per process (each is a server backend; made on first use).
pub(crate) const POOL_SIZE: usize = 4;

/// The shared pool ([`keel_pg::Pool`]) and the process's listening
/// connection's notifications.
pub(crate) struct Pool {
    inner: keel_pg::Pool,
    /// The process's one listening connection's notifications, for the
    /// module that listens (started on first use; see `events.rs`).
    pub(crate) notifications: std::sync::OnceLock<tokio::sync::broadcast::Sender<String>>,
}

impl Pool {
    /// A pool whose first connection is `first`; the others are made
    /// when needed.
    pub(crate) fn new(config: Config, redacted: String, first: Client) -> Self {
        Self {
            inner: keel_pg::Pool::new(config, redacted, "sessions", POOL_SIZE, Some(first)),
            notifications: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn config(&self) -> &Config {
        self.inner.config()
    }

    /// Runs `work` on a connection of its own for as long as it runs.
    pub(crate) async fn with<T>(
        &self,
        work: impl AsyncFnOnce(&mut keel_pg::Conn) -> Result<T, tokio_postgres::Error>,
    ) -> io::Result<T> {
        self.inner.with(work).await.map_err(io_error)
    }

    /// Like [`with`](Self::with), but run again on a new connection when
    /// the one it ran on was lost (see [`keel_pg::Pool::again`]). Only for
    /// work that is safe to run twice.
    pub(crate) async fn again<T>(
        &self,
        work: impl AsyncFnMut(&mut keel_pg::Conn) -> Result<T, tokio_postgres::Error>,
    ) -> io::Result<T> {
        self.inner.again(work).await.map_err(io_error)
    }
}

/// A connection, driven by a task on the current runtime.
pub(crate) async fn connect(config: &Config) -> Result<Client, tokio_postgres::Error> {
    keel_pg::connect(config, "sessions").await
}

/// The driver's error with what the server or the socket said.
pub(crate) fn io_error(e: tokio_postgres::Error) -> io::Error {
    io::Error::other(format!("sessions database: {}", keel_pg::describe(&e)))
}
