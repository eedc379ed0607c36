//! Git drivers named in a repository's config, switched off for the
//! commands keel runs.
//!
//! A repository's config (and the files it includes) can name programs that
//! even a read-only git runs: `filter.<name>.clean`/`smudge`/`process` (run
//! by `git status` and `git diff` on files whose `.gitattributes` name the
//! filter), `diff.<name>.textconv` and `diff.<name>.command` (run by `git
//! diff`, `log -p`, `show`), `merge.<name>.driver`. Their names are the
//! repository's own, so no fixed list of settings can cover them: this
//! module reads the config of the repository a command starts in and names
//! every such setting, which the child then gets empty at command-line
//! priority (an empty filter is no filter; an empty diff program makes git
//! fail with `cannot run` instead of running one). It owns only the reading
//! of config files; [`crate::child_env`] puts the settings in the child's
//! environment.

use std::path::{Path, PathBuf};

/// Config files followed through `include.path` at most this deep.
const MAX_INCLUDE_DEPTH: usize = 5;
/// A config file larger than this is not read (its drivers stay as git
/// reads them: the guards are a second wall behind the approval of config
/// writes, not the only one).
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The keys of every program-running driver setting in the config of the
/// repository containing `cwd`, each to be set empty.
pub fn driver_guards(cwd: &Path) -> Vec<String> {
    let Some(git_dir) = find_git_dir(cwd) else {
        return Vec::new();
    };
    let mut keys = Vec::new();
    let mut seen = Vec::new();
    read_config(&git_dir.join("config"), 0, &mut keys, &mut seen);
    keys.sort();
    keys.dedup();
    keys
}

/// The `.git` folder of the repository containing `cwd` (a `.git` file's
/// `gitdir:` followed; for a worktree, its own config is the common one's
/// `config.worktree` plus the common config, both read).
fn find_git_dir(cwd: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let dot_git = dir.join(".git");
        if dot_git.is_dir() {
            return Some(dot_git);
        }
        if dot_git.is_file() {
            let text = std::fs::read_to_string(&dot_git).ok()?;
            let target = text.strip_prefix("gitdir:")?.trim();
            let path = dir.join(target);
            // A worktree's git dir points at the common dir.
            let common = std::fs::read_to_string(path.join("commondir"))
                .ok()
                .map(|c| path.join(c.trim()));
            return Some(common.unwrap_or(path));
        }
    }
    None
}

fn read_config(path: &Path, depth: usize, keys: &mut Vec<String>, seen: &mut Vec<PathBuf>) {
    if depth > MAX_INCLUDE_DEPTH || seen.iter().any(|p| p == path) {
        return;
    }
    seen.push(path.to_path_buf());
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    if !meta.is_file() || meta.len() > MAX_CONFIG_BYTES {
        return;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return;
    };
    let base = path.parent().unwrap_or(Path::new("/"));
    let mut section = Section::Other;
    for line in text.lines() {
        let line = line.trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.split(']').next().unwrap_or_default();
            section = Section::parse(header);
            // `[section "sub"] key = value` on one line.
            let rest = line.split_once(']').map(|(_, r)| r.trim()).unwrap_or("");
            if !rest.is_empty() {
                on_key(&section, rest, base, depth, keys, seen);
            }
            continue;
        }
        on_key(&section, line, base, depth, keys, seen);
    }
    if path.file_name().is_some_and(|n| n == "config") {
        read_config(&base.join("config.worktree"), depth + 1, keys, seen);
    }
}

fn on_key(
    section: &Section,
    line: &str,
    base: &Path,
    depth: usize,
    keys: &mut Vec<String>,
    seen: &mut Vec<PathBuf>,
) {
    if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
        return;
    }
    let (key, value) = match line.split_once('=') {
        Some((k, v)) => (k.trim(), v.trim()),
        None => (line, ""),
    };
    let key = key.to_ascii_lowercase();
    match section {
        Section::Driver { kind, name } => {
            let runs = match kind.as_str() {
                "filter" => matches!(key.as_str(), "clean" | "smudge" | "process"),
                "diff" => matches!(key.as_str(), "textconv" | "command"),
                "merge" => key == "driver",
                _ => false,
            };
            if runs {
                keys.push(format!("{kind}.{name}.{key}"));
            }
        }
        Section::Include => {
            if key == "path" && !value.is_empty() {
                let value = value.trim_matches('"');
                let target = match value.strip_prefix("~/") {
                    Some(rest) => std::env::var_os("HOME")
                        .map(|h| PathBuf::from(h).join(rest))
                        .unwrap_or_else(|| PathBuf::from(value)),
                    None => base.join(value),
                };
                read_config(&target, depth + 1, keys, seen);
            }
        }
        Section::Other => {}
    }
}

enum Section {
    /// `[filter "name"]`, `[diff "name"]`, `[merge "name"]` (or the old
    /// `[filter.name]` form).
    Driver {
        kind: String,
        name: String,
    },
    /// `[include]` and `[includeIf "…"]` (followed whatever the condition:
    /// naming more settings than git would use is harmless).
    Include,
    Other,
}

impl Section {
    fn parse(header: &str) -> Section {
        let header = header.trim();
        let (kind, name) = match header.split_once(char::is_whitespace) {
            Some((kind, sub)) => (kind, sub.trim().trim_matches('"').to_owned()),
            None => match header.split_once('.') {
                Some((kind, sub)) => (kind, sub.to_ascii_lowercase()),
                None => (header, String::new()),
            },
        };
        let kind = kind.to_ascii_lowercase();
        match kind.as_str() {
            "include" | "includeif" => Section::Include,
            "filter" | "diff" | "merge" if !name.is_empty() => Section::Driver { kind, name },
            _ => Section::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(config: &str) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/config"), config).unwrap();
        std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
        dir
    }

    #[test]
    fn names_every_program_running_driver_setting() {
        let dir = repo(
            "[core]\n\tbare = false\n[filter \"lfs\"]\n\tclean = x\n\tsmudge = y\n\
             \trequired = true\n[diff \"Evil\"]\n\ttextconv = z\n[diff.old]\n\tcommand = w\n\
             [merge \"m\"]\n\tdriver = v\n[include]\n\tpath = more.cfg\n",
        );
        std::fs::write(
            dir.path().join(".git/more.cfg"),
            "[filter \"hidden\"] process = p\n",
        )
        .unwrap();
        let keys = driver_guards(&dir.path().join("sub/deeper"));
        assert_eq!(
            keys,
            [
                "diff.Evil.textconv",
                "diff.old.command",
                "filter.hidden.process",
                "filter.lfs.clean",
                "filter.lfs.smudge",
                "merge.m.driver",
            ]
        );
    }

    #[test]
    fn an_include_loop_ends_and_no_repository_names_nothing() {
        let dir = repo("[include]\n\tpath = config\n");
        assert!(driver_guards(dir.path()).is_empty());
        let plain = tempfile::tempdir().unwrap();
        assert!(driver_guards(plain.path()).is_empty());
    }
}
