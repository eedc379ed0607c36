//! Glob semantics for walks.
//!
//! Owns how a find/grep glob is matched against a walked path, so every
//! backend filters the same way: a pattern without `/` matches the file name
//! at any depth (like `fd --glob` or `rg -g`), a pattern with `/` matches the
//! path relative to the search root, `*` does not cross `/`, and `**/`
//! matches zero or more directories. It must not know about tools or I/O.

use std::path::Path;

use globset::{GlobBuilder, GlobMatcher};

use crate::error::{Error, Result};

/// A compiled glob.
#[derive(Debug, Clone)]
pub struct PathGlob {
    matcher: GlobMatcher,
    by_name: bool,
}

impl PathGlob {
    /// Compiles `pattern`; an invalid glob is an [`Error::InvalidArguments`].
    pub fn new(pattern: &str) -> Result<Self> {
        let trimmed = pattern.trim();
        if trimmed.is_empty() {
            return Err(Error::InvalidArguments(
                "glob pattern must not be empty".to_owned(),
            ));
        }
        let trimmed = trimmed.strip_prefix("./").unwrap_or(trimmed);
        let trimmed = trimmed.trim_end_matches('/');
        let by_name = !trimmed.contains('/');
        let glob = GlobBuilder::new(trimmed)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|e| {
                Error::InvalidArguments(format!("invalid glob pattern {pattern:?}: {e}"))
            })?;
        Ok(Self {
            matcher: glob.compile_matcher(),
            by_name,
        })
    }

    /// Whether `relative` (a path relative to the search root) matches.
    pub fn is_match(&self, relative: &Path) -> bool {
        if self.by_name {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(Path::new(name)))
        } else {
            self.matcher.is_match(relative)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(pattern: &str, path: &str) -> bool {
        PathGlob::new(pattern).unwrap().is_match(Path::new(path))
    }

    #[test]
    fn name_patterns_match_at_any_depth() {
        assert!(m("*.rs", "main.rs"));
        assert!(m("*.rs", "src/deep/lib.rs"));
        assert!(!m("*.rs", "src/lib.rsx"));
        assert!(m("Cargo.toml", "crates/a/Cargo.toml"));
        assert!(m("*.{ts,tsx}", "web/app.tsx"));
    }

    #[test]
    fn path_patterns_match_relative_path() {
        assert!(m("src/*.rs", "src/lib.rs"));
        assert!(!m("src/*.rs", "src/a/lib.rs"));
        assert!(m("src/**/*.rs", "src/a/b/lib.rs"));
        assert!(m("src/**/*.rs", "src/lib.rs"));
        assert!(m("**/*.json", "package.json"));
        assert!(m("**/*.json", "a/b/c.json"));
        assert!(m("./src/*.rs", "src/lib.rs"));
        assert!(!m("src/*.rs", "other/src/lib.rs"));
    }

    #[test]
    fn invalid_glob_is_an_argument_error() {
        let err = PathGlob::new("a[").unwrap_err();
        assert!(matches!(err, Error::InvalidArguments(_)), "{err}");
        assert!(PathGlob::new("  ").is_err());
    }
}
