//! The unix socket of `--listen unix://[PATH]`: where it lives, how a stale
//! one is replaced, its mode, and its removal on shutdown.
//!
//! `unix://` alone uses [`default_socket_path`]:
//! `$KEEL_HOME/app-server-control/app-server-control.sock` (the directory is
//! created `0700`). An existing socket file that nobody answers on is
//! replaced; one a server still answers on, or a path that is not a socket,
//! is an error (keel never deletes a regular file). The socket is `chmod
//! 0600` right after `bind`, before the first `accept`, and removed when
//! the [`SocketGuard`] drops — only if the path still is the socket keel
//! bound. The protocol on it is the same as on `ws://` (an HTTP upgrade to
//! WebSocket, with the same auth), see [`super::network`].

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use tokio::net::{UnixListener, UnixStream};

use crate::error::{Error, Result};

/// Directory of the default socket, under `KEEL_HOME`.
pub const DEFAULT_SOCKET_DIR: &str = "app-server-control";
/// File name of the default socket.
pub const DEFAULT_SOCKET_FILE: &str = "app-server-control.sock";
/// Mode of the socket file.
pub const SOCKET_MODE: u32 = 0o600;
/// Mode of the default socket's directory when keel creates it.
const SOCKET_DIR_MODE: u32 = 0o700;

/// `$KEEL_HOME/app-server-control/app-server-control.sock`.
pub fn default_socket_path(home: &Path) -> PathBuf {
    home.join(DEFAULT_SOCKET_DIR).join(DEFAULT_SOCKET_FILE)
}

/// Removes the socket file when dropped, if it is still ours.
#[derive(Debug)]
pub struct SocketGuard {
    path: PathBuf,
    id: (u64, u64),
}

impl SocketGuard {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        if file_id(&self.path) == Some(self.id)
            && let Err(e) = std::fs::remove_file(&self.path)
            && e.kind() != ErrorKind::NotFound
        {
            tracing::warn!(path = %self.path.display(), error = %e, "cannot remove the socket file");
        }
    }
}

fn file_id(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Binds the socket at `path` (absolute), replacing a stale one.
pub async fn bind(path: &Path, default_dir: bool) -> Result<(UnixListener, SocketGuard)> {
    use std::os::unix::fs::PermissionsExt;
    let io = |what: &str, source| Error::io(format!("{what} {}", path.display()), source);
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        if default_dir && !parent.exists() {
            std::fs::create_dir_all(parent).map_err(|e| io("cannot create the directory of", e))?;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(SOCKET_DIR_MODE))
                .map_err(|e| io("cannot chmod the directory of", e))?;
        } else if !parent.is_dir() {
            return Err(Error::Config(format!(
                "the directory of the socket {} does not exist",
                path.display()
            )));
        }
    }
    remove_stale(path).await?;
    let listener = UnixListener::bind(path).map_err(|e| io("cannot bind", e))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(SOCKET_MODE))
        .map_err(|e| io("cannot chmod", e))?;
    let id = file_id(path).ok_or_else(|| {
        io(
            "cannot stat",
            std::io::Error::new(ErrorKind::NotFound, "socket vanished"),
        )
    })?;
    Ok((
        listener,
        SocketGuard {
            path: path.to_owned(),
            id,
        },
    ))
}

/// Removes a socket file nobody listens on; refuses anything else.
async fn remove_stale(path: &Path) -> Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("cannot stat {}", path.display()), e)),
    };
    if !meta.file_type().is_socket() {
        return Err(Error::Config(format!(
            "{} exists and is not a socket; not replacing it",
            path.display()
        )));
    }
    match UnixStream::connect(path).await {
        Ok(_) => Err(Error::Config(format!(
            "another server is listening on {}",
            path.display()
        ))),
        Err(e) if matches!(e.kind(), ErrorKind::ConnectionRefused | ErrorKind::NotFound) => {
            tracing::info!(path = %path.display(), "replacing a stale socket");
            match std::fs::remove_file(path) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
                Err(e) => Err(Error::io(
                    format!("cannot remove the stale socket {}", path.display()),
                    e,
                )),
            }
        }
        Err(e) => Err(Error::io(format!("cannot probe {}", path.display()), e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[tokio::test]
    async fn binds_0600_replaces_stale_sockets_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = default_socket_path(dir.path());
        let (listener, guard) = bind(&path, true).await.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), SOCKET_MODE);
        assert_eq!(mode(path.parent().unwrap()), SOCKET_DIR_MODE);
        // A live server is not replaced.
        assert!(bind(&path, true).await.is_err());
        // A stale socket (its listener gone, the file left behind) is.
        drop(listener);
        std::mem::forget(guard);
        assert!(path.exists());
        let (_listener, guard) = bind(&path, true).await.unwrap();
        drop(guard);
        assert!(!path.exists(), "removed on drop");
    }

    #[tokio::test]
    async fn never_replaces_a_regular_file_or_someone_elses_socket() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-socket");
        std::fs::write(&file, "keep me").unwrap();
        assert!(bind(&file, false).await.is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
        assert!(bind(&dir.path().join("nodir/s.sock"), false).await.is_err());

        let path = dir.path().join("s.sock");
        let (listener, guard) = bind(&path, false).await.unwrap();
        // Someone replaced the file: the guard leaves the new one alone.
        drop(listener);
        let other = dir.path().join("other.sock");
        let _other = std::os::unix::net::UnixListener::bind(&other).unwrap();
        std::fs::rename(&other, &path).unwrap();
        drop(guard);
        assert!(path.exists());
    }
}
