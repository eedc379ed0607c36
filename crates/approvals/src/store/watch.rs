//! Hearing another process change an SQLite approvals database.
//!
//! Owns [`watch_sqlite`]: a file-system watch (inotify on Linux) on the
//! database's folder that wakes local waiters whenever the database or its
//! write-ahead log changes, which is what every commit of another keel
//! process (`keel approvals approve`, another front-end, the inbox) does.
//! The waiter then re-reads its row, so a decision taken elsewhere lands at
//! once; the waiter's slow poll stays as the backstop for a watch that
//! cannot be set up or misses an event. It must not know rows or decisions.

use std::path::Path;
use std::sync::Arc;

use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::Notify;

use super::ChangeWatch;

/// Watches `db` (and its `-wal`/`-journal` siblings) for changes and
/// wakes `wake`; `None` when no watch can be set up here.
pub(crate) fn watch_sqlite(db: &Path, wake: Arc<Notify>) -> Option<ChangeWatch> {
    let dir = db
        .parent()
        .filter(|p| !p.as_os_str().is_empty())?
        .to_path_buf();
    let name = db.file_name()?.to_string_lossy().into_owned();
    let handler = move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        let relevant = matches!(
            event.kind,
            EventKind::Modify(_) | EventKind::Create(_) | EventKind::Remove(_)
        ) && event.paths.iter().any(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(name.as_str()))
        });
        if relevant {
            wake.notify_waiters();
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(e) => {
            tracing::debug!(error = %e, "no file watch for the approvals database; waiters poll");
            return None;
        }
    };
    if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
        tracing::debug!(error = %e, "no file watch for the approvals database; waiters poll");
        return None;
    }
    Some(Box::new(watcher))
}
