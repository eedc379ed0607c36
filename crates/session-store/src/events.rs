//! The event log of sessions whose turns run on another machine.
//!
//! Owns the `keel_session_events` table of the sessions database and
//! [`EventLog`], its only reader and writer. A process that runs a turn
//! for someone else (`keel worker`) appends the turn's events here, in the
//! order the session emitted them; any process that shows the turn (a
//! front-end on any machine) reads them back in that order with
//! [`EventLog::follow`], and a reader that reconnects resumes after the
//! last sequence number it saw.
//!
//! Each row is one event of one session: `seq` counts from 1 per session,
//! without gaps (writers of a session take a transaction-scoped advisory
//! lock, so two writers, say a worker that was thought dead and its
//! successor, queue instead of colliding); `turn` and `attempt` say which
//! turn and which try of it wrote the event; `event` is the event as JSON
//! text. Rows of turns before the last finished one are deleted when a
//! turn ends, once they are older than the worker keeps them for hosts
//! that reconnect ([`EventLog::forget_before`]), so the table holds about
//! one turn per session, plus what that window holds. Beside the log,
//! `keel_turn_tries` says which try of a session's turn may still act
//! ([`EventLog::claim_try`], [`EventLog::holds_try`]): a try given up on
//! (its worker paused or cut off while the server gave the turn to
//! another) finds out before it runs a call. Every append notifies [`CHANNEL`] with the session id at
//! commit. A process listens on one connection of its own, whatever the
//! number of its followers (an app-server follows every session it has
//! open), and passes each notification to them, so followers wake at
//! once; they also look every [`FOLLOW_POLL`], so a notification lost
//! while that connection was down costs that long. It must not know what
//! the events mean.

use std::time::{Duration, SystemTime};

use tokio::sync::{broadcast, mpsc};
use tokio_postgres::AsyncMessage;

use crate::db::millis;
use crate::error::{Error, Result};
use crate::pool::Pool;

/// The schema step that adds the table (see `db.rs`'s migrations).
pub(crate) const SCHEMA: &str = r#"
    CREATE TABLE keel_session_events (
        session_id TEXT NOT NULL,
        seq        BIGINT NOT NULL,
        turn       TEXT NOT NULL,
        attempt    INTEGER NOT NULL,
        at_ms      BIGINT NOT NULL,
        event      TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );
"#;

/// The schema step that adds the tries table: per session, the turn and
/// the try that may still act ([`EventLog::claim_try`]).
pub(crate) const TRIES_SCHEMA: &str = r#"
    CREATE TABLE keel_turn_tries (
        session_id TEXT PRIMARY KEY,
        turn       TEXT NOT NULL,
        attempt    INTEGER NOT NULL
    );
"#;

/// The `LISTEN`/`NOTIFY` channel of appends; the payload is the session id.
pub const CHANNEL: &str = "keel_session_events";
/// How often a follower looks even without a notification.
pub const FOLLOW_POLL: Duration = Duration::from_secs(1);
/// Events a follower reads per query.
const READ_BATCH: i64 = 500;
/// Events a follower holds for its reader before it stops reading.
pub const FOLLOW_CAPACITY: usize = 256;

/// One stored event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// 1, 2, … per session.
    pub seq: u64,
    pub turn: String,
    pub attempt: u32,
    /// The event as JSON text.
    pub event: String,
}

/// The sessions database's event log; see the module docs.
#[derive(Clone, Copy)]
pub struct EventLog {
    pool: &'static Pool,
}

impl std::fmt::Debug for EventLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventLog").finish_non_exhaustive()
    }
}

impl EventLog {
    /// The log of the database sessions live in ([`crate::use_database`]);
    /// `None` when they live on disk.
    pub fn shared() -> Option<Self> {
        crate::db::pool().map(|pool| Self { pool })
    }

    #[cfg(test)]
    pub(crate) fn over(pool: &'static Pool) -> Self {
        Self { pool }
    }

