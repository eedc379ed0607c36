//! Where session files are kept: on disk, or in the sessions database.
//!
//! Owns the few file operations the rest of the crate performs (create,
//! read, reopen for appending, append and sync, list a folder, list the
//! folders, does it exist) and sends each one to the disk or, for a path
//! under the root given to [`crate::use_database`], to `db`. Callers keep
//! working with paths; nothing above this module knows which it is. These
//! functions block: call them on tokio's blocking pool. It must not know
//! what the bytes mean.

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Cursor, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::db::{self, DbFile, Summarized};

/// A session file open for appending.
#[derive(Debug)]
pub(crate) enum Sink {
    Disk(File),
    Db(DbFile),
}

impl Sink {
    /// Appends `data` (whole lines).
    pub(crate) fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        match self {
            Sink::Disk(file) => file.write_all(data),
            Sink::Db(file) => file.append(data),
        }
    }

    /// Makes what was written durable (a committed append already is).
    pub(crate) fn sync_data(&mut self) -> io::Result<()> {
        match self {
            Sink::Disk(file) => file.sync_data(),
            Sink::Db(_) => Ok(()),
        }
    }

    /// Makes a new file and its directory entry durable.
    pub(crate) fn sync_new(&mut self, dir: &Path) -> io::Result<()> {
        match self {
            Sink::Disk(file) => {
                file.sync_all()?;
                #[cfg(unix)]
                if let Err(err) = File::open(dir).and_then(|d| d.sync_all()) {
                    tracing::warn!(dir = %dir.display(), error = %err, "cannot sync the session directory");
                }
                Ok(())
            }
            Sink::Db(_) => Ok(()),
        }
    }
}

/// The whole file.
pub(crate) fn read(path: &Path) -> io::Result<Vec<u8>> {
    match db::under(path) {
        Some((db, key)) => db.read(&key),
        None => fs::read(path),
    }
}

/// A buffered reader over the file.
pub(crate) fn reader(path: &Path) -> io::Result<Box<dyn BufRead>> {
    match db::under(path) {
        Some((db, key)) => Ok(Box::new(Cursor::new(db.read(&key)?))),
        None => Ok(Box::new(BufReader::new(File::open(path)?))),
    }
}

/// Creates `path` in `dir` with `bytes`; fails when it exists. With
/// `sync`, the bytes (and on disk the directory entry) are durable before
/// this returns.
pub(crate) fn create_new(dir: &Path, path: &Path, bytes: &[u8], sync: bool) -> io::Result<Sink> {
    if let Some((db, key)) = db::under(path) {
        return db.create(&key, bytes).map(Sink::Db);
    }
    fs::create_dir_all(dir)?;
    let mut options = OpenOptions::new();
    options.append(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Sessions may hold secrets pasted into prompts or tool output.
        options.mode(0o600);
    }
    let mut sink = Sink::Disk(options.open(path)?);
    sink.write_all(bytes)?;
    if sync {
        sink.sync_new(dir)?;
    }
    Ok(sink)
}

/// How a loaded file is reopened for appending.
pub(crate) struct Reopen {
    /// Its length when it was loaded: a different length now means another
    /// process changed it (`Ok(None)`).
    pub expected_len: u64,
    /// Cut the file back to this many bytes first (a torn last line).
    pub keep_len: Option<u64>,
    /// Its last line lacks a `\n`: write one first.
    pub needs_newline: bool,
}

/// Reopens `path` for appending; `Ok(None)` when it changed since it was
/// loaded.
pub(crate) fn reopen(path: &Path, how: &Reopen) -> io::Result<Option<Sink>> {
    if let Some((db, key)) = db::under(path) {
        // The database holds whole lines only: nothing to repair.
        let keep = how.keep_len.unwrap_or(how.expected_len);
        return Ok(db.open_append(&key, how.expected_len, keep)?.map(Sink::Db));
    }
    let mut file = OpenOptions::new().append(true).open(path)?;
    if file.metadata()?.len() != how.expected_len {
        return Ok(None);
    }
    if let Some(keep) = how.keep_len {
        file.set_len(keep)?;
    }
    if how.needs_newline {
        file.write_all(b"\n")?;
    }
    if how.keep_len.is_some() || how.needs_newline {
        file.sync_data()?;
    }
    Ok(Some(Sink::Disk(file)))
}

/// Removes the file.
pub(crate) fn remove(path: &Path) -> io::Result<()> {
    match db::under(path) {
        Some((db, key)) => {
            if db.remove(&key)? {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no session file {key} in the sessions database"),
                ))
            }
        }
        None => fs::remove_file(path),
    }
}

/// Whether `path` is a file keel could load.
pub(crate) fn is_file(path: &Path) -> bool {
    match db::under(path) {
        Some((db, key)) => db.exists(&key),
        None => path.is_file(),
    }
}

/// What a listing shows of the files of the folder `dir` whose names end
/// in `.extension`, when they live in the database (each one's path,
/// modification time, header line and listing facts), without reading
/// their lines. `None` on disk (read the files instead).
pub(crate) fn db_summaries(dir: &Path, extension: &str) -> Option<io::Result<Vec<Summarized>>> {
    let (db, key) = db::under(dir)?;
    Some(db.summaries(&key).map(|rows| {
        rows.into_iter()
            .filter(|r| r.path.extension().is_some_and(|ext| ext == extension))
            .collect()
    }))
}

/// The files of the folder `dir` whose names end in `.extension`, with
/// their modification times (a missing folder has none).
pub(crate) fn list(dir: &Path, extension: &str) -> io::Result<Vec<(PathBuf, SystemTime)>> {
    if let Some((db, key)) = db::under(dir) {
        return Ok(db
            .list(&key)?
            .into_iter()
            .map(|(file, modified)| (db.root().join(file), modified))
            .filter(|(path, _)| path.extension().is_some_and(|ext| ext == extension))
            .collect());
    }
    let read = match fs::read_dir(dir) {
        Ok(read) => read,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut files = Vec::new();
    for item in read {
        let path = item?.path();
        if path.extension().is_none_or(|ext| ext != extension) {
            continue;
        }
        let Ok(meta) = fs::metadata(&path) else {
            continue;
        };
        if meta.is_file() {
            files.push((path, meta.modified().unwrap_or(SystemTime::UNIX_EPOCH)));
        }
    }
    Ok(files)
}

/// The folders of `root` (a missing root has none).
pub(crate) fn dirs(root: &Path) -> io::Result<Vec<PathBuf>> {
    if let Some((db, key)) = db::under(root) {
        return Ok(db
            .dirs(&key)?
            .into_iter()
            .map(|d| db.root().join(d))
            .collect());
    }
    let read = match fs::read_dir(root) {
        Ok(read) => read,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(err),
    };
    let mut out = Vec::new();
    for item in read.flatten() {
        let path = item.path();
        if path.is_dir() {
            out.push(path);
        }
    }
    Ok(out)
}
