//! Change feeds: how a waiting turn learns that another process wrote.
//!
//! Owns [`ChangeFeed`], a generation counter that ticks when the store
//! may have changed under this process (another process, or another
//! connection, committed), and the two watchers that tick it:
//!
//! - SQLite ([`ChangeFeed::sqlite`]): a thread with its own read-only
//!   connection compares `PRAGMA data_version` every
//!   [`SQLITE_CHECK_INTERVAL`] while someone listens (a few microseconds:
//!   the check reads the WAL index in shared memory, no file I/O), and
//!   every [`SQLITE_IDLE_INTERVAL`] otherwise.
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
pub const SQLITE_CHECK_INTERVAL: Duration = Duration::from_millis(10);
/// How often it looks when nobody waits (only to notice the store is gone).
pub const SQLITE_IDLE_INTERVAL: Duration = Duration::from_millis(200);
/// The PostgreSQL channel the schema's trigger notifies on.
pub const PG_CHANNEL: &str = "keel_approvals";
/// The longest pause between two reconnect attempts of the listener.
const PG_MAX_BACKOFF: Duration = Duration::from_secs(5);

type Starter = Box<dyn FnOnce(Weak<Inner>) + Send>;

struct Inner {
    tx: watch::Sender<u64>,
    start: Mutex<Option<Starter>>,
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
    fn new(start: Starter) -> Self {
        let (tx, _rx) = watch::channel(0);
        Self {
            inner: Arc::new(Inner {
                tx,
                start: Mutex::new(Some(start)),
            }),
        }
    }

    /// Starts listening (and the watcher, the first time).
    pub fn subscribe(&self) -> Subscription {
        let rx = self.inner.tx.subscribe();
        let start = match self.inner.start.lock() {
            Ok(mut slot) => slot.take(),
            Err(_) => None,
        };
        if let Some(start) = start {
            start(Arc::downgrade(&self.inner));
        }
        Subscription { rx: Some(rx) }
    }

    /// A feed for the SQLite database at `path`.
    pub fn sqlite(path: PathBuf) -> Self {
        Self::new(Box::new(move |weak| {
            let spawned = std::thread::Builder::new()
                .name("keel-approvals-watch".to_owned())
                .spawn(move || watch_sqlite(&path, &weak));
            if let Err(e) = spawned {
                tracing::warn!(error = %e, "cannot start the approvals change watcher; waits poll");
            }
        }))
    }

    /// A feed for the PostgreSQL database `config` connects to.
    /// `redacted` names it in logs.
    pub fn postgres(config: Config, redacted: String) -> Self {
        Self::new(Box::new(
            move |weak| match tokio::runtime::Handle::try_current() {
                Ok(runtime) => {
                    runtime.spawn(listen_postgres(config, redacted, weak));
                }
                Err(_) => {
                    tracing::warn!("no async runtime for the approvals listener; waits poll");
                }
            },
        ))
    }
}

fn watch_sqlite(path: &std::path::Path, weak: &Weak<Inner>) {
    let flags =
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = match rusqlite::Connection::open_with_flags(path, flags) {
        Ok(conn) => conn,
        Err(e) => {
            tracing::warn!(error = %e, "cannot open the approvals database to watch it; waits poll");
            return;
        }
    };
    let version = |conn: &rusqlite::Connection| {
        conn.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
            .ok()
    };
    let mut last = version(&conn);
    // Whatever was committed before the baseline was taken may have been
    // missed by a listener that read its row earlier: tell it to look.
    match weak.upgrade() {
        Some(inner) => inner.tick(),
        None => return,
    }
    loop {
        let listened = match weak.upgrade() {
            None => return,
            Some(inner) => {
                let listened = inner.listened();
                if listened {
                    let now = version(&conn);
                    if now != last {
                        last = now;
                        inner.tick();
                    }
                }
                listened
            }
        };
        std::thread::sleep(if listened {
            SQLITE_CHECK_INTERVAL
        } else {
            SQLITE_IDLE_INTERVAL
        });
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

    #[tokio::test]
    async fn a_missing_database_leaves_a_feed_that_never_ticks() {
        let dir = tempfile::tempdir().unwrap();
        let feed = ChangeFeed::sqlite(dir.path().join("absent.sqlite"));
        let mut sub = feed.subscribe();
        assert!(!ticks_within(&mut sub, Duration::from_millis(100)).await);
    }
}
