//! `fs/watch` / `fs/unwatch` and the `fs/changed` notifications.
//!
//! One OS watcher (inotify, through the `notify` crate) serves every
//! connection of the process. A watch of a directory reports changes of
//! the directory and of its direct entries (not recursive); a watch of a
//! file watches its directory and reports that file only, so an editor's
//! save-by-rename is still seen. Events are gathered for [`DEBOUNCE`] and
//! sent as one `fs/changed {watchId, changedPaths}` per watch. Watch ids
//! belong to the connection that made them; its watches end when it
//! closes.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use keel_app_server_protocol::v2::{FsChangedNotification, ServerNotification};
use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use crate::outbound::{Connection, ConnectionId};
use crate::rpc_error::RpcError;

/// How long events are gathered before they are sent.
pub const DEBOUNCE: Duration = Duration::from_millis(50);

struct Watch {
    conn: Arc<Connection>,
    /// The canonical path asked for.
    path: PathBuf,
    /// The directory the OS watches for it.
    dir: PathBuf,
    is_dir: bool,
}

impl Watch {
    fn covers(&self, changed: &Path) -> bool {
        if self.is_dir {
            changed == self.path || changed.parent() == Some(self.path.as_path())
        } else {
            changed == self.path
        }
    }
}

#[derive(Default)]
struct State {
    watcher: Option<notify::RecommendedWatcher>,
    watches: HashMap<(ConnectionId, String), Watch>,
    /// Watched directory → how many watches use it.
    dirs: HashMap<PathBuf, usize>,
}

/// Every watch of the process.
#[derive(Default)]
pub struct Watchers {
    state: Arc<Mutex<State>>,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|e| e.into_inner())
}

fn os_error(e: notify::Error) -> RpcError {
    match e.kind {
        notify::ErrorKind::Io(io) => RpcError::from(io),
        _ => RpcError::internal(e),
    }
}

impl Watchers {
    /// Starts watch `watch_id` of `conn` on `path` (absolute, normalised,
    /// existing); returns the canonical path.
    pub async fn watch(
        &self,
        conn: &Arc<Connection>,
        watch_id: String,
        path: &Path,
    ) -> Result<PathBuf, RpcError> {
        let path = tokio::fs::canonicalize(path).await?;
        let is_dir = tokio::fs::metadata(&path).await?.is_dir();
        let dir = if is_dir {
            path.clone()
        } else {
            path.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| path.clone())
        };
        let mut state = lock(&self.state);
        let key = (conn.id, watch_id);
        if state.watches.contains_key(&key) {
            return Err(RpcError::invalid(format!(
                "watchId {:?} is already in use",
                key.1
            )));
        }
        if state.watcher.is_none() {
            state.watcher = Some(self.start()?);
        }
        if !state.dirs.contains_key(&dir)
            && let Some(w) = state.watcher.as_mut()
        {
            w.watch(&dir, RecursiveMode::NonRecursive)
                .map_err(os_error)?;
        }
        *state.dirs.entry(dir.clone()).or_default() += 1;
        state.watches.insert(
            key,
            Watch {
                conn: conn.clone(),
                path: path.clone(),
                dir,
                is_dir,
            },
        );
        Ok(path)
    }

    /// Ends a watch of `conn`.
    pub fn unwatch(&self, conn: ConnectionId, watch_id: &str) -> Result<(), RpcError> {
        let mut state = lock(&self.state);
        let Some(w) = state.watches.remove(&(conn, watch_id.to_owned())) else {
            return Err(RpcError::invalid(format!("no watch {watch_id:?}")));
        };
        release(&mut state, &w.dir);
        Ok(())
    }

    /// Ends every watch of a closed connection.
    pub fn connection_closed(&self, conn: ConnectionId) {
        let mut state = lock(&self.state);
        let keys: Vec<(ConnectionId, String)> = state
            .watches
            .keys()
            .filter(|(c, _)| *c == conn)
            .cloned()
            .collect();
        for key in keys {
            if let Some(w) = state.watches.remove(&key) {
                release(&mut state, &w.dir);
            }
        }
    }

    /// How many watches are open (for tests).
    pub fn count(&self) -> usize {
        lock(&self.state).watches.len()
    }

    /// The OS watcher and the task that turns its events into notifications.
    fn start(&self) -> Result<notify::RecommendedWatcher, RpcError> {
        let (tx, rx) = mpsc::unbounded_channel::<PathBuf>();
        let watcher =
            notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
                Ok(event) => {
                    for path in event.paths {
                        let _ = tx.send(path);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "file watcher error"),
            })
            .map_err(os_error)?;
        tokio::spawn(deliver(Arc::downgrade(&self.state), rx));
        Ok(watcher)
    }
}

