//! Loading one session file: parse (in `read`), crash-tail recovery, the
//! entry tree and its active branch, and reopening a loaded file for
//! appending (or handing its entries to a [`SessionTree`] without a copy).
//!
//! This module owns [`load`] and [`LoadedSession`]. It knows the line format
//! only through `format`; it must not know about directories or listing
//! (`store`), how the writer task batches (`writer`), or any wire protocol.

use std::collections::{HashMap, HashSet};
use std::fs::OpenOptions;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use keel_protocol::{Message, ThinkingLevel};

use crate::error::{Error, Result};
use crate::format::{Entry, EntryBody, SessionHeader, parse_header_line};
use crate::tree::SessionTree;
use crate::writer::{self, SessionWriter};

mod read;

use read::load_blocking;

/// A session file read into memory.
#[derive(Debug, Clone)]
pub struct LoadedSession {
    pub path: PathBuf,
    pub header: SessionHeader,
    /// Every known entry, in file order (all branches).
    pub entries: Vec<Entry>,
    /// The leaf: the id of the last entry line of the file.
    pub leaf_id: Option<String>,
    /// The last line was cut mid-write (or otherwise malformed) and was ignored.
    pub recovered_tail: bool,
    /// Entry id → its position in `entries` (with duplicate ids: the later
    /// entry).
    index: HashMap<String, usize>,
    /// Entries of unknown types: id → parentId, so the tree stays linked
    /// through them.
    skipped: HashMap<String, Option<String>>,
    /// Two entries share an id (the later one wins).
    has_duplicate_ids: bool,
    /// Length in bytes of the valid prefix of the file (through the last
    /// well-formed line).
    valid_len: u64,
    /// Length of the file when it was read.
    file_len: u64,
    /// The valid prefix does not end with `\n` (its last line is complete JSON
    /// without a terminator); one must be written before appending.
    needs_newline: bool,
}

/// Reads the session file at `path`.
///
/// Tolerates a malformed last line (a write cut by a crash: ignored, with
/// `recovered_tail` set), blank lines and CRLF line ends. Entries of unknown
/// types are skipped with a warning. A malformed line that is not the last is
/// [`Error::Corrupt`]; a missing or invalid header is [`Error::InvalidHeader`].
pub async fn load(path: &Path) -> Result<LoadedSession> {
    let owned = path.to_path_buf();
    crate::blocking(path, move || load_blocking(owned)).await
}

/// Strips the line terminator (`\n` or `\r\n`).
pub(crate) fn trim_line_end(mut line: &[u8]) -> &[u8] {
    if let Some(rest) = line.strip_suffix(b"\n") {
        line = rest;
    }
    if let Some(rest) = line.strip_suffix(b"\r") {
        line = rest;
    }
    line
}

/// Whether a line holds nothing but whitespace.
pub(crate) fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Reads the header from the first line of `reader`; returns it and the
/// number of bytes consumed.
pub(crate) fn read_header(
    path: &Path,
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
) -> Result<(SessionHeader, u64)> {
    buf.clear();
    let n = reader
        .read_until(b'\n', buf)
        .map_err(|e| Error::io(path, e))?;
    let invalid = |message: String| Error::InvalidHeader {
        path: path.to_path_buf(),
        message,
    };
    if n == 0 {
        return Err(invalid("the file is empty".to_owned()));
    }
    let line = trim_line_end(buf);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let header = parse_header_line(line).map_err(invalid)?;
    Ok((header, n as u64))
}

impl LoadedSession {
    /// The entry with this id.
    pub fn entry(&self, id: &str) -> Option<&Entry> {
        self.index.get(id).map(|i| &self.entries[*i])
    }

