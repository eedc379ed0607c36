//! Resolving the paths tools receive.
//!
//! Owns turning a user- or model-supplied path string into an absolute,
//! lexically normalised path against the workspace `cwd` (`~` expands to
//! `$HOME`), rejecting unusable input, and rendering paths back relative to
//! the workspace for output. It does no I/O and no sandboxing: whether a path
//! may be touched is the approvals layer's decision, which reuses
//! [`resolve_path`].

use std::path::{Component, Path, PathBuf};

use crate::error::{Error, Result};

/// Resolves `input` against `cwd`.
///
/// - an absolute path stays absolute;
/// - `~` and `~/…` expand to `$HOME`;
/// - a relative path joins `cwd`;
/// - a leading `@` (as in `@src/main.rs` mentions) is dropped;
/// - `.` and `..` are normalised lexically (symlinks are not followed; `..`
///   never climbs above the root).
///
/// Empty paths and paths containing NUL bytes are rejected.
pub fn resolve_path(cwd: &Path, input: &str) -> Result<PathBuf> {
    if input.contains('\0') {
        return Err(Error::InvalidPath(format!(
            "path {input:?} contains a NUL byte"
        )));
    }
    let trimmed = input.trim();
    let trimmed = trimmed.strip_prefix('@').unwrap_or(trimmed);
    if trimmed.is_empty() {
        return Err(Error::InvalidPath("path must not be empty".to_owned()));
    }
    let expanded = if trimmed == "~" {
        home_dir()?
    } else if let Some(rest) = trimmed.strip_prefix("~/") {
        home_dir()?.join(rest)
    } else {
        PathBuf::from(trimmed)
    };
    let joined = if expanded.is_absolute() {
        expanded
    } else {
        cwd.join(expanded)
    };
    Ok(normalize_path(&joined))
}

/// Resolves an optional path argument, defaulting to `cwd` itself.
pub(crate) fn resolve_or_cwd(cwd: &Path, input: Option<&str>) -> Result<PathBuf> {
    match input {
        Some(p) if !p.trim().is_empty() => resolve_path(cwd, p),
        _ => Ok(normalize_path(cwd)),
    }
}

/// Normalises `.` and `..` components lexically.
pub fn normalize_path(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                let can_pop = matches!(out.components().next_back(), Some(Component::Normal(_)));
                if can_pop {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Renders `path` relative to `base` when it lies under it, else as is.
/// `base` itself renders as `.`.
pub fn display_relative(base: &Path, path: &Path) -> String {
    match path.strip_prefix(base) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => path.to_string_lossy().into_owned(),
    }
}

fn home_dir() -> Result<PathBuf> {
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home)),
        _ => Err(Error::InvalidPath(
            "cannot expand `~`: HOME is not set".to_owned(),
        )),
    }
}

/// `path` with every existing symlink followed (the final component
/// included) and `..` applied after each step, as the kernel would; the
/// part that does not exist yet is appended lexically. Symlink loops and
/// unreadable folders leave the rest as written.
pub fn physical_path(path: &Path) -> PathBuf {
    // `..` is applied by the kernel, after the symlink before it: resolve
    // first, normalise only what does not exist.
    let path = path.to_path_buf();
    if let Ok(real) = std::fs::canonicalize(&path) {
        return real;
    }
    // Walk up to the deepest ancestor that resolves.
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    let mut cur = path.clone();
    loop {
        match cur.file_name() {
            Some(name) => {
                // A dangling symlink as the last existing step: follow its
                // target, which is where a write would land.
                if let Ok(target) = std::fs::read_link(&cur) {
                    let parent = cur.parent().map(Path::to_path_buf).unwrap_or_default();
                    let mut next = normalize_path(&parent.join(target));
                    for r in rest.iter().rev() {
                        next.push(r);
                    }
                    if next != path && depth_ok(&rest) {
                        return physical_path(&next);
                    }
                    return normalize_path(&path);
                }
                rest.push(name.to_owned());
            }
            None => return path,
        }
        let Some(parent) = cur.parent() else {
            return path;
        };
        cur = parent.to_path_buf();
        if let Ok(mut real) = std::fs::canonicalize(&cur) {
            for r in rest.iter().rev() {
                real.push(r);
            }
            return real;
        }
        if matches!(
            cur.components().next_back(),
            Some(Component::RootDir) | None
        ) {
            return path;
        }
    }
}

fn depth_ok(rest: &[std::ffi::OsString]) -> bool {
    rest.len() < 64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_joins_cwd_and_normalises() {
        let cwd = Path::new("/work/repo");
        assert_eq!(
            resolve_path(cwd, "src/./lib.rs").unwrap(),
            PathBuf::from("/work/repo/src/lib.rs")
        );
        assert_eq!(
            resolve_path(cwd, "../other/x").unwrap(),
            PathBuf::from("/work/other/x")
        );
        assert_eq!(resolve_path(cwd, ".").unwrap(), PathBuf::from("/work/repo"));
        assert_eq!(
            resolve_path(cwd, "@src/main.rs").unwrap(),
            PathBuf::from("/work/repo/src/main.rs")
        );
    }

    #[test]
    fn absolute_stays_absolute_and_dotdot_stops_at_root() {
        let cwd = Path::new("/work/repo");
        assert_eq!(
            resolve_path(cwd, "/etc/hosts").unwrap(),
            PathBuf::from("/etc/hosts")
        );
        assert_eq!(
            resolve_path(cwd, "/../../etc").unwrap(),
            PathBuf::from("/etc")
        );
    }

    #[test]
    fn tilde_expands_to_home() {
        let Some(home) = std::env::var_os("HOME") else {
            return;
        };
        let home = PathBuf::from(home);
        let cwd = Path::new("/work/repo");
        assert_eq!(resolve_path(cwd, "~").unwrap(), normalize_path(&home));
        assert_eq!(
            resolve_path(cwd, "~/notes.md").unwrap(),
            normalize_path(&home.join("notes.md"))
        );
        // `~user` is not expanded.
        assert_eq!(
            resolve_path(cwd, "~bob/x").unwrap(),
            PathBuf::from("/work/repo/~bob/x")
        );
    }

    #[test]
    fn rejects_empty_and_nul() {
        let cwd = Path::new("/w");
        let err = resolve_path(cwd, "").unwrap_err();
        assert!(err.to_string().contains("must not be empty"), "{err}");
        let err = resolve_path(cwd, "   ").unwrap_err();
        assert!(matches!(err, Error::InvalidPath(_)));
        let err = resolve_path(cwd, "a\0b").unwrap_err();
        assert!(err.to_string().contains("NUL"), "{err}");
    }

    #[test]
    fn relative_display() {
        let base = Path::new("/w/r");
        assert_eq!(display_relative(base, Path::new("/w/r/a/b")), "a/b");
        assert_eq!(display_relative(base, Path::new("/w/r")), ".");
        assert_eq!(display_relative(base, Path::new("/x")), "/x");
    }
}
