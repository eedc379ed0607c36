//! The identity of an SQLite approvals database: is this the file keel
//! wrote?
//!
//! Owns [`check`]: a database keel creates gets a random id in its
//! `keel_identity` table and a sidecar `<db>.identity` beside it that holds
//! the same id and the file's device and inode. Every open compares the
//! three. A file moved over the database (a different inode), or one whose
//! id differs from the sidecar, is not the one keel wrote: the open fails,
//! so the gate denies every call and says why, instead of reading a mode or
//! rules someone else prepared. SQLite itself never replaces the file (WAL
//! writes in place), so the inode is stable for keel's own database. A
//! database opened for the first time with no schema is new and gets a new
//! identity; one with a schema and neither id nor sidecar (written before
//! identities existed) is adopted once. [`trust`] accepts the current file
//! after a person has checked it (`keel approvals trust-store`). It must
//! not know about the engine or the wire.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension};
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[derive(Debug, Serialize, Deserialize, PartialEq, Eq)]
struct Sidecar {
    id: String,
    dev: u64,
    ino: u64,
}

/// The sidecar file of the database at `db`.
pub fn sidecar_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".identity");
    db.with_file_name(name)
}

fn stored_id(conn: &Connection) -> Result<Option<String>> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS keel_identity (id TEXT NOT NULL)")?;
    Ok(conn
        .query_row("SELECT id FROM keel_identity LIMIT 1", [], |r| r.get(0))
        .optional()?)
}

fn read_sidecar(db: &Path) -> Result<Option<Sidecar>> {
    match std::fs::read(sidecar_path(db)) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes).map_err(|e| {
            Error::Config(format!(
                "{} is unreadable ({e}); run `keel approvals trust-store` after checking the database",
                sidecar_path(db).display()
            ))
        })?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn write_identity(conn: &Connection, db: &Path, id: &str) -> Result<()> {
    conn.execute("DELETE FROM keel_identity", [])?;
    conn.execute("INSERT INTO keel_identity (id) VALUES (?1)", [id])?;
    let meta = std::fs::metadata(db)?;
    let sidecar = Sidecar {
        id: id.to_owned(),
        dev: meta.dev(),
        ino: meta.ino(),
    };
    let path = sidecar_path(db);
    let tmp = path.with_extension("identity.tmp");
    std::fs::write(&tmp, serde_json::to_vec(&sidecar)?)?;
    std::fs::rename(&tmp, &path)?;
    Ok(())
}

/// Checks (or, for a new database, creates) the identity of `db`.
/// `fresh`: the file had no schema before this open.
pub fn check(conn: &Connection, db: &Path, fresh: bool) -> Result<()> {
    let id = stored_id(conn)?;
    let sidecar = read_sidecar(db)?;
    if fresh || (id.is_none() && sidecar.is_none()) {
        let new = id.unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string());
        return write_identity(conn, db, &new);
    }
    let meta = std::fs::metadata(db)?;
    let why = match (&id, &sidecar) {
        (Some(id), Some(s)) if *id == s.id && s.dev == meta.dev() && s.ino == meta.ino() => {
            return Ok(());
        }
        (Some(id), Some(s)) if *id == s.id => "the file was replaced (another inode)",
        (Some(_), Some(_)) => "its identity differs from the one keel recorded",
        (None, Some(_)) => "it has no identity, but keel recorded one",
        (Some(_), None) => "keel's record of its identity is missing",
        (None, None) => "it has no identity",
    };
    Err(Error::Config(format!(
        "the approvals database {} is not the one keel wrote: {why}; every tool call is denied until a person checks it and runs `keel approvals trust-store`",
        db.display()
    )))
}

/// Accepts the database at `db` as keel's own: records its identity anew.
pub fn trust(conn: &Connection, db: &Path) -> Result<()> {
    let id = stored_id(conn)?.unwrap_or_else(|| uuid::Uuid::now_v7().simple().to_string());
    write_identity(conn, db, &id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(db: &Path) -> (Connection, bool) {
        let fresh = !db.exists();
        let conn = Connection::open(db).unwrap();
        if fresh {
            conn.execute_batch("CREATE TABLE t (x)").unwrap();
        }
        (conn, fresh)
    }

    #[test]
    fn a_database_moved_over_keels_own_is_refused_until_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keel.db");
        let (conn, fresh) = open(&db);
        check(&conn, &db, fresh).unwrap();
        drop(conn);
        let (conn, fresh) = open(&db);
        check(&conn, &db, fresh).unwrap();
        drop(conn);
        // An attacker's database, moved over keel's.
        let evil = dir.path().join("evil.db");
        let c = Connection::open(&evil).unwrap();
        c.execute_batch("CREATE TABLE t (x)").unwrap();
        drop(c);
        std::fs::rename(&evil, &db).unwrap();
        let (conn, fresh) = open(&db);
        let e = check(&conn, &db, fresh).unwrap_err().to_string();
        assert!(e.contains("not the one keel wrote"), "{e}");
        trust(&conn, &db).unwrap();
        check(&conn, &db, false).unwrap();
        // A copy of keel's own file (same id, other inode) is refused too.
        drop(conn);
        let copy = dir.path().join("copy.db");
        std::fs::copy(&db, &copy).unwrap();
        std::fs::rename(&copy, &db).unwrap();
        let (conn, fresh) = open(&db);
        let e = check(&conn, &db, fresh).unwrap_err().to_string();
        assert!(e.contains("replaced"), "{e}");
    }
}
