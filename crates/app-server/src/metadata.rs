//! What the protocol keeps about a thread beyond its session file: whether
//! it is archived and its Git metadata (`thread/metadata/update`).
//!
//! Stored in a sidecar per thread, `$KEEL_HOME/app-server/threads/<id>.json`
//! (written whole or not at all, on disk or with the shared database in
//! PostgreSQL: `keel_session_store::home_files`), and applied to every
//! `Thread` keel returns. The session file is
//! never touched, so RPC mode and the CLI see the same conversation; an
//! archived thread is only hidden from `thread/list` and refused by
//! `thread/resume` until it is unarchived.

use std::path::{Path, PathBuf};

use keel_app_server_protocol::v2::{GitInfo, Thread, ThreadMetadataGitInfoUpdateParams};
use serde::{Deserialize, Serialize};

/// The sidecar of one thread.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ThreadMeta {
    pub archived: bool,
    pub git_sha: Option<String>,
    pub git_branch: Option<String>,
    pub git_origin_url: Option<String>,
}

impl ThreadMeta {
    /// The Git metadata as the protocol shows it (`None` when nothing is set).
    pub fn git_info(&self) -> Option<GitInfo> {
        if self.git_sha.is_none() && self.git_branch.is_none() && self.git_origin_url.is_none() {
            return None;
        }
        Some(GitInfo {
            sha: self.git_sha.clone(),
            branch: self.git_branch.clone(),
            origin_url: self.git_origin_url.clone(),
        })
    }

    /// Applies a `thread/metadata/update` patch (empty strings clear).
    pub fn patch_git(&mut self, patch: ThreadMetadataGitInfoUpdateParams) {
        patch.sha.apply(&mut self.git_sha);
        patch.branch.apply(&mut self.git_branch);
        patch.origin_url.apply(&mut self.git_origin_url);
        for slot in [
            &mut self.git_sha,
            &mut self.git_branch,
            &mut self.git_origin_url,
        ] {
            if slot.as_deref().is_some_and(|s| s.trim().is_empty()) {
                *slot = None;
            }
        }
    }
}

fn dir(home: &Path) -> PathBuf {
    home.join("app-server").join("threads")
}

fn file(home: &Path, id: &str) -> Option<PathBuf> {
    // Thread ids are UUIDs; anything else could escape the directory.
    let safe = !id.is_empty()
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    safe.then(|| dir(home).join(format!("{id}.json")))
}

/// The sidecar of `id` (the default when there is none or it is unreadable).
pub async fn load(home: &Path, id: &str) -> ThreadMeta {
    let Some(path) = file(home, id) else {
        return ThreadMeta::default();
    };
    match keel_session_store::home_files::read(&path).await {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            tracing::warn!(path = %path.display(), error = %e, "unreadable thread metadata ignored");
            ThreadMeta::default()
        }),
        Ok(None) | Err(_) => ThreadMeta::default(),
    }
}

/// Writes the sidecar of `id` atomically.
pub async fn save(home: &Path, id: &str, meta: &ThreadMeta) -> std::io::Result<()> {
    let path =
        file(home, id).ok_or_else(|| std::io::Error::other(format!("invalid thread id {id:?}")))?;
    let bytes = serde_json::to_vec_pretty(meta).map_err(std::io::Error::other)?;
    keel_session_store::home_files::write(&path, bytes).await
}

/// Removes the sidecar of `id` (a deleted thread).
pub async fn remove(home: &Path, id: &str) {
    if let Some(path) = file(home, id)
        && let Err(e) = keel_session_store::home_files::remove(&path).await
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove thread metadata");
    }
}

/// Applies the stored metadata to a `Thread` about to be returned.
pub async fn decorate(home: &Path, thread: &mut Thread) -> ThreadMeta {
    let meta = load(home, &thread.id).await;
    thread.git_info = meta.git_info();
    meta
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_app_server_protocol::v2::Patch;

    #[tokio::test]
    async fn sidecars_round_trip_and_patch() {
        let home = tempfile::tempdir().unwrap();
        assert_eq!(load(home.path(), "t1").await, ThreadMeta::default());
        let mut meta = ThreadMeta {
            archived: true,
            ..ThreadMeta::default()
        };
        meta.patch_git(ThreadMetadataGitInfoUpdateParams {
            sha: Patch::Set("abc".into()),
            branch: Patch::Set("main".into()),
            origin_url: Patch::Keep,
        });
        save(home.path(), "t1", &meta).await.unwrap();
        let back = load(home.path(), "t1").await;
        assert_eq!(back, meta);
        assert_eq!(back.git_info().unwrap().branch.as_deref(), Some("main"));
        let mut cleared = back.clone();
        cleared.patch_git(ThreadMetadataGitInfoUpdateParams {
            sha: Patch::Clear,
            branch: Patch::Set(" ".into()),
            origin_url: Patch::Keep,
        });
        assert_eq!(cleared.git_info(), None);
        assert!(save(home.path(), "../x", &meta).await.is_err());
        remove(home.path(), "t1").await;
        assert_eq!(load(home.path(), "t1").await, ThreadMeta::default());
    }
}
