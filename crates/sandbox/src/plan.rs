//! What a spec means on this machine: which folders are writable, which
//! stay read-only inside them, whether the network is on.
//!
//! Owns [`Plan`] and [`plan`]: a function of the spec, the temp dir, keel's
//! own protected folders and the folders keel keeps its secrets in
//! (`keel_tools::kept_out`), with every path resolved (symlinks and `..`)
//! so the walls are built on the real folders. It also answers
//! [`may_write`] for keel's own in-process writes (`write`, `edit`), so the
//! built-in file tools and the kernel agree. It must not know how the walls
//! are built.

use std::path::{Path, PathBuf};

use keel_tools::SandboxSpec;

/// Device files every confined command may write (or use as a terminal).
pub const WRITABLE_DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
    "/dev/shm",
];

/// Names kept read-only inside every writable root.
pub const PROTECTED_NAMES: &[&str] = &[".git", ".keel"];

/// The walls of one confined process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    /// Folders (and files) writable with everything beneath them.
    pub writable: Vec<PathBuf>,
    /// Folders inside `writable` that stay read-only (made read-only
    /// mounts in the child's own mount namespace).
    pub read_only: Vec<PathBuf>,
    /// Folders the command cannot see into at all (keel's secrets: each
    /// covered by an empty, read-only mount in the child's own mount
    /// namespace).
    pub hidden: Vec<PathBuf>,
    /// Network sockets allowed.
    pub network: bool,
}

/// The plan of `spec`. `temp_dir` is writable under `workspace-write`;
/// `protected` (keel's home) stays read-only wherever it lies inside a
/// writable root.
pub fn plan(spec: &SandboxSpec, temp_dir: &Path, protected: &[PathBuf]) -> Plan {
    use keel_protocol::SandboxMode;
    let mut roots: Vec<PathBuf> = Vec::new();
    match spec.policy.mode {
        SandboxMode::WorkspaceWrite => {
            roots.push(spec.workspace.clone());
            if !spec.policy.exclude_temp_dir {
                roots.push(temp_dir.to_path_buf());
            }
            roots.extend(spec.policy.writable_roots.iter().cloned());
        }
        SandboxMode::ReadOnly | SandboxMode::DangerFullAccess => {}
    }
    let roots: Vec<PathBuf> = dedup(roots.iter().filter_map(|r| real(r)).collect());
    let mut read_only = Vec::new();
    for root in &roots {
        for name in PROTECTED_NAMES {
            let p = root.join(name);
            if p.is_dir() {
                read_only.push(p);
            } else if *name == ".git"
                && p.is_file()
                && let Some(gitdir) = worktree_gitdir(&p)
            {
                // A worktree: its git folder and the repository's common one.
                if let Some(common) = common_dir(&gitdir) {
                    read_only.push(common);
                }
                read_only.push(gitdir);
            }
        }
    }
    for p in protected.iter().filter_map(|p| real(p)) {
        read_only.push(p);
    }
    let read_only = dedup(
        read_only
            .into_iter()
            .filter_map(|p| real(&p))
            .filter(|p| roots.iter().any(|r| p.starts_with(r)))
            .collect(),
    );
    let mut writable = roots;
    writable.extend(spec.grant.writable.iter().filter_map(|p| real(p)));
    let hidden = dedup(
        keel_tools::kept_out()
            .iter()
            .filter_map(|p| real(p))
            .filter(|p| p.is_dir())
            .collect(),
    );
    Plan {
        writable: dedup(writable),
        read_only,
        hidden,
        network: spec.network(),
    }
}

/// Whether keel itself may write the physical file `path` for a call under
/// `spec` (the same walls as a confined command's).
pub fn may_write(spec: &SandboxSpec, path: &Path, temp_dir: &Path, protected: &[PathBuf]) -> bool {
    if !spec.confines() {
        return true;
    }
    let Some(path) = real_or_parent(path) else {
        return false;
    };
    let plan = plan(spec, temp_dir, protected);
    plan.writable.iter().any(|r| path.starts_with(r))
        && !plan.read_only.iter().any(|r| path.starts_with(r))
}

/// `path` with every symlink and `..` resolved; `None` when it is missing.
fn real(path: &Path) -> Option<PathBuf> {
    std::fs::canonicalize(path).ok()
}