    /// Appends `events` (JSON texts) to `session_id`'s log as written by
    /// `turn`'s try `attempt`; returns the sequence number of the last
    /// (the current last when `events` is empty).
    pub async fn append(
        &self,
        session_id: &str,
        turn: &str,
        attempt: u32,
        events: &[String],
    ) -> Result<u64> {
        let now = millis(SystemTime::now());
        if events.is_empty() {
            return self.last_seq(session_id).await;
        }
        let attempt = i32::try_from(attempt).unwrap_or(i32::MAX);
        let last = self
            .pool
            .with(async |c| {
                let tx = c.transaction().await?;
                tx.execute(
                    "SELECT pg_advisory_xact_lock(hashtext($1))",
                    &[&session_id],
                )
                .await?;
                let last: i64 = tx
                    .query_one(
                        "SELECT COALESCE(MAX(seq), 0) FROM keel_session_events WHERE session_id = $1",
                        &[&session_id],
                    )
                    .await?
                    .get(0);
                let seqs: Vec<i64> = (last + 1..).take(events.len()).collect();
                tx.execute(
                    "INSERT INTO keel_session_events (session_id, seq, turn, attempt, at_ms, event) \
                     SELECT $1, s, $2, $3, $4, e FROM UNNEST($5::bigint[], $6::text[]) AS t(s, e)",
                    &[&session_id, &turn, &attempt, &now, &seqs, &events],
                )
                .await?;
                tx.execute("SELECT pg_notify($1, $2)", &[&CHANNEL, &session_id])
                    .await?;
                tx.commit().await?;
                Ok(last + events.len() as i64)
            })
            .await
            .map_err(|e| Error::Events(e.to_string()))?;
        Ok(u64::try_from(last).unwrap_or(0))
    }

    /// The sequence number of `session_id`'s last event (0: none): a plain
    /// read, no writer's lock.
    pub async fn last_seq(&self, session_id: &str) -> Result<u64> {
        let last: i64 = self
            .pool
            .with(async |c| {
                Ok(c.query_one(
                    "SELECT COALESCE(MAX(seq), 0) FROM keel_session_events WHERE session_id = $1",
                    &[&session_id],
                )
                .await?
                .get(0))
            })
            .await
            .map_err(|e| Error::Events(e.to_string()))?;
        Ok(u64::try_from(last).unwrap_or(0))
    }

    /// Makes try `attempt` of `turn` the one of `session_id` that may act:
    /// false when a later try of the same turn already claimed it (this
    /// one was given up on and must touch nothing). A new turn always
    /// claims.
    pub async fn claim_try(&self, session_id: &str, turn: &str, attempt: u32) -> Result<bool> {
        let attempt = i32::try_from(attempt).unwrap_or(i32::MAX);
        let claimed = self
            .pool
            .with(async |c| {
                c.execute(
                    "INSERT INTO keel_turn_tries (session_id, turn, attempt) VALUES ($1, $2, $3) \
                     ON CONFLICT (session_id) DO UPDATE SET turn = EXCLUDED.turn, attempt = EXCLUDED.attempt \
                     WHERE keel_turn_tries.turn <> EXCLUDED.turn OR keel_turn_tries.attempt <= EXCLUDED.attempt",
                    &[&session_id, &turn, &attempt],
                )
                .await
            })
            .await
            .map_err(|e| Error::Events(e.to_string()))?;
        Ok(claimed == 1)
    }

    /// Whether try `attempt` of `turn` is still the one of `session_id`
    /// that may act (a later try has not claimed it since).
    pub async fn holds_try(&self, session_id: &str, turn: &str, attempt: u32) -> Result<bool> {
        let attempt = i32::try_from(attempt).unwrap_or(i32::MAX);
        let rows = self
            .pool
            .with(async |c| {
                c.query(
                    "SELECT 1 FROM keel_turn_tries WHERE session_id = $1 AND turn = $2 AND attempt = $3",
                    &[&session_id, &turn, &attempt],
                )
                .await
            })
            .await
            .map_err(|e| Error::Events(e.to_string()))?;
        Ok(!rows.is_empty())
    }

