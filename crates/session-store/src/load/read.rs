//! Reading a session file into a [`LoadedSession`]: the whole file in one
//! read, its lines parsed (a big file's in chunks, by this thread and a
//! second one) and taken in file order, with the crash-tail and
//! duplicate-id rules of [`load`](super::load).
//!
//! It knows lines only through `format`; what a loaded session offers
//! (branch, messages, reopening) is the parent module's.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use crate::error::{Error, Result};
use crate::format::{Entry, FORMAT_VERSION, ParsedLine, SessionHeader, parse_entry_line};
use crate::ids::IdMap;

use super::{Latest, LoadedSession, is_blank, read_header, trim_line_end};

/// Below this many bytes of entries a file is parsed on one thread.
pub(super) const PARALLEL_MIN_BYTES: usize = 1 << 20;

/// About how many bytes of lines a chunk of a big file holds.
const CHUNK_BYTES: usize = 256 << 10;

/// Chunks the second thread may have parsed ahead of the one taking them.
const PARSED_CHUNKS_CAPACITY: usize = 16;

pub(super) fn load_blocking(path: PathBuf) -> Result<LoadedSession> {
    load_in_chunks(path, CHUNK_BYTES)
}

/// [`load_blocking`], a big file's lines parsed in chunks of about
/// `chunk_bytes`.
pub(super) fn load_in_chunks(path: PathBuf, chunk_bytes: usize) -> Result<LoadedSession> {
    // One read of the whole file: lines are parsed where they lie (no copy
    // per line) and the entry vector is sized once, from the line count.
    let bytes = crate::files::read(&path).map_err(|e| Error::io(&path, e))?;
    let mut rest: &[u8] = &bytes;
    let (header, header_len) = read_header(&path, &mut rest, &mut Vec::new())?;
    if header.version > FORMAT_VERSION {
        return Err(Error::UnsupportedVersion {
            path,
            version: header.version,
            supported: FORMAT_VERSION,
        });
    }
    let lines = count_newlines(rest) + 1;
    let mut state = LineReader {
        path,
        needs_newline: !bytes[..header_len as usize].ends_with(b"\n"),
        offset: header_len,
        valid_len: header_len,
        line_no: 1,
        entries: Vec::with_capacity(lines),
        index: IdMap::with_capacity(lines),
        skipped: HashMap::new(),
        has_duplicate_ids: false,
        linear: true,
        latest: Latest::default(),
        leaf: Leaf::None,
        warned_kinds: HashSet::new(),
        pending: None,
    };
    let chunk_bytes = if rest.len() < PARALLEL_MIN_BYTES {
        usize::MAX
    } else {
        chunk_bytes
    };
    parse_in_order(&chunks_of(rest, chunk_bytes), |line, parsed| {
        state.take(line, parsed)
    })?;
    Ok(state.finish(bytes.len() as u64, header))
}

/// How many `\n` bytes `bytes` holds, eight bytes at a time.
fn count_newlines(bytes: &[u8]) -> usize {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const NEWLINES: u64 = 0x0a0a_0a0a_0a0a_0a0a;
    let mut words = bytes.chunks_exact(8);
    let mut count = 0usize;
    for word in &mut words {
        let mut raw = [0u8; 8];
        raw.copy_from_slice(word);
        // A zero byte of `x` (a newline of the input) gets its high bit set
        // in `zero`, and no other byte does.
        let x = u64::from_ne_bytes(raw) ^ NEWLINES;
        let zero = !(((x & LOW7) + LOW7) | x | LOW7);
        count += zero.count_ones() as usize;
    }
    count + words.remainder().iter().filter(|b| **b == b'\n').count()
}

/// The lines of `bytes`, each with its terminator (the last one may have
/// none).
fn lines_of(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.split_inclusive(|b| *b == b'\n')
}

/// Splits `bytes` after line ends into chunks of about `size` bytes.
fn chunks_of(bytes: &[u8], size: usize) -> Vec<&[u8]> {
    let mut chunks = Vec::new();
    let mut rest = bytes;
    while rest.len() > size {
        let Some(at) = rest[size..].iter().position(|b| *b == b'\n') else {
            break;
        };
        let (chunk, after) = rest.split_at(size + at + 1);
        chunks.push(chunk);
        rest = after;
    }
    if !rest.is_empty() {
        chunks.push(rest);
    }
    chunks
}

/// The lines of one chunk, parsed.
fn parse_chunk(chunk: &[u8]) -> Vec<ParsedOrBlank> {
    lines_of(chunk).map(parse_line).collect()
}