    /// The active branch: the chain from a root to `leaf_id`, in order.
    ///
    /// Most files are linear (each entry follows the one before it), so the
    /// walk first tries the entry just before the current one in the file
    /// and looks the id up only when a link points elsewhere. With
    /// duplicate ids the index decides (the later entry wins).
    pub fn branch(&self) -> Vec<&Entry> {
        let limit = self.entries.len() + self.skipped.len();
        let mut chain = Vec::with_capacity(self.entries.len());
        let mut steps = 0usize;
        let mut current = self.leaf_id.as_deref();
        // Where the entry `current` names probably is.
        let mut guess = self.entries.len().checked_sub(1);
        while let Some(id) = current {
            if steps > limit {
                tracing::warn!(path = %self.path.display(), "cycle in session entry tree");
                break;
            }
            steps += 1;
            let at = match guess.and_then(|i| self.entries.get(i).map(|e| (i, e))) {
                Some((i, entry)) if !self.has_duplicate_ids && entry.id == id => Some(i),
                _ => self.index.get(id).copied(),
            };
            if let Some(i) = at {
                let entry = &self.entries[i];
                chain.push(entry);
                current = entry.parent_id.as_deref();
                guess = i.checked_sub(1);
            } else if let Some(parent) = self.skipped.get(id) {
                current = parent.as_deref();
            } else {
                break;
            }
        }
        chain.reverse();
        chain
    }

    /// The messages the model sees on the active branch, in order: all
    /// of them, or, after a compaction, its summary and what it kept (see
    /// [`crate::tree`]).
    pub fn messages(&self) -> Vec<Message> {
        crate::tree::context_of(&self.branch()).messages
    }

    /// Every message on the active branch, compacted or not, in order.
    pub fn all_messages(&self) -> Vec<Message> {
        self.branch()
            .into_iter()
            .filter_map(|e| match &e.body {
                EntryBody::Message { message } => Some(message.clone()),
                _ => None,
            })
            .collect()
    }

    /// The entries in memory, as a tree (a copy).
    pub fn tree(&self) -> SessionTree {
        SessionTree::indexed(
            self.entries.clone(),
            self.index.clone(),
            self.skipped.clone(),
            self.leaf_id.clone(),
        )
    }

    /// The latest `session_info` name on the active branch (`None` if never
    /// named or the latest one cleared it).
    pub fn name(&self) -> Option<String> {
        self.branch()
            .into_iter()
            .rev()
            .find_map(|e| match &e.body {
                EntryBody::SessionInfo { name } => Some(name.clone()),
                _ => None,
            })?
    }

    /// The latest model change on the active branch: `(provider, model_id)`.
    pub fn last_model(&self) -> Option<(String, String)> {
        self.branch().into_iter().rev().find_map(|e| match &e.body {
            EntryBody::ModelChange { provider, model_id } => {
                Some((provider.clone(), model_id.clone()))
            }
            _ => None,
        })
    }

    /// The latest thinking level change on the active branch.
    pub fn last_thinking_level(&self) -> Option<ThinkingLevel> {
        self.branch().into_iter().rev().find_map(|e| match &e.body {
            EntryBody::ThinkingLevelChange { thinking_level } => Some(*thinking_level),
            _ => None,
        })
    }

    /// Reopens the file for appending. If the tail was cut, the file is first
    /// truncated back to its last complete line (so it is valid JSONL again);
    /// then a writer starts whose leaf is `leaf_id`. Fails with
    /// [`Error::Modified`] if the file changed on disk since it was loaded.
    pub async fn into_writer(self) -> Result<SessionWriter> {
        let mut ids: HashSet<String> = self.index.into_keys().collect();
        ids.extend(self.skipped.into_keys());
        Reopen {
            path: self.path,
            session_id: self.header.id,
            leaf_id: self.leaf_id,
            recovered: self.recovered_tail,
            valid_len: self.valid_len,
            file_len: self.file_len,
            needs_newline: self.needs_newline,
        }
        .writer(ids)
        .await
    }

