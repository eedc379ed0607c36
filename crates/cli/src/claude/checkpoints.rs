//! File checkpoints for the SDK's `rewindFiles()` (its
//! `enableFileCheckpointing`, which sets
//! `CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING` for the process it spawns).
//!
//! Owns, per user message (by its `uuid`), what each file keel's `write`
//! and `edit` tools changed held before the first change in that
//! message's run: its bytes, or that it did not exist. A rewind to a
//! message puts every file changed since then back as it was when that
//! message came, and says what it changed (`RewindFilesResult`). Changes
//! that commands made are not tracked, as in Claude Code. It must not know
//! the wire or the gate (the gate calls [`Checkpoints::before_write`]
//! once a call is decided to run).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde_json::{Value, json};

/// Files larger than this are not kept: a rewind says it cannot restore them.
const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A file as it was: its bytes, `None` when it did not exist, or too big
/// to keep.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kept {
    Bytes(Option<Vec<u8>>),
    TooBig,
}

#[derive(Debug, Default)]
struct Mark {
    uuid: String,
    files: BTreeMap<PathBuf, Kept>,
}

/// The checkpoints of one process; off unless the SDK asked for them.
#[derive(Debug, Default)]
pub struct Checkpoints {
    enabled: bool,
    marks: Mutex<Vec<Mark>>,
}

impl Checkpoints {
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            marks: Mutex::new(Vec::new()),
        }
    }

    /// Whether the environment asks for checkpoints, as the SDK sets it.
    pub fn wanted() -> bool {
        std::env::var("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING")
            .is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes"))
    }

    fn marks(&self) -> MutexGuard<'_, Vec<Mark>> {
        self.marks.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The run of user message `uuid` starts: what changes from now on is
    /// kept under it.
    pub fn mark(&self, uuid: &str) {
        if self.enabled {
            self.marks().push(Mark {
                uuid: uuid.to_owned(),
                files: BTreeMap::new(),
            });
        }
    }

    /// `path` is about to be written: keeps what it holds now, unless the
    /// current message's run already did.
    pub fn before_write(&self, path: &Path) {
        if !self.enabled {
            return;
        }
        let mut marks = self.marks();
        let Some(mark) = marks.last_mut() else { return };
        if mark.files.contains_key(path) {
            return;
        }
        let kept = match std::fs::metadata(path) {
            Ok(meta) if meta.len() > MAX_FILE_BYTES => Kept::TooBig,
            Ok(_) => match std::fs::read(path) {
                Ok(bytes) => Kept::Bytes(Some(bytes)),
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot keep a checkpoint");
                    Kept::TooBig
                }
            },
            Err(_) => Kept::Bytes(None),
        };
        mark.files.insert(path.to_owned(), kept);
    }

    /// Puts the files changed since message `uuid` back as they were when
    /// it came (with `dry_run`, only says what that would change): a
    /// `RewindFilesResult`. After a real rewind, the runs after that
    /// message are forgotten; rewinding to it again still works.
    pub fn rewind(&self, uuid: &str, dry_run: bool) -> Value {
        if !self.enabled {
            return json!({
                "canRewind": false,
                "error": "file checkpointing is off: start the query with enableFileCheckpointing",
            });
        }
        let mut marks = self.marks();
        let Some(at) = marks.iter().position(|m| m.uuid == uuid) else {
            return json!({
                "canRewind": false,
                "error": format!("no checkpoint for user message {uuid}"),
            });
        };
        // The earliest state kept of each file since that message.
        let mut before: BTreeMap<PathBuf, Kept> = BTreeMap::new();
        for mark in &marks[at..] {
            for (path, kept) in &mark.files {
                before.entry(path.clone()).or_insert_with(|| kept.clone());
            }
        }
        if let Some((path, _)) = before.iter().find(|(_, k)| **k == Kept::TooBig) {
            return json!({
                "canRewind": false,
                "error": format!("{} was not kept (larger than {MAX_FILE_BYTES} bytes or unreadable)", path.display()),
            });
        }
        let mut changed = Vec::new();
        let (mut insertions, mut deletions) = (0u64, 0u64);
        for (path, kept) in &before {
            let Kept::Bytes(then) = kept else { continue };
            let now = std::fs::read(path).ok();
            if &now == then {
                continue;
            }
            let (ins, del) = line_changes(now.as_deref(), then.as_deref());
            insertions += ins;
            deletions += del;
            changed.push(path.display().to_string());
            if dry_run {
                continue;
            }
            let restored = match then {
                Some(bytes) => std::fs::write(path, bytes),
                None => std::fs::remove_file(path).or_else(|e| {
                    if e.kind() == std::io::ErrorKind::NotFound {
                        Ok(())
                    } else {
                        Err(e)
                    }
                }),
            };
            if let Err(e) = restored {
                return json!({
                    "canRewind": false,
                    "error": format!("cannot restore {}: {e}", path.display()),
                    "filesChanged": changed,
                });
            }
        }
        if !dry_run {
            marks.truncate(at);
            marks.push(Mark {
                uuid: uuid.to_owned(),
                files: before,
            });
        }
        json!({
            "canRewind": true,
            "filesChanged": changed,
            "insertions": insertions,
            "deletions": deletions,
        })
    }
}

