//! The connections to the sessions database.
//!
//! Owns a few connections ([`POOL_SIZE`]) that the threads blocking on the
//! database share: an operation takes a free one, or waits for the next in
//! turn when all are busy, so one slow read (a long session) or a busy
//! writer does not hold up every other session of the process. A
//! connection the server dropped is made again before it is used. Also
//! owns connecting and the mapping of the driver's errors to `io::Error`.
//! It must not know the schema.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Mutex;
use tokio_postgres::{Client, Config, NoTls};

/// Connections per process (each is a server backend; made on first use).
pub(crate) const POOL_SIZE: usize = 4;

pub(crate) struct Pool {
    config: Config,
    redacted: String,
    slots: Vec<Mutex<Option<Client>>>,
    next: AtomicUsize,
    /// The process's one listening connection's notifications, for the
    /// module that listens (started on first use; see `events.rs`).
    pub(crate) notifications: std::sync::OnceLock<tokio::sync::broadcast::Sender<String>>,
}

impl Pool {
    /// A pool whose first connection is `first`; the others are made
    /// when needed.
    pub(crate) fn new(config: Config, redacted: String, first: Client) -> Self {
        let mut slots = Vec::with_capacity(POOL_SIZE);
        slots.push(Mutex::new(Some(first)));
        slots.resize_with(POOL_SIZE, || Mutex::new(None));
        Self {
            config,
            redacted,
            slots,
            next: AtomicUsize::new(0),
            notifications: std::sync::OnceLock::new(),
        }
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Runs `work` on a connection of its own for as long as it runs.
    pub(crate) async fn with<T>(
        &self,
        work: impl AsyncFnOnce(&mut Client) -> Result<T, tokio_postgres::Error>,
    ) -> io::Result<T> {
        let free = self.slots.iter().find_map(|slot| slot.try_lock().ok());
        let mut slot = match free {
            Some(slot) => slot,
            None => {
                let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
                self.slots[turn].lock().await
            }
        };
        let client = match slot.take() {
            Some(client) if !client.is_closed() => slot.insert(client),
            dropped => {
                if dropped.is_some() {
                    tracing::warn!(url = %self.redacted, "a sessions database connection was closed; reconnecting");
                }
                slot.insert(connect(&self.config).await.map_err(io_error)?)
            }
        };
        work(client).await.map_err(io_error)
    }
}

/// A connection, driven by a task on the current runtime.
pub(crate) async fn connect(config: &Config) -> Result<Client, tokio_postgres::Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "the sessions database connection failed");
        }
    });
    Ok(client)
}

pub(crate) fn io_error(e: tokio_postgres::Error) -> io::Error {
    io::Error::other(format!("sessions database: {e}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::{Pool, connect};

    #[tokio::test(flavor = "multi_thread")]
    async fn a_busy_connection_does_not_hold_up_the_others() {
        let Some(server) = keel_test_support::PostgresServer::start().await else {
            return;
        };
        let config: tokio_postgres::Config = server.database().await.parse().unwrap();
        let first = connect(&config).await.unwrap();
        let pool = Arc::new(Pool::new(config, "postgres://test".into(), first));
        let (held_tx, held_rx) = oneshot::channel::<()>();
        let (release_tx, release_rx) = oneshot::channel::<()>();
        let busy = {
            let pool = pool.clone();
            tokio::spawn(async move {
                pool.with(async move |c| {
                    let _ = held_tx.send(());
                    let _ = release_rx.await;
                    c.execute("SELECT 1", &[]).await.map(|_| ())
                })
                .await
            })
        };
        held_rx.await.unwrap();
        // With one connection this would wait for the busy one forever.
        let answer: i64 = tokio::time::timeout(
            Duration::from_secs(20),
            pool.with(async |c| Ok(c.query_one("SELECT 42::bigint", &[]).await?.get(0))),
        )
        .await
        .expect("a second caller waited for the busy connection")
        .unwrap();
        assert_eq!(answer, 42);
        release_tx.send(()).unwrap();
        busy.await.unwrap().unwrap();
    }
}