    /// Resuming: the entries as a tree (moved, not copied) and the file
    /// reopened for appending as [`into_writer`](Self::into_writer) does.
    /// Read what else is needed ([`name`](Self::name),
    /// [`last_model`](Self::last_model)) before.
    pub async fn into_tree_and_writer(self) -> Result<(SessionTree, SessionWriter)> {
        let mut ids: HashSet<String> =
            HashSet::with_capacity(self.index.len() + self.skipped.len());
        ids.extend(self.index.keys().cloned());
        ids.extend(self.skipped.keys().cloned());
        let reopen = Reopen {
            path: self.path,
            session_id: self.header.id,
            leaf_id: self.leaf_id.clone(),
            recovered: self.recovered_tail,
            valid_len: self.valid_len,
            file_len: self.file_len,
            needs_newline: self.needs_newline,
        };
        let writer = reopen.writer(ids).await?;
        let tree = SessionTree::indexed(self.entries, self.index, self.skipped, self.leaf_id);
        Ok((tree, writer))
    }
}

/// What reopening a loaded file for appending needs to know about it.
struct Reopen {
    path: PathBuf,
    session_id: String,
    leaf_id: Option<String>,
    recovered: bool,
    valid_len: u64,
    file_len: u64,
    needs_newline: bool,
}