    /// Forgets `session_id`'s events numbered below `seq` that are older
    /// than `keep` (a finished turn's are forgotten once the next turn
    /// has ended: the session holds what they produced, and every reader
    /// follows from the running turn's start or later, except a host that
    /// reconnects, which `keep` is for). The event numbered `seq` stays,
    /// so numbering goes on from the same place. Returns how many went.
    pub async fn forget_before(
        &self,
        session_id: &str,
        seq: u64,
        keep: std::time::Duration,
    ) -> Result<u64> {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        let now = millis(SystemTime::now());
        let before = now.saturating_sub(i64::try_from(keep.as_millis()).unwrap_or(i64::MAX));
        self.pool
            .with(async |c| {
                c.execute(
                    "DELETE FROM keel_session_events \
                     WHERE session_id = $1 AND seq < $2 AND at_ms <= $3",
                    &[&session_id, &seq, &before],
                )
                .await
            })
            .await
            .map_err(|e| Error::Events(e.to_string()))
    }

    /// Up to [`READ_BATCH`] events of `session_id` after `after`, in order.
    pub async fn after(&self, session_id: &str, after: u64) -> Result<Vec<StoredEvent>> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let rows = self
            .pool
            .with(async |c| {
                c.query(
                    "SELECT seq, turn, attempt, event FROM keel_session_events \
                     WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                    &[&session_id, &after, &READ_BATCH],
                )
                .await
            })
            .await
            .map_err(|e| Error::Events(e.to_string()))?;
        Ok(rows
            .iter()
            .map(|row| StoredEvent {
                seq: u64::try_from(row.get::<_, i64>(0)).unwrap_or(0),
                turn: row.get(1),
                attempt: u32::try_from(row.get::<_, i32>(2)).unwrap_or(0),
                event: row.get(3),
            })
            .collect())
    }

    /// Every event of `session_id` after `after`, then each new one as it
    /// is appended, until the receiver is dropped. A read that fails is
    /// tried again at the next wake-up (the error is logged), so a
    /// database restart delays the events but loses none.
    pub fn follow(&self, session_id: &str, after: u64) -> mpsc::Receiver<StoredEvent> {
        let (tx, rx) = mpsc::channel(FOLLOW_CAPACITY);
        let (log, session_id) = (*self, session_id.to_owned());
        tokio::spawn(async move { log.follow_task(session_id, after, tx).await });
        rx
    }

    async fn follow_task(self, session_id: String, mut after: u64, tx: mpsc::Sender<StoredEvent>) {
        let mut wake = wake_ups(self.pool);
        loop {
            match self.after(&session_id, after).await {
                Ok(events) => {
                    let full = events.len() as i64 == READ_BATCH;
                    for event in events {
                        after = event.seq;
                        if tx.send(event).await.is_err() {
                            return;
                        }
                    }
                    if full {
                        continue;
                    }
                }
                Err(e) => {
                    tracing::warn!(session = %session_id, error = %e, "cannot read the session's events; trying again")
                }
            }
            // Until this session's notification, a missed one (lagged),
            // the listener's (re)connection, or the poll.
            let poll = tokio::time::sleep(FOLLOW_POLL);
            let mut poll = std::pin::pin!(poll);
            loop {
                tokio::select! {
                    () = tx.closed() => return,
                    () = &mut poll => break,
                    woke = wake.recv() => match woke {
                        Ok(id) if id == session_id || id.is_empty() => break,
                        Ok(_) => {}
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => {
                            (&mut poll).await;
                            break;
                        }
                    },
                }
            }
        }
    }
}

/// Notifications a process's followers share.
const WAKE_UPS_CAPACITY: usize = 1024;

