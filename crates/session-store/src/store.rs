//! The session directory: where files live, creating them, listing a
//! workspace's sessions and resolving a user's "id or path".
//!
//! This module owns [`SessionStore`] and [`SessionSummary`]. Layout:
//! `<root>/--<workspace slug>--/<YYYY-MM-DDTHH-MM-SS-mmmZ>_<session id>.jsonl`,
//! where `root` is `KEEL_HOME/sessions`. It must not know how entries are
//! turned into a conversation (`load`), how the writer batches (`writer`), or
//! any wire protocol.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use chrono::Utc;

use crate::error::{Error, Result};
use crate::files::{self, Sink};
use crate::format::{Entry, FORMAT_VERSION, SessionHeader, parse_header_line, rfc3339_ms, to_line};
use crate::ids::IdSet;
use crate::load::{read_header, trim_line_end};
pub use crate::summary::FIRST_MESSAGE_MAX_CHARS;
use crate::summary::Facts;
use crate::writer::{self, SessionWriter};

/// File name extension of session files.
const EXTENSION: &str = "jsonl";

/// Slugs longer than this (in bytes) are shortened and suffixed with a hash,
/// keeping directory names well under the usual 255-byte limit.
const MAX_SLUG_BYTES: usize = 160;

/// The sessions directory (`KEEL_HOME/sessions`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionStore {
    root: PathBuf,
}

/// What a session list shows about one file, read without loading it whole.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    pub id: String,
    pub path: PathBuf,
    pub cwd: String,
    /// The header's timestamp (RFC 3339).
    pub created: String,
    /// Last modification time of the file.
    pub modified: SystemTime,
    /// Message entries in the file, all branches counted.
    pub message_count: usize,
    /// Text of the first user message (whitespace collapsed, truncated to
    /// [`FIRST_MESSAGE_MAX_CHARS`]).
    pub first_message: Option<String>,
    /// The name of the last `session_info` entry in the file.
    pub name: Option<String>,
}

