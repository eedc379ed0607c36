//! The small files keel keeps beside its sessions in `KEEL_HOME`: an app
//! server thread's metadata, RPC mode's workflow gates and unattended audit
//! log.
//!
//! Owns [`read`], [`write`] (and [`write_private`] for secrets), [`append`]
//! (and [`append_blocking`]) and [`remove`] for a path below the
//! home: on disk (a write replaces the file atomically through a temporary
//! one; an append closes a line a crash cut, then syncs), or, once
//! [`crate::use_database`] has been called for that home, as a row of
//! `keel_home_files` keyed by the path below the home, so every machine on
//! the database shares them. It must not know what the bytes mean.

use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::db;

async fn off_thread<T: Send + 'static>(
    work: impl FnOnce() -> io::Result<T> + Send + 'static,
) -> io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| io::Error::other(format!("home file task failed: {e}")))?
}

/// The file's bytes; `None` when it does not exist.
pub async fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let path = path.to_path_buf();
    off_thread(move || match db::under_home(&path) {
        Some((db, key)) => db.doc_read(&key),
        None => match fs::read(&path) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        },
    })
    .await
}

/// Replaces the file with `bytes`, all or nothing.
pub async fn write(path: &Path, bytes: Vec<u8>) -> io::Result<()> {
    let path = path.to_path_buf();
    off_thread(move || match db::under_home(&path) {
        Some((db, key)) => db.doc_write(&key, &bytes),
        None => replace_file(&path, &bytes, false),
    })
    .await
}

/// [`write`] for a secret (a sign-in's tokens): on disk the file is its
/// owner's only (`0600`) and a folder made for it too (`0700`), written
/// and synced before it replaces the old one.
pub async fn write_private(path: &Path, bytes: Vec<u8>) -> io::Result<()> {
    let path = path.to_path_buf();
    off_thread(move || match db::under_home(&path) {
        Some((db, key)) => db.doc_write(&key, &bytes),
        None => replace_file(&path, &bytes, true),
    })
    .await
}

/// Replaces the file on disk through a temporary one beside it (owner-only
/// and synced when `private`), on the calling thread.
pub fn replace_file(path: &Path, bytes: &[u8], private: bool) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(dir) = path.parent() {
        let mut builder = fs::DirBuilder::new();
        builder.recursive(true);
        if private {
            builder.mode(0o700);
        }
        builder.create(dir)?;
    }
    let tmp = temp_beside(path);
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    if private {
        options.mode(0o600);
    }
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(bytes)?;
        if private { f.sync_all() } else { Ok(()) }
    });
    if let Err(e) = written.and_then(|()| fs::rename(&tmp, path)) {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

/// Appends `bytes` (whole lines) durably, creating the file when missing.
/// On disk a last line cut by a crash is closed first, so this one stays
/// whole.
pub async fn append(path: &Path, bytes: Vec<u8>) -> io::Result<()> {
    let path = path.to_path_buf();
    off_thread(move || append_here(&path, &bytes)).await
}

/// [`append`] for a caller that cannot await (an audit line that must be
/// stored before the decision it records takes effect). It blocks the
/// calling thread for one write, and needs no runtime: with a database it
/// writes through a connection of its own.
pub fn append_blocking(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match db::under_home(path) {
        Some((db, key)) => db.doc_append_detached(&key, bytes),
        None => append_here(path, bytes),
    }
}

/// The append itself, on the calling thread (which may block).
fn append_here(path: &Path, bytes: &[u8]) -> io::Result<()> {
    match db::under_home(path) {
        Some((db, key)) => db.doc_append(&key, bytes),
        None => {
            if let Some(dir) = path.parent() {
                fs::create_dir_all(dir)?;
            }
            let mut f = fs::OpenOptions::new()
                .create(true)
                .append(true)
                .read(true)
                .open(path)?;
            let len = f.metadata()?.len();
            if len > 0 {
                let mut last = [0u8; 1];
                f.seek(SeekFrom::Start(len - 1))?;
                f.read_exact(&mut last)?;
                if last[0] != b'\n' {
                    f.write_all(b"\n")?;
                }
            }
            f.write_all(bytes)?;
            f.sync_data()
        }
    }
}

/// Removes the file; false when there was none.
pub async fn remove(path: &Path) -> io::Result<bool> {
    let path = path.to_path_buf();
    off_thread(move || match db::under_home(&path) {
        Some((db, key)) => db.doc_remove(&key),
        None => match fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        },
    })
    .await
}

/// A temporary name next to `path`, unique to this write.
fn temp_beside(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", uuid::Uuid::now_v7().simple()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_secret_is_its_owners_only_and_a_failed_write_leaves_nothing() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join("secrets/one.json");
        write_private(&path, b"{}".to_vec()).await.unwrap();
        let mode = |p: &Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(read(&path).await.unwrap().unwrap(), b"{}");
        // The target cannot be replaced (a folder is in its way): the old
        // state stays and no temporary file is left beside it.
        let blocked = home.path().join("secrets/blocked");
        fs::create_dir_all(blocked.join("inside")).unwrap();
        assert!(write_private(&blocked, b"x".to_vec()).await.is_err());
        let names: Vec<String> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert!(remove(&path).await.unwrap());
        assert!(!remove(&path).await.unwrap());
    }
}
