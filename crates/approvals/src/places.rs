//! Where a path really is: inside the workspace, outside it, in git's own
//! files, or in keel's protected state.
//!
//! Owns [`Places`] (the workspace root and the protected roots such as
//! `KEEL_HOME`) and [`Places::locate`], which decides on the *resolved*
//! path: `~` expanded, `..` and every symlink that exists followed, the
//! final component included, so `gitlink/config` with `gitlink -> .git`
//! is git's config and `link/x` with `link -> ../outside` is outside. A
//! path that does not exist yet is resolved through its deepest existing
//! ancestor. It must not know about modes, rules or the store.

use std::path::{Path, PathBuf};

/// The places a classification needs to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Places {
    /// The workspace root (resolved).
    pub workspace: PathBuf,
    /// keel's own state (`KEEL_HOME`, the approvals database): touching it
    /// is money and never covered by rules.
    pub protected: Vec<PathBuf>,
}

/// Where one path lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// In the workspace, with its `/`-separated relative path.
    Inside(String),
    /// Beyond the workspace.
    Outside,
    /// In keel's protected state.
    Protected,
}

impl Places {
    /// `workspace` with no protected roots.
    pub fn new(workspace: &Path) -> Self {
        Self {
            workspace: resolve_real(workspace),
            protected: Vec::new(),
        }
    }

    /// Adds protected roots (each resolved).
    pub fn protecting(mut self, roots: &[PathBuf]) -> Self {
        self.protected.extend(roots.iter().map(|r| resolve_real(r)));
        self
    }

    /// Where the absolute, lexically normal `path` really lies, and its
    /// resolved form.
    pub fn locate(&self, path: &Path) -> (Place, PathBuf) {
        let real = resolve_real(path);
        (self.place_of(&real), real)
    }

    /// Where the already resolved `real` lies.
    pub fn place_of(&self, real: &Path) -> Place {
        if self.protected.iter().any(|p| real.starts_with(p)) {
            Place::Protected
        } else if let Ok(rel) = real.strip_prefix(&self.workspace) {
            Place::Inside(
                rel.components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect::<Vec<_>>()
                    .join("/"),
            )
        } else {
            Place::Outside
        }
    }

    /// Whether any protected root lies at or under `path` (a command
    /// naming `~` or `~/.keel/..` reaches keel's state).
    pub fn covers_protected(&self, path: &Path) -> bool {
        let real = resolve_real(path);
        self.protected
            .iter()
            .any(|p| real.starts_with(p) || (p.starts_with(&real) && real != Path::new("/")))
    }
}

/// `path` resolved as the kernel would (see [`keel_tools::physical_path`]).
pub fn resolve_real(path: &Path) -> PathBuf {
    keel_tools::physical_path(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlinks_are_followed_to_where_a_write_lands() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let out = dir.path().join("outside");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(&out).unwrap();
        std::os::unix::fs::symlink(ws.join(".git"), ws.join("gitlink")).unwrap();
        std::os::unix::fs::symlink(&out, ws.join("link")).unwrap();
        std::os::unix::fs::symlink(out.join("new.txt"), ws.join("dangling")).unwrap();
        let places = Places::new(&ws).protecting(&[dir.path().join("home")]);
        let (p, real) = places.locate(&ws.join("gitlink/config"));
        assert_eq!(p, Place::Inside(".git/config".to_owned()));
        assert!(real.ends_with("ws/.git/config"));
        assert_eq!(places.locate(&ws.join("link/a.txt")).0, Place::Outside);
        assert_eq!(places.locate(&ws.join("dangling")).0, Place::Outside);
        assert_eq!(
            places.locate(&ws.join("src/new/deep.rs")).0,
            Place::Inside("src/new/deep.rs".to_owned())
        );
        assert_eq!(places.locate(&dir.path().join("x")).0, Place::Outside);
        assert_eq!(
            places.locate(&dir.path().join("home/keel.db")).0,
            Place::Protected
        );
        // The kernel applies `..` after the symlink before it.
        assert_eq!(places.locate(&ws.join("link/../x")).0, Place::Outside);
        assert!(places.covers_protected(dir.path()));
        assert!(!places.covers_protected(&ws));
    }
}
