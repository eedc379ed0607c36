//! The SQLite schema and its versioned migrations.
//!
//! Owns the `CREATE` statements and [`migrate`], which brings a database up
//! to [`SCHEMA_VERSION`] using `PRAGMA user_version`, one transaction per
//! step, and refuses a database written by a newer keel. It must not know
//! about rows' meaning.

use rusqlite::Connection;

use crate::error::{Error, Result};

/// Each entry takes the schema from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 → 1
    r#"
    CREATE TABLE approval_requests (
        id               TEXT PRIMARY KEY,
        workspace        TEXT NOT NULL,
        session_id       TEXT NOT NULL,
        call_id          TEXT NOT NULL,
        tool             TEXT NOT NULL,
        operation        TEXT,
        args_json        TEXT NOT NULL,
        digest           TEXT NOT NULL,
        class            TEXT NOT NULL CHECK (class IN ('read', 'write', 'send', 'money')),
        reason           TEXT NOT NULL,
        understood       INTEGER NOT NULL,
        offer_json       TEXT,
        delivery         TEXT NOT NULL CHECK (delivery IN ('wait', 'draft')),
        status           TEXT NOT NULL
                         CHECK (status IN ('pending', 'approved', 'declined', 'expired', 'cancelled')),
        note             TEXT,
        by_message       INTEGER NOT NULL DEFAULT 0,
        stop_turn        INTEGER NOT NULL DEFAULT 0,
        decided_by       TEXT,
        approved_by      TEXT,
        rule_id          TEXT,
        idempotency_key  TEXT,
        revision         INTEGER NOT NULL DEFAULT 0,
        created_at       INTEGER NOT NULL,
        decided_at       INTEGER,
        expires_at       INTEGER NOT NULL,
        consumed_at      INTEGER,
        finished_at      INTEGER,
        outcome          TEXT,
        outcome_is_error INTEGER NOT NULL DEFAULT 0,
        reported_at      INTEGER
    );
    CREATE INDEX approval_requests_by_call ON approval_requests (session_id, call_id, created_at);
    CREATE INDEX approval_requests_by_status ON approval_requests (status, workspace);

    CREATE TABLE approval_rules (
        id              TEXT PRIMARY KEY,
        workspace       TEXT NOT NULL,
        tool            TEXT NOT NULL,
        operation       TEXT,
        scope_kind      TEXT NOT NULL CHECK (scope_kind IN ('command', 'host', 'path_glob', 'tool')),
        scope_value     TEXT NOT NULL,
        label           TEXT NOT NULL,
        session_id      TEXT,
        created_at      INTEGER NOT NULL,
        created_from    TEXT,
        last_matched_at INTEGER,
        match_count     INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX approval_rules_by_workspace ON approval_rules (workspace, tool);

    CREATE TABLE approval_modes (
        workspace  TEXT PRIMARY KEY,
        mode       TEXT NOT NULL CHECK (mode IN ('outside', 'everything', 'money_only')),
        updated_at INTEGER NOT NULL
    );

    CREATE TABLE approval_audit (
        id          INTEGER PRIMARY KEY AUTOINCREMENT,
        at          INTEGER NOT NULL,
        workspace   TEXT NOT NULL,
        session_id  TEXT,
        call_id     TEXT,
        request_id  TEXT,
        tool        TEXT,
        class       TEXT,
        mode        TEXT,
        outcome     TEXT NOT NULL,
        approved_by TEXT,
        rule_ids    TEXT NOT NULL DEFAULT '[]',
        decider     TEXT,
        detail      TEXT NOT NULL
    );
    CREATE INDEX approval_audit_by_call ON approval_audit (call_id);
    CREATE INDEX approval_audit_by_request ON approval_audit (request_id);
    "#,
];

/// The version this keel writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings `conn` up to [`SCHEMA_VERSION`].
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    loop {
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(Error::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == SCHEMA_VERSION {
            tx.commit()?;
            return Ok(());
        }
        let step = usize::try_from(version).unwrap_or(usize::MAX);
        let Some(sql) = MIGRATIONS.get(step) else {
            return Err(Error::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        };
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", version + 1)?;
        tx.commit()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrates_once_and_refuses_newer_databases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let mut conn = Connection::open(&path).unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        assert!(matches!(
            migrate(&mut conn),
            Err(Error::SchemaTooNew { .. })
        ));
    }
}