/// The session ids appended to, as the process's one listening connection
/// hears them (an empty id: it has just (re)connected, so anything may
/// have been appended meanwhile). Started on first use.
fn wake_ups(pool: &'static Pool) -> broadcast::Receiver<String> {
    pool.notifications
        .get_or_init(|| {
            let (tx, _) = broadcast::channel(WAKE_UPS_CAPACITY);
            tokio::spawn(listen(pool, tx.clone()));
            tx
        })
        .subscribe()
}

/// Listens on [`CHANNEL`] on a connection of its own for as long as the
/// process runs, reconnecting when it drops, and passes each notification
/// on.
async fn listen(pool: &'static Pool, wake: broadcast::Sender<String>) {
    loop {
        if let Ok((client, mut connection)) = pool.config().connect(tokio_postgres::NoTls).await {
            let statement = format!("LISTEN {CHANNEL}");
            let ready = {
                let mut listening = std::pin::pin!(client.batch_execute(&statement));
                loop {
                    tokio::select! {
                        done = &mut listening => break done.is_ok(),
                        message = std::future::poll_fn(|cx| connection.poll_message(cx)) => {
                            if !matches!(message, Some(Ok(_))) {
                                break false;
                            }
                        }
                    }
                }
            };
            if ready {
                // Something may have been appended before the LISTEN.
                let _ = wake.send(String::new());
                loop {
                    match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                        Some(Ok(AsyncMessage::Notification(n))) => {
                            let _ = wake.send(n.payload().to_owned());
                        }
                        Some(Ok(_)) => {}
                        Some(Err(_)) | None => break,
                    }
                }
            }
            // `client` lives to here: dropping it ends the connection.
            drop(client);
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::pool::connect;

    async fn log() -> Option<(keel_test_support::PostgresServer, EventLog)> {
        let server = keel_test_support::PostgresServer::start().await?;
        let config: tokio_postgres::Config = server.database().await.parse().unwrap();
        let mut first = connect(&config).await.unwrap();
        crate::db::migrate_for_tests(&mut first).await;
        let pool: &'static Pool = Box::leak(Box::new(Pool::new(config, "pg".into(), first)));
        Some((server, EventLog::over(pool)))
    }

    fn texts(n: std::ops::Range<u32>) -> Vec<String> {
        n.map(|i| format!("{{\"n\":{i}}}")).collect()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn appends_number_each_sessions_events_from_one_without_gaps() {
        let Some((_server, log)) = log().await else {
            return;
        };
        assert_eq!(log.last_seq("s1").await.unwrap(), 0);
        assert_eq!(log.append("s1", "t1", 1, &texts(0..3)).await.unwrap(), 3);
        assert_eq!(log.append("s2", "t9", 1, &texts(0..1)).await.unwrap(), 1);
        assert_eq!(log.append("s1", "t1", 2, &texts(3..5)).await.unwrap(), 5);
        let read = log.after("s1", 2).await.unwrap();
        let seqs: Vec<u64> = read.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [3, 4, 5]);
        assert_eq!(read[0].event, "{\"n\":2}");
        assert_eq!((read[0].attempt, read[1].attempt), (1, 2));
        assert_eq!(log.last_seq("s1").await.unwrap(), 5);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn two_writers_of_one_session_queue_instead_of_colliding() {
        let Some((_server, log)) = log().await else {
            return;
        };
        let writers: Vec<_> = (0..4)
            .map(|w| {
                tokio::spawn(async move {
                    for i in 0..10 {
                        log.append("s", &format!("w{w}"), 1, &texts(i..i + 2))
                            .await
                            .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.await.unwrap();
        }
        let mut seen = Vec::new();
        let mut after = 0;
        loop {
            let batch = log.after("s", after).await.unwrap();
            let Some(last) = batch.last() else { break };
            after = last.seq;
            seen.extend(batch.into_iter().map(|e| e.seq));
        }
        assert_eq!(seen, (1..=80).collect::<Vec<u64>>());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_later_try_fences_an_earlier_one_of_the_same_turn() {
        let Some((_server, log)) = log().await else {
            return;
        };
        assert!(log.claim_try("s", "t1", 1).await.unwrap());
        assert!(log.holds_try("s", "t1", 1).await.unwrap());
        assert!(log.claim_try("s", "t1", 2).await.unwrap());
        assert!(!log.holds_try("s", "t1", 1).await.unwrap());
        // The earlier try, back from a pause, cannot take it again.
        assert!(!log.claim_try("s", "t1", 1).await.unwrap());
        assert!(log.holds_try("s", "t1", 2).await.unwrap());
        // The same try may claim again; a new turn always claims.
        assert!(log.claim_try("s", "t1", 2).await.unwrap());
        assert!(log.claim_try("s", "t2", 1).await.unwrap());
        assert!(!log.holds_try("s", "t1", 2).await.unwrap());
        // Other sessions are apart.
        assert!(log.claim_try("other", "t9", 5).await.unwrap());
        assert!(log.holds_try("s", "t2", 1).await.unwrap());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn many_followers_share_one_listening_connection() {
        let Some((_server, log)) = log().await else {
            return;
        };
        let mut followers: Vec<_> = (0..20).map(|i| log.follow(&format!("s{i}"), 0)).collect();
        log.append("s7", "t", 1, &texts(0..1)).await.unwrap();
        let event = tokio::time::timeout(Duration::from_secs(10), followers[7].recv())
            .await
            .expect("no event within 10 s")
            .unwrap();
        assert_eq!(event.seq, 1);
        // The listener may still be connecting (the first read needs no
        // notification): once it listens, it is the only one.
        let listening = async || -> i64 {
            log.pool
                .with(async |c| {
                    c.query_one(
                        "SELECT count(*) FROM pg_stat_activity \
                         WHERE datname = current_database() AND query LIKE 'LISTEN%'",
                        &[],
                    )
                    .await
                })
                .await
                .unwrap()
                .get(0)
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while listening().await == 0 {
            assert!(tokio::time::Instant::now() < deadline, "nobody listens");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(listening().await, 1);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn forgetting_earlier_events_keeps_the_numbering() {
        let Some((_server, log)) = log().await else {
            return;
        };
        log.append("s", "t1", 1, &texts(0..4)).await.unwrap();
        log.append("other", "t", 1, &texts(0..2)).await.unwrap();
        // Kept for a while, they stay.
        let hour = Duration::from_secs(3600);
        assert_eq!(log.forget_before("s", 4, hour).await.unwrap(), 0);
        assert_eq!(log.forget_before("s", 4, Duration::ZERO).await.unwrap(), 3);
        let left: Vec<u64> = log
            .after("s", 0)
            .await
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect();
        assert_eq!(left, [4]);
        // The next append numbers on; other sessions keep theirs.
        assert_eq!(log.append("s", "t2", 1, &texts(4..5)).await.unwrap(), 5);
        assert_eq!(log.after("other", 0).await.unwrap().len(), 2);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_follower_gets_the_past_then_each_append_in_order() {
        let Some((_server, log)) = log().await else {
            return;
        };
        log.append("s", "t", 1, &texts(0..2)).await.unwrap();
        let mut follower = log.follow("s", 1);
        let next = async |f: &mut mpsc::Receiver<StoredEvent>| {
            tokio::time::timeout(Duration::from_secs(10), f.recv())
                .await
                .expect("no event within 10 s")
                .expect("the follower stopped")
        };
        assert_eq!(next(&mut follower).await.seq, 2);
        // Another session's appends are not this follower's.
        log.append("other", "t", 1, &texts(0..1)).await.unwrap();
        for i in 2..5 {
            log.append("s", "t", 1, &texts(i..i + 1)).await.unwrap();
            let event = next(&mut follower).await;
            assert_eq!(event.seq, u64::from(i) + 1);
            assert_eq!(event.event, format!("{{\"n\":{i}}}"));
        }
    }
}
