//! The local file system backend.
//!
//! Owns reading and writing files on this machine (writes are atomic: a
//! temporary file in the same directory, then a rename), metadata, directory
//! listing, and the ignore-aware walk built on the `ignore` crate. It must not
//! know about tools or how their output is formatted.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ignore::WalkBuilder;

use super::{DirEntry, FileSystem, Metadata, PathGlob, WalkEntry, WalkOptions, WalkResult};
use crate::error::{Error, Result};

/// [`FileSystem`] over the local disk.
#[derive(Debug, Clone, Copy, Default)]
pub struct LocalFileSystem;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

#[async_trait::async_trait]
impl FileSystem for LocalFileSystem {
    async fn read(&self, path: &Path) -> Result<Vec<u8>> {
        if super::kept_out::is_kept_out(path) {
            return Err(super::kept_out::refusal(path));
        }
        crate::bounded::read_regular_async(path, crate::bounded::MAX_READ_BYTES)
            .await
            .map_err(|e| Error::io(path, e))
    }

    async fn write(&self, path: &Path, contents: &[u8]) -> Result<()> {
        // Write through a symlink to its target rather than replacing the link.
        let target = match tokio::fs::symlink_metadata(path).await {
            Ok(meta) if meta.file_type().is_symlink() => tokio::fs::canonicalize(path)
                .await
                .map_err(|e| Error::io(path, e))?,
            Ok(meta) if meta.is_dir() => {
                return Err(Error::IsADirectory {
                    path: path.to_path_buf(),
                });
            }
            _ => path.to_path_buf(),
        };
        crate::bounded::check_writable(&target).map_err(|e| Error::io(&target, e))?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        tokio::fs::create_dir_all(&parent)
            .await
            .map_err(|e| Error::io(&parent, e))?;
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "file".to_owned());
        let tmp = parent.join(format!(
            ".{name}.keel-tmp-{}-{}",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let result = write_then_rename(&tmp, &target, contents).await;
        if result.is_err() {
            let _ = tokio::fs::remove_file(&tmp).await;
        }
        result
    }

    async fn write_judged(&self, path: &Path, contents: &[u8]) -> Result<()> {
        let (target, contents) = (path.to_path_buf(), contents.to_vec());
        tokio::task::spawn_blocking(move || super::pinned::write_no_follow(&target, &contents))
            .await
            .map_err(|e| Error::Failed(format!("file write failed: {e}")))?
            .map_err(|e| Error::io(path, e))
    }

    async fn metadata(&self, path: &Path) -> Result<Metadata> {
        if super::kept_out::is_kept_out(path) {
            return Err(super::kept_out::refusal(path));
        }
        let meta = tokio::fs::metadata(path)
            .await
            .map_err(|e| Error::io(path, e))?;
        Ok(Metadata {
            is_dir: meta.is_dir(),
            is_file: meta.is_file(),
            len: meta.len(),
        })
    }

    async fn read_dir(&self, path: &Path) -> Result<Vec<DirEntry>> {
        if super::kept_out::is_kept_out(path) {
            return Err(super::kept_out::refusal(path));
        }
        let mut dir = tokio::fs::read_dir(path)
            .await
            .map_err(|e| Error::io(path, e))?;
        let mut entries = Vec::new();
        while let Some(entry) = dir.next_entry().await.map_err(|e| Error::io(path, e))? {
            let file_type = match entry.file_type().await {
                Ok(t) => t,
                Err(e) => {
                    tracing::debug!(path = %entry.path().display(), error = %e, "skipping entry");
                    continue;
                }
            };
            let is_symlink = file_type.is_symlink();
            let is_dir = if is_symlink {
                tokio::fs::metadata(entry.path())
                    .await
                    .is_ok_and(|m| m.is_dir())
            } else {
                file_type.is_dir()
            };
            entries.push(DirEntry {
                name: entry.file_name().to_string_lossy().into_owned(),
                is_dir,
                is_symlink,
            });
        }
        Ok(entries)
    }

    async fn walk(&self, root: &Path, options: &WalkOptions) -> Result<WalkResult> {
        let glob = options.glob.as_deref().map(PathGlob::new).transpose()?;
        if super::kept_out::is_kept_out(root) {
            return Err(super::kept_out::refusal(root));
        }
        tokio::fs::metadata(root)
            .await
            .map_err(|e| Error::io(root, e))?;
        let root = root.to_path_buf();
        let options = options.clone();
        tokio::task::spawn_blocking(move || walk_blocking(&root, &options, glob.as_ref()))
            .await
            .map_err(|e| Error::Failed(format!("file walk failed: {e}")))
    }
}

async fn write_then_rename(tmp: &Path, target: &Path, contents: &[u8]) -> Result<()> {
    tokio::fs::write(tmp, contents)
        .await
        .map_err(|e| Error::io(tmp, e))?;
    // Keep the permissions of a file being replaced (an executable script
    // stays executable).
    if let Ok(meta) = tokio::fs::metadata(target).await {
        tokio::fs::set_permissions(tmp, meta.permissions())
            .await
            .map_err(|e| Error::io(tmp, e))?;
    }
    tokio::fs::rename(tmp, target)
        .await
        .map_err(|e| Error::io(target, e))
}

fn walk_blocking(root: &Path, options: &WalkOptions, glob: Option<&PathGlob>) -> WalkResult {
    let walker = WalkBuilder::new(root)
        .hidden(!options.include_hidden)
        .require_git(false)
        .follow_links(false)
        .max_depth(options.max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|entry| {
            // Only folders are looked up (a kept-out file is reached
            // through its folder, and the root is checked before).
            let kept = || {
                entry.file_type().is_some_and(|t| t.is_dir())
                    && super::kept_out::is_kept_out(entry.path())
            };
            (entry.depth() == 0 || entry.file_name() != ".git") && !kept()
        })
        .build();
    let mut result = WalkResult::default();
    for entry in walker {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                tracing::debug!(error = %e, "walk: skipping unreadable entry");
                continue;
            }
        };
        let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
        if is_dir && (entry.depth() == 0 || !options.include_dirs) {
            continue;
        }
        if let Some(glob) = glob {
            let relative = match entry.path().strip_prefix(root) {
                Ok(rel) if !rel.as_os_str().is_empty() => rel,
                // A file root: match on its own name.
                _ => Path::new(entry.file_name()),
            };
            if !glob.is_match(relative) {
                continue;
            }
        }
        if options
            .limit
            .is_some_and(|limit| result.entries.len() >= limit)
        {
            result.truncated = true;
            break;
        }
        let len = if is_dir {
            0
        } else {
            entry.metadata().map(|m| m.len()).unwrap_or(0)
        };
        result.entries.push(WalkEntry {
            path: entry.into_path(),
            is_dir,
            len,
        });
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn names(root: &Path, result: &WalkResult) -> Vec<String> {
        result
            .entries
            .iter()
            .map(|e| {
                let rel = e
                    .path
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                if e.is_dir { format!("{rel}/") } else { rel }
            })
            .collect()
    }

