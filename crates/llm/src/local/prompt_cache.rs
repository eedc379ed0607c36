//! Evaluated prompts kept on disk, so a new keel process does not pay for
//! a prompt another one already evaluated.
//!
//! [`PromptStore`] owns the files: under the cache root, one folder per
//! model (keyed by the model file's path, size and modification time, the
//! context size, and the versions of this crate and llama.cpp: any change
//! makes a new folder), and in it one entry per saved prompt: `H.state`
//! (llama.cpp's saved KV cache and tokens, written by the caller) and
//! `H.txt` (the text those tokens encode), where `H` is the SHA-256 of the
//! text. A lookup finds the saved text that shares the longest start with
//! the new prompt (the engine then drops what differs from its cache).
//! An entry is complete only once its `.txt` is there (it is renamed into
//! place last), so a process killed while saving leaves nothing that is
//! read. Entries are kept least-recently-used first out within a byte
//! limit over the whole root. A caller that finds an entry unusable (a
//! load fails, the tokens do not spell the text) discards it.
//!
//! It knows nothing of llama.cpp: the caller writes and reads the state
//! files.
#![cfg_attr(not(feature = "local"), allow(dead_code))]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

/// Default limit of the whole cache, in bytes.
pub const DEFAULT_LIMIT: u64 = 2 << 30;
/// Temporary files older than this are a dead process's and are removed.
const STALE_TEMP: Duration = Duration::from_secs(600);

/// A saved prompt: its state file and the text it encodes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Saved {
    pub state: PathBuf,
    pub text: Vec<u8>,
}

/// The saved prompts of one model file and context size.
#[derive(Debug, Clone)]
pub(crate) struct PromptStore {
    root: PathBuf,
    dir: PathBuf,
    limit: u64,
}

fn hex(bytes: &[u8], n: usize) -> String {
    bytes.iter().take(n).map(|b| format!("{b:02x}")).collect()
}

