//! Loading one session file: parse (in `read`), crash-tail recovery, the
//! entry tree and its active branch, and reopening a loaded file for
//! appending (or handing its entries to a [`SessionTree`] without a copy).
//!
//! This module owns [`load`] and [`LoadedSession`]. It knows the line format
//! only through `format`; it must not know about directories or listing
//! (`store`), how the writer task batches (`writer`), or any wire protocol.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use keel_protocol::{Message, ThinkingLevel};

use crate::error::{Error, Result};
use crate::format::{Entry, EntryBody, SessionHeader, parse_header_line};
use crate::ids::{IdMap, IdSet};
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
    index: IdMap<usize>,
    /// Entries of unknown types: id → parentId, so the tree stays linked
    /// through them.
    skipped: HashMap<String, Option<String>>,
    /// Two entries share an id (the later one wins).
    has_duplicate_ids: bool,
    /// Each entry follows the one before it in the file (the first is a
    /// root), ids are unique and no entry is of an unknown type: the active
    /// branch is every entry, in file order.
    linear: bool,
    /// Where the latest settings entries of the file are.
    latest: Latest,
    /// Length in bytes of the valid prefix of the file (through the last
    /// well-formed line).
    valid_len: u64,
    /// Length of the file when it was read.
    file_len: u64,
    /// The valid prefix does not end with `\n` (its last line is complete JSON
    /// without a terminator); one must be written before appending.
    needs_newline: bool,
}

/// Positions in a loaded file's entries of the latest entry of each
/// settings kind.
#[derive(Debug, Clone, Copy, Default)]
struct Latest {
    session_info: Option<usize>,
    model_change: Option<usize>,
    thinking_level_change: Option<usize>,
}

impl Latest {
    /// Notes `body`, the entry at position `at`.
    fn note(&mut self, at: usize, body: &EntryBody) {
        match body {
            EntryBody::SessionInfo { .. } => self.session_info = Some(at),
            EntryBody::ModelChange { .. } => self.model_change = Some(at),
            EntryBody::ThinkingLevelChange { .. } => self.thinking_level_change = Some(at),
            EntryBody::Message { .. }
            | EntryBody::Compaction { .. }
            | EntryBody::Branch { .. }
            | EntryBody::Approval(_) => {}
        }
    }
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

/// The header of the session file at `path` (its first line only).
pub async fn header_of(path: &Path) -> Result<SessionHeader> {
    let owned = path.to_path_buf();
    crate::blocking(path, move || {
        let mut reader = crate::files::reader(&owned).map_err(|e| Error::io(&owned, e))?;
        read_header(&owned, &mut reader, &mut Vec::new()).map(|(header, _)| header)
    })
    .await
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
    /// Most files are linear (each entry follows the one before it): then
    /// it is every entry, known from the load. Otherwise the walk first
    /// tries the entry just before the current one in the file
    /// and looks the id up only when a link points elsewhere. With
    /// duplicate ids the index decides (the later entry wins).
    pub fn branch(&self) -> Vec<&Entry> {
        if self.linear {
            return self.entries.iter().collect();
        }
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
        crate::tree::context_messages_of(&self.branch()).0
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
            self.linear_len(),
        )
    }

    /// How many entries, from the first, are known to form one chain.
    fn linear_len(&self) -> usize {
        if self.linear { self.entries.len() } else { 0 }
    }

    /// The latest `session_info` name on the active branch (`None` if never
    /// named or the latest one cleared it).
    pub fn name(&self) -> Option<String> {
        self.latest(self.latest.session_info, |body| match body {
            EntryBody::SessionInfo { name } => Some(name.clone()),
            _ => None,
        })?
    }

    /// The latest model change on the active branch: `(provider, model_id)`.
    pub fn last_model(&self) -> Option<(String, String)> {
        self.latest(self.latest.model_change, |body| match body {
            EntryBody::ModelChange { provider, model_id } => {
                Some((provider.clone(), model_id.clone()))
            }
            _ => None,
        })
    }

