//! Session files kept in PostgreSQL.
//!
//! Owns the database side of the sessions directory: once [`use_database`]
//! has been called, every session file under the given root lives in two
//! tables instead of on disk, addressed by its path relative to the root
//! (`--<slug>--/<time>_<id>.jsonl`), so keel processes on machines with
//! different homes share them. `keel_session_files` holds one row per
//! session (its header line, line count, length and modification time);
//! `keel_session_lines` holds its entry lines, one row each, in order. A
//! file read back is the header and the lines joined with `\n`: byte for
//! byte the JSONL file keel would have written, so the same parser loads
//! it and every rule of the format (ids, parents, branches, forks,
//! compactions, names) holds unchanged.
//!
//! An append is one transaction that checks the line count the writer
//! last saw (`WHERE lines = $n`): a second writer of the same session, on
//! any machine, fails with "changed since it was loaded" instead of
//! interleaving, and a committed append is durable (no cut tails). The
//! schema is versioned (`keel_sessions_schema`); a database written by a
//! newer keel is refused. The connection string is only ever shown
//! redacted. The functions here block (they run on tokio's blocking pool,
//! as file I/O does) on a connection of [`crate::pool`]. Beyond the
//! listing's [`Facts`] (kept in columns of `keel_session_files` by every
//! create and append, so a listing reads no lines), it must not know what
//! the lines mean.

use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::runtime::Handle;
use tokio_postgres::{Client, Config};

use crate::pool::{Pool, connect, io_error};

mod append;
use crate::summary::Facts;

/// The sessions root that lives in the database, and its connection.
pub(crate) struct Db {
    /// `KEEL_HOME`: other files keel keeps there are keyed below it.
    home: PathBuf,
    /// `KEEL_HOME/sessions`: session files are keyed below it.
    root: PathBuf,
    redacted: String,
    pool: Pool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("root", &self.root)
            .field("url", &self.redacted)
            .finish_non_exhaustive()
    }
}

static DB: OnceLock<Db> = OnceLock::new();

use crate::migrations::MIGRATIONS;

/// Appends `$2` to home file `$1` (created when missing), at time `$3`.
const APPEND_HOME_FILE: &str = "INSERT INTO keel_home_files (path, body, modified_ms) \
     VALUES ($1, $2, $3) ON CONFLICT (path) DO UPDATE \
     SET body = keel_home_files.body || EXCLUDED.body, modified_ms = EXCLUDED.modified_ms";

/// The version this keel writes.
const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock migrations hold ("keel" then "se").
const MIGRATION_LOCK: i64 = 0x6b65_656c_7365;

/// Errors of setting the database up.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("invalid PostgreSQL connection string {0}")]
    Config(String),
    #[error("cannot use the sessions database {url}: {message}")]
    Connect { url: String, message: String },
    #[error(
        "the sessions database {url} was written by a newer keel (schema {found}; this keel knows {supported})"
    )]
    TooNew {
        url: String,
        found: i64,
        supported: i64,
    },
    #[error("sessions already use another database in this process")]
    AlreadySet,
}

