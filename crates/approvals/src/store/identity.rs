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
//! identities existed) is adopted once. The sidecar is written before the
//! id is committed, in one write-locked transaction, so processes that open
//! a new database together agree on one identity and one that dies half
//! way leaves what the next open adopts (a sidecar of this very file and no
//! id), never an id without its sidecar. [`trust`] accepts the current
//! file after a person has checked it (`keel approvals trust-store`). It
//! must not know about the engine or the wire.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};
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

/// Writes the sidecar (synced, then renamed into place, then its folder
/// synced), so that it is on disk before the id it names is committed.
fn write_sidecar(db: &Path, id: &str) -> Result<()> {
    use std::io::Write;
    let meta = std::fs::metadata(db)?;
    let sidecar = Sidecar {
        id: id.to_owned(),
        dev: meta.dev(),
        ino: meta.ino(),
    };
    let path = sidecar_path(db);
    let tmp = path.with_extension("identity.tmp");
    let mut file = std::fs::File::create(&tmp)?;
    file.write_all(&serde_json::to_vec(&sidecar)?)?;
    file.sync_all()?;
    std::fs::rename(&tmp, &path)?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)?.sync_all()?;
    }
    Ok(())
}

/// Records `id` as the identity of `db` inside `tx`: the sidecar first,
/// then the row. A process that dies before the commit leaves a sidecar
/// and no row, which the next open adopts (see [`check`]). The other order
/// left a row and no sidecar, which looks like a file moved over keel's,
/// and locked every later process out.
fn record(tx: &rusqlite::Transaction<'_>, db: &Path, id: &str) -> Result<()> {
    write_sidecar(db, id)?;
    tx.execute("DELETE FROM keel_identity", [])?;
    tx.execute("INSERT INTO keel_identity (id) VALUES (?1)", [id])?;
    Ok(())
}

/// Checks (or, for a new database, creates) the identity of `db`.
/// `fresh`: the file had no schema before this open.
///
/// Runs in an immediate (write-locked) transaction, so that processes
/// opening a new database at once agree on one identity: the first one
/// records it, the others wait for its commit and then check it.
pub fn check(conn: &mut Connection, db: &Path, fresh: bool) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let id = stored_id(&tx)?;
    let sidecar = read_sidecar(db)?;
    let meta = std::fs::metadata(db)?;
    let same_file = |s: &Sidecar| s.dev == meta.dev() && s.ino == meta.ino();
    match (&id, &sidecar) {
        // New (a sidecar left by a deleted database is replaced), or
        // written before identities existed (adopted once).
        (None, None) => record(&tx, db, &new_id())?,
        (None, Some(_)) if fresh => record(&tx, db, &new_id())?,
        // The process that wrote this sidecar died before its commit.
        (None, Some(s)) if same_file(s) => record(&tx, db, &s.id)?,
        (Some(id), Some(s)) if *id == s.id && same_file(s) => {}
        (Some(id), Some(s)) => {
            return Err(refused(
                db,
                if *id == s.id {
                    "the file was replaced (another inode)"
                } else {
                    "its identity differs from the one keel recorded"
                },
            ));
        }
        (None, Some(_)) => {
            return Err(refused(
                db,
                "it has no identity, but keel recorded one for another file",
            ));
        }
        (Some(_), None) => return Err(refused(db, "keel's record of its identity is missing")),
    }
    tx.commit()?;
    Ok(())
}

fn new_id() -> String {
    uuid::Uuid::now_v7().simple().to_string()
}

/// The error of a database that is not keel's own (the gate denies every
/// call with it).
fn refused(db: &Path, why: &str) -> Error {
    Error::Config(format!(
        "the approvals database {} is not the one keel wrote: {why}; every tool call is denied until a person checks it and runs `keel approvals trust-store`",
        db.display()
    ))
}

/// Accepts the database at `db` as keel's own: records its identity anew.
pub fn trust(conn: &mut Connection, db: &Path) -> Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let id = stored_id(&tx)?.unwrap_or_else(new_id);
    record(&tx, db, &id)?;
    tx.commit()?;
    Ok(())
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

    fn stored(db: &Path) -> Option<String> {
        stored_id(&Connection::open(db).unwrap()).unwrap()
    }

    #[test]
    fn a_database_moved_over_keels_own_is_refused_until_trusted() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keel.db");
        let (mut conn, fresh) = open(&db);
        check(&mut conn, &db, fresh).unwrap();
        drop(conn);
        let (mut conn, fresh) = open(&db);
        check(&mut conn, &db, fresh).unwrap();
        drop(conn);
        // An attacker's database, moved over keel's.
        let evil = dir.path().join("evil.db");
        let c = Connection::open(&evil).unwrap();
        c.execute_batch("CREATE TABLE t (x)").unwrap();
        drop(c);
        std::fs::rename(&evil, &db).unwrap();
        let (mut conn, fresh) = open(&db);
        let e = check(&mut conn, &db, fresh).unwrap_err().to_string();
        assert!(e.contains("not the one keel wrote"), "{e}");
        trust(&mut conn, &db).unwrap();
        check(&mut conn, &db, false).unwrap();
        // A copy of keel's own file (same id, other inode) is refused too.
        drop(conn);
        let copy = dir.path().join("copy.db");
        std::fs::copy(&db, &copy).unwrap();
        std::fs::rename(&copy, &db).unwrap();
        let (mut conn, fresh) = open(&db);
        let e = check(&mut conn, &db, fresh).unwrap_err().to_string();
        assert!(e.contains("replaced"), "{e}");
    }

    #[test]
    fn a_first_open_that_died_before_its_commit_is_adopted_by_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keel.db");
        let (conn, _) = open(&db);
        stored_id(&conn).unwrap();
        // What a process leaves when it dies between its sidecar and its
        // commit: the schema, the sidecar, no row.
        write_sidecar(&db, "died-before-commit").unwrap();
        let mut conn = conn;
        check(&mut conn, &db, false).unwrap();
        assert_eq!(stored(&db).as_deref(), Some("died-before-commit"));
        drop(conn);
        let (mut conn, fresh) = open(&db);
        check(&mut conn, &db, fresh).unwrap();
    }

    #[test]
    fn a_row_without_its_sidecar_is_still_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keel.db");
        let (mut conn, fresh) = open(&db);
        check(&mut conn, &db, fresh).unwrap();
        std::fs::remove_file(sidecar_path(&db)).unwrap();
        let e = check(&mut conn, &db, false).unwrap_err().to_string();
        assert!(e.contains("record of its identity is missing"), "{e}");
    }

    #[test]
    fn processes_opening_a_new_database_at_once_agree_on_its_identity() {
        // Each thread stands for a keel process: its own connection, all
        // started together on a database none of them has seen.
        for round in 0..15 {
            let dir = tempfile::tempdir().unwrap();
            let db = dir.path().join("keel.db");
            let start = std::sync::Arc::new(std::sync::Barrier::new(6));
            let opens: Vec<_> = (0..6)
                .map(|_| {
                    let (db, start) = (db.clone(), start.clone());
                    std::thread::spawn(move || {
                        start.wait();
                        crate::store::SqliteStore::open_blocking(&db).map(drop)
                    })
                })
                .collect();
            for open in opens {
                let opened = open.join().unwrap();
                assert!(opened.is_ok(), "round {round}: {opened:?}");
            }
            crate::store::SqliteStore::open_blocking(&db).unwrap();
        }
    }
}
