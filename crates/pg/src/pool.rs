//! The connections a store keeps to its server.
//!
//! Owns [`Pool`]: a few connections (made on first use) that a store's
//! callers share: an operation takes a free one, or waits for the next in
//! turn when all are busy, so one slow statement does not hold up every
//! other caller of the process. A connection the server dropped is made
//! again before it is used, and work that is safe to repeat is run again
//! when its connection is lost mid-way ([`Pool::again`]), so a server
//! restart does not fail it. Each connection keeps the statements prepared
//! on it ([`Conn::prepare_cached`]). It must not know any schema or store:
//! the store names itself (`what`) for the log lines.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};
use tokio_postgres::{Client, Config, Error, NoTls, Statement};

use crate::lost;

/// How long [`Pool::again`] keeps trying when the connection is lost: long
/// enough for a server to restart, short enough that work whose database
/// is gone fails within a minute.
pub const RECONNECT_WINDOW: Duration = Duration::from_secs(30);
/// The first pause before trying again; it doubles up to [`LAST_PAUSE`].
pub const FIRST_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two tries.
pub const LAST_PAUSE: Duration = Duration::from_secs(2);

/// A connection and the statements prepared on it (the same few run again
/// and again; preparing one costs a round trip). Derefs to the driver's
/// [`Client`].
pub struct Conn {
    client: Client,
    statements: HashMap<String, Statement>,
    /// Work on it failed as a lost connection: the next lease makes a new
    /// one (the client may not know yet that it is closed).
    lost: bool,
}

impl Conn {
    fn new(client: Client) -> Self {
        Self {
            client,
            statements: HashMap::new(),
            lost: false,
        }
    }

    /// `sql` prepared on this connection, once per connection.
    pub async fn prepare_cached(&mut self, sql: &str) -> Result<Statement, Error> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql).await?;
        self.statements.insert(sql.to_owned(), statement.clone());
        Ok(statement)
    }
}

impl Deref for Conn {
    type Target = Client;
    fn deref(&self) -> &Client {
        &self.client
    }
}

impl DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// A few connections to one server, shared by a store's callers.
pub struct Pool {
    config: Config,
    /// The connection string with any password hidden, for log lines.
    redacted: String,
    /// What the connections are for ("sessions", "approvals").
    what: &'static str,
    slots: Vec<Mutex<Option<Conn>>>,
    next: AtomicUsize,
}

impl Pool {
    /// A pool of `size` connections (at least one) to the server of
    /// `config`, whose first connection is `first` when given; the others
    /// are made when needed.
    pub fn new(
        config: Config,
        redacted: String,
        what: &'static str,
        size: usize,
        first: Option<Client>,
    ) -> Self {
        let size = size.max(1);
        let mut slots = Vec::with_capacity(size);
        slots.push(Mutex::new(first.map(Conn::new)));
        slots.resize_with(size, || Mutex::new(None));
        Self {
            config,
            redacted,
            what,
            slots,
            next: AtomicUsize::new(0),
        }
    }

    /// The server's connection settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Connections the pool may hold.
    pub fn size(&self) -> usize {
        self.slots.len()
    }

    /// Runs `work` on a connection of its own for as long as it runs.
    pub async fn with<T>(
        &self,
        work: impl AsyncFnOnce(&mut Conn) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut lease = self.lease().await?;
        let done = work(&mut lease).await;
        lease.settle(done)
    }

    /// Like [`with`](Self::with), but `work` is run again on a new
    /// connection when the one it ran on was lost (the server restarted or
    /// dropped it) or none could be made, for up to [`RECONNECT_WINDOW`].
    /// Only for work that is safe to run twice: a read, an upsert, or a
    /// write that recognises its own earlier commit whose answer was lost.
    pub async fn again<T>(
        &self,
        mut work: impl AsyncFnMut(&mut Conn) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut retry = Retry::new(self.what);
        loop {
            let done = match self.lease().await {
                Ok(mut lease) => {
                    let done = work(&mut lease).await;
                    lease.settle(done)
                }
                Err(e) => Err(e),
            };
            match done {
                Err(e) if retry.wait(&e).await => {}
                done => return done,
            }
        }
    }

    /// A ready connection of the caller's own until the lease is dropped: a
    /// free one, or the next in turn when all are busy, made again when
    /// there is none or the server closed it. Pass what was done with it to
    /// [`Lease::settle`] so a lost connection is not used again. (The
    /// closure forms [`with`](Self::with) and [`again`](Self::again) do
    /// this; a lease suits callers whose futures must be `Send` across
    /// borrowed arguments, which async closures cannot yet promise.)
    pub async fn lease(&self) -> Result<Lease<'_>, Error> {
        let mut slot = self.slot().await;
        match slot.take() {
            Some(conn) if !conn.lost && !conn.client.is_closed() => {
                *slot = Some(conn);
            }
            dropped => {
                if dropped.is_some() {
                    tracing::warn!(url = %self.redacted, "the {} database connection was closed; reconnecting", self.what);
                }
                let client = connect(&self.config, self.what).await?;
                *slot = Some(Conn::new(client));
            }
        }
        match MutexGuard::try_map(slot, Option::as_mut) {
            Ok(conn) => Ok(Lease { pool: self, conn }),
            // Filled just above.
            Err(_) => unreachable!("a pool slot filled above is empty"),
        }
    }

    /// A free connection slot, or the next one in turn when all are busy.
    async fn slot(&self) -> MutexGuard<'_, Option<Conn>> {
        for slot in &self.slots {
            if let Ok(free) = slot.try_lock() {
                return free;
            }
        }
        let turn = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        self.slots[turn].lock().await
    }
}

