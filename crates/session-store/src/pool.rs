//! The connections to the sessions database.
//!
//! Owns a few connections ([`POOL_SIZE`]) that the threads blocking on the
//! database share: an operation takes a free one, or waits for the next in
//! turn when all are busy, so one slow read (a long session) or a busy
//! writer does not hold up every other session of the process. A
//! connection the server dropped is made again before it is used, and work
//! that is safe to repeat is run again when its connection is lost mid-way
//! ([`Pool::again`]), so a server restart does not fail it. Also
//! owns connecting and the mapping of the driver's errors to `io::Error`.
//! It must not know the schema.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, MutexGuard};
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
        let mut slot = self.slot().await;
        let client = self.ready(&mut slot).await.map_err(io_error)?;
        let done = work(client).await;
        forget_if_lost(&mut slot, &done);
        done.map_err(io_error)
    }

    /// Like [`with`](Self::with), but `work` is run again on a new
    /// connection when the one it ran on was lost (the server restarted or
    /// dropped it), for up to [`RECONNECT_WINDOW`]. Only for work that is
    /// safe to run twice: a read, an upsert, or a write that recognises
    /// its own earlier commit whose answer was lost.
    pub(crate) async fn again<T>(
        &self,
        mut work: impl AsyncFnMut(&mut Client) -> Result<T, tokio_postgres::Error>,
    ) -> io::Result<T> {
        let started = Instant::now();
        let mut pause = FIRST_PAUSE;
        loop {
            let mut slot = self.slot().await;
            let done = match self.ready(&mut slot).await {
                Ok(client) => work(client).await,
                Err(e) => Err(e),
            };
            forget_if_lost(&mut slot, &done);
            drop(slot);
            match done {
                Err(e) if keel_pg::lost(&e) && started.elapsed() < RECONNECT_WINDOW => {
                    tracing::debug!(error = %e, "a sessions database operation lost its connection; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(LAST_PAUSE);
                }
                done => return done.map_err(io_error),
            }
        }
    }

    /// A free connection slot, or the next one in turn when all are busy.
    async fn slot(&self) -> MutexGuard<'_, Option<Client>> {
        for slot in &self.slots {
            if let Ok(free) = slot.try_lock() {
                return free;
            }
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        self.slots[turn].lock().await
    }

    /// The slot's connection, made again when there is none or the server
    /// closed it.
    async fn ready<'a>(
        &self,
        slot: &'a mut Option<Client>,
    ) -> Result<&'a mut Client, tokio_postgres::Error> {
        match slot.take() {
            Some(client) if !client.is_closed() => Ok(slot.insert(client)),
            dropped => {
                if dropped.is_some() {
                    tracing::warn!(url = %self.redacted, "a sessions database connection was closed; reconnecting");
                }
                Ok(slot.insert(connect(&self.config).await?))
            }
        }
    }
}

/// How long [`Pool::again`] keeps trying when the connection is lost: long
/// enough for a server to restart, short enough that a turn whose database
/// is gone fails within a minute.
pub(crate) const RECONNECT_WINDOW: Duration = Duration::from_secs(30);
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const LAST_PAUSE: Duration = Duration::from_secs(2);

/// Drops the slot's connection when `done` says it was lost, so the next
/// use makes a new one (the client may not know yet that it is closed).
fn forget_if_lost<T>(slot: &mut Option<Client>, done: &Result<T, tokio_postgres::Error>) {
    if let Err(e) = done
        && keel_pg::lost(e)
        && slot.take().is_some()
    {
        tracing::warn!("a sessions database connection was closed; reconnecting");
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

/// The driver's error with what the server or the socket said.
pub(crate) fn io_error(e: tokio_postgres::Error) -> io::Error {
    io::Error::other(format!("sessions database: {}", keel_pg::describe(&e)))
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

    /// The server crashes and restarts while a query runs: `with` reports
    /// the lost connection, `again` runs the work once more on a new one.
    #[tokio::test(flavor = "multi_thread")]
    async fn work_that_lost_its_connection_is_run_again() {
        let Some(mut server) = keel_test_support::PostgresServer::start().await else {
            return;
        };
        let config: tokio_postgres::Config = server.database().await.parse().unwrap();
        let first = connect(&config).await.unwrap();
        let pool = Arc::new(Pool::new(config, "postgres://test".into(), first));
        let slow = "SELECT pg_sleep(0.5), 7::bigint";
        let once = tokio::spawn({
            let pool = pool.clone();
            async move {
                pool.with(async |c| c.query_one(slow, &[]).await.map(|r| r.get::<_, i64>(1)))
                    .await
            }
        });
        // (`again` is used from blocking threads, so not spawned here.)
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let (again, ()) = tokio::join!(
            tokio::time::timeout(
                Duration::from_secs(60),
                pool.again(async |c| {
                    tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    c.query_one(slow, &[]).await.map(|r| r.get::<_, i64>(1))
                })
            ),
            async {
                tokio::time::sleep(Duration::from_millis(200)).await;
                server.crash_and_restart().await;
            }
        );
        let again = again.unwrap();
        let once = tokio::time::timeout(Duration::from_secs(60), once)
            .await
            .unwrap()
            .unwrap();
        assert!(once.is_err(), "{once:?}");
        assert_eq!(again.unwrap(), 7);
        assert!(tries.load(std::sync::atomic::Ordering::Relaxed) >= 2);
        // A statement's own error is not a lost connection: no second try.
        let tries = std::sync::atomic::AtomicUsize::new(0);
        let err = pool
            .again(async |c| {
                tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                c.execute("SELECT * FROM no_such_table", &[]).await
            })
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no_such_table"), "{err}");
        assert_eq!(tries.load(std::sync::atomic::Ordering::Relaxed), 1);
    }
}
