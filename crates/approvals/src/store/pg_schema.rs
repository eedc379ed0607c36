//! The PostgreSQL schema and its versioned migrations.
//!
//! Owns the `CREATE` statements for the PostgreSQL store and
//! [`migrate`], which brings a database up to [`SCHEMA_VERSION`]: the
//! version lives in the one-row table `keel_approvals_schema`, every step
//! runs in one transaction under an advisory lock (so two keel processes
//! opening a new database at once do not both create it), and a database
//! written by a newer keel is refused. The tables mirror the SQLite ones
//! (`schema.rs`), with a `seq` column standing in for SQLite's `rowid` as
//! the tie-break of "newest first". It must not know about rows' meaning.

use tokio_postgres::Client;

use crate::error::{Error, Result};

/// Each entry takes the schema from version `index` to `index + 1`.
const MIGRATIONS: &[&str] = &[
    // 0 → 1
    r#"
    CREATE TABLE approval_requests (
        seq              BIGINT GENERATED ALWAYS AS IDENTITY,
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
        understood       BOOLEAN NOT NULL,
        offer_json       TEXT,
        delivery         TEXT NOT NULL CHECK (delivery IN ('wait', 'draft')),
        status           TEXT NOT NULL
                         CHECK (status IN ('pending', 'approved', 'declined', 'expired', 'cancelled')),
        note             TEXT,
        by_message       BOOLEAN NOT NULL DEFAULT FALSE,
        stop_turn        BOOLEAN NOT NULL DEFAULT FALSE,
        decided_by       TEXT,
        approved_by      TEXT,
        rule_id          TEXT,
        idempotency_key  TEXT,
        revision         BIGINT NOT NULL DEFAULT 0,
        created_at       BIGINT NOT NULL,
        decided_at       BIGINT,
        expires_at       BIGINT NOT NULL,
        consumed_at      BIGINT,
        finished_at      BIGINT,
        outcome          TEXT,
        outcome_is_error BOOLEAN NOT NULL DEFAULT FALSE,
        reported_at      BIGINT
    );
    CREATE INDEX approval_requests_by_call ON approval_requests (session_id, call_id, created_at);
    CREATE INDEX approval_requests_by_status ON approval_requests (status, workspace);
    CREATE INDEX approval_requests_unreported_drafts ON approval_requests (session_id)
        WHERE delivery = 'draft' AND reported_at IS NULL;

    CREATE TABLE approval_rules (
        seq             BIGINT GENERATED ALWAYS AS IDENTITY,
        id              TEXT PRIMARY KEY,
        workspace       TEXT NOT NULL,
        tool            TEXT NOT NULL,
        operation       TEXT,
        scope_kind      TEXT NOT NULL CHECK (scope_kind IN ('command', 'host', 'path_glob', 'tool')),
        scope_value     TEXT NOT NULL,
        label           TEXT NOT NULL,
        session_id      TEXT,
        created_at      BIGINT NOT NULL,
        created_from    TEXT,
        last_matched_at BIGINT,
        match_count     BIGINT NOT NULL DEFAULT 0
    );
    CREATE INDEX approval_rules_by_workspace ON approval_rules (workspace, tool);

    CREATE TABLE approval_modes (
        workspace  TEXT PRIMARY KEY,
        mode       TEXT NOT NULL CHECK (mode IN ('outside', 'everything', 'money_only')),
        updated_at BIGINT NOT NULL
    );

    CREATE TABLE approval_audit (
        id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        at          BIGINT NOT NULL,
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
    // 1 → 2: a new request or a status change notifies the listeners of
    // every keel process (`store/changes.rs`: waiting turns, the web
    // inbox), delivered when the writing transaction commits. The payload
    // is only the id: the row is the record.
    r#"
    CREATE FUNCTION keel_approvals_nudge() RETURNS trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'INSERT' OR OLD.status IS DISTINCT FROM NEW.status THEN
                PERFORM pg_notify('keel_approvals', NEW.id);
            END IF;
            RETURN NULL;
        END
        $$;
    CREATE TRIGGER approval_requests_nudge
        AFTER INSERT OR UPDATE OF status ON approval_requests
        FOR EACH ROW EXECUTE FUNCTION keel_approvals_nudge();
    "#,
];

/// The version this keel writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock every migration step holds (an arbitrary constant:
/// "keel" in ASCII, then "ap").
const MIGRATION_LOCK: i64 = 0x6b65_656c_6170;

/// Brings the database behind `client` up to [`SCHEMA_VERSION`].
pub(crate) async fn migrate(client: &mut Client) -> Result<()> {
    loop {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS keel_approvals_schema (version BIGINT NOT NULL)",
        )
        .await?;
        let version: i64 = tx
            .query_opt("SELECT version FROM keel_approvals_schema LIMIT 1", &[])
            .await?
            .map(|row| row.try_get(0))
            .transpose()?
            .unwrap_or(0);
        if version > SCHEMA_VERSION {
            return Err(Error::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        if version == SCHEMA_VERSION {
            tx.commit().await?;
            return Ok(());
        }
        let step = usize::try_from(version).unwrap_or(usize::MAX);
        let Some(sql) = MIGRATIONS.get(step) else {
            return Err(Error::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        };
        tx.batch_execute(sql).await?;
        tx.execute("DELETE FROM keel_approvals_schema", &[]).await?;
        tx.execute(
            "INSERT INTO keel_approvals_schema (version) VALUES ($1)",
            &[&(version + 1)],
        )
        .await?;
        tx.commit().await?;
    }
}
