//! The embedded SQLite approval store.
//!
//! Owns [`SqliteStore`]: one connection per store (WAL, `synchronous=FULL`;
//! decisions and audit lines commit with `NORMAL`, without a sync of their
//! own, since the claim that must follow a decision before anything runs is
//! synced; a busy timeout so several keel processes can share the file), every call
//! run on tokio's blocking pool, and the SQL for the [`ApprovalStore`]
//! operations. Decisions are single `UPDATE ... WHERE id = ? AND revision = ?
//! AND status = 'pending'` statements, so two processes deciding the same row
//! cannot both win. It must not know about classes' meaning or waiting.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::types::{Type, Value as SqlValue};
use rusqlite::{Connection, OptionalExtension, Row, params, params_from_iter};

use super::changes::ChangeFeed;
use super::rows::{Columns, audit, record, rule};
use super::schema::migrate;
use super::{
    AUDIT_COLUMNS, ApprovalRecord, ApprovalStore, AuditEntry, AuditFilter, DecisionUpdate,
    NewAudit, NewRequest, REQUEST_COLUMNS, RULE_COLUMNS, RequestFilter, own_row,
};
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::rules::{Lifetime, Rule};

/// The approvals database in one SQLite file.
#[derive(Clone)]
pub struct SqliteStore {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    feed: ChangeFeed,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// How long an open waits for another process's hold on a new database.
const OPEN_BUSY_WAIT: Duration = Duration::from_secs(10);

/// Puts the database in WAL mode. Switching needs the file to itself, and
/// SQLite answers "database is locked" at once, without its busy handler,
/// while another process is creating or switching the same file (several
/// keel processes started together in a new home): wait and try again.
fn use_wal(conn: &Connection) -> Result<()> {
    let started = std::time::Instant::now();
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(e) if is_busy(&e) && started.elapsed() < OPEN_BUSY_WAIT => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// SQLite's "another connection holds the file" (busy or locked).
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and migrates it.
    pub async fn open(path: impl Into<PathBuf>) -> Result<Self> {
        let path = path.into();
        tokio::task::spawn_blocking(move || Self::open_blocking(&path))
            .await
            .map_err(|e| Error::Task(e.to_string()))?
    }

    /// [`open`](Self::open) for callers outside an async context.
    pub fn open_blocking(path: &Path) -> Result<Self> {
        if let Some(parent) = path.parent()
            && !parent.as_os_str().is_empty()
        {
            std::fs::create_dir_all(parent)?;
        }
        let existed = path.exists();
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(OPEN_BUSY_WAIT)?;
        conn.set_prepared_statement_cache_capacity(64);
        let fresh = !existed
            || conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
                r.get::<_, i64>(0)
            })? == 0;
        use_wal(&conn)?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        migrate(&mut conn)?;
        super::identity::check(&mut conn, path, fresh)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
            path: path.to_path_buf(),
            feed: ChangeFeed::sqlite(path.to_path_buf()),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts the database at `path` as keel's own after a person checked
    /// it (its identity is recorded anew; see `store::identity`).
    pub fn trust_blocking(path: &Path) -> Result<()> {
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(OPEN_BUSY_WAIT)?;
        super::identity::trust(&mut conn, path)
    }

