//! `fs/*`: absolute, normalised paths only (a relative path is refused as
//! the Codex server refuses it); I/O failures are `-32603` with the OS
//! message. Symlinks are reported as symlinks (`lstat`).

use std::path::{Component, Path, PathBuf};
use std::time::SystemTime;

use base64::Engine;
use keel_app_server_protocol::v2::{
    EmptyResponse, FsCopyParams, FsCreateDirectoryParams, FsGetMetadataResponse, FsPathParams,
    FsReadDirectoryEntry, FsReadDirectoryResponse, FsReadFileResponse, FsRemoveParams,
    FsUnwatchParams, FsWatchParams, FsWatchResponse, FsWriteFileParams,
};

use crate::handlers::{Reply, RequestCtx, ok};
use crate::rpc_error::RpcError;

/// An absolute path with no `.`/`..` components.
pub fn checked_path(path: &str) -> Result<PathBuf, RpcError> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(RpcError::invalid_params(
            "AbsolutePathBuf deserialized without a base path",
        ));
    }
    if p.components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return Err(RpcError::invalid_params(format!(
            "path {path:?} is not normalised (contains . or ..)"
        )));
    }
    if path.contains('\0') {
        return Err(RpcError::invalid_params("path contains a NUL byte"));
    }
    Ok(p.to_path_buf())
}

fn ms(t: std::io::Result<SystemTime>) -> i64 {
    t.ok()
        .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

pub async fn read_file(p: FsPathParams) -> Result<Reply, RpcError> {
    let path = checked_path(&p.path)?;
    let bytes =
        keel_tools::bounded::read_regular_async(&path, keel_tools::bounded::MAX_READ_BYTES).await?;
    ok(&FsReadFileResponse {
        data_base64: base64::engine::general_purpose::STANDARD.encode(bytes),
    })
}

pub async fn write_file(p: FsWriteFileParams) -> Result<Reply, RpcError> {
    let path = checked_path(&p.path)?;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(p.data_base64.as_bytes())
        .map_err(|e| RpcError::invalid_params(format!("dataBase64: {e}")))?;
    keel_tools::bounded::check_writable(&path)?;
    tokio::fs::write(&path, bytes).await?;
    ok(&EmptyResponse {})
}

pub async fn get_metadata(p: FsPathParams) -> Result<Reply, RpcError> {
    let path = checked_path(&p.path)?;
    let link = tokio::fs::symlink_metadata(&path).await?;
    let is_symlink = link.file_type().is_symlink();
    let target = if is_symlink {
        tokio::fs::metadata(&path).await.ok()
    } else {
        Some(link.clone())
    };
    ok(&FsGetMetadataResponse {
        is_directory: target.as_ref().is_some_and(|m| m.is_dir()),
        is_file: target.as_ref().is_some_and(|m| m.is_file()),
        is_symlink,
        created_at_ms: ms(link.created()),
        modified_at_ms: ms(link.modified()),
    })
}

pub async fn read_directory(p: FsPathParams) -> Result<Reply, RpcError> {
    let path = checked_path(&p.path)?;
    let mut dir = tokio::fs::read_dir(&path).await?;
    let mut entries = Vec::new();
    while let Some(e) = dir.next_entry().await? {
        let meta = tokio::fs::metadata(e.path()).await.ok();
        entries.push(FsReadDirectoryEntry {
            file_name: e.file_name().to_string_lossy().into_owned(),
            is_directory: meta.as_ref().is_some_and(|m| m.is_dir()),
            is_file: meta.as_ref().is_some_and(|m| m.is_file()),
        });
    }
    entries.sort_by(|a, b| a.file_name.cmp(&b.file_name));
    ok(&FsReadDirectoryResponse { entries })
}

pub async fn create_directory(p: FsCreateDirectoryParams) -> Result<Reply, RpcError> {
    let path = checked_path(&p.path)?;
    if p.recursive.unwrap_or(true) {
        tokio::fs::create_dir_all(&path).await?;
    } else {
        tokio::fs::create_dir(&path).await?;
    }
    ok(&EmptyResponse {})
}

pub async fn remove(p: FsRemoveParams) -> Result<Reply, RpcError> {
    let path = checked_path(&p.path)?;
    let result = match tokio::fs::symlink_metadata(&path).await {
        Ok(m) if m.is_dir() => {
            if p.recursive.unwrap_or(true) {
                tokio::fs::remove_dir_all(&path).await
            } else {
                tokio::fs::remove_dir(&path).await
            }
        }
        Ok(_) => tokio::fs::remove_file(&path).await,
        Err(e) => Err(e),
    };
    match result {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && p.force.unwrap_or(true) => {}
        other => other?,
    }
    ok(&EmptyResponse {})
}

fn copy_tree(from: &Path, to: &Path, recursive: bool) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(from)?;
    let t = meta.file_type();
    if !(t.is_dir() || t.is_file() || t.is_symlink()) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} is not a regular file or folder; not copied",
                from.display()
            ),
        ));
    }
    keel_tools::bounded::check_writable(to).or_else(
        |e| {
            if to.is_dir() { Ok(()) } else { Err(e) }
        },
    )?;
    if meta.is_dir() {
        if !recursive {
            return Err(std::io::Error::other(
                "source is a directory: pass recursive: true",
            ));
        }
        std::fs::create_dir_all(to)?;
        for e in std::fs::read_dir(from)? {
            let e = e?;
            copy_tree(&e.path(), &to.join(e.file_name()), true)?;
        }
        Ok(())
    } else if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from)?;
        std::os::unix::fs::symlink(target, to)
    } else {
        std::fs::copy(from, to).map(|_| ())
    }
}

pub async fn copy(p: FsCopyParams) -> Result<Reply, RpcError> {
    let from = checked_path(&p.source_path)?;
    let to = checked_path(&p.destination_path)?;
    let recursive = p.recursive;
    tokio::task::spawn_blocking(move || copy_tree(&from, &to, recursive))
        .await
        .map_err(RpcError::internal)??;
    ok(&EmptyResponse {})
}

/// `fs/watch`: see [`crate::watch`].
pub async fn watch(ctx: &mut RequestCtx, p: FsWatchParams) -> Result<Reply, RpcError> {
    let path = checked_path(&p.path)?;
    let path = ctx
        .runtime
        .watchers
        .watch(&ctx.conn, p.watch_id, &path)
        .await?;
    ok(&FsWatchResponse {
        path: path.display().to_string(),
    })
}

pub fn unwatch(ctx: &mut RequestCtx, p: FsUnwatchParams) -> Result<Reply, RpcError> {
    ctx.runtime.watchers.unwatch(ctx.conn.id, &p.watch_id)?;
    ok(&EmptyResponse {})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_absolute_normalised_paths() {
        assert!(checked_path("/a/b").is_ok());
        assert_eq!(
            checked_path("a").unwrap_err().message,
            "Invalid request: AbsolutePathBuf deserialized without a base path"
        );
        assert!(checked_path("/a/../b").is_err());
    }

    #[tokio::test]
    async fn symlinks_are_reported_as_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let link = dir.path().join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let Reply::Now(v) = get_metadata(FsPathParams {
            path: link.display().to_string(),
        })
        .await
        .unwrap() else {
            panic!()
        };
        assert_eq!(v["isSymlink"], true);
        assert_eq!(v["isFile"], true);
        let err = read_file(FsPathParams {
            path: dir.path().join("missing").display().to_string(),
        })
        .await
        .err()
        .unwrap();
        assert_eq!(err.code, -32603);
        assert!(err.message.contains("No such file or directory"));
    }
}