    #[tokio::test]
    async fn write_creates_parents_and_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/c.txt");
        let fs_ = LocalFileSystem;
        fs_.write(&path, b"one").await.unwrap();
        fs_.write(&path, b"two").await.unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"two");
        // No temporary files are left behind.
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("a/b")).unwrap().collect();
        assert_eq!(leftovers.len(), 1);
        let meta = fs_.metadata(&path).await.unwrap();
        assert!(meta.is_file && !meta.is_dir);
        assert_eq!(meta.len, 3);
    }

    #[tokio::test]
    async fn write_keeps_permissions_and_follows_symlinks() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("run.sh");
        fs::write(&script, "old").unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        let link = dir.path().join("link.sh");
        std::os::unix::fs::symlink(&script, &link).unwrap();
        LocalFileSystem.write(&link, b"new").await.unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read_to_string(&script).unwrap(), "new");
        let mode = fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
    }

    #[tokio::test]
    async fn missing_paths_are_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = LocalFileSystem.read(&missing).await.unwrap_err();
        assert!(
            matches!(err, Error::NotFound { ref path } if *path == missing),
            "{err}"
        );
        assert!(matches!(
            LocalFileSystem.metadata(&missing).await,
            Err(Error::NotFound { .. })
        ));
        assert!(matches!(
            LocalFileSystem
                .walk(&missing, &WalkOptions::default())
                .await,
            Err(Error::NotFound { .. })
        ));
        let err = LocalFileSystem.write(dir.path(), b"x").await.unwrap_err();
        assert!(matches!(err, Error::IsADirectory { .. }), "{err}");
    }

    #[tokio::test]
    async fn read_dir_reports_dirs() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("f"), "").unwrap();
        let mut entries = LocalFileSystem.read_dir(dir.path()).await.unwrap();
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(entries.len(), 2);
        assert_eq!((entries[0].name.as_str(), entries[0].is_dir), ("f", false));
        assert_eq!((entries[1].name.as_str(), entries[1].is_dir), ("sub", true));
    }

    #[tokio::test]
    async fn walk_honours_ignore_files_hidden_depth_and_limit() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join(".gitignore"), "ignored.txt\nbuild/\n").unwrap();
        fs::write(root.join(".ignore"), "*.log\n").unwrap();
        fs::write(root.join("a.txt"), "").unwrap();
        fs::write(root.join("ignored.txt"), "").unwrap();
        fs::write(root.join("x.log"), "").unwrap();
        fs::create_dir_all(root.join("build")).unwrap();
        fs::write(root.join("build/out.txt"), "").unwrap();
        fs::create_dir_all(root.join("src/deep")).unwrap();
        fs::write(root.join("src/lib.rs"), "").unwrap();
        fs::write(root.join("src/deep/x.rs"), "").unwrap();
        fs::write(root.join(".env"), "").unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join(".git/config"), "").unwrap();

        let fs_ = LocalFileSystem;
        let all = fs_.walk(root, &WalkOptions::default()).await.unwrap();
        assert_eq!(
            names(root, &all),
            vec!["a.txt", "src/deep/x.rs", "src/lib.rs"]
        );
        assert!(!all.truncated);

        let hidden = WalkOptions {
            include_hidden: true,
            include_dirs: true,
            ..Default::default()
        };
        let with_hidden = fs_.walk(root, &hidden).await.unwrap();
        assert_eq!(
            names(root, &with_hidden),
            vec![
                ".env",
                ".gitignore",
                ".ignore",
                "a.txt",
                "src/",
                "src/deep/",
                "src/deep/x.rs",
                "src/lib.rs"
            ]
        );

        let shallow = WalkOptions {
            max_depth: Some(1),
            ..Default::default()
        };
        assert_eq!(
            names(root, &fs_.walk(root, &shallow).await.unwrap()),
            vec!["a.txt"]
        );

        let limited = WalkOptions {
            limit: Some(2),
            ..Default::default()
        };
        let r = fs_.walk(root, &limited).await.unwrap();
        assert_eq!(r.entries.len(), 2);
        assert!(r.truncated);

        let globbed = WalkOptions {
            glob: Some("*.rs".to_owned()),
            limit: Some(2),
            ..Default::default()
        };
        let r = fs_.walk(root, &globbed).await.unwrap();
        assert_eq!(names(root, &r), vec!["src/deep/x.rs", "src/lib.rs"]);
        assert!(!r.truncated, "exactly the limit is not truncation");
    }

    /// A kept-out folder is not read, listed or walked into, through a
    /// link either; its neighbours are.
    #[tokio::test]
    async fn kept_out_folders_are_never_read() {
        let dir = tempfile::tempdir().unwrap();
        let secrets = dir.path().join("home/mcp-credentials");
        std::fs::create_dir_all(&secrets).unwrap();
        std::fs::write(secrets.join("s.json"), "token").unwrap();
        std::fs::write(dir.path().join("open.txt"), "fine").unwrap();
        std::os::unix::fs::symlink(&secrets, dir.path().join("link")).unwrap();
        super::super::keep_out([secrets.clone()]);
        let fs = LocalFileSystem;
        assert!(fs.read(&secrets.join("s.json")).await.is_err());
        let via_link = fs.read(&dir.path().join("link/s.json")).await.unwrap_err();
        assert!(via_link.to_string().contains("secrets"), "{via_link}");
        assert!(fs.read_dir(&secrets).await.is_err());
        // Not even whether a file is there.
        let missing = fs.metadata(&secrets.join("none.json")).await.unwrap_err();
        assert!(missing.to_string().contains("secrets"), "{missing}");
        assert!(fs.walk(&secrets, &WalkOptions::default()).await.is_err());
        let all = WalkOptions {
            include_hidden: true,
            ..WalkOptions::default()
        };
        let walked = fs.walk(dir.path(), &all).await.unwrap();
        let names = names(dir.path(), &walked);
        assert!(names.contains(&"open.txt".to_owned()), "{names:?}");
        assert!(!names.iter().any(|n| n.contains("s.json")), "{names:?}");
        assert_eq!(
            fs.read(&dir.path().join("open.txt")).await.unwrap(),
            b"fine"
        );
    }

    #[tokio::test]
    async fn walk_of_a_file_yields_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("one.txt");
        fs::write(&file, "hello").unwrap();
        let r = LocalFileSystem
            .walk(&file, &WalkOptions::default())
            .await
            .unwrap();
        assert_eq!(r.entries.len(), 1);
        assert_eq!(r.entries[0].path, file);
        assert_eq!(r.entries[0].len, 5);
    }
}