    /// [`run`](Self::run) with `synchronous=NORMAL`: the commit goes to
    /// the WAL without an fsync of its own; it survives a crash of the
    /// process, and the next synced (`FULL`) commit makes it durable
    /// against a power loss too (WAL frames are synced in order).
    async fn run_unsynced<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        self.run(move |conn| {
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            let result = f(conn);
            conn.pragma_update(None, "synchronous", "FULL")?;
            result
        })
        .await
    }

    /// A small read: on the caller's thread when the connection is free
    /// and SQLite answers without waiting (a WAL read does not wait for
    /// writers), sparing two thread wake-ups on the way of a turn; else
    /// on the blocking pool, as [`run`](Self::run).
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut Connection) -> Result<T> + Send + 'static,
    {
        if let Ok(mut conn) = self.conn.try_lock() {
            conn.busy_timeout(Duration::ZERO)?;
            let result = f(&mut conn);
            conn.busy_timeout(OPEN_BUSY_WAIT)?;
            match result {
                Err(Error::Sqlite(e)) if is_busy(&e) => {}
                answered => return answered,
            }
        }
        self.run(f).await
    }

    async fn run<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        tokio::task::spawn_blocking(move || {
            let mut guard = conn
                .lock()
                .map_err(|_| Error::Task("the approvals connection lock is poisoned".to_owned()))?;
            f(&mut guard)
        })
        .await
        .map_err(|e| Error::Task(e.to_string()))?
    }
}

fn conversion(idx: usize, e: Error) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e))
}

/// SQLite's side of the shared row mapping (`super::rows`).
impl Columns for Row<'_> {
    type Error = rusqlite::Error;
    fn text(&self, idx: usize) -> rusqlite::Result<Option<String>> {
        self.get(idx)
    }
    fn int(&self, idx: usize) -> rusqlite::Result<Option<i64>> {
        self.get(idx)
    }
    fn flag(&self, idx: usize) -> rusqlite::Result<bool> {
        self.get(idx)
    }
    fn invalid(&self, idx: usize, e: Error) -> rusqlite::Error {
        conversion(idx, e)
    }
}

/// `Connection::execute` through the connection's statement cache: the
/// same few statements run on every turn, and preparing one costs more than
/// running it.
fn exec(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<usize> {
    conn.prepare_cached(sql)?.execute(params)
}

/// `Connection::query_row` through the statement cache.
fn query_one<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.prepare_cached(sql)?.query_row(params, f)
}

fn get_request(conn: &Connection, id: &str) -> Result<Option<ApprovalRecord>> {
    let sql = format!("SELECT {REQUEST_COLUMNS} FROM approval_requests WHERE id = ?1");
    Ok(query_one(conn, &sql, [id], |r| record(r)).optional()?)
}

fn limit_value(limit: Option<usize>) -> i64 {
    limit.map_or(-1, |l| i64::try_from(l).unwrap_or(i64::MAX))
}

#[async_trait]
impl ApprovalStore for SqliteStore {
    fn change_feed(&self) -> Option<ChangeFeed> {
        Some(self.feed.clone())
    }

    async fn insert_request(&self, r: NewRequest) -> Result<ApprovalRecord> {
        self.run(move |conn| {
            let offer = r.offer.as_ref().map(serde_json::to_string).transpose()?;
            exec(conn,
                "INSERT INTO approval_requests (id, workspace, session_id, call_id, tool, \
                 operation, args_json, digest, class, reason, understood, offer_json, delivery, \
                 status, revision, created_at, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 'pending', 0, ?14, ?15) \
                 ON CONFLICT (id) DO NOTHING",
                params![
                    r.id,
                    r.workspace,
                    r.session_id,
                    r.call_id,
                    r.tool,
                    r.operation,
                    serde_json::to_string(&r.args)?,
                    r.digest,
                    r.class.as_str(),
                    r.reason,
                    r.understood,
                    offer,
                    r.delivery.as_str(),
                    r.created_at,
                    r.expires_at,
                ],
            )?;
            let stored =
                get_request(conn, &r.id)?.ok_or_else(|| Error::RequestNotFound(r.id.clone()))?;
            own_row(&r, stored)
        })
        .await
    }

    async fn get_request(&self, id: &str) -> Result<Option<ApprovalRecord>> {
        let id = id.to_owned();
        self.run(move |conn| get_request(conn, &id)).await
    }