/// Lines added and removed going from `now` to `then`.
fn line_changes(now: Option<&[u8]>, then: Option<&[u8]>) -> (u64, u64) {
    let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
    let (now, then) = (text(now), text(then));
    let diff = similar::TextDiff::from_lines(&now, &then);
    let (mut ins, mut del) = (0, 0);
    for change in diff.iter_all_changes() {
        match change.tag() {
            similar::ChangeTag::Insert => ins += 1,
            similar::ChangeTag::Delete => del += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    (ins, del)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rewind_puts_back_what_each_message_found() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
        std::fs::write(&a, "one\n").unwrap();
        let cp = Checkpoints::new(true);
        cp.mark("m1");
        cp.before_write(&a);
        std::fs::write(&a, "two\n").unwrap();
        cp.before_write(&a);
        std::fs::write(&a, "three\n").unwrap();
        cp.mark("m2");
        cp.before_write(&a);
        std::fs::write(&a, "four\n").unwrap();
        cp.before_write(&b);
        std::fs::write(&b, "new\n").unwrap();

        // A dry run changes nothing.
        let dry = cp.rewind("m2", true);
        assert_eq!(dry["canRewind"], true);
        assert_eq!(dry["filesChanged"].as_array().unwrap().len(), 2);
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "four\n");

        // To m2: a as m2 found it, b gone again.
        let done = cp.rewind("m2", false);
        assert_eq!(done["insertions"], 1, "{done}");
        assert_eq!(done["deletions"], 2, "{done}");
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "three\n");
        assert!(!b.exists());

        // Then to m1: a as it was before anything.
        assert_eq!(cp.rewind("m1", false)["canRewind"], true);
        assert_eq!(std::fs::read_to_string(&a).unwrap(), "one\n");
        assert_eq!(cp.rewind("nope", false)["canRewind"], false);
    }

    /// A file too big to keep is named by the rewind, which then changes
    /// nothing; a file that cannot be put back is an error, not a panic.
    #[test]
    fn what_cannot_be_kept_or_restored_is_said() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.bin");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        let small = dir.path().join("small.txt");
        let cp = Checkpoints::new(true);
        cp.mark("m1");
        cp.before_write(&big);
        cp.before_write(&small);
        std::fs::write(&small, "made\n").unwrap();
        let r = cp.rewind("m1", false);
        assert_eq!(r["canRewind"], false);
        assert!(r["error"].as_str().unwrap().contains("big.bin"), "{r}");
        assert!(
            small.exists(),
            "nothing is put back when one file cannot be"
        );

        // A file that became a directory cannot be written back.
        let cp = Checkpoints::new(true);
        let gone = dir.path().join("gone.txt");
        std::fs::write(&gone, "was\n").unwrap();
        cp.mark("m2");
        cp.before_write(&gone);
        std::fs::remove_file(&gone).unwrap();
        std::fs::create_dir(&gone).unwrap();
        let r = cp.rewind("m2", false);
        assert_eq!(r["canRewind"], false, "{r}");
        assert!(
            r["error"].as_str().unwrap().contains("cannot restore"),
            "{r}"
        );
    }

    #[test]
    fn off_unless_asked() {
        let dir = tempfile::tempdir().unwrap();
        let cp = Checkpoints::new(false);
        cp.mark("m1");
        cp.before_write(&dir.path().join("x"));
        let r = cp.rewind("m1", false);
        assert_eq!(r["canRewind"], false);
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains("enableFileCheckpointing")
        );
    }
}
