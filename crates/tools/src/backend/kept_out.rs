//! Folders keel keeps its own secrets in (the tokens of `keel mcp login`):
//! the local file system backend never reads, lists, looks up or walks
//! into them,
//! whatever a tool asks and whichever link leads there. The binary names
//! them once it knows its home ([`keep_out`]), as it sets the environment
//! policy of commands. It must not know what is kept there.
//!
//! Commands are another path: Landlock cannot take reads away from a
//! folder inside a readable tree (it only grants), so the sandbox covers
//! each of these folders with an empty mount in the command's own mount
//! namespace ([`kept_out`] names them to it).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

static KEPT: RwLock<Vec<PathBuf>> = RwLock::new(Vec::new());

/// Keeps the file tools out of `dirs` from now on (added to any named
/// before).
pub fn keep_out(dirs: impl IntoIterator<Item = PathBuf>) {
    let mut kept = KEPT.write().unwrap_or_else(|e| e.into_inner());
    for dir in dirs {
        let dir = real(&dir);
        if !kept.contains(&dir) {
            kept.push(dir);
        }
    }
}

/// The kept-out folders, links resolved.
pub fn kept_out() -> Vec<PathBuf> {
    KEPT.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `path` with its links resolved, as far as it exists.
fn real(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    match (path.parent(), path.file_name()) {
        (Some(parent), Some(name)) if parent != path => real(parent).join(name),
        _ => crate::path::normalize_path(path),
    }
}

/// Whether `path` is in a kept-out folder.
pub(crate) fn is_kept_out(path: &Path) -> bool {
    let kept = KEPT.read().unwrap_or_else(|e| e.into_inner());
    if kept.is_empty() {
        return false;
    }
    let path = real(path);
    kept.iter().any(|dir| path.starts_with(dir))
}

/// The error of a tool that reached a kept-out folder.
pub(crate) fn refusal(path: &Path) -> crate::error::Error {
    crate::error::Error::io(
        path,
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            "keel keeps its own secrets there; the file tools do not read it",
        ),
    )
}