    async fn latest_for_call(
        &self,
        session_id: &str,
        call_id: &str,
    ) -> Result<Option<ApprovalRecord>> {
        let (session_id, call_id) = (session_id.to_owned(), call_id.to_owned());
        self.run(move |conn| {
            let sql = format!(
                "SELECT {REQUEST_COLUMNS} FROM approval_requests \
                 WHERE session_id = ?1 AND call_id = ?2 ORDER BY created_at DESC, rowid DESC LIMIT 1"
            );
            Ok(query_one(conn, &sql, [session_id, call_id], |r| record(r))
                .optional()?)
        })
        .await
    }

    async fn list_requests(&self, filter: RequestFilter) -> Result<Vec<ApprovalRecord>> {
        self.run(move |conn| {
            let mut clauses = Vec::new();
            let mut values: Vec<SqlValue> = Vec::new();
            let mut add = |clause: &str, v: Option<String>| {
                if let Some(v) = v {
                    values.push(SqlValue::Text(v));
                    clauses.push(format!("{clause} = ?{}", values.len()));
                }
            };
            add("workspace", filter.workspace);
            add("session_id", filter.session_id);
            add("status", filter.status.map(|s| s.as_str().to_owned()));
            add("delivery", filter.delivery.map(|d| d.as_str().to_owned()));
            if filter.unconsumed {
                clauses.push("consumed_at IS NULL".to_owned());
            }
            let where_sql = if clauses.is_empty() {
                String::new()
            } else {
                format!("WHERE {}", clauses.join(" AND "))
            };
            values.push(SqlValue::Integer(limit_value(filter.limit)));
            let sql = format!(
                "SELECT {REQUEST_COLUMNS} FROM approval_requests {where_sql} \
                 ORDER BY created_at DESC, rowid DESC LIMIT ?{}",
                values.len()
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(values), |r| record(r))?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    async fn decide(
        &self,
        id: &str,
        revision: i64,
        u: DecisionUpdate,
    ) -> Result<Option<ApprovalRecord>> {
        let id = id.to_owned();
        // Not synced on its own: nothing runs on a decision until the call
        // is claimed (`consume`), whose synced commit carries this one too.
        // A crash of the process keeps it; a power loss before the claim
        // can only make the request pending again.
        self.run_unsynced(move |conn| {
            let tx = conn.transaction()?;
            let changed = exec(
                &tx,
                "UPDATE approval_requests SET status = ?1, note = ?2, by_message = ?3, \
                 stop_turn = ?4, decided_by = ?5, approved_by = ?6, rule_id = ?7, \
                 idempotency_key = ?8, decided_at = ?9, revision = revision + 1 \
                 WHERE id = ?10 AND revision = ?11 AND status = 'pending'",
                params![
                    u.status.as_str(),
                    u.note,
                    u.by_message,
                    u.stop_turn,
                    u.decided_by,
                    u.approved_by.map(|a| a.as_str()),
                    u.rule_id,
                    u.idempotency_key,
                    u.decided_at,
                    id,
                    revision,
                ],
            )?;
            if changed != 1 {
                return Ok(None);
            }
            if let Some(audit) = &u.audit {
                insert_audit(&tx, audit)?;
            }
            let decided = get_request(&tx, &id)?;
            tx.commit()?;
            Ok(decided)
        })
        .await
    }

    async fn consume(&self, id: &str, at: i64) -> Result<bool> {
        let id = id.to_owned();
        self.run(move |conn| {
            Ok(exec(
                conn,
                "UPDATE approval_requests SET consumed_at = ?1 \
                 WHERE id = ?2 AND status != 'pending' AND consumed_at IS NULL",
                params![at, id],
            )? == 1)
        })
        .await
    }

    async fn finish(
        &self,
        id: &str,
        at: i64,
        outcome: Option<String>,
        is_error: bool,
    ) -> Result<bool> {
        let id = id.to_owned();
        self.run(move |conn| {
            Ok(exec(conn,
                "UPDATE approval_requests SET finished_at = ?1, outcome = ?2, outcome_is_error = ?3 \
                 WHERE id = ?4 AND finished_at IS NULL",
                params![at, outcome, is_error, id],
            )? == 1)
        })
        .await
    }

    async fn has_unreported_drafts(&self, session_id: &str) -> Result<bool> {
        let session_id = session_id.to_owned();
        // Asked before every model request: read on the caller's thread.
        self.read(move |conn| {
            Ok(query_one(
                conn,
                "SELECT EXISTS (SELECT 1 FROM approval_requests \
                 WHERE session_id = ?1 AND delivery = 'draft' AND reported_at IS NULL)",
                [&session_id],
                |r| r.get::<_, bool>(0),
            )?)
        })
        .await
    }

    async fn mark_reported(&self, ids: &[String], at: i64) -> Result<()> {
        let ids = ids.to_vec();
        self.run(move |conn| {
            let tx = conn.transaction()?;
            for id in &ids {
                exec(&tx,
                    "UPDATE approval_requests SET reported_at = ?1 WHERE id = ?2 AND reported_at IS NULL",
                    params![at, id],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn insert_rule(&self, r: Rule) -> Result<()> {
        self.run(move |conn| {
            let session = match &r.lifetime {
                Lifetime::Permanent => None,
                Lifetime::Session { session_id } => Some(session_id.clone()),
            };
            exec(
                conn,
                "INSERT INTO approval_rules (id, workspace, tool, operation, scope_kind, \
                 scope_value, label, session_id, created_at, created_from, last_matched_at, \
                 match_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                params![
                    r.id,
                    r.workspace,
                    r.tool,
                    r.operation,
                    r.scope.kind(),
                    r.scope.value(),
                    r.label,
                    session,
                    r.created_at,
                    r.created_from,
                    r.last_matched_at,
                    r.match_count,
                ],
            )?;
            Ok(())
        })
        .await
    }

    async fn list_rules(&self, workspace: Option<&str>) -> Result<Vec<Rule>> {
        let workspace = workspace.map(str::to_owned);
        self.run(move |conn| {
            let rows = match workspace {
                Some(ws) => {
                    let sql = format!(
                        "SELECT {RULE_COLUMNS} FROM approval_rules WHERE workspace = ?1 \
                         ORDER BY created_at, rowid"
                    );
                    let mut stmt = conn.prepare_cached(&sql)?;
                    stmt.query_map([ws], |r| rule(r))?
                        .collect::<rusqlite::Result<Vec<_>>>()?
                }
                None => {
                    let sql = format!(
                        "SELECT {RULE_COLUMNS} FROM approval_rules ORDER BY created_at, rowid"
                    );
                    let mut stmt = conn.prepare_cached(&sql)?;
                    stmt.query_map([], |r| rule(r))?
                        .collect::<rusqlite::Result<Vec<_>>>()?
                }
            };
            Ok(rows)
        })
        .await
    }

    async fn get_rule(&self, id: &str) -> Result<Option<Rule>> {
        let id = id.to_owned();
        self.run(move |conn| {
            let sql = format!("SELECT {RULE_COLUMNS} FROM approval_rules WHERE id = ?1");
            Ok(query_one(conn, &sql, [id], |r| rule(r)).optional()?)
        })
        .await
    }

    async fn delete_rule(&self, id: &str) -> Result<bool> {
        let id = id.to_owned();
        self.run(move |conn| Ok(exec(conn, "DELETE FROM approval_rules WHERE id = ?1", [id])? == 1))
            .await
    }

    async fn touch_rules(&self, ids: &[String], at: i64) -> Result<()> {
        let ids = ids.to_vec();
        self.run(move |conn| {
            let tx = conn.transaction()?;
            for id in &ids {
                exec(
                    &tx,
                    "UPDATE approval_rules SET match_count = match_count + 1, last_matched_at = ?1 \
                     WHERE id = ?2",
                    params![at, id],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
        .await
    }

    async fn get_mode(&self, workspace: &str) -> Result<Option<Mode>> {
        let workspace = workspace.to_owned();
        self.run(move |conn| {
            let mode: Option<String> = query_one(
                conn,
                "SELECT mode FROM approval_modes WHERE workspace = ?1",
                [workspace],
                |r| r.get(0),
            )
            .optional()?;
            mode.map(|m| m.parse()).transpose()
        })
        .await
    }

    async fn set_mode(&self, workspace: &str, mode: Mode, at: i64) -> Result<()> {
        let workspace = workspace.to_owned();
        self.run(move |conn| {
            exec(conn,
                "INSERT INTO approval_modes (workspace, mode, updated_at) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (workspace) DO UPDATE SET mode = excluded.mode, updated_at = excluded.updated_at",
                params![workspace, mode.as_str(), at],
            )?;
            Ok(())
        })
        .await
    }

    async fn append_audit(&self, e: NewAudit) -> Result<()> {
        // An audit line is history, not state: it is not synced on its own
        // (the next synced commit of the WAL carries it), so a tool call
        // never waits on the disk for it.
        self.run_unsynced(move |conn| insert_audit(conn, &e)).await
    }

    async fn audit(&self, filter: AuditFilter) -> Result<Vec<AuditEntry>> {
        self.run(move |conn| {
            let mut clauses = Vec::new();
            let mut values: Vec<SqlValue> = Vec::new();
            for (col, v) in [
                ("workspace", filter.workspace),
                ("call_id", filter.call_id),
                ("request_id", filter.request_id),
            ] {
                if let Some(v) = v {
                    values.push(SqlValue::Text(v));
                    clauses.push(format!("{col} = ?{}", values.len()));
                }
            }
            let where_sql = if clauses.is_empty() {
                String::new()
            } else {
                format!("WHERE {}", clauses.join(" AND "))
            };
            values.push(SqlValue::Integer(limit_value(filter.limit)));
            let sql = format!(
                "SELECT {AUDIT_COLUMNS} FROM approval_audit {where_sql} ORDER BY id DESC LIMIT ?{}",
                values.len()
            );
            let mut stmt = conn.prepare_cached(&sql)?;
            let rows = stmt.query_map(params_from_iter(values), |r| audit(r))?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }
}

/// Appends one audit line.
fn insert_audit(conn: &Connection, e: &NewAudit) -> Result<()> {
    exec(
        conn,
        "INSERT INTO approval_audit (at, workspace, session_id, call_id, request_id, tool, \
         class, mode, outcome, approved_by, rule_ids, decider, detail) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
        params![
            e.at,
            e.workspace,
            e.session_id,
            e.call_id,
            e.request_id,
            e.tool,
            e.class.map(|c| c.as_str()),
            e.mode.map(|m| m.as_str()),
            e.outcome,
            e.approved_by.map(|a| a.as_str()),
            serde_json::to_string(&e.rule_ids)?,
            e.decider,
            e.detail,
        ],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::ApprovalStore;

    #[tokio::test]
    async fn a_read_waits_for_a_busy_connection_instead_of_failing() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path().join("keel.db")).await.unwrap();
        assert!(!store.has_unreported_drafts("s").await.unwrap());
        // Another task holds the connection: the read goes to the pool
        // and answers once it is free.
        let conn = Arc::clone(&store.conn);
        let (held, release) = (std::sync::mpsc::channel(), std::sync::mpsc::channel::<()>());
        let holder = std::thread::spawn(move || {
            let _guard = conn.lock().unwrap();
            held.0.send(()).unwrap();
            release.1.recv().unwrap();
        });
        held.1.recv().unwrap();
        let read = tokio::spawn({
            let store = store.clone();
            async move { store.has_unreported_drafts("s").await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !read.is_finished(),
            "answered while the connection was held"
        );
        release.0.send(()).unwrap();
        assert!(!read.await.unwrap().unwrap());
        holder.join().unwrap();
    }
}