/// Keeps every session file of the keel home `home` (under
/// `home/sessions`), and the small files keel keeps beside them
/// ([`crate::home_files`]), in the PostgreSQL database at `url` (created
/// and migrated as needed), for the rest of the process. `redacted` is the
/// URL as it may be shown. Call once, early, inside a tokio runtime; a
/// second call with another home fails.
pub async fn use_database(home: &Path, url: &str, redacted: &str) -> Result<(), DbError> {
    if let Some(db) = DB.get() {
        return if db.home == home {
            Ok(())
        } else {
            Err(DbError::AlreadySet)
        };
    }
    let config = Config::from_str(url).map_err(|e| DbError::Config(format!("{redacted}: {e}")))?;
    let connect_error = |e: tokio_postgres::Error| DbError::Connect {
        url: redacted.to_owned(),
        message: keel_pg::describe(&e),
    };
    let mut client = connect(&config).await.map_err(connect_error)?;
    if let Some(found) = migrate(&mut client).await.map_err(connect_error)? {
        return Err(DbError::TooNew {
            url: redacted.to_owned(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    let db = Db {
        home: home.to_path_buf(),
        root: crate::SessionStore::for_home(home).root().to_path_buf(),
        redacted: redacted.to_owned(),
        pool: Pool::new(config, redacted.to_owned(), client),
    };
    if DB.set(db).is_err() {
        return Err(DbError::AlreadySet);
    }
    Ok(())
}

/// The connections of the sessions database, once [`use_database`] ran.
pub(crate) fn pool() -> Option<&'static Pool> {
    DB.get().map(|db| &db.pool)
}

/// Brings a test database's schema up to date.
#[cfg(test)]
pub(crate) async fn migrate_for_tests(client: &mut Client) {
    assert_eq!(migrate(client).await.ok(), Some(None));
}

/// Whether sessions live in a database in this process; its URL, redacted.
pub fn database_in_use() -> Option<&'static str> {
    DB.get().map(|db| db.redacted.as_str())
}

/// Brings the schema up to date; `Some(version)` when the database is newer.
async fn migrate(client: &mut Client) -> Result<Option<i64>, tokio_postgres::Error> {
    loop {
        let tx = client.transaction().await?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await?;
        tx.batch_execute(
            "CREATE TABLE IF NOT EXISTS keel_sessions_schema (version BIGINT NOT NULL)",
        )
        .await?;
        let version: i64 = tx
            .query_opt("SELECT version FROM keel_sessions_schema LIMIT 1", &[])
            .await?
            .map(|row| row.try_get(0))
            .transpose()?
            .unwrap_or(0);
        let step = usize::try_from(version).ok();
        let Some(sql) = step.and_then(|s| MIGRATIONS.get(s)) else {
            tx.commit().await?;
            return Ok((version > SCHEMA_VERSION).then_some(version));
        };
        tx.batch_execute(sql).await?;
        tx.execute("DELETE FROM keel_sessions_schema", &[]).await?;
        tx.execute(
            "INSERT INTO keel_sessions_schema (version) VALUES ($1)",
            &[&(version + 1)],
        )
        .await?;
        tx.commit().await?;
    }
}

/// One file as a listing shows it ([`Db::summaries`]).
pub(crate) struct Summarized {
    pub path: PathBuf,
    pub modified: SystemTime,
    pub header: String,
    pub facts: Facts,
}

/// [`Facts`] as the columns `messages`, `first_message`, `named`, `name`.
fn columns_of(facts: &Facts) -> (i64, Option<String>, bool, Option<String>) {
    (
        i64::try_from(facts.messages).unwrap_or(i64::MAX),
        facts.first_message.clone(),
        facts.name.is_some(),
        facts.name.clone().flatten(),
    )
}

/// Summarizes the file `key` from its lines and stores the facts, unless
/// it has grown past `lines` lines meanwhile.
async fn summarize_rows(
    c: &mut Client,
    key: &str,
    lines: i64,
) -> Result<Facts, tokio_postgres::Error> {
    let rows = c
        .query(
            "SELECT line FROM keel_session_lines WHERE path = $1 AND seq < $2 ORDER BY seq",
            &[&key, &lines],
        )
        .await?;
    let mut facts = Facts::default();
    for row in &rows {
        facts.add(row.try_get::<_, &str>(0)?.as_bytes());
    }
    let (messages, first, named, name) = columns_of(&facts);
    c.execute(
        "UPDATE keel_session_files SET summarized = true, messages = $3, first_message = $4, \
         named = $5, name = $6 WHERE path = $1 AND lines = $2",
        &[&key, &lines, &messages, &first, &named, &name],
    )
    .await?;
    Ok(facts)
}

/// `path` below `base`, with `/` between its parts: the key of a row.
fn key_below(path: &Path, base: &Path) -> Option<String> {
    let rel = path.strip_prefix(base).ok()?;
    Some(
        rel.components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/"),
    )
}

/// The database and the key of `path`, when `path` is under its root.
pub(crate) fn under(path: &Path) -> Option<(&'static Db, String)> {
    let db = DB.get()?;
    Some((db, key_below(path, &db.root)?))
}

/// The database and the key of `path`, when `path` is under its home
/// but not among the session files.
pub(crate) fn under_home(path: &Path) -> Option<(&'static Db, String)> {
    let db = DB.get()?;
    if path.starts_with(&db.root) {
        return None;
    }
    let key = key_below(path, &db.home)?;
    (!key.is_empty()).then_some((db, key))
}

/// Milliseconds since the Unix epoch (0 before it), as the tables keep times.
pub(crate) fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

fn time_of(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

fn not_found(key: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("no session file {key} in the sessions database"),
    )
}

/// Splits appended bytes into lines (each written with its `\n`).
fn lines_of(bytes: &[u8]) -> io::Result<Vec<String>> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.is_empty() {
        return Ok(Vec::new());
    }
    Ok(text.split('\n').map(str::to_owned).collect())
}

/// A session file in the database, opened for appending: the writer's
/// view of how many lines it holds.
#[derive(Debug)]
pub(crate) struct DbFile {
    db: &'static Db,
    key: String,
    lines: i64,
}

/// The runtime whose blocking pool this thread belongs to.
fn runtime() -> io::Result<Handle> {
    Handle::try_current()
        .map_err(|_| io::Error::other("the sessions database needs an async runtime"))
}

impl Db {
    /// Runs `work` on a connection of the pool (see [`Pool::with`]),
    /// blocking this thread of the current runtime's blocking pool.
    fn run<T>(
        &self,
        work: impl AsyncFnOnce(&mut keel_pg::Conn) -> Result<T, tokio_postgres::Error>,
    ) -> io::Result<T> {
        runtime()?.block_on(self.pool.with(work))
    }

    /// Like [`run`](Self::run), for work that is safe to run again on a new
    /// connection when its own was lost (see [`Pool::again`]).
    fn run_again<T>(
        &self,
        work: impl AsyncFnMut(&mut keel_pg::Conn) -> Result<T, tokio_postgres::Error>,
    ) -> io::Result<T> {
        runtime()?.block_on(self.pool.again(work))
    }

    /// The whole file as JSONL bytes.
    pub(crate) fn read(&self, key: &str) -> io::Result<Vec<u8>> {
        let key = key.to_owned();
        let found = self.run_again(async |c| {
            let Some(file) = c
                .query_opt(
                    "SELECT header FROM keel_session_files WHERE path = $1",
                    &[&key],
                )
                .await?
            else {
                return Ok(None);
            };
            let header: String = file.try_get(0)?;
            let rows = c
                .query(
                    "SELECT line FROM keel_session_lines WHERE path = $1 ORDER BY seq",
                    &[&key],
                )
                .await?;
            let mut out = Vec::with_capacity(header.len() + 1 + rows.len() * 256);
            out.extend_from_slice(header.as_bytes());
            out.push(b'\n');
            for row in rows {
                let line: &str = row.try_get(0)?;
                out.extend_from_slice(line.as_bytes());
                out.push(b'\n');
            }
            Ok(Some(out))
        })?;
        found.ok_or_else(|| not_found(&key))
    }

    /// Creates the file with `bytes` (a header line, maybe entries); fails
    /// with `AlreadyExists` when it exists.
    pub(crate) fn create(&'static self, key: &str, bytes: &[u8]) -> io::Result<DbFile> {
        let mut lines = lines_of(bytes)?.into_iter();
        let header = lines.next().unwrap_or_default();
        let entries: Vec<String> = lines.collect();
        let session_id = serde_json::from_str::<serde_json::Value>(&header)
            .ok()
            .and_then(|h| h.get("id").and_then(|v| v.as_str()).map(str::to_owned))
            .unwrap_or_default();
        let workspace = key.rsplit_once('/').map_or("", |(dir, _)| dir).to_owned();
        let count = i64::try_from(entries.len()).unwrap_or(i64::MAX);
        let len = i64::try_from(bytes.len()).unwrap_or(i64::MAX);
        let now = millis(SystemTime::now());
        let owned = key.to_owned();
        let facts = Facts::of(entries.iter().map(String::as_bytes));
        let (messages, first, named, name) = columns_of(&facts);
        let created = self.run(async |c| {
            let tx = c.transaction().await?;
            let inserted = tx
                .execute(
                    "INSERT INTO keel_session_files \
                     (path, workspace, session_id, header, lines, bytes, modified_ms, \
                      summarized, messages, first_message, named, name) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, true, $8, $9, $10, $11) \
                     ON CONFLICT (path) DO NOTHING",
                    &[
                        &owned,
                        &workspace,
                        &session_id,
                        &header,
                        &count,
                        &len,
                        &now,
                        &messages,
                        &first,
                        &named,
                        &name,
                    ],
                )
                .await?;
            if inserted == 0 {
                return Ok(false);
            }
            insert_lines(&tx, &owned, 0, &entries).await?;
            tx.commit().await?;
            Ok(true)
        })?;
        if !created {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("session file {key} exists in the sessions database"),
            ));
        }
        Ok(DbFile {
            db: self,
            key: key.to_owned(),
            lines: count,
        })
    }

    /// Opens the file for appending if it is still `expected_len` bytes long
    /// (`None`: it changed), dropping the lines past `keep_len` first.
    pub(crate) fn open_append(
        &'static self,
        key: &str,
        expected_len: u64,
        keep_len: u64,
    ) -> io::Result<Option<DbFile>> {
        let key = key.to_owned();
        let expected = i64::try_from(expected_len).unwrap_or(i64::MAX);
        let lines = self.run(async |c| {
            let tx = c.transaction().await?;
            let Some(row) = tx
                .query_opt(
                    "SELECT header, lines, bytes FROM keel_session_files WHERE path = $1 FOR UPDATE",
                    &[&key],
                )
                .await?
            else {
                return Ok(None);
            };
            let header: String = row.try_get(0)?;
            let (lines, bytes): (i64, i64) = (row.try_get(1)?, row.try_get(2)?);
            if bytes != expected {
                return Ok(None);
            }
            if keep_len >= expected_len {
                return Ok(Some(lines));
            }
            // Keep the lines that end within `keep_len`.
            let rows = tx
                .query(
                    "SELECT seq, octet_length(line) FROM keel_session_lines WHERE path = $1 ORDER BY seq",
                    &[&key],
                )
                .await?;
            let mut end = i64::try_from(header.len()).unwrap_or(i64::MAX) + 1;
            let mut kept = 0i64;
            for row in rows {
                let len: i32 = row.try_get(1)?;
                if u64::try_from(end + i64::from(len) + 1).unwrap_or(u64::MAX) > keep_len {
                    break;
                }
                end += i64::from(len) + 1;
                kept += 1;
            }
            tx.execute(
                "DELETE FROM keel_session_lines WHERE path = $1 AND seq >= $2",
                &[&key, &kept],
            )
            .await?;
            tx.execute(
                "UPDATE keel_session_files SET lines = $2, bytes = $3, summarized = false \
                 WHERE path = $1",
                &[&key, &kept, &end],
            )
            .await?;
            tx.commit().await?;
            Ok(Some(kept))
        })?;
        Ok(lines.map(|lines| DbFile {
            db: self,
            key: key.clone(),
            lines,
        }))
    }

    /// Removes the file and its lines; false when there was none.
    pub(crate) fn remove(&self, key: &str) -> io::Result<bool> {
        let key = key.to_owned();
        self.run(async |c| {
            Ok(
                c.execute("DELETE FROM keel_session_files WHERE path = $1", &[&key])
                    .await?
                    > 0,
            )
        })
    }

    /// Whether the file exists.
    pub(crate) fn exists(&self, key: &str) -> bool {
        let key = key.to_owned();
        self.run_again(async |c| {
            Ok(
                c.query_opt("SELECT 1 FROM keel_session_files WHERE path = $1", &[&key])
                    .await?
                    .is_some(),
            )
        })
        .unwrap_or(false)
    }

    /// The files of one workspace folder (`dir` is its key) with their
    /// modification times.
    pub(crate) fn list(&self, dir: &str) -> io::Result<Vec<(String, SystemTime)>> {
        let dir = dir.to_owned();
        self.run_again(async |c| {
            let rows = c
                .query(
                    "SELECT path, modified_ms FROM keel_session_files WHERE workspace = $1",
                    &[&dir],
                )
                .await?;
            rows.iter()
                .map(|r| Ok((r.try_get(0)?, time_of(r.try_get(1)?))))
                .collect()
        })
    }

    /// What a listing shows of each file of one workspace folder (`dir`
    /// is its key): its path, modification time, header line and
    /// [`Facts`], without reading its lines. A row from before the facts
    /// were kept (or whose tail was cut) is summarized from its lines
    /// once, and the result stored unless it changed meanwhile.
    pub(crate) fn summaries(&self, dir: &str) -> io::Result<Vec<Summarized>> {
        let dir = dir.to_owned();
        self.run_again(async |c| {
            let rows = c
                .query(
                    "SELECT path, modified_ms, header, lines, summarized, messages, \
                     first_message, named, name FROM keel_session_files WHERE workspace = $1",
                    &[&dir],
                )
                .await?;
            let mut out = Vec::with_capacity(rows.len());
            for r in rows {
                let key: String = r.try_get(0)?;
                let facts = if r.try_get(4)? {
                    let messages: i64 = r.try_get(5)?;
                    let named: bool = r.try_get(7)?;
                    Facts {
                        messages: usize::try_from(messages).unwrap_or(0),
                        first_message: r.try_get(6)?,
                        name: named.then(|| r.try_get(8)).transpose()?,
                    }
                } else {
                    summarize_rows(c, &key, r.try_get(3)?).await?
                };
                out.push(Summarized {
                    path: self.root.join(&key),
                    modified: time_of(r.try_get(1)?),
                    header: r.try_get(2)?,
                    facts,
                });
            }
            Ok(out)
        })
    }

    /// The folders right below the folder `prefix` (its key; empty for
    /// the root) that hold sessions.
    pub(crate) fn dirs(&self, prefix: &str) -> io::Result<Vec<String>> {
        let under = if prefix.is_empty() {
            String::new()
        } else {
            format!("{prefix}/")
        };
        let pattern = format!(
            "{}%",
            under
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let all: Vec<String> = self.run_again(async |c| {
            let rows = c
                .query(
                    "SELECT DISTINCT workspace FROM keel_session_files WHERE workspace LIKE $1",
                    &[&pattern],
                )
                .await?;
            rows.iter().map(|r| r.try_get(0)).collect()
        })?;
        let mut out: Vec<String> = all
            .into_iter()
            .filter_map(|w| {
                let rest = w.strip_prefix(&under)?;
                let first = rest.split('/').next()?;
                (!first.is_empty()).then(|| format!("{under}{first}"))
            })
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// A home file's bytes, if it exists.
    pub(crate) fn doc_read(&self, key: &str) -> io::Result<Option<Vec<u8>>> {
        let key = key.to_owned();
        self.run_again(async |c| {
            c.query_opt("SELECT body FROM keel_home_files WHERE path = $1", &[&key])
                .await?
                .map(|row| row.try_get(0))
                .transpose()
        })
    }

    /// Replaces a home file (one statement: never half written).
    pub(crate) fn doc_write(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        let (key, body, now) = (key.to_owned(), bytes.to_vec(), millis(SystemTime::now()));
        self.run_again(async |c| {
            c.execute(
                "INSERT INTO keel_home_files (path, body, modified_ms) VALUES ($1, $2, $3) \
                 ON CONFLICT (path) DO UPDATE SET body = EXCLUDED.body, modified_ms = EXCLUDED.modified_ms",
                &[&key, &body, &now],
            )
            .await
            .map(|_| ())
        })
    }

    /// Appends to a home file (created when missing).
    pub(crate) fn doc_append(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        let (key, body, now) = (key.to_owned(), bytes.to_vec(), millis(SystemTime::now()));
        self.run(async |c| {
            c.execute(APPEND_HOME_FILE, &[&key, &body, &now])
                .await
                .map(|_| ())
        })
    }

    /// [`Self::doc_append`] for a caller that holds up its runtime's only
    /// thread (a sync audit on a current-thread runtime): the process's
    /// connection is driven by that runtime, so this uses a connection of
    /// its own on a thread of its own, and returns once the row is stored.
    pub(crate) fn doc_append_detached(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        let (key, body, now) = (key.to_owned(), bytes.to_vec(), millis(SystemTime::now()));
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    runtime.block_on(async {
                        let client = connect(self.pool.config()).await.map_err(io_error)?;
                        client
                            .execute(APPEND_HOME_FILE, &[&key, &body, &now])
                            .await
                            .map(|_| ())
                            .map_err(io_error)
                    })
                })
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("home file append panicked")))
        })
    }

    /// Removes a home file; false when there was none.
    pub(crate) fn doc_remove(&self, key: &str) -> io::Result<bool> {
        let key = key.to_owned();
        self.run(async |c| {
            Ok(
                c.execute("DELETE FROM keel_home_files WHERE path = $1", &[&key])
                    .await?
                    > 0,
            )
        })
    }

    /// The root this database stands for.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }
}