/// Drops a use of a watched directory; the last one stops watching it.
fn release(state: &mut State, dir: &Path) {
    let last = match state.dirs.get_mut(dir) {
        Some(n) => {
            *n -= 1;
            *n == 0
        }
        None => false,
    };
    if last {
        state.dirs.remove(dir);
        if let Some(w) = state.watcher.as_mut()
            && let Err(e) = w.unwatch(dir)
        {
            tracing::debug!(error = %e, dir = %dir.display(), "unwatch failed");
        }
    }
}

async fn deliver(state: std::sync::Weak<Mutex<State>>, mut rx: mpsc::UnboundedReceiver<PathBuf>) {
    while let Some(first) = rx.recv().await {
        let mut changed = BTreeSet::from([first]);
        let deadline = tokio::time::Instant::now() + DEBOUNCE;
        while let Ok(Some(path)) = tokio::time::timeout_at(deadline, rx.recv()).await {
            changed.insert(path);
        }
        let Some(state) = state.upgrade() else { return };
        let sends: Vec<(Arc<Connection>, FsChangedNotification)> = {
            let state = lock(&state);
            state
                .watches
                .iter()
                .filter_map(|((_, id), w)| {
                    let paths: Vec<String> = changed
                        .iter()
                        .filter(|p| w.covers(p))
                        .map(|p| p.display().to_string())
                        .collect();
                    (!paths.is_empty()).then(|| {
                        (
                            w.conn.clone(),
                            FsChangedNotification {
                                watch_id: id.clone(),
                                changed_paths: paths,
                            },
                        )
                    })
                })
                .collect()
        };
        for (conn, n) in sends {
            conn.notify(&ServerNotification::FsChanged(n)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outbound::{ClientCaps, SlowClientPolicy};
    use serde_json::Value;

    #[tokio::test]
    async fn changes_are_reported_to_the_watch_and_end_with_the_connection() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("a.txt"), "1").unwrap();
        let (c, mut rx) = Connection::new(1, SlowClientPolicy::Backpressure);
        c.set_caps(ClientCaps {
            initialized: true,
            ..ClientCaps::default()
        });
        let c = Arc::new(c);
        let w = Watchers::default();
        let got = w.watch(&c, "w1".into(), &root.join("a.txt")).await.unwrap();
        assert_eq!(got, root.join("a.txt"));
        assert!(w.watch(&c, "w1".into(), &root).await.is_err());
        w.watch(&c, "w2".into(), &root).await.unwrap();
        std::fs::write(root.join("b.txt"), "2").unwrap();
        let frame = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap()
            .unwrap();
        let v: Value = serde_json::from_slice(&frame).unwrap();
        assert_eq!(v["method"], "fs/changed");
        assert_eq!(v["params"]["watchId"], "w2", "b.txt is not a.txt: {v}");
        assert_eq!(
            v["params"]["changedPaths"][0],
            root.join("b.txt").display().to_string()
        );
        assert!(w.unwatch(1, "nope").is_err());
        w.unwatch(1, "w1").unwrap();
        assert_eq!(w.count(), 1);
        w.connection_closed(1);
        assert_eq!(w.count(), 0);
    }
}
