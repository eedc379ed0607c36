//! Reading and writing files without hanging or exhausting memory.
//!
//! Owns [`read_regular`] and [`check_writable`]: a file is opened with
//! `O_NONBLOCK` (so a FIFO or a device never blocks the open), checked with
//! `fstat` to be a regular file, and read up to a cap ([`MAX_READ_BYTES`])
//! that is checked against its size before reading and enforced while
//! reading (files such as `/proc/…` report size 0). A write target that
//! exists and is not a regular file (FIFO, device, socket) is refused. Both
//! the `read`/`edit` tools (through [`crate::LocalFileSystem`]) and the
//! app-server's `fs/*` use these. It must not know about tools or the wire.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The most one read returns: 128 MiB.
pub const MAX_READ_BYTES: u64 = 128 * 1024 * 1024;

/// What kind of non-regular file `t` is, for an error message.
fn kind(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// The whole of the regular file at `path`, at most `cap` bytes; an error
/// (`InvalidInput`) for anything else or anything larger. Blocking: call it
/// from a blocking thread.
pub fn read_regular(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits() | nix::fcntl::OFlag::O_NOCTTY.bits())
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is {}; only regular files are read",
                path.display(),
                kind(meta.file_type())
            ),
        ));
    }
    if meta.len() > cap {
        return Err(too_big(path, cap));
    }
    let mut out = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    let read = (&file as &File).take(cap + 1).read_to_end(&mut out)?;
    if read as u64 > cap {
        return Err(too_big(path, cap));
    }
    Ok(out)
}

fn too_big(path: &Path, cap: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!(
            "{} is larger than {} MiB, the most keel reads at once",
            path.display(),
            cap / (1024 * 1024)
        ),
    )
}

/// Refuses a write target that exists and is not a regular file or a
/// directory's new entry (a FIFO would block, a device would be written).
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(m) => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is {}; only regular files are written",
                path.display(),
                kind(m.file_type())
            ),
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// [`read_regular`] on a blocking thread.
pub async fn read_regular_async(path: &Path, cap: u64) -> std::io::Result<Vec<u8>> {
    let owned = path.to_path_buf();
    tokio::task::spawn_blocking(move || read_regular(&owned, cap))
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_bounded_regular_files_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("a.txt");
        std::fs::write(&f, "hello").unwrap();
        assert_eq!(read_regular(&f, 10).unwrap(), b"hello");
        let e = read_regular(&f, 3).unwrap_err();
        assert!(e.to_string().contains("larger than"), "{e}");
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        let e = read_regular(&fifo, 10).unwrap_err();
        assert!(e.to_string().contains("FIFO"), "{e}");
        assert!(check_writable(&fifo).is_err());
        let e = read_regular(Path::new("/dev/zero"), 10).unwrap_err();
        assert!(e.to_string().contains("character device"), "{e}");
        assert!(read_regular(Path::new("/proc/self/status"), MAX_READ_BYTES).is_ok());
        assert!(check_writable(&f).is_ok());
        assert!(check_writable(&dir.path().join("new")).is_ok());
    }
}