impl PromptStore {
    /// The store for `model` at `context_size` under `root`, holding at
    /// most `limit` bytes in all (`None` when `limit` is 0 or the model
    /// file cannot be read).
    pub fn open(root: &Path, model: &Path, context_size: u32, limit: u64) -> Option<Self> {
        if limit == 0 {
            return None;
        }
        let meta = std::fs::metadata(model).ok()?;
        let path = std::fs::canonicalize(model).unwrap_or_else(|_| model.to_path_buf());
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos());
        let key = format!(
            "{}\0{}\0{modified}\0{context_size}\0{}\0{}",
            path.display(),
            meta.len(),
            env!("CARGO_PKG_VERSION"),
            LLAMA_VERSION,
        );
        let dir = root.join(hex(&Sha256::digest(key.as_bytes()), 12));
        Some(PromptStore {
            root: root.to_path_buf(),
            dir,
            limit,
        })
    }

    fn name(text: &[u8]) -> String {
        hex(&Sha256::digest(text), 16)
    }

    /// The saved prompt whose text shares the longest start with `prompt`
    /// (at least [`MIN_SHARED`] bytes; of equal ones the shortest). An
    /// entry whose state file is not the size it was saved at (cut short,
    /// or changed) is removed on the way.
    pub fn best(&self, prompt: &[u8]) -> Option<Saved> {
        let entries = std::fs::read_dir(&self.dir).ok()?;
        let mut best: Option<(Saved, usize)> = None;
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name();
            if path.extension().is_none_or(|x| x != "txt")
                || name.to_string_lossy().starts_with(".tmp-")
            {
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let state = path.with_extension("state");
            let Some((size, text)) = parse_entry(&bytes) else {
                tracing::warn!(file = %path.display(), "prompt cache entry unreadable; removed");
                self.discard_files(&state);
                continue;
            };
            let shared = shared(text, prompt);
            let better = match &best {
                None => shared >= MIN_SHARED,
                Some((b, n)) => shared > *n || (shared == *n && text.len() < b.text.len()),
            };
            if !better {
                continue;
            }
            let on_disk = std::fs::metadata(&state).map(|m| m.len()).ok();
            if on_disk != Some(size) {
                tracing::warn!(
                    file = %state.display(),
                    expected = size,
                    found = on_disk.unwrap_or(0),
                    "prompt cache file damaged; removed (it is rebuilt)"
                );
                self.discard_files(&state);
                continue;
            }
            best = Some((
                Saved {
                    state,
                    text: text.to_vec(),
                },
                shared,
            ));
        }
        best.map(|(b, _)| b)
    }

    /// Whether `text` is saved.
    pub fn has(&self, text: &[u8]) -> bool {
        self.dir.join(format!("{}.txt", Self::name(text))).is_file()
    }

    /// Saves `text`: `write` writes the state to the path it is given;
    /// the entry appears complete or not at all. Then the oldest entries
    /// go until the cache fits its limit.
    pub fn save(
        &self,
        text: &[u8],
        write: impl FnOnce(&Path) -> Result<(), String>,
    ) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir).map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let name = Self::name(text);
        let tag = format!("{}.{}", std::process::id(), name);
        let state_tmp = self.dir.join(format!(".tmp-{tag}.state"));
        let text_tmp = self.dir.join(format!(".tmp-{tag}.txt"));
        let done = (|| {
            write(&state_tmp)?;
            let size = std::fs::metadata(&state_tmp)
                .map_err(|e| e.to_string())?
                .len();
            let mut entry = format!("{HEADER} {size}\n").into_bytes();
            entry.extend_from_slice(text);
            std::fs::write(&text_tmp, entry).map_err(|e| e.to_string())?;
            std::fs::rename(&state_tmp, self.dir.join(format!("{name}.state")))
                .map_err(|e| e.to_string())?;
            std::fs::rename(&text_tmp, self.dir.join(format!("{name}.txt")))
                .map_err(|e| e.to_string())
        })();
        if done.is_err() {
            let _ = std::fs::remove_file(&state_tmp);
            let _ = std::fs::remove_file(&text_tmp);
        }
        self.evict();
        done
    }

    /// Marks `saved` as just used (it is evicted last).
    pub fn used(&self, saved: &Saved) {
        let now = SystemTime::now();
        for p in [saved.state.clone(), saved.state.with_extension("txt")] {
            if let Ok(f) = std::fs::File::options().append(true).open(&p) {
                let _ = f.set_modified(now);
            }
        }
    }

    /// Removes `saved` (it could not be used).
    pub fn discard(&self, saved: &Saved) {
        self.discard_files(&saved.state);
    }

    fn discard_files(&self, state: &Path) {
        let _ = std::fs::remove_file(state.with_extension("txt"));
        let _ = std::fs::remove_file(state);
    }

    /// Removes the least recently used entries (of every model) until the
    /// whole cache fits its limit, and a dead process's temporary files.
    fn evict(&self) {
        let mut entries: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
        let now = SystemTime::now();
        let dirs = std::fs::read_dir(&self.root)
            .into_iter()
            .flatten()
            .flatten();
        for dir in dirs.filter(|d| d.path().is_dir()) {
            for e in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let path = e.path();
                let Ok(meta) = e.metadata() else { continue };
                let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
                let is_temp = e.file_name().to_string_lossy().starts_with(".tmp-");
                if is_temp {
                    if now.duration_since(modified).unwrap_or_default() > STALE_TEMP {
                        let _ = std::fs::remove_file(&path);
                    }
                    continue;
                }
                if path.extension().is_some_and(|x| x == "state") {
                    let text = std::fs::metadata(path.with_extension("txt"))
                        .map(|m| m.len())
                        .unwrap_or(0);
                    entries.push((modified, meta.len() + text, path));
                }
            }
        }
        let mut total: u64 = entries.iter().map(|e| e.1).sum();
        entries.sort_by_key(|e| e.0);
        for (_, size, path) in entries {
            if total <= self.limit {
                break;
            }
            let _ = std::fs::remove_file(path.with_extension("txt"));
            let _ = std::fs::remove_file(&path);
            total = total.saturating_sub(size);
            tracing::debug!(file = %path.display(), "prompt cache entry evicted");
        }
    }
}

/// The fewest bytes a saved text must share with a prompt to be loaded.
const MIN_SHARED: usize = 256;