/// `path` resolved through its nearest existing ancestor (a file about to
/// be created).
pub(crate) fn real_or_parent(path: &Path) -> Option<PathBuf> {
    if let Some(p) = real(path) {
        return Some(p);
    }
    let mut rest = Vec::new();
    let mut cur = path;
    loop {
        let name = cur.file_name()?;
        if name == ".." || name == "." {
            return None;
        }
        rest.push(name.to_owned());
        cur = cur.parent()?;
        if let Some(mut base) = real(cur) {
            for n in rest.iter().rev() {
                base.push(n);
            }
            return Some(base);
        }
    }
}

fn dedup(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = Vec::new();
    paths.retain(|p| {
        if seen.contains(p) {
            false
        } else {
            seen.push(p.clone());
            true
        }
    });
    paths
}

/// The folder a worktree's `.git` file points at (`gitdir: …`).
fn worktree_gitdir(dot_git: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(dot_git).ok()?;
    let target = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let target = Path::new(target);
    let full = if target.is_absolute() {
        target.to_path_buf()
    } else {
        dot_git.parent()?.join(target)
    };
    real(&full)
}

/// The repository's common folder of a worktree's git folder.
fn common_dir(gitdir: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(gitdir.join("commondir")).ok()?;
    real(&gitdir.join(text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{SandboxGrant, SandboxMode, SandboxPolicy};

    fn spec(mode: SandboxMode, ws: &Path) -> SandboxSpec {
        SandboxSpec::new(SandboxPolicy::of(mode), ws)
    }

    #[test]
    fn workspace_write_keeps_git_keel_and_home_read_only() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let home = tmp.path().join("tmpdir/keel-home");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(ws.join(".keel")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let t = tmp.path().join("tmpdir");
        let p = plan(
            &spec(SandboxMode::WorkspaceWrite, &ws),
            &t,
            std::slice::from_ref(&home),
        );
        let ws = ws.canonicalize().unwrap();
        assert_eq!(p.writable, vec![ws.clone(), t.canonicalize().unwrap()]);
        assert_eq!(
            p.read_only,
            vec![
                ws.join(".git"),
                ws.join(".keel"),
                home.canonicalize().unwrap()
            ]
        );
        assert!(!p.network);
    }

    #[test]
    fn a_worktree_protects_its_git_folders() {
        let tmp = tempfile::tempdir().unwrap();
        let main_git = tmp.path().join("repo/.git");
        let wt_git = main_git.join("worktrees/wt");
        std::fs::create_dir_all(&wt_git).unwrap();
        std::fs::write(wt_git.join("commondir"), "../..\n").unwrap();
        let ws = tmp.path().join("repo/wt");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join(".git"), format!("gitdir: {}\n", wt_git.display())).unwrap();
        let mut s = spec(SandboxMode::WorkspaceWrite, &ws);
        // The repository lies inside a writable root.
        s.policy.writable_roots = vec![tmp.path().join("repo")];
        let p = plan(&s, Path::new("/nonexistent-temp"), &[]);
        let main_git = main_git.canonicalize().unwrap();
        assert!(p.read_only.contains(&main_git), "{p:?}");
        assert!(p.read_only.contains(&wt_git.canonicalize().unwrap()));
    }

    #[test]
    fn read_only_writes_nothing_and_grants_add_paths_and_network() {
        let tmp = tempfile::tempdir().unwrap();
        let mut s = spec(SandboxMode::ReadOnly, tmp.path());
        assert!(plan(&s, tmp.path(), &[]).writable.is_empty());
        s.grant = SandboxGrant {
            network: true,
            writable: vec![tmp.path().to_path_buf()],
            unconfined: false,
        };
        let p = plan(&s, tmp.path(), &[]);
        assert_eq!(p.writable, vec![tmp.path().canonicalize().unwrap()]);
        assert!(p.network);
    }

    #[test]
    fn in_process_writes_follow_the_same_walls() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join(".git")).unwrap();
        std::fs::create_dir_all(tmp.path().join("out")).unwrap();
        let t = Path::new("/nonexistent-temp");
        let s = spec(SandboxMode::WorkspaceWrite, &ws);
        assert!(may_write(&s, &ws.join("new/file.txt"), t, &[]));
        assert!(!may_write(&s, &ws.join(".git/config"), t, &[]));
        assert!(!may_write(&s, &ws.join("../out/x"), t, &[]));
        std::os::unix::fs::symlink(tmp.path().join("out"), ws.join("link")).unwrap();
        assert!(!may_write(&s, &ws.join("link/x"), t, &[]));
        assert!(!may_write(
            &spec(SandboxMode::ReadOnly, &ws),
            &ws.join("a"),
            t,
            &[]
        ));
        assert!(may_write(
            &spec(SandboxMode::DangerFullAccess, &ws),
            Path::new("/etc/x"),
            t,
            &[]
        ));
    }
}
