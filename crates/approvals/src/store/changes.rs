//! Change feeds: how a waiting turn learns that another process wrote.
//!
//! Owns [`ChangeFeed`], a generation counter that ticks when the store
//! may have changed under this process (another process, or another
//! connection, committed), and the two watchers that tick it:
//!
//! - SQLite ([`ChangeFeed::sqlite`]): a task on the async runtime compares
//!   `PRAGMA data_version` on a read-only connection of its own every
//!   [`SQLITE_CHECK_INTERVAL`] while someone listens (a few microseconds:
//!   the check reads the WAL index in shared memory, no file I/O), every
//!   [`SQLITE_SETTLED_INTERVAL`] once the newest listener has listened for
//!   [`SQLITE_SETTLE_AFTER`], and not at all when nobody listens: the
//!   task ends with the last listener and the next one starts it again.
//!   No thread of its own.
//! - PostgreSQL ([`ChangeFeed::postgres`]): a task on a connection of its
//!   own that `LISTEN`s on [`PG_CHANNEL`]; the schema's trigger notifies it
//!   whenever a request's status changes (see `pg_schema.rs`). It
//!   reconnects with a backoff when the server goes away.
//!
//! A tick carries nothing (the row is the only record); a listener re-reads
//! what it waits on. Ticks may be spurious (a watcher ticks once when it
//! starts and after every reconnect, so nothing that happened while it was
//! not looking is missed); they are never missing for a change committed
//! after [`ChangeFeed::subscribe`]. The watchers start with the first
//! subscriber and stop when the store is dropped. It must not know what
//! the rows mean or who waits.

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;
use tokio_postgres::{AsyncMessage, Config, NoTls};

/// How often the SQLite watcher compares `data_version` while a turn waits.
pub const SQLITE_CHECK_INTERVAL: Duration = Duration::from_millis(4);
/// How long after the newest subscription it keeps that pace.
pub const SQLITE_SETTLE_AFTER: Duration = Duration::from_secs(30);
/// Its pace after that: a call nobody decided within half a minute is
/// waiting for a person, who does not notice 20 ms.
pub const SQLITE_SETTLED_INTERVAL: Duration = Duration::from_millis(20);
/// The PostgreSQL channel the schema's trigger notifies on.
pub const PG_CHANNEL: &str = "keel_approvals";
/// The longest pause between two reconnect attempts of the listener.
const PG_MAX_BACKOFF: Duration = Duration::from_secs(5);

type Starter = Box<dyn FnOnce(Weak<Inner>) + Send>;

struct Inner {
    tx: watch::Sender<u64>,
    start: Mutex<Option<Starter>>,
    /// SQLite only: the watcher task's state (see [`SqliteWatch`]).
    sqlite: Option<SqliteWatch>,
}

impl Inner {
    fn tick(&self) {
        self.tx
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    fn listened(&self) -> bool {
        self.tx.receiver_count() > 0
    }
}

/// Ticks when the store may have changed; see the module docs.
#[derive(Clone)]
pub struct ChangeFeed {
    inner: Arc<Inner>,
}

impl fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeFeed")
            .field("generation", &*self.inner.tx.borrow())
            .finish_non_exhaustive()
    }
}

/// One listener: [`changed`](Self::changed) resolves at the next tick after
/// it was made (or at once, if one came since the last call).
#[derive(Debug)]
pub struct Subscription {
    /// `None`: a store without a feed; nothing ever ticks.
    rx: Option<watch::Receiver<u64>>,
}

impl Subscription {
    /// A listener that never hears anything (a store that cannot tell).
    pub fn never() -> Self {
        Self { rx: None }
    }

    /// Waits for the next tick. Never resolves once the store is gone, or
    /// for [`Subscription::never`].
    pub async fn changed(&mut self) {
        let ticked = match self.rx.as_mut() {
            Some(rx) => rx.changed().await.is_ok(),
            None => false,
        };
        if !ticked {
            std::future::pending::<()>().await;
        }
    }
}

impl ChangeFeed {
    fn new(start: Option<Starter>, sqlite: Option<SqliteWatch>) -> Self {
        let (tx, _rx) = watch::channel(0);
        Self {
            inner: Arc::new(Inner {
                tx,
                start: Mutex::new(start),
                sqlite,
            }),
        }
    }