async fn insert_lines(
    tx: &tokio_postgres::Transaction<'_>,
    key: &str,
    first: i64,
    lines: &[String],
) -> Result<(), tokio_postgres::Error> {
    if lines.is_empty() {
        return Ok(());
    }
    let seqs: Vec<i64> = (first..).take(lines.len()).collect();
    tx.execute(
        "INSERT INTO keel_session_lines (path, seq, line) \
         SELECT $1, s, l FROM unnest($2::bigint[], $3::text[]) AS t(s, l)",
        &[&key, &seqs, &lines],
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{SCHEMA_VERSION, connect, lines_of, migrate};

    #[tokio::test]
    async fn a_database_written_by_a_newer_keel_is_refused_and_left_alone() {
        let Some(server) = keel_test_support::PostgresServer::start().await else {
            return;
        };
        let url = server.database().await;
        let config: tokio_postgres::Config = url.parse().unwrap();
        let mut client = connect(&config).await.unwrap();
        assert_eq!(migrate(&mut client).await.unwrap(), None);
        // Migrating again changes nothing.
        assert_eq!(migrate(&mut client).await.unwrap(), None);
        client
            .batch_execute("UPDATE keel_sessions_schema SET version = 99")
            .await
            .unwrap();
        assert_eq!(migrate(&mut client).await.unwrap(), Some(99));
        let version: i64 = client
            .query_one("SELECT version FROM keel_sessions_schema", &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(version, 99);
        const { assert!(SCHEMA_VERSION < 99) };
    }

    #[test]
    fn appended_bytes_split_into_lines() {
        assert_eq!(lines_of(b"").unwrap(), Vec::<String>::new());
        assert_eq!(lines_of(b"a\n").unwrap(), vec!["a"]);
        assert_eq!(lines_of(b"a\nb\n").unwrap(), vec!["a", "b"]);
        assert_eq!(lines_of(b"a\nb").unwrap(), vec!["a", "b"]);
        assert!(lines_of(b"\xff\n").is_err());
    }
}