/// Parses the lines of `chunks` and hands each to `take` in file order,
/// stopping at its first error. With more than one chunk a second thread
/// parses too: each thread claims the next chunk nobody has claimed, and
/// this one takes the parsed chunks in order, parsing one itself whenever
/// the next in order is not ready. So the work is shared evenly and the
/// outcome is the same as reading the lines one by one.
fn parse_in_order<'a>(
    chunks: &[&'a [u8]],
    mut take: impl FnMut(&'a [u8], ParsedOrBlank) -> Result<()>,
) -> Result<()> {
    let take_parsed = |take: &mut dyn FnMut(&'a [u8], ParsedOrBlank) -> Result<()>,
                       chunk: &'a [u8],
                       parsed: Vec<ParsedOrBlank>|
     -> Result<()> {
        lines_of(chunk)
            .zip(parsed)
            .try_for_each(|(line, parsed)| take(line, parsed))
    };
    if chunks.len() < 2 {
        return chunks
            .iter()
            .flat_map(|chunk| lines_of(chunk))
            .try_for_each(|line| take(line, parse_line(line)));
    }
    let next = AtomicUsize::new(0);
    let claim = || {
        let i = next.fetch_add(1, Ordering::Relaxed);
        chunks.get(i).map(|chunk| (i, *chunk))
    };
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::sync_channel::<(usize, Vec<ParsedOrBlank>)>(PARSED_CHUNKS_CAPACITY);
        // If the thread cannot start, this one parses every chunk.
        let helper = std::thread::Builder::new()
            .name("keel-session-load".to_owned())
            .spawn_scoped(scope, move || {
                while let Some((i, chunk)) = claim() {
                    if tx.send((i, parse_chunk(chunk))).is_err() {
                        break;
                    }
                }
            });
        let mut ready: Vec<Option<Vec<ParsedOrBlank>>> = chunks.iter().map(|_| None).collect();
        let result = chunks.iter().enumerate().try_for_each(|(want, chunk)| {
            loop {
                if let Some(parsed) = ready[want].take() {
                    return take_parsed(&mut take, chunk, parsed);
                }
                if let Ok((i, parsed)) = rx.try_recv() {
                    ready[i] = Some(parsed);
                    continue;
                }
                match claim() {
                    // The next chunk in order is this thread's: taken as
                    // its lines are parsed.
                    Some((i, _)) if i == want => {
                        return lines_of(chunk).try_for_each(|line| take(line, parse_line(line)));
                    }
                    Some((i, later)) => ready[i] = Some(parse_chunk(later)),
                    // Every chunk is claimed: the one wanted is the other
                    // thread's (or, if it is gone, parsed here).
                    None => match rx.recv() {
                        Ok((i, parsed)) => ready[i] = Some(parsed),
                        Err(_) => return take_parsed(&mut take, chunk, parse_chunk(chunk)),
                    },
                }
            }
        });
        // Stop the other thread early (after an error): it claims nothing
        // more and its next send fails.
        next.store(chunks.len(), Ordering::Relaxed);
        drop(rx);
        // Joined here, so a thread that failed (its chunks were parsed by
        // this one instead) does not fail the load.
        if let Ok(helper) = helper {
            let _ = helper.join();
        }
        result
    })
}

/// A line parsed: `None` for a blank line.
type ParsedOrBlank = Option<std::result::Result<ParsedLine, String>>;

/// Parses one line (with its terminator).
fn parse_line(raw: &[u8]) -> ParsedOrBlank {
    let line = trim_line_end(raw);
    (!is_blank(line)).then(|| parse_entry_line(line))
}

/// The last entry line read so far (the leaf), kept as a position until
/// the end rather than as a copy of its id per line.
enum Leaf {
    None,
    /// A position in the entries.
    Entry(usize),
    /// An entry of an unknown type.
    Skipped(String),
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
    index: IdMap<usize>,
    skipped: HashMap<String, Option<String>>,
    has_duplicate_ids: bool,
    /// Every entry so far follows the one before it (the first is a root),
    /// with no duplicate ids and no entries of unknown types.
    linear: bool,
    latest: Latest,
    leaf: Leaf,
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
                self.linear = self.linear
                    && entry.parent_id.as_deref() == self.entries.last().map(|e| e.id.as_str());
                // With a duplicate id, the later entry wins.
                let replaced = self.index.insert(&entry.id, self.entries.len()).is_some();
                if replaced || self.skipped.contains_key(&entry.id) {
                    self.has_duplicate_ids = true;
                    self.linear = false;
                    tracing::warn!(
                        path = %self.path.display(),
                        line = self.line_no,
                        id = %entry.id,
                        "duplicate session entry id; the later entry wins"
                    );
                }
                self.leaf = Leaf::Entry(self.entries.len());
                self.latest.note(self.entries.len(), &entry.body);
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
                self.linear = false;
                if let Some(id) = id {
                    self.leaf = Leaf::Skipped(id.clone());
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
        let leaf_id = match self.leaf {
            Leaf::None => None,
            Leaf::Entry(i) => self.entries.get(i).map(|e| e.id.clone()),
            Leaf::Skipped(id) => Some(id),
        };
        LoadedSession {
            path: self.path,
            header,
            entries: self.entries,
            leaf_id,
            recovered_tail,
            index: self.index,
            skipped: self.skipped,
            has_duplicate_ids: self.has_duplicate_ids,
            linear: self.linear,
            latest: self.latest,
            valid_len: self.valid_len,
            file_len,
            needs_newline: self.needs_newline,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::count_newlines;

    #[test]
    fn newlines_are_counted_exactly_at_any_alignment() {
        let text = b"a\nbb\n\n\x8a\x0b\x09\xff\n\n\n\n\n\n\n\n\n\xca\x8a\n0123456789abcdef\n";
        for start in 0..text.len() {
            for end in start..=text.len() {
                let bytes = &text[start..end];
                let expected = bytes.iter().filter(|b| **b == b'\n').count();
                assert_eq!(count_newlines(bytes), expected, "{start}..{end}");
            }
        }
    }
}