    /// Starts listening (and the watcher, when it is not running).
    pub fn subscribe(&self) -> Subscription {
        // The receiver exists before the watcher decides whether anyone
        // listens, so a watcher that ends cannot miss this listener.
        let rx = self.inner.tx.subscribe();
        let start = match self.inner.start.lock() {
            Ok(mut slot) => slot.take(),
            Err(_) => None,
        };
        if let Some(start) = start {
            start(Arc::downgrade(&self.inner));
        }
        if let Some(watch) = &self.inner.sqlite {
            watch.listened(&self.inner);
        }
        Subscription { rx: Some(rx) }
    }

    /// A feed for the SQLite database at `path`.
    pub fn sqlite(path: PathBuf) -> Self {
        Self::new(
            None,
            Some(SqliteWatch {
                path,
                state: Mutex::new(SqliteState::default()),
            }),
        )
    }

    /// A feed for the PostgreSQL database `config` connects to.
    /// `redacted` names it in logs.
    pub fn postgres(config: Config, redacted: String) -> Self {
        Self::new(
            Some(Box::new(
                move |weak| match tokio::runtime::Handle::try_current() {
                    Ok(runtime) => {
                        runtime.spawn(listen_postgres(config, redacted, weak));
                    }
                    Err(_) => {
                        tracing::warn!("no async runtime for the approvals listener; waits poll");
                    }
                },
            )),
            None,
        )
    }
}

/// The SQLite watcher: one task at a time, alive while someone listens.
struct SqliteWatch {
    path: PathBuf,
    state: Mutex<SqliteState>,
}

#[derive(Default)]
struct SqliteState {
    /// A watcher task is running (it clears this, under the lock, when it
    /// finds nobody listening, and ends).
    running: bool,
    /// When the newest listener came: the pace follows it.
    newest: Option<std::time::Instant>,
    /// The read-only connection, kept between the task's runs (`None`
    /// until first opened; the task takes it while it runs).
    conn: Option<rusqlite::Connection>,
}

impl SqliteWatch {
    /// A listener came: start the watcher unless it runs.
    fn listened(&self, inner: &Arc<Inner>) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.newest = Some(std::time::Instant::now());
        if state.running {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no async runtime for the approvals change watcher; waits poll");
            return;
        };
        state.running = true;
        runtime.spawn(watch_sqlite(Arc::downgrade(inner)));
    }
}

/// Compares `data_version` at the pace above until nobody listens (or the
/// store is gone). Ticks once at its start: whatever was committed before
/// its baseline may have been missed by a listener that read its row
/// earlier.
async fn watch_sqlite(weak: Weak<Inner>) {
    let version = |conn: &rusqlite::Connection| {
        conn.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
            .ok()
    };
    let Some(conn) = take_connection(&weak) else {
        return;
    };
    let mut last = version(&conn);
    match weak.upgrade() {
        Some(inner) => inner.tick(),
        None => return,
    }
    loop {
        let pace = {
            let Some(inner) = weak.upgrade() else { return };
            let Some(watch) = &inner.sqlite else { return };
            let Ok(mut state) = watch.state.lock() else {
                return;
            };
            if !inner.listened() {
                // Under the lock: a listener that comes now starts a new
                // task, since `running` is already false when it looks.
                state.running = false;
                state.conn = Some(conn);
                return;
            }
            match state.newest {
                Some(at) if at.elapsed() >= SQLITE_SETTLE_AFTER => SQLITE_SETTLED_INTERVAL,
                _ => SQLITE_CHECK_INTERVAL,
            }
        };
        tokio::time::sleep(pace).await;
        let now = version(&conn);
        if now != last {
            last = now;
            match weak.upgrade() {
                Some(inner) => inner.tick(),
                None => return,
            }
        }
    }
}

/// The watcher's connection: the kept one, else a new one. `None` (and
/// the watcher marked not running) when the database cannot be opened.
fn take_connection(weak: &Weak<Inner>) -> Option<rusqlite::Connection> {
    let inner = weak.upgrade()?;
    let watch = inner.sqlite.as_ref()?;
    let kept = watch.state.lock().ok()?.conn.take();
    let conn = kept.or_else(|| open_watch_connection(weak));
    if conn.is_none()
        && let Ok(mut state) = watch.state.lock()
    {
        state.running = false;
    }
    conn
}

fn open_watch_connection(weak: &Weak<Inner>) -> Option<rusqlite::Connection> {
    let inner = weak.upgrade()?;
    let path = &inner.sqlite.as_ref()?.path;
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    match rusqlite::Connection::open_with_flags(path, flags) {
        Ok(conn) => Some(conn),
        Err(e) => {
            tracing::warn!(error = %e, "cannot open the approvals database to watch it; waits poll");
            None
        }
    }
}

