//! The sessions database's schema, step by step.
//!
//! Owns [`MIGRATIONS`]: `db.rs` applies the steps a database lacks, in
//! order, and refuses a database written by a newer keel. A step is never
//! changed once released; a new one is appended. It must not know how
//! the tables are used.

/// Each entry takes the schema from version `index` to `index + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 0 -> 1: session files.
    r#"
    CREATE TABLE keel_session_files (
        path        TEXT PRIMARY KEY,
        workspace   TEXT NOT NULL,
        session_id  TEXT NOT NULL,
        header      TEXT NOT NULL,
        lines       BIGINT NOT NULL,
        bytes       BIGINT NOT NULL,
        modified_ms BIGINT NOT NULL
    );
    CREATE INDEX keel_session_files_by_workspace ON keel_session_files (workspace, modified_ms);
    CREATE INDEX keel_session_files_by_id ON keel_session_files (session_id);
    CREATE TABLE keel_session_lines (
        path TEXT NOT NULL REFERENCES keel_session_files (path) ON DELETE CASCADE,
        seq  BIGINT NOT NULL,
        line TEXT NOT NULL,
        PRIMARY KEY (path, seq)
    );
    "#,
    // 1 -> 2: the small files keel keeps beside its sessions (thread
    // metadata, RPC workflow gates), by their path below the home.
    r#"
    CREATE TABLE keel_home_files (
        path        TEXT PRIMARY KEY,
        body        BYTEA NOT NULL,
        modified_ms BIGINT NOT NULL
    );
    "#,
    // 2 -> 3: what a listing shows, kept up to date by every append
    // (`crate::summary::Facts`), so listing reads no lines. Rows from
    // before it (`summarized` false) are summarized once when listed.
    r#"
    ALTER TABLE keel_session_files
        ADD COLUMN summarized    BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN messages      BIGINT NOT NULL DEFAULT 0,
        ADD COLUMN first_message TEXT,
        ADD COLUMN named         BOOLEAN NOT NULL DEFAULT false,
        ADD COLUMN name          TEXT;
    "#,
    // 3 -> 4: the events of turns run on another machine.
    crate::events::SCHEMA,
    // 4 -> 5: which try of a session's turn may still act.
    crate::events::TRIES_SCHEMA,
];
