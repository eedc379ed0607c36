//! Writing exactly the file the approval gate judged.
//!
//! Owns [`write_no_follow`]: the target is a *physical* path (every symlink
//! already resolved when the call was judged), and the write walks it one
//! component at a time from `/` with `O_NOFOLLOW | O_DIRECTORY`, creating
//! missing folders with `mkdirat`, then writes a temporary file beside the
//! target (`O_CREAT | O_EXCL | O_NOFOLLOW`) and renames it over the final
//! name within the same folder descriptor. A component that became a
//! symlink since the call was judged (a swap by a process running in the
//! background) stops the write with an error instead of following it, so
//! the file written is the one the person approved or the gate classed.
//! It must not know about tools or approvals.

use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat, renameat};
use nix::sys::stat::{Mode, SFlag, fchmod, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn changed(path: &Path, what: &str) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!(
            "{} changed since the call was judged ({what}); nothing was written",
            path.display()
        ),
    )
}

fn open_dir(dir: impl AsFd, name: &std::ffi::OsStr) -> nix::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Writes `contents` to the absolute physical `path`, following no
/// symlink on the way (see the module docs). Blocking.
pub fn write_no_follow(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    let Some(name) = path.file_name() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        ));
    };
    let parent = path.parent().unwrap_or(Path::new("/"));
    let mut dir = openat(
        nix::fcntl::AT_FDCWD,
        "/",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    for component in parent.components() {
        let part = match component {
            Component::RootDir => continue,
            Component::Normal(part) => part,
            Component::Prefix(_) | Component::CurDir | Component::ParentDir => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{} is not a resolved absolute path", path.display()),
                ));
            }
        };
        dir = match open_dir(&dir, part) {
            Ok(next) => next,
            Err(Errno::ENOENT) => {
                match mkdirat(&dir, part, Mode::from_bits_truncate(0o777)) {
                    Ok(()) | Err(Errno::EEXIST) => {}
                    Err(e) => return Err(e.into()),
                }
                open_dir(&dir, part).map_err(|e| refused(path, e))?
            }
            Err(e) => return Err(refused(path, e)),
        };
    }
    let keep_mode = match fstatat(&dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => {
            let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            if kind == SFlag::S_IFLNK {
                return Err(changed(path, "it is now a symlink"));
            }
            if kind != SFlag::S_IFREG {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("{} exists and is not a regular file", path.display()),
                ));
            }
            Some(Mode::from_bits_truncate(st.st_mode & 0o7777))
        }
        Err(Errno::ENOENT) => None,
        Err(e) => return Err(e.into()),
    };
    let tmp = format!(
        ".{}.keel-tmp-{}-{}",
        name.to_string_lossy(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let fd = openat(
        &dir,
        tmp.as_str(),
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o666),
    )?;
    let result = (|| -> std::io::Result<()> {
        if let Some(mode) = keep_mode {
            fchmod(&fd, mode)?;
        }
        let mut file = std::fs::File::from(fd);
        file.write_all(contents)?;
        drop(file);
        renameat(&dir, tmp.as_str(), &dir, name)?;
        Ok(())
    })();
    if result.is_err() {
        let _ = unlinkat(&dir, tmp.as_str(), UnlinkatFlags::NoRemoveDir);
    }
    result
}

/// A folder on the way that cannot be opened without following a link.
fn refused(path: &Path, e: Errno) -> std::io::Error {
    match e {
        Errno::ELOOP | Errno::ENOTDIR => changed(path, "a folder on its way is now a symlink"),
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{PermissionsExt, symlink};

    #[test]
    fn writes_creates_folders_and_keeps_the_mode() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let target = root.join("a/b/c.txt");
        write_no_follow(&target, b"one").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"one");
        fs::set_permissions(&target, fs::Permissions::from_mode(0o751)).unwrap();
        write_no_follow(&target, b"two").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two");
        let mode = fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o751);
        assert_eq!(fs::read_dir(root.join("a/b")).unwrap().count(), 1);
    }

    #[test]
    fn a_folder_swapped_for_a_symlink_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let outside = root.join("outside");
        fs::create_dir(&outside).unwrap();
        symlink(&outside, root.join("sub")).unwrap();
        let err = write_no_follow(&root.join("sub/x.txt"), b"evil").unwrap_err();
        assert!(err.to_string().contains("now a symlink"), "{err}");
        assert!(!outside.join("x.txt").exists());
    }

    #[test]
    fn a_final_name_swapped_for_a_symlink_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::write(root.join("victim"), "keep").unwrap();
        symlink(root.join("victim"), root.join("f")).unwrap();
        let err = write_no_follow(&root.join("f"), b"evil").unwrap_err();
        assert!(err.to_string().contains("now a symlink"), "{err}");
        assert_eq!(fs::read_to_string(root.join("victim")).unwrap(), "keep");
        assert_eq!(fs::read_dir(&root).unwrap().count(), 2, "no temp left");
    }

    #[test]
    fn a_fifo_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        nix::unistd::mkfifo(&root.join("p"), Mode::from_bits_truncate(0o600)).unwrap();
        let err = write_no_follow(&root.join("p"), b"x").unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");
    }
}