    /// The latest thinking level change on the active branch.
    pub fn last_thinking_level(&self) -> Option<ThinkingLevel> {
        self.latest(self.latest.thinking_level_change, |body| match body {
            EntryBody::ThinkingLevelChange { thinking_level } => Some(*thinking_level),
            _ => None,
        })
    }

    /// What `pick` finds in the latest entry on the active branch it
    /// matches: in a linear file the one at `known` (the latest of its kind
    /// in the file, noted while loading), else found walking the branch back.
    fn latest<T>(&self, known: Option<usize>, pick: impl Fn(&EntryBody) -> Option<T>) -> Option<T> {
        if self.linear {
            return known
                .and_then(|i| self.entries.get(i))
                .and_then(|e| pick(&e.body));
        }
        self.branch().into_iter().rev().find_map(|e| pick(&e.body))
    }

    /// Reopens the file for appending. If the tail was cut, the file is first
    /// truncated back to its last complete line (so it is valid JSONL again);
    /// then a writer starts whose leaf is `leaf_id`. Fails with
    /// [`Error::Modified`] if the file changed on disk since it was loaded.
    pub async fn into_writer(self) -> Result<SessionWriter> {
        let ids = self.known_ids();
        self.reopen().writer(ids).await
    }

    /// Resuming: the entries as a tree (moved, not copied) and the file
    /// reopened for appending as [`into_writer`](Self::into_writer) does.
    /// Read what else is needed ([`name`](Self::name),
    /// [`last_model`](Self::last_model)) before.
    pub async fn into_tree_and_writer(self) -> Result<(SessionTree, SessionWriter)> {
        let writer = self.reopen().writer(self.known_ids()).await?;
        Ok((self.into_tree(), writer))
    }

    /// Every entry id of the file, skipped lines' included.
    fn known_ids(&self) -> IdSet {
        let mut ids = self.index.to_set();
        for id in self.skipped.keys() {
            ids.insert(id);
        }
        ids
    }

    /// How to reopen the file where loading left it.
    fn reopen(&self) -> Reopen {
        Reopen {
            path: self.path.clone(),
            session_id: self.header.id.clone(),
            leaf_id: self.leaf_id.clone(),
            recovered: self.recovered_tail,
            valid_len: self.valid_len,
            file_len: self.file_len,
            needs_newline: self.needs_newline,
        }
    }

    /// The entries as a tree (moved, not copied).
    fn into_tree(self) -> SessionTree {
        let linear = self.linear_len();
        SessionTree::indexed(self.entries, self.index, self.skipped, self.leaf_id, linear)
    }
}

impl SessionWriter {
    /// Reads the session again from where it is kept and goes on after
    /// its current end: for a writer whose session another process (a
    /// worker) appended to meanwhile, which would otherwise refuse to
    /// append ("changed since it was loaded"). Returns the entries as they
    /// are now. Nothing of this writer's own may be queued unflushed that
    /// the other process did not see: call it between the other process's
    /// appends and this one's.
    pub async fn reload(&self) -> Result<SessionTree> {
        self.flush().await?;
        let loaded = load(self.path()).await?;
        let (ids, reopen) = (loaded.known_ids(), loaded.reopen());
        let file = reopen.sink().await?;
        let leaf = loaded.leaf_id.clone();
        self.swap(file, leaf, ids).await?;
        Ok(loaded.into_tree())
    }
}

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
    async fn writer(self, ids: IdSet) -> Result<SessionWriter> {
        let file = self.sink().await?;
        Ok(writer::spawn(
            file,
            self.path,
            self.session_id,
            self.leaf_id,
            ids,
        ))
    }

    /// Opens the file for appending, repairing its tail first; fails with
    /// [`Error::Modified`] when it is not as loaded.
    async fn sink(&self) -> Result<crate::files::Sink> {
        let open_path = self.path.clone();
        let how = crate::files::Reopen {
            expected_len: self.file_len,
            keep_len: self.recovered.then_some(self.valid_len),
            needs_newline: self.needs_newline,
        };
        crate::blocking(&self.path, move || {
            crate::files::reopen(&open_path, &how)
                .map_err(|e| Error::io(&open_path, e))?
                .ok_or(Error::Modified { path: open_path })
        })
        .await
    }
}

#[cfg(test)]
mod tests;