impl Reopen {
    /// Opens the file for appending (repairing its tail first) and starts
    /// its writer, which knows `ids`.
    async fn writer(self, ids: HashSet<String>) -> Result<SessionWriter> {
        let Reopen {
            path,
            session_id,
            leaf_id,
            recovered,
            valid_len,
            file_len,
            needs_newline,
        } = self;
        let open_path = path.clone();
        let file = crate::blocking(&path, move || {
            let io = |e| Error::io(&open_path, e);
            let mut file = OpenOptions::new()
                .append(true)
                .open(&open_path)
                .map_err(io)?;
            let len = file.metadata().map_err(io)?.len();
            if len != file_len {
                return Err(Error::Modified { path: open_path });
            }
            if recovered {
                file.set_len(valid_len).map_err(io)?;
            }
            if needs_newline {
                file.write_all(b"\n").map_err(io)?;
            }
            if recovered || needs_newline {
                file.sync_data().map_err(io)?;
            }
            Ok(file)
        })
        .await?;
        Ok(writer::spawn(file, path, session_id, leaf_id, ids))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::FORMAT_VERSION;
    use crate::testutil::{assistant, msg, temp_store, text_of, tool_result, user, within};
    use std::fs;

    /// Writes a session file by hand: a header and the given lines.
    fn write_raw(path: &Path, lines: &[&str], terminator: &str) {
        let mut text = String::from(
            r#"{"type":"session","version":1,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
        );
        text.push_str(terminator);
        for line in lines {
            text.push_str(line);
            text.push_str(terminator);
        }
        fs::write(path, text).unwrap();
    }

    fn raw_entry(id: &str, parent: Option<&str>, text: &str) -> String {
        let entry = Entry {
            id: id.into(),
            parent_id: parent.map(str::to_owned),
            timestamp: "2025-01-01T00:00:01.000Z".into(),
            body: msg(user(text)),
        };
        serde_json::to_string(&entry).unwrap()
    }

    #[tokio::test]
    async fn every_entry_type_round_trips_through_a_file() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, Some("parent-id".into())))
            .await
            .unwrap();
        let bodies = vec![
            msg(user("hello")),
            EntryBody::ModelChange {
                provider: "openai".into(),
                model_id: "gpt-4.1".into(),
            },
            EntryBody::ThinkingLevelChange {
                thinking_level: ThinkingLevel::High,
            },
            msg(assistant("hi there")),
            msg(tool_result("file.txt")),
            EntryBody::SessionInfo {
                name: Some("first".into()),
            },
            EntryBody::SessionInfo {
                name: Some("renamed".into()),
            },
        ];
        let mut written = Vec::new();
        for body in bodies {
            written.push(within(writer.append(body)).await.unwrap());
        }
        within(writer.close()).await.unwrap();

        let loaded = within(load(writer.path())).await.unwrap();
        assert_eq!(loaded.header.id, writer.id());
        assert_eq!(loaded.header.version, FORMAT_VERSION);
        assert_eq!(loaded.header.parent_session.as_deref(), Some("parent-id"));
        assert_eq!(loaded.header.cwd, cwd.to_string_lossy());
        assert!(!loaded.recovered_tail);
        assert_eq!(loaded.entries, written);
        assert_eq!(loaded.leaf_id, written.last().map(|e| e.id.clone()));
        assert_eq!(written[0].parent_id, None);
        for pair in written.windows(2) {
            assert_eq!(pair[1].parent_id.as_deref(), Some(pair[0].id.as_str()));
        }
        let texts: Vec<String> = loaded.messages().iter().map(text_of).collect();
        assert_eq!(texts, ["hello", "hi there", "file.txt"]);
        assert_eq!(loaded.name().as_deref(), Some("renamed"));
        assert_eq!(
            loaded.last_model(),
            Some(("openai".to_owned(), "gpt-4.1".to_owned()))
        );
        assert_eq!(loaded.last_thinking_level(), Some(ThinkingLevel::High));
        assert_eq!(loaded.entry(&written[1].id), Some(&written[1]));
    }

    #[tokio::test]
    async fn a_compacted_branch_loads_as_summary_and_kept_messages_and_forks() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, None)).await.unwrap();
        within(writer.append(msg(user("old question"))))
            .await
            .unwrap();
        within(writer.append(msg(assistant("old answer"))))
            .await
            .unwrap();
        let kept = within(writer.append(msg(user("recent question"))))
            .await
            .unwrap();
        within(writer.append(EntryBody::Compaction {
            summary: "## Goal\nanswer questions".into(),
            first_kept_entry_id: kept.id.clone(),
            tokens_before: 900,
            tokens_after: Some(120),
            details: None,
        }))
        .await
        .unwrap();
        within(writer.append(msg(assistant("recent answer"))))
            .await
            .unwrap();
        within(writer.close()).await.unwrap();

        let loaded = within(load(writer.path())).await.unwrap();
        let texts: Vec<String> = loaded.messages().iter().map(text_of).collect();
        assert_eq!(texts.len(), 3);
        assert!(texts[0].contains("answer questions"), "{texts:?}");
        assert_eq!(texts[1..], ["recent question", "recent answer"]);
        assert_eq!(loaded.all_messages().len(), 4);

        // A fork copies the branch (ids kept) into a new file that records
        // its parent.
        let branch: Vec<Entry> = loaded.branch().into_iter().cloned().collect();
        let fork = within(store.create_with(
            &cwd,
            Some(loaded.path.display().to_string()),
            branch.clone(),
        ))
        .await
        .unwrap();
        let next = within(fork.append(msg(user("in the fork")))).await.unwrap();
        assert_eq!(next.parent_id, branch.last().map(|e| e.id.clone()));
        within(fork.close()).await.unwrap();
        let forked = within(load(fork.path())).await.unwrap();
        assert_ne!(forked.header.id, loaded.header.id);
        assert_eq!(
            forked.header.parent_session.as_deref(),
            Some(loaded.path.to_str().unwrap())
        );
        assert_eq!(forked.entries[..branch.len()], branch[..]);
        assert_eq!(forked.messages().len(), 4);
    }

    #[tokio::test]
    async fn a_cut_last_line_is_recovered_and_truncated_before_appending() {
        let (_dir, store, cwd) = temp_store();
        let writer = within(store.create(&cwd, None)).await.unwrap();
        let a = within(writer.append(msg(user("one")))).await.unwrap();
        let b = within(writer.append(msg(assistant("two")))).await.unwrap();
        within(writer.append(msg(user("three, cut by a crash"))))
            .await
            .unwrap();
        within(writer.close()).await.unwrap();

        let path = writer.path().to_path_buf();
        let text = fs::read_to_string(&path).unwrap();
        let last_start = text.trim_end_matches('\n').rfind('\n').unwrap() + 1;
        let cut = last_start + (text.len() - last_start) / 2;
        fs::write(&path, &text[..cut]).unwrap();

        let loaded = within(load(&path)).await.unwrap();
        assert!(loaded.recovered_tail);
        assert_eq!(loaded.entries.len(), 2);
        assert_eq!(loaded.leaf_id.as_deref(), Some(b.id.as_str()));

        let writer = within(loaded.into_writer()).await.unwrap();
        let c = within(writer.append(msg(user("three again"))))
            .await
            .unwrap();
        assert_eq!(c.parent_id.as_deref(), Some(b.id.as_str()));
        within(writer.close()).await.unwrap();

        let text = fs::read_to_string(&path).unwrap();
        assert!(text.ends_with('\n'));
        for line in text.lines() {
            serde_json::from_str::<serde_json::Value>(line).unwrap();
        }
        let reloaded = within(load(&path)).await.unwrap();
        assert!(!reloaded.recovered_tail);
        let ids: Vec<&str> = reloaded.entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, [a.id.as_str(), b.id.as_str(), c.id.as_str()]);
        let texts: Vec<String> = reloaded.messages().iter().map(text_of).collect();
        assert_eq!(texts, ["one", "two", "three again"]);
    }

    #[tokio::test]
    async fn a_zero_filled_tail_is_recovered() {
        let (dir, _store, _cwd) = temp_store();
        let path = dir.path().join("s.jsonl");
        write_raw(&path, &[&raw_entry("aaaaaaaa", None, "x")], "\n");
        let mut bytes = fs::read(&path).unwrap();
        bytes.extend_from_slice(&[0u8; 64]);
        fs::write(&path, bytes).unwrap();
        let loaded = within(load(&path)).await.unwrap();
        assert!(loaded.recovered_tail);
        assert_eq!(loaded.entries.len(), 1);
    }

    #[tokio::test]
    async fn a_complete_but_unterminated_last_line_gets_its_newline() {
        let (dir, _store, _cwd) = temp_store();
        let path = dir.path().join("s.jsonl");
        write_raw(&path, &[&raw_entry("aaaaaaaa", None, "x")], "\n");
        let text = fs::read_to_string(&path).unwrap();
        fs::write(&path, text.trim_end()).unwrap();

        let loaded = within(load(&path)).await.unwrap();
        assert!(!loaded.recovered_tail);
        assert_eq!(loaded.entries.len(), 1);
        let writer = within(loaded.into_writer()).await.unwrap();
        assert_eq!(writer.id(), "s1");
        within(writer.append(msg(user("y")))).await.unwrap();
        within(writer.close()).await.unwrap();
        let reloaded = within(load(&path)).await.unwrap();
        assert_eq!(reloaded.entries.len(), 2);
        assert_eq!(reloaded.entries[1].parent_id.as_deref(), Some("aaaaaaaa"));
    }

    #[tokio::test]
    async fn a_corrupt_middle_line_is_an_error_with_its_line_number() {
        let (dir, _store, _cwd) = temp_store();
        let path = dir.path().join("s.jsonl");
        let a = raw_entry("aaaaaaaa", None, "x");
        let b = raw_entry("bbbbbbbb", Some("aaaaaaaa"), "y");
        write_raw(&path, &[&a, r#"{"type":"message","id":"#, &b], "\n");
        match within(load(&path)).await {
            Err(Error::Corrupt { line, path: p, .. }) => {
                assert_eq!(line, 3);
                assert_eq!(p, path);
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
        // A known type with the wrong shape is corrupt too.
        write_raw(&path, &[r#"{"type":"model_change","id":"x"}"#, &a], "\n");
        assert!(matches!(
            within(load(&path)).await,
            Err(Error::Corrupt { line: 2, .. })
        ));
    }

    #[tokio::test]
    async fn unknown_entry_types_are_skipped_but_keep_the_tree_linked() {
        let (dir, _store, _cwd) = temp_store();
        let path = dir.path().join("s.jsonl");
        let a = raw_entry("aaaaaaaa", None, "first");
        let unknown =
            r#"{"type":"branch_summary","id":"cccccccc","parentId":"aaaaaaaa","summary":"…"}"#;
        let b = raw_entry("bbbbbbbb", Some("cccccccc"), "second");
        write_raw(&path, &[&a, unknown, &b, r#"{"type":"label"}"#], "\n");
        let loaded = within(load(&path)).await.unwrap();
        assert!(!loaded.recovered_tail);
        assert_eq!(loaded.entries.len(), 2);
        let texts: Vec<String> = loaded.messages().iter().map(text_of).collect();
        assert_eq!(texts, ["first", "second"]);

        // The writer knows the skipped id, so it can branch from it.
        let writer = within(loaded.into_writer()).await.unwrap();
        within(writer.set_leaf(Some("cccccccc".into())))
            .await
            .unwrap();
        let c = within(writer.append(msg(user("third")))).await.unwrap();
        assert_eq!(c.parent_id.as_deref(), Some("cccccccc"));
        within(writer.close()).await.unwrap();
        let texts: Vec<String> = within(load(&path))
            .await
            .unwrap()
            .messages()
            .iter()
            .map(text_of)
            .collect();
        assert_eq!(texts, ["first", "third"]);
    }

    #[tokio::test]
    async fn crlf_and_blank_lines_are_tolerated() {
        let (dir, _store, _cwd) = temp_store();
        let path = dir.path().join("s.jsonl");
        let a = raw_entry("aaaaaaaa", None, "x");
        let b = raw_entry("bbbbbbbb", Some("aaaaaaaa"), "y");
        write_raw(&path, &[&a, "", &b, ""], "\r\n");
        let loaded = within(load(&path)).await.unwrap();
        assert!(!loaded.recovered_tail);
        assert_eq!(loaded.entries.len(), 2);
        assert_eq!(loaded.leaf_id.as_deref(), Some("bbbbbbbb"));
        assert_eq!(loaded.messages().len(), 2);
    }

    #[tokio::test]
    async fn bad_headers_are_clear_errors() {
        let (dir, _store, _cwd) = temp_store();
        let path = dir.path().join("s.jsonl");
        fs::write(&path, "").unwrap();
        assert!(matches!(
            within(load(&path)).await,
            Err(Error::InvalidHeader { .. })
        ));
        fs::write(&path, format!("{}\n", raw_entry("aaaaaaaa", None, "x"))).unwrap();
        let err = within(load(&path)).await.unwrap_err();
        assert!(matches!(err, Error::InvalidHeader { .. }), "{err}");
        assert!(err.to_string().contains("invalid session header"), "{err}");
        fs::write(&path, r#"{"type":"session","version":1,"id":"#).unwrap();
        assert!(matches!(
            within(load(&path)).await,
            Err(Error::InvalidHeader { .. })
        ));
        fs::write(
            &path,
            r#"{"type":"session","version":99,"id":"x","timestamp":"t","cwd":"/"}"#,
        )
        .unwrap();
        assert!(matches!(
            within(load(&path)).await,
            Err(Error::UnsupportedVersion { version: 99, .. })
        ));
        assert!(matches!(
            within(load(&dir.path().join("missing.jsonl"))).await,
            Err(Error::Io { .. })
        ));
    }

    #[tokio::test]
    async fn reopening_a_file_changed_since_load_is_refused() {
        let (dir, _store, _cwd) = temp_store();
        let path = dir.path().join("s.jsonl");
        write_raw(
            &path,
            &[&raw_entry("aaaaaaaa", None, "x"), "{\"type\":"],
            "\n",
        );
        let loaded = within(load(&path)).await.unwrap();
        assert!(loaded.recovered_tail);
        let mut text = fs::read_to_string(&path).unwrap();
        text.push_str("\"message\"}\n");
        fs::write(&path, &text).unwrap();
        assert!(matches!(
            within(loaded.into_writer()).await,
            Err(Error::Modified { .. })
        ));
        assert_eq!(fs::read_to_string(&path).unwrap(), text);
    }

    #[tokio::test]
    async fn loads_a_hundred_thousand_entries() {
        let (dir, _store, _cwd) = temp_store();
        let path = dir.path().join("big.jsonl");
        let mut text = String::from(
            r#"{"type":"session","version":1,"id":"big","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#,
        );
        text.push('\n');
        let count = 100_000;
        let mut parent: Option<String> = None;
        for i in 0..count {
            let id = format!("{i:08x}");
            let body = if i % 2 == 0 {
                msg(user(&format!("question {i}")))
            } else {
                msg(assistant(&format!("answer {i}")))
            };
            let entry = Entry {
                id: id.clone(),
                parent_id: parent.replace(id),
                timestamp: "2025-01-01T00:00:01.000Z".into(),
                body,
            };
            text.push_str(&serde_json::to_string(&entry).unwrap());
            text.push('\n');
        }
        fs::write(&path, text).unwrap();
        let loaded = within(load(&path)).await.unwrap();
        assert_eq!(loaded.entries.len(), count);
        assert_eq!(loaded.branch().len(), count);
        assert_eq!(
            text_of(loaded.messages().last().unwrap()),
            format!("answer {}", count - 1)
        );
    }

    /// A file big enough that its second half is parsed on another thread:
    /// `count` linked entries, one line each.
    fn big_lines(count: usize) -> Vec<String> {
        let filler = "x".repeat(200);
        let mut parent: Option<String> = None;
        (0..count)
            .map(|i| {
                let id = format!("{i:08x}");
                let line = raw_entry(&id, parent.as_deref(), &format!("{i} {filler}"));
                parent = Some(id);
                line
            })
            .collect()
    }

    #[test]
    fn a_corrupt_line_in_the_second_half_of_a_big_file_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut lines = big_lines(8000);
        assert!(lines.iter().map(String::len).sum::<usize>() > 2 * read::PARALLEL_MIN_BYTES);
        lines[6000] = r#"{"type":"message","id":"#.to_owned();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        write_raw(&path, &refs, "\n");
        match load_blocking(path.clone()) {
            // Line 1 is the header.
            Err(Error::Corrupt { line, .. }) => assert_eq!(line, 6002),
            other => panic!("expected Corrupt, got {other:?}"),
        }

        // The same line last is a cut write: recovered, everything before kept.
        lines.truncate(6001);
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        write_raw(&path, &refs, "\n");
        let loaded = load_blocking(path).unwrap();
        assert!(loaded.recovered_tail);
        assert_eq!(loaded.entries.len(), 6000);
        assert_eq!(loaded.leaf_id.as_deref(), Some("0000176f"));
        assert_eq!(loaded.branch().len(), 6000);
    }

    #[tokio::test]
    async fn resuming_moves_the_entries_into_a_tree_and_reopens_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let lines = big_lines(6000);
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        write_raw(&path, &refs, "\n");
        let loaded = within(load(&path)).await.unwrap();
        let messages = loaded.messages();
        let (tree, writer) = within(loaded.into_tree_and_writer()).await.unwrap();
        assert_eq!(tree.entries().len(), 6000);
        assert_eq!(tree.leaf(), Some("0000176f"));
        assert_eq!(tree.context().messages, messages);
        assert!(tree.get("00000000").is_some());
        // The writer knows every id and continues from the leaf.
        assert!(writer.contains("00000abc"));
        let next = within(writer.append(msg(user("more")))).await.unwrap();
        assert_eq!(next.parent_id.as_deref(), Some("0000176f"));
        within(writer.close()).await.unwrap();
        let reloaded = within(load(&path)).await.unwrap();
        assert_eq!(reloaded.entries.len(), 6001);
        assert_eq!(text_of(reloaded.messages().last().unwrap()), "more");
    }

    #[test]
    fn a_parent_cycle_does_not_hang_the_branch_walk() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let a = raw_entry("aaaaaaaa", Some("bbbbbbbb"), "x");
        let b = raw_entry("bbbbbbbb", Some("aaaaaaaa"), "y");
        write_raw(&path, &[&a, &b], "\n");
        let loaded = load_blocking(path).unwrap();
        assert!(loaded.branch().len() <= 3);
    }
}