impl SessionStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The sessions directory of keel's home (`<home>/sessions`).
    pub fn for_home(home: &Path) -> Self {
        Self::new(home.join("sessions"))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/--<slug>--`, where the slug is `cwd` without its leading
    /// separator and with `/`, `\` and `:` replaced by `-` (pi's scheme), e.g.
    /// `/home/me/proj` → `--home-me-proj--`. Control characters become `_`;
    /// very long paths are shortened and suffixed with a hash.
    pub fn workspace_dir(&self, cwd: &Path) -> PathBuf {
        self.root.join(workspace_slug(cwd))
    }

    /// The header of a new session (a new UUID v7 id), its workspace
    /// directory and its file path
    /// `<workspace_dir>/<YYYY-MM-DDTHH-MM-SS-mmmZ>_<id>.jsonl`.
    fn new_file(
        &self,
        cwd: &Path,
        parent_session: Option<String>,
    ) -> (SessionHeader, PathBuf, PathBuf) {
        self.new_file_as(cwd, parent_session, uuid::Uuid::now_v7())
    }

    fn new_file_as(
        &self,
        cwd: &Path,
        parent_session: Option<String>,
        id: uuid::Uuid,
    ) -> (SessionHeader, PathBuf, PathBuf) {
        let now = Utc::now();
        let header = SessionHeader {
            version: FORMAT_VERSION,
            id: id.hyphenated().to_string(),
            timestamp: rfc3339_ms(now),
            cwd: cwd.to_string_lossy().into_owned(),
            parent_session,
        };
        let dir = self.workspace_dir(cwd);
        let name = format!(
            "{}_{}.{EXTENSION}",
            now.format("%Y-%m-%dT%H-%M-%S-%3fZ"),
            header.id
        );
        let path = dir.join(name);
        (header, dir, path)
    }

    /// Creates a new session file (see `new_file` for its name). The header
    /// is written before this returns; the writer task syncs it and the
    /// directory as its first job.
    pub async fn create(
        &self,
        cwd: &Path,
        parent_session: Option<String>,
    ) -> Result<SessionWriter> {
        let (header, dir, path) = self.new_file(cwd, parent_session);
        Self::create_file_for(header, dir, path).await
    }

    /// Creates a new session like [`create`](Self::create) with the id a
    /// host chose (Claude Code's `--session-id`): a UUID no session of the
    /// store has.
    pub async fn create_as(&self, cwd: &Path, id: &str) -> Result<SessionWriter> {
        let bad = |why| Error::BadId {
            id: id.to_owned(),
            why,
        };
        let uuid = uuid::Uuid::parse_str(id).map_err(|_| bad("not a UUID"))?;
        match self.resolve(cwd, &uuid.hyphenated().to_string()).await {
            Err(Error::NotFound { .. }) => {}
            Ok(_) | Err(Error::Ambiguous { .. }) => return Err(bad("a session has it already")),
            Err(e) => return Err(e),
        }
        let (header, dir, path) = self.new_file_as(cwd, None, uuid);
        Self::create_file_for(header, dir, path).await
    }

    async fn create_file_for(
        header: SessionHeader,
        dir: PathBuf,
        path: PathBuf,
    ) -> Result<SessionWriter> {
        let line = to_line(&header)?;
        // The header is written now; the writer task syncs it and the
        // directory right away, so a host is not kept waiting on the disk
        // for an empty session (a crash of the process loses nothing).
        let file = {
            let (dir, path) = (dir.clone(), path.clone());
            crate::blocking(&dir.clone(), move || create_file(&dir, &path, &line, false)).await?
        };
        Ok(writer::spawn_syncing(
            file,
            path,
            header.id,
            None,
            IdSet::default(),
            Some(dir),
        ))
    }

    /// Creates a session like [`create`](Self::create) whose file starts
    /// with copies of `entries` (ids, parents and timestamps kept, for
    /// example the branch of another session being forked); the leaf is the
    /// last of them. Everything is written and synced before this returns.
    pub async fn create_with(
        &self,
        cwd: &Path,
        parent_session: Option<String>,
        entries: Vec<Entry>,
    ) -> Result<SessionWriter> {
        let (header, dir, path) = self.new_file(cwd, parent_session);
        let mut lines = to_line(&header)?;
        let mut ids = IdSet::default();
        for entry in &entries {
            lines.extend(to_line(entry)?);
            ids.insert(&entry.id);
        }
        let leaf = entries.last().map(|e| e.id.clone());
        let file = {
            let path = path.clone();
            crate::blocking(&dir.clone(), move || create_file(&dir, &path, &lines, true)).await?
        };
        Ok(writer::spawn(file, path, header.id, leaf, ids))
    }

    /// A new session starting with copies of `entries` (a branch of
    /// another session, see [`Self::create_with`]), with the tree of them;
    /// the leaf is the last entry.
    pub async fn create_branch(
        &self,
        cwd: &Path,
        parent_session: Option<String>,
        entries: Vec<Entry>,
    ) -> Result<(SessionWriter, crate::SessionTree)> {
        let leaf = entries.last().map(|e| e.id.clone());
        let writer = self
            .create_with(cwd, parent_session, entries.clone())
            .await?;
        Ok((
            writer,
            crate::SessionTree::new(entries, Default::default(), leaf),
        ))
    }

    /// The sessions of one workspace, newest (by last modification) first.
    /// Files that cannot be read as sessions are skipped with a warning.
    pub async fn list(&self, cwd: &Path) -> Result<Vec<SessionSummary>> {
        let dir = self.workspace_dir(cwd);
        crate::blocking(&dir.clone(), move || summaries(&dir, false)).await
    }

    /// The sessions of every workspace, newest (by last modification)
    /// first. Unreadable folders and files are skipped with a warning.
    pub async fn list_all(&self) -> Result<Vec<SessionSummary>> {
        let root = self.root.clone();
        crate::blocking(&root.clone(), move || {
            let mut out = Vec::new();
            for dir in files::dirs(&root).map_err(|e| Error::io(&root, e))? {
                match summaries(&dir, false) {
                    Ok(summaries) => out.extend(summaries),
                    Err(e) => tracing::warn!(error = %e, "cannot list sessions"),
                }
            }
            out.sort_by(|a, b| {
                b.modified
                    .cmp(&a.modified)
                    .then_with(|| b.path.cmp(&a.path))
            });
            Ok(out)
        })
        .await
    }

    /// The most recently modified session of one workspace.
    pub async fn latest(&self, cwd: &Path) -> Result<Option<SessionSummary>> {
        let dir = self.workspace_dir(cwd);
        crate::blocking(&dir.clone(), move || {
            Ok(summaries(&dir, true)?.into_iter().next())
        })
        .await
    }

    /// Resolves what a user typed: an existing file path (absolute, or
    /// relative to `cwd` or to the process directory), else a session id or
    /// unique id prefix, searched in this workspace first, then in all
    /// workspaces. An exact id beats prefix matches.
    pub async fn resolve(&self, cwd: &Path, id_or_path: &str) -> Result<PathBuf> {
        let root = self.root.clone();
        let workspace = self.workspace_dir(cwd);
        let cwd = cwd.to_path_buf();
        let query = id_or_path.trim().to_owned();
        crate::blocking(&self.root, move || {
            resolve_blocking(&root, &workspace, &cwd, &query)
        })
        .await
    }
}

impl SessionStore {
    /// Deletes the session file at `path` (for good).
    pub async fn remove(&self, path: &Path) -> Result<()> {
        let owned = path.to_path_buf();
        crate::blocking(path, move || {
            files::remove(&owned).map_err(|e| Error::io(&owned, e))
        })
        .await
    }
}

/// The directory name of a workspace; see [`SessionStore::workspace_dir`].
fn workspace_slug(cwd: &Path) -> String {
    let full = cwd.to_string_lossy();
    let trimmed = full.strip_prefix(['/', '\\']).unwrap_or(&full);
    let mut slug: String = trimmed
        .chars()
        .map(|c| match c {
            '/' | '\\' | ':' => '-',
            c if c.is_control() => '_',
            c => c,
        })
        .collect();
    if slug.len() > MAX_SLUG_BYTES {
        let mut cut = MAX_SLUG_BYTES - 17;
        while !slug.is_char_boundary(cut) {
            cut -= 1;
        }
        slug.truncate(cut);
        slug.push_str(&format!("-{:016x}", fnv1a64(full.as_bytes())));
    }
    format!("--{slug}--")
}

/// FNV-1a, 64-bit: a hash that is stable across builds and platforms.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Creates `path` with `header_line`; with `sync`, it (and `dir`) is
/// durable before this returns.
fn create_file(dir: &Path, path: &Path, header_line: &[u8], sync: bool) -> Result<Sink> {
    files::create_new(dir, path, header_line, sync).map_err(|e| Error::io(path, e))
}

/// The session files of a directory with their modification times, newest
/// first (ties: later file name first). A missing directory has none.
fn session_files(dir: &Path) -> Result<Vec<(PathBuf, SystemTime)>> {
    let mut files = files::list(dir, EXTENSION).map_err(|e| Error::io(dir, e))?;
    files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| b.0.cmp(&a.0)));
    Ok(files)
}

/// The summaries of the sessions in `dir`, newest (by last modification)
/// first (ties: later file name first); only the newest readable one when
/// `first_only`. Files that cannot be read as sessions are skipped with a
/// warning. In the database the summaries are kept with the files; on
/// disk each file is read.
fn summaries(dir: &Path, first_only: bool) -> Result<Vec<SessionSummary>> {
    let Some(kept) = files::db_summaries(dir, EXTENSION) else {
        let mut out = Vec::new();
        for (path, modified) in session_files(dir)? {
            if let Some(summary) = summarize_or_warn(&path, modified) {
                out.push(summary);
                if first_only {
                    break;
                }
            }
        }
        return Ok(out);
    };
    let mut out: Vec<SessionSummary> = kept
        .map_err(|e| Error::io(dir, e))?
        .into_iter()
        .filter_map(|kept| match parse_header_line(kept.header.as_bytes()) {
            Ok(header) => Some(SessionSummary {
                id: header.id,
                path: kept.path,
                cwd: header.cwd,
                created: header.timestamp,
                modified: kept.modified,
                message_count: kept.facts.messages,
                first_message: kept.facts.first_message,
                name: kept.facts.name.flatten(),
            }),
            Err(message) => {
                tracing::warn!(path = %kept.path.display(), error = %message, "skipping unreadable session file");
                None
            }
        })
        .collect();
    out.sort_by(|a, b| {
        b.modified
            .cmp(&a.modified)
            .then_with(|| b.path.cmp(&a.path))
    });
    if first_only {
        out.truncate(1);
    }
    Ok(out)
}

fn summarize_or_warn(path: &Path, modified: SystemTime) -> Option<SessionSummary> {
    match summarize(path, modified) {
        Ok(summary) => Some(summary),
        Err(err) => {
            tracing::warn!(path = %path.display(), error = %err, "skipping unreadable session file");
            None
        }
    }
}

/// Reads a summary by streaming the file; malformed lines are ignored.
fn summarize(path: &Path, modified: SystemTime) -> Result<SessionSummary> {
    let mut reader = files::reader(path).map_err(|e| Error::io(path, e))?;
    let mut buf = Vec::new();
    let (header, _) = read_header(path, &mut reader, &mut buf)?;
    let mut summary = SessionSummary {
        id: header.id,
        path: path.to_path_buf(),
        cwd: header.cwd,
        created: header.timestamp,
        modified,
        message_count: 0,
        first_message: None,
        name: None,
    };
    let mut facts = Facts::default();
    loop {
        buf.clear();
        if reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(path, e))?
            == 0
        {
            break;
        }
        facts.add(trim_line_end(&buf));
    }
    summary.message_count = facts.messages;
    summary.first_message = facts.first_message;
    summary.name = facts.name.flatten();
    Ok(summary)
}

fn resolve_blocking(root: &Path, workspace: &Path, cwd: &Path, query: &str) -> Result<PathBuf> {
    let not_found = || Error::NotFound {
        query: query.to_owned(),
    };
    if query.is_empty() {
        return Err(not_found());
    }
    let as_path = Path::new(query);
    let mut candidates = vec![cwd.join(as_path)];
    if as_path.is_relative() {
        candidates.push(as_path.to_path_buf());
    }
    for candidate in candidates {
        if files::is_file(&candidate) {
            return Ok(std::path::absolute(&candidate).unwrap_or(candidate));
        }
    }
    let looks_like_path = query.contains(['/', '\\']) || query.ends_with(&format!(".{EXTENSION}"));
    if looks_like_path {
        return Err(not_found());
    }
    let query_id = query.to_ascii_lowercase();
    if let Some(path) = find_by_id(
        std::slice::from_ref(&workspace.to_path_buf()),
        &query_id,
        query,
    )? {
        return Ok(path);
    }
    let mut others: Vec<PathBuf> = files::dirs(root)
        .map_err(|e| Error::io(root, e))?
        .into_iter()
        .filter(|dir| dir != workspace)
        .collect();
    others.sort();
    find_by_id(&others, &query_id, query)?.ok_or_else(not_found)
}

/// The session id in a file name `<timestamp>_<id>.jsonl`.
fn id_from_file_name(path: &Path) -> Option<&str> {
    if path.extension()? != EXTENSION {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    Some(stem.split_once('_').map_or(stem, |(_, id)| id))
}

/// Looks `query_id` up among the session files of `dirs`: the one exact id
/// match, else the one prefix match; several → [`Error::Ambiguous`].
fn find_by_id(dirs: &[PathBuf], query_id: &str, query: &str) -> Result<Option<PathBuf>> {
    let mut exact = Vec::new();
    let mut prefixed = Vec::new();
    for dir in dirs {
        for (path, _) in session_files(dir)? {
            let Some(id) = id_from_file_name(&path).map(str::to_ascii_lowercase) else {
                continue;
            };
            if id == query_id {
                exact.push((id, path));
            } else if id.starts_with(query_id) {
                prefixed.push((id, path));
            }
        }
    }
    let matches = if exact.is_empty() { prefixed } else { exact };
    match matches.len() {
        0 => Ok(None),
        1 => Ok(matches.into_iter().next().map(|(_, path)| path)),
        _ => {
            let mut candidates: Vec<String> = matches
                .into_iter()
                .map(|(id, path)| format!("{id} ({})", path.display()))
                .collect();
            candidates.sort();
            Err(Error::Ambiguous {
                query: query.to_owned(),
                candidates,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::EntryBody;
    use crate::testutil::{assistant, msg, temp_store, user, within};
    use std::fs::{self, File};
    use std::time::Duration;

    /// A minimal session file named like `create` names them.
    fn fake_session(dir: &Path, id: &str) -> PathBuf {
        fs::create_dir_all(dir).unwrap();
        let path = dir.join(format!("2025-01-01T00-00-00-000Z_{id}.jsonl"));
        let header = format!(
            r#"{{"type":"session","version":1,"id":"{id}","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}}"#
        );
        fs::write(&path, header + "\n").unwrap();
        path
    }

    fn set_mtime(path: &Path, secs: u64) {
        let file = File::options().append(true).open(path).unwrap();
        file.set_modified(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))
            .unwrap();
    }

    #[test]
    fn workspace_slug_follows_pi() {
        let store = SessionStore::new("/keel/sessions");
        assert_eq!(
            store.workspace_dir(Path::new("/home/me/proj")),
            Path::new("/keel/sessions/--home-me-proj--")
        );
        assert_eq!(
            workspace_slug(Path::new("C:\\Users\\me")),
            "--C--Users-me--"
        );
        assert_eq!(workspace_slug(Path::new("/a/b\nc")), "--a-b_c--");
        assert_eq!(workspace_slug(Path::new("/")), "----");

        let long_a = format!("/{}/a", "x".repeat(300));
        let long_b = format!("/{}/b", "x".repeat(300));
        let (a, b) = (
            workspace_slug(Path::new(&long_a)),
            workspace_slug(Path::new(&long_b)),
        );
        assert!(a.len() <= MAX_SLUG_BYTES + 4, "{}", a.len());
        assert_ne!(a, b);
        assert_eq!(a, workspace_slug(Path::new(&long_a)));
        let wide = format!("/{}", "é".repeat(200));
        assert!(workspace_slug(Path::new(&wide)).len() <= MAX_SLUG_BYTES + 4);
    }

    #[tokio::test]
    async fn a_chosen_id_is_a_uuid_no_session_has() {
        let (_dir, store, cwd) = temp_store();
        let id = "5D4F1C2A-0000-4000-8000-00000000ABCD";
        let writer = within(store.create_as(&cwd, id)).await.unwrap();
        assert_eq!(writer.id(), id.to_ascii_lowercase());
        writer.close().await.unwrap();
        let found = within(store.resolve(&cwd, &id.to_ascii_lowercase())).await;
        assert_eq!(found.unwrap(), writer.path());
        let again = within(store.create_as(&cwd, id)).await.unwrap_err();
        assert!(again.to_string().contains("has it already"), "{again}");
        let bad = within(store.create_as(&cwd, "not-a-uuid"))
            .await
            .unwrap_err();
        assert!(bad.to_string().contains("not a UUID"), "{bad}");
    }

    #[tokio::test]
    async fn create_writes_a_synced_header_in_the_workspace_dir() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, Some("/old/session.jsonl".into())))
            .await
            .unwrap();
        let path = writer.path();
        assert_eq!(path.parent().unwrap(), store.workspace_dir(&cwd));
        let name = path.file_name().unwrap().to_str().unwrap();
        // <YYYY-MM-DDTHH-MM-SS-mmmZ>_<uuid>.jsonl
        let (stamp, rest) = name.split_once('_').unwrap();
        assert_eq!(stamp.len(), "2025-01-01T00-00-00-000Z".len());
        assert!(stamp.ends_with('Z') && !stamp.contains(':'), "{stamp}");
        assert_eq!(rest, format!("{}.jsonl", writer.id()));
        let id = uuid::Uuid::parse_str(writer.id()).unwrap();
        assert_eq!(id.get_version_num(), 7);

        let text = fs::read_to_string(path).unwrap();
        let line = text.strip_suffix('\n').unwrap();
        let header: serde_json::Value = serde_json::from_str(line).unwrap();
        let timestamp = header["timestamp"].as_str().unwrap();
        assert_eq!(
            line,
            format!(
                r#"{{"type":"session","version":1,"id":"{}","timestamp":"{timestamp}","cwd":"{}","parentSession":"/old/session.jsonl"}}"#,
                writer.id(),
                cwd.display()
            )
        );
        // RFC 3339 UTC with milliseconds, and the file name carries the same instant.
        assert_eq!(timestamp.len(), "2025-01-01T00:00:00.000Z".len());
        assert!(timestamp.ends_with('Z'));
        assert_eq!(timestamp.replace([':', '.'], "-"), stamp);
        within(writer.close()).await.unwrap();
    }

    #[tokio::test]
    async fn list_all_reads_every_workspace_newest_first() {
        let (_dir, store, cwd) = temp_store();
        assert!(within(store.list_all()).await.unwrap().is_empty());
        let other = cwd.join("other");
        let a = within(store.create(&cwd, None)).await.unwrap();
        within(a.close()).await.unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = within(store.create(&other, None)).await.unwrap();
        within(b.close()).await.unwrap();
        std::fs::write(store.root().join("stray.txt"), "not a folder").unwrap();
        let all = within(store.list_all()).await.unwrap();
        let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [b.id(), a.id()]);
        assert_eq!(all[0].cwd, other.display().to_string());
    }

    #[tokio::test]
    async fn list_and_latest_order_by_modification_and_summarise() {
        let (_dir, store, cwd) = temp_store();
        assert!(within(store.list(&cwd)).await.unwrap().is_empty());
        assert_eq!(within(store.latest(&cwd)).await.unwrap(), None);

        let mut writers = Vec::new();
        for i in 0..3 {
            let writer = within(store.create(&cwd, None)).await.unwrap();
            within(writer.append(msg(user(&format!("question {i}\n  with   spaces")))))
                .await
                .unwrap();
            within(writer.append(msg(assistant("answer"))))
                .await
                .unwrap();
            within(writer.close()).await.unwrap();
            writers.push(writer);
        }
        let named = &writers[1];
        let writer = within(crate::load(named.path()).await.unwrap().into_writer())
            .await
            .unwrap();
        within(writer.append(EntryBody::SessionInfo {
            name: Some("old".into()),
        }))
        .await
        .unwrap();
        within(writer.append(EntryBody::SessionInfo {
            name: Some("named".into()),
        }))
        .await
        .unwrap();
        within(writer.append(msg(user(&"long ".repeat(100)))))
            .await
            .unwrap();
        within(writer.close()).await.unwrap();
        // Modification order: 1 (newest), 0, 2.
        set_mtime(writers[0].path(), 2_000);
        set_mtime(writers[1].path(), 3_000);
        set_mtime(writers[2].path(), 1_000);
        // Not sessions: skipped (with a warning) or ignored.
        let ws = store.workspace_dir(&cwd);
        fs::write(ws.join("junk.jsonl"), "not json\n").unwrap();
        fs::write(ws.join("notes.txt"), "hello").unwrap();

        let list = within(store.list(&cwd)).await.unwrap();
        let ids: Vec<&str> = list.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, [writers[1].id(), writers[0].id(), writers[2].id()]);
        let top = &list[0];
        assert_eq!(top.path, writers[1].path());
        assert_eq!(top.cwd, cwd.to_string_lossy());
        assert_eq!(top.message_count, 3);
        assert_eq!(top.name.as_deref(), Some("named"));
        assert_eq!(top.first_message.as_deref(), Some("question 1 with spaces"));
        assert_eq!(
            top.modified,
            SystemTime::UNIX_EPOCH + Duration::from_secs(3_000)
        );
        assert_eq!(list[1].name, None);
        assert!(top.created.ends_with('Z'));

        let latest = within(store.latest(&cwd)).await.unwrap().unwrap();
        assert_eq!(latest, list[0]);
        let other = cwd.join("elsewhere");
        assert!(within(store.list(&other)).await.unwrap().is_empty());
    }

    #[test]
    fn first_message_is_collapsed_and_truncated() {
        let entry = crate::Entry {
            id: "aaaaaaaa".into(),
            parent_id: None,
            timestamp: "t".into(),
            body: msg(user(&"é ".repeat(150))),
        };
        let line = serde_json::to_vec(&entry).unwrap();
        let first = |line: &[u8]| Facts::of([line]).first_message;
        let text = first(&line).unwrap();
        assert_eq!(text.chars().count(), FIRST_MESSAGE_MAX_CHARS + 1);
        assert!(text.ends_with('…'));
        let empty = crate::Entry {
            body: msg(user("  \n ")),
            ..entry
        };
        assert_eq!(first(&serde_json::to_vec(&empty).unwrap()), None);
    }

    #[tokio::test]
    async fn resolve_by_path_id_and_prefix() {
        let (dir, store, cwd) = temp_store();
        let ws = store.workspace_dir(&cwd);
        let other_ws = store.workspace_dir(Path::new("/other/project"));
        let one = fake_session(&ws, "0198aaaa-1111");
        let two = fake_session(&ws, "0198aaab-2222");
        let three = fake_session(&other_ws, "0198cccc-3333");
        // Same prefix in another workspace: this workspace wins.
        let _four = fake_session(&other_ws, "0198aaab-9999");

        // Absolute path, and a path relative to `cwd`.
        assert_eq!(
            within(store.resolve(&cwd, one.to_str().unwrap()))
                .await
                .unwrap(),
            one
        );
        fs::create_dir_all(&cwd).unwrap();
        let local = cwd.join("local.jsonl");
        fs::write(&local, "x").unwrap();
        assert_eq!(
            within(store.resolve(&cwd, "local.jsonl")).await.unwrap(),
            local
        );

        // Exact id, unique prefix (case-insensitive), other workspaces.
        assert_eq!(
            within(store.resolve(&cwd, "0198aaaa-1111")).await.unwrap(),
            one
        );
        assert_eq!(within(store.resolve(&cwd, "0198AAAA")).await.unwrap(), one);
        assert_eq!(within(store.resolve(&cwd, "0198aaab")).await.unwrap(), two);
        assert_eq!(within(store.resolve(&cwd, "0198cc")).await.unwrap(), three);

        match within(store.resolve(&cwd, "0198aaa")).await {
            Err(Error::Ambiguous { query, candidates }) => {
                assert_eq!(query, "0198aaa");
                assert_eq!(candidates.len(), 2);
                assert!(candidates[0].starts_with("0198aaaa-1111"), "{candidates:?}");
                assert!(candidates[1].starts_with("0198aaab-2222"), "{candidates:?}");
            }
            other => panic!("expected Ambiguous, got {other:?}"),
        }
        let err = within(store.resolve(&cwd, "0198aaa")).await.unwrap_err();
        assert!(err.to_string().contains("ambiguous"), "{err}");

        for query in ["ffff", "", "missing/file.jsonl", "nope.jsonl"] {
            match within(store.resolve(&cwd, query)).await {
                Err(Error::NotFound { .. }) => {}
                other => panic!("{query:?}: expected NotFound, got {other:?}"),
            }
        }
        // A store whose root does not exist yet finds nothing, cleanly.
        let empty = SessionStore::new(dir.path().join("nothing"));
        assert!(matches!(
            within(empty.resolve(&cwd, "0198")).await,
            Err(Error::NotFound { .. })
        ));
    }
}