async fn listen_postgres(config: Config, redacted: String, weak: Weak<Inner>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        if weak.strong_count() == 0 {
            return;
        }
        match config.connect(NoTls).await {
            Ok((client, mut connection)) => {
                let listening = async {
                    client
                        .batch_execute(&format!("LISTEN {PG_CHANNEL}"))
                        .await?;
                    Ok::<_, tokio_postgres::Error>(())
                };
                // The LISTEN runs through the connection, so drive both.
                let mut listening = std::pin::pin!(listening);
                let ready = loop {
                    tokio::select! {
                        done = &mut listening => break done,
                        message = std::future::poll_fn(|cx| connection.poll_message(cx)) => {
                            if !matches!(message, Some(Ok(_))) {
                                break Ok(());
                            }
                        }
                    }
                };
                if let Err(e) = ready {
                    tracing::warn!(url = %redacted, error = %e, "cannot LISTEN for approval decisions");
                } else {
                    backoff = Duration::from_millis(100);
                    match weak.upgrade() {
                        Some(inner) => inner.tick(),
                        None => return,
                    }
                    if !pump(&mut connection, &weak).await {
                        return;
                    }
                    tracing::warn!(url = %redacted, "the approvals listener lost its connection; reconnecting");
                }
                // `client` lives to here: dropping it would end the
                // connection the notifications come on.
            }
            Err(e) => {
                tracing::debug!(url = %redacted, error = %e, "the approvals listener cannot connect yet");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(PG_MAX_BACKOFF);
    }
}

/// Ticks on every notification until the connection ends (true: reconnect)
/// or the store is gone (false).
async fn pump<S, T>(connection: &mut tokio_postgres::Connection<S, T>, weak: &Weak<Inner>) -> bool
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        tokio::select! {
            message = std::future::poll_fn(|cx| connection.poll_message(cx)) => match message {
                Some(Ok(AsyncMessage::Notification(_))) => match weak.upgrade() {
                    Some(inner) => inner.tick(),
                    None => return false,
                },
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return weak.strong_count() > 0,
            },
            // Look now and then whether the store is still there.
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if weak.strong_count() == 0 {
                    return false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn ticks_within(sub: &mut Subscription, within: Duration) -> bool {
        tokio::time::timeout(within, sub.changed()).await.is_ok()
    }

    #[tokio::test]
    async fn another_connections_commit_ticks_the_sqlite_feed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.sqlite");
        let writer = rusqlite::Connection::open(&path).unwrap();
        writer
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        writer.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();

        let feed = ChangeFeed::sqlite(path.clone());
        let mut sub = feed.subscribe();
        // The start tick, then quiet.
        assert!(ticks_within(&mut sub, Duration::from_secs(5)).await);
        assert!(!ticks_within(&mut sub, Duration::from_millis(100)).await);

        writer.execute("INSERT INTO t VALUES (1)", []).unwrap();
        assert!(ticks_within(&mut sub, Duration::from_secs(5)).await);
        assert!(!ticks_within(&mut sub, Duration::from_millis(100)).await);
    }

    fn watcher_runs(feed: &ChangeFeed) -> bool {
        let watch = feed.inner.sqlite.as_ref().unwrap();
        watch.state.lock().unwrap().running
    }

    #[tokio::test]
    async fn the_sqlite_watcher_ends_with_its_last_listener_and_the_next_one_starts_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.sqlite");
        let writer = rusqlite::Connection::open(&path).unwrap();
        writer
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0))
            .unwrap();
        writer.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        let feed = ChangeFeed::sqlite(path.clone());
        assert!(!watcher_runs(&feed), "started before anyone listened");

        let mut first = feed.subscribe();
        assert!(ticks_within(&mut first, Duration::from_secs(5)).await);
        assert!(watcher_runs(&feed));
        drop(first);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while watcher_runs(&feed) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the watcher outlived its listeners"
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }

        // A commit while nobody listens, then one after a listener came:
        // the new listener hears the start tick and then the commit.
        writer.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let mut second = feed.subscribe();
        assert!(ticks_within(&mut second, Duration::from_secs(5)).await);
        assert!(!ticks_within(&mut second, Duration::from_millis(50)).await);
        writer.execute("INSERT INTO t VALUES (2)", []).unwrap();
        assert!(ticks_within(&mut second, Duration::from_secs(5)).await);
    }

    #[tokio::test]
    async fn a_missing_database_leaves_a_feed_that_never_ticks() {
        let dir = tempfile::tempdir().unwrap();
        let feed = ChangeFeed::sqlite(dir.path().join("absent.sqlite"));
        let mut sub = feed.subscribe();
        assert!(!ticks_within(&mut sub, Duration::from_millis(100)).await);
    }
}