/// How many bytes `a` and `b` start with in common.
fn shared(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The first line of a `.txt` entry, before the state file's size.
const HEADER: &str = "keel-prompt-cache 1";

/// `(state file size, text)` of a `.txt` entry.
fn parse_entry(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let nl = bytes.iter().position(|b| *b == b'\n')?;
    let line = std::str::from_utf8(&bytes[..nl]).ok()?;
    let size = line.strip_prefix(HEADER)?.trim().parse().ok()?;
    Some((size, &bytes[nl + 1..]))
}

/// The llama.cpp binding's version: its state files are read only by the
/// same one.
const LLAMA_VERSION: &str = "llama-cpp-2 0.1.160";

#[cfg(test)]
mod tests {
    use super::*;

    fn store(dir: &Path, limit: u64) -> PromptStore {
        let model = dir.join("m.gguf");
        std::fs::write(&model, b"GGUF").unwrap();
        PromptStore::open(&dir.join("cache"), &model, 4096, limit).unwrap()
    }

    fn write(bytes: usize) -> impl FnOnce(&Path) -> Result<(), String> {
        move |p| std::fs::write(p, vec![7u8; bytes]).map_err(|e| e.to_string())
    }

    /// `text` grown past [`MIN_SHARED`].
    fn long(text: &str) -> Vec<u8> {
        format!("{}{text}", "s".repeat(MIN_SHARED)).into_bytes()
    }

    #[test]
    fn the_saved_text_sharing_the_longest_start_is_found() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path(), 1 << 20);
        assert_eq!(s.best(&long("tools user")), None);
        s.save(&long("tools"), write(10)).unwrap();
        s.save(&long("tools user one"), write(10)).unwrap();
        s.save(b"other", write(10)).unwrap();
        assert!(s.has(&long("tools")) && !s.has(&long("tool")));
        let b = s.best(&long("tools user one more")).unwrap();
        assert_eq!(b.text, long("tools user one"));
        // Shared as far as "tools user ": the longer one still wins.
        assert_eq!(
            s.best(&long("tools user two")).unwrap().text,
            long("tools user one")
        );
        // Of equal shares, the shorter text (less to load).
        assert_eq!(s.best(&long("tool")).unwrap().text, long("tools"));
        // Too little in common: nothing.
        assert_eq!(s.best(b"other prompt"), None);
        s.discard(&b);
        assert_eq!(
            s.best(&long("tools user one more")).unwrap().text,
            long("tools")
        );
    }

    #[test]
    fn a_half_written_entry_is_never_found_and_a_failed_write_leaves_nothing() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path(), 1 << 20);
        // A state without its text (the process died before the rename).
        std::fs::create_dir_all(&s.dir).unwrap();
        std::fs::write(s.dir.join("abc.state"), b"x").unwrap();
        assert_eq!(s.best(b"anything at all"), None);
        let e = s
            .save(b"prefix", |_| Err("disk full".to_owned()))
            .unwrap_err();
        assert_eq!(e, "disk full");
        assert!(!s.has(b"prefix"));
        let left: Vec<_> = std::fs::read_dir(&s.dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, vec!["abc.state"]);
    }

    #[test]
    fn a_state_file_cut_short_is_removed_not_used() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path(), 1 << 20);
        s.save(&long("prefix"), write(100)).unwrap();
        let saved = s.best(&long("prefix and more")).unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(&saved.state)
            .unwrap();
        f.set_len(40).unwrap();
        assert_eq!(s.best(&long("prefix and more")), None);
        assert!(!s.has(&long("prefix")) && !saved.state.exists());
        // A text file without the header is removed too.
        s.save(&long("other"), write(10)).unwrap();
        let txt = s
            .best(&long("other one"))
            .unwrap()
            .state
            .with_extension("txt");
        std::fs::write(&txt, long("other")).unwrap();
        assert_eq!(s.best(&long("other one")), None);
        assert!(!txt.exists());
    }

    #[test]
    fn the_least_recently_used_entries_go_first_when_over_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let s = store(d.path(), 250 + 3 * (MIN_SHARED as u64 + 40));
        s.save(&long("a"), write(100)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        s.save(&long("b"), write(100)).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        // `a` is used: `b` is now the oldest.
        s.used(&s.best(&long("a+")).unwrap());
        std::thread::sleep(Duration::from_millis(20));
        s.save(&long("c"), write(100)).unwrap();
        assert!(s.has(&long("a")) && s.has(&long("c")));
        assert!(!s.has(&long("b")));
    }

    #[test]
    fn another_model_file_or_context_size_is_another_folder() {
        let d = tempfile::tempdir().unwrap();
        let a = store(d.path(), 1 << 20);
        let model = d.path().join("m.gguf");
        let b = PromptStore::open(&d.path().join("cache"), &model, 8192, 1 << 20).unwrap();
        assert_ne!(a.dir, b.dir);
        std::fs::write(&model, b"GGUF changed").unwrap();
        let c = PromptStore::open(&d.path().join("cache"), &model, 4096, 1 << 20).unwrap();
        assert_ne!(a.dir, c.dir);
        assert!(PromptStore::open(&d.path().join("cache"), &model, 4096, 0).is_none());
    }
}