/// One caller's connection from a [`Pool`]; derefs to the [`Conn`].
pub struct Lease<'p> {
    pool: &'p Pool,
    conn: MappedMutexGuard<'p, Conn>,
}

impl Lease<'_> {
    /// Hands back `done`, first dropping the connection when `done` says it
    /// was lost, so the next use makes a new one (the client may not know
    /// yet that it is closed).
    pub fn settle<T>(mut self, done: Result<T, Error>) -> Result<T, Error> {
        if let Err(e) = &done
            && lost(e)
        {
            self.conn.lost = true;
            tracing::warn!(url = %self.pool.redacted, "the {} database connection was lost; the next use makes a new one", self.pool.what);
        }
        done
    }
}

impl Deref for Lease<'_> {
    type Target = Conn;
    fn deref(&self) -> &Conn {
        &self.conn
    }
}

impl DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Conn {
        &mut self.conn
    }
}

/// The pauses between tries of work that lost its connection: from
/// [`FIRST_PAUSE`], doubling up to [`LAST_PAUSE`], for [`RECONNECT_WINDOW`].
pub struct Retry {
    what: &'static str,
    started: Instant,
    pause: Duration,
}

impl Retry {
    /// Tries of work on the connections for `what`, starting now.
    pub fn new(what: &'static str) -> Self {
        Self {
            what,
            started: Instant::now(),
            pause: FIRST_PAUSE,
        }
    }

    /// After a try that failed with `e`: whether to try again, having
    /// paused, because the connection was lost and the window is open.
    pub async fn wait(&mut self, e: &Error) -> bool {
        let lost = lost(e);
        if lost {
            tracing::debug!(error = %e, "a {} database operation lost its connection", self.what);
        }
        self.wait_if(lost).await
    }

    /// After a failed try whose failure `unreachable` says is the
    /// server's absence (a caller's own test of its own error type):
    /// whether to try again, having paused, while the window is open.
    pub async fn wait_if(&mut self, unreachable: bool) -> bool {
        if !unreachable || self.started.elapsed() >= RECONNECT_WINDOW {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(LAST_PAUSE);
        true
    }
}

/// A connection, driven by a task on the current runtime; `what` names it
/// in the line logged when the connection fails.
pub async fn connect(config: &Config, what: &'static str) -> Result<Client, Error> {
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::warn!(error = %e, "the {what} database connection failed");
        }
    });
    Ok(client)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::{Pool, connect};

    async fn pool_on(server: &keel_test_support::PostgresServer) -> Arc<Pool> {
        let config: tokio_postgres::Config = server.database().await.parse().unwrap();
        let first = connect(&config, "test").await.unwrap();
        Arc::new(Pool::new(
            config,
            "postgres://test".into(),
            "test",
            4,
            Some(first),
        ))
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_busy_connection_does_not_hold_up_the_others() {
        let Some(server) = keel_test_support::PostgresServer::start().await else {
            return;
        };
        let pool = pool_on(&server).await;
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

    #[tokio::test(flavor = "multi_thread")]
    async fn a_statement_is_prepared_once_per_connection() {
        let Some(server) = keel_test_support::PostgresServer::start().await else {
            return;
        };
        let pool = pool_on(&server).await;
        let sql = "SELECT $1::bigint + 1";
        let prepared = pool
            .with(async |c| {
                c.prepare_cached(sql).await?;
                let b = c.prepare_cached(sql).await?;
                let n: i64 = c.query_one(&b, &[&41_i64]).await?.get(0);
                assert_eq!(n, 42);
                c.prepare_cached("SELECT 1").await?;
                Ok(c.statements.len())
            })
            .await
            .unwrap();
        assert_eq!(prepared, 2, "the second prepare reused the first statement");
    }

    /// The server crashes and restarts while a query runs: `with` reports
    /// the lost connection, `again` runs the work once more on a new one.
    #[tokio::test(flavor = "multi_thread")]
    async fn work_that_lost_its_connection_is_run_again() {
        let Some(mut server) = keel_test_support::PostgresServer::start().await else {
            return;
        };
        let pool = pool_on(&server).await;
        let slow = "SELECT pg_sleep(0.5), 7::bigint";
        let once = tokio::spawn({
            let pool = pool.clone();
            async move {
                pool.with(async |c| c.query_one(slow, &[]).await.map(|r| r.get::<_, i64>(1)))
                    .await
            }
        });
        let tries = AtomicUsize::new(0);
        let (again, ()) = tokio::join!(
            tokio::time::timeout(
                Duration::from_secs(60),
                pool.again(async |c| {
                    tries.fetch_add(1, Ordering::Relaxed);
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
        assert!(tries.load(Ordering::Relaxed) >= 2);
        // A statement's own error is not a lost connection: no second try.
        let tries = AtomicUsize::new(0);
        let err = pool
            .again(async |c| {
                tries.fetch_add(1, Ordering::Relaxed);
                c.execute("SELECT * FROM no_such_table", &[]).await
            })
            .await
            .unwrap_err();
        assert!(
            crate::describe(&err).contains("no_such_table"),
            "{}",
            crate::describe(&err)
        );
        assert_eq!(tries.load(Ordering::Relaxed), 1);
    }
}
