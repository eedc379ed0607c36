//! Reading a session file into a [`LoadedSession`]: the whole file in one
//! read, its lines parsed (the second half of a big file on a second
//! thread) and taken in file order, with the crash-tail and duplicate-id
//! rules of [`load`](super::load).
//!
//! It knows lines only through `format`; what a loaded session offers
//! (branch, messages, reopening) is the parent module's.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::format::{Entry, FORMAT_VERSION, ParsedLine, SessionHeader, parse_entry_line};

use super::{LoadedSession, is_blank, read_header, trim_line_end};

/// Below this many bytes of entries a file is parsed on one thread.
pub(super) const PARALLEL_MIN_BYTES: usize = 1 << 20;

pub(super) fn load_blocking(path: PathBuf) -> Result<LoadedSession> {
    // One read of the whole file: lines are parsed where they lie (no copy
    // per line) and the entry vector is sized once, from the line count.
    let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
    let mut rest: &[u8] = &bytes;
    let (header, header_len) = read_header(&path, &mut rest, &mut Vec::new())?;
    if header.version > FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            path,
            version: header.version,
            supported: FORMAT_VERSION,
        });
    }
    let lines = rest.iter().filter(|b| **b == b'\n').count() + 1;
    let mut state = LineReader {
        path,
        needs_newline: !bytes[..header_len as usize].ends_with(b"\n"),
        offset: header_len,
        valid_len: header_len,
        line_no: 1,
        entries: Vec::with_capacity(lines),
        index: HashMap::with_capacity(lines),
        skipped: HashMap::new(),
        has_duplicate_ids: false,
        leaf_id: None,
        warned_kinds: HashSet::new(),
        pending: None,
    };
    // The second half of a big file is parsed on another thread while this
    // one parses (and takes in) the first; the lines are then taken in file
    // order, so the outcome is the same as reading them one by one.
    let (first, second) = split_in_half(rest);
    std::thread::scope(|scope| -> Result<()> {
        let other = (!second.is_empty())
            .then(|| {
                std::thread::Builder::new()
                    .name("keel-session-load".to_owned())
                    .spawn_scoped(scope, || {
                        lines_of(second).map(parse_line).collect::<Vec<_>>()
                    })
                    .ok()
            })
            .flatten();
        for line in lines_of(first) {
            state.take(line, parse_line(line))?;
        }
        match other.map(|handle| handle.join()) {
            Some(Ok(parsed)) => {
                for (line, parsed) in lines_of(second).zip(parsed) {
                    state.take(line, parsed)?;
                }
            }
            // The thread could not start or failed: parse here instead.
            None | Some(Err(_)) => {
                for line in lines_of(second) {
                    state.take(line, parse_line(line))?;
                }
            }
        }
        Ok(())
    })?;
    Ok(state.finish(bytes.len() as u64, header))
}

/// The lines of `bytes`, each with its terminator (the last one may have
/// none).
fn lines_of(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split_inclusive(|b| *b == b'\n')
}

/// Splits `bytes` after the line end nearest its middle (all in the first
/// part when it is small).
fn split_in_half(bytes: &[u8]) -> (&[u8], &[u8]) {
    if bytes.len() < PARALLEL_MIN_BYTES {
        return (bytes, &[]);
    }
    let mid = bytes.len() / 2;
    match bytes[mid..].iter().position(|b| *b == b'\n') {
        Some(at) => bytes.split_at(mid + at + 1),
        None => (bytes, &[]),
    }
}

/// A line parsed: `None` for a blank line.
type ParsedOrBlank = Option<std::result::Result<ParsedLine, String>>;

/// Parses one line (with its terminator).
fn parse_line(raw: &[u8]) -> ParsedOrBlank {
    let line = trim_line_end(raw);
    (!is_blank(line)).then(|| parse_entry_line(line))
}

/// What [`load_blocking`] has read so far, taking the parsed lines in file
/// order.
struct LineReader {
    path: PathBuf,
    needs_newline: bool,
    offset: u64,
    valid_len: u64,
    line_no: usize,
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    skipped: HashMap<String, Option<String>>,
    has_duplicate_ids: bool,
    leaf_id: Option<String>,
    warned_kinds: HashSet<String>,
    /// A malformed line is only an error once a later line proves it was
    /// not the last one.
    pending: Option<(usize, String)>,
}

impl LineReader {
    /// Takes the next line: `raw` as read (with its terminator) and what
    /// parsing it gave.
    fn take(&mut self, raw: &[u8], parsed: ParsedOrBlank) -> Result<()> {
        self.line_no += 1;
        self.offset += raw.len() as u64;
        let Some(parsed) = parsed else {
            if self.pending.is_none() {
                self.valid_len = self.offset;
            }
            return Ok(());
        };
        if let Some((line, message)) = self.pending.take() {
            return Err(Error::Corrupt {
                path: self.path.clone(),
                line,
                message,
            });
        }
        match parsed {
            Ok(ParsedLine::Entry(entry)) => {
                if self.index.contains_key(&entry.id) || self.skipped.contains_key(&entry.id) {
                    self.has_duplicate_ids = true;
                    tracing::warn!(
                        path = %self.path.display(),
                        line = self.line_no,
                        id = %entry.id,
                        "duplicate session entry id; the later entry wins"
                    );
                }
                // With a duplicate id, the later entry wins.
                self.index.insert(entry.id.clone(), self.entries.len());
                self.leaf_id = Some(entry.id.clone());
                self.entries.push(entry);
            }
            Ok(ParsedLine::Unknown {
                kind,
                id,
                parent_id,
            }) => {
                if !self.warned_kinds.contains(&kind) {
                    tracing::warn!(
                        path = %self.path.display(),
                        line = self.line_no,
                        kind = %kind,
                        "skipping session entries of unknown type"
                    );
                    self.warned_kinds.insert(kind);
                }
                if let Some(id) = id {
                    self.leaf_id = Some(id.clone());
                    self.skipped.insert(id, parent_id);
                }
            }
            Err(message) => {
                self.pending = Some((self.line_no, message));
                return Ok(());
            }
        }
        self.valid_len = self.offset;
        self.needs_newline = raw.last() != Some(&b'\n');
        Ok(())
    }

    fn finish(mut self, file_len: u64, header: SessionHeader) -> LoadedSession {
        let recovered_tail = self.pending.is_some();
        if let Some((line, message)) = &self.pending {
            tracing::warn!(
                path = %self.path.display(),
                line,
                error = %message,
                "ignoring a malformed last line (write cut by a crash?)"
            );
            self.needs_newline = false;
        }
        LoadedSession {
            path: self.path,
            header,
            entries: self.entries,
            leaf_id: self.leaf_id,
            recovered_tail,
            index: self.index,
            skipped: self.skipped,
            has_duplicate_ids: self.has_duplicate_ids,
            valid_len: self.valid_len,
            file_len,
            needs_newline: self.needs_newline,
        }
    }
}
