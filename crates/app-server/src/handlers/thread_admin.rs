//! `thread/archive`, `thread/unarchive`, `thread/delete`,
//! `thread/metadata/update` and `thread/items/list`.
//!
//! Archiving and deleting unload a loaded thread first (its subscribers
//! see `thread/status/changed` `notLoaded`); both are refused while a turn
//! runs (`-32600 thread <id> has a turn in progress; interrupt it first`).
//! Archived state and Git metadata live in the thread's sidecar
//! ([`crate::metadata`]); deleting removes the session file, the sidecar
//! and the thread's pending approvals.

use std::sync::Arc;

use keel_app_server_protocol::v2::{
    EmptyResponse, ServerNotification, SortDirection, ThreadIdNotification, ThreadIdParams,
    ThreadItemEntry, ThreadItemsListAnchor, ThreadItemsListCursor, ThreadItemsListParams,
    ThreadItemsListResponse, ThreadMetadataUpdateParams, ThreadResponse, ThreadStatus,
    ThreadStatusChangedNotification,
};

use crate::handlers::thread::{page, read_thread};
use crate::handlers::{After, Reply, RequestCtx, ok};
use crate::metadata;
use crate::notify::Notifier;
use crate::outbound::Connection;
use crate::rpc_error::RpcError;
use crate::sessions;

/// Refuses while the loaded thread runs a turn.
fn idle_or_refuse(ctx: &RequestCtx, id: &str) -> Result<(), RpcError> {
    match ctx.runtime.thread(id) {
        Some(t) if t.active_turn_id().is_some() => Err(RpcError::invalid(format!(
            "thread {id} has a turn in progress; interrupt it first"
        ))),
        _ => Ok(()),
    }
}

/// Unloads a loaded thread: its subscribers hear `notLoaded`; returns them
/// (with the requester) for the notification that follows the response.
async fn unload(ctx: &RequestCtx, id: &str) -> Vec<Arc<Connection>> {
    let mut conns = ctx.runtime.subscribers(id);
    if !conns.iter().any(|c| c.id == ctx.conn.id) {
        conns.push(ctx.conn.clone());
    }
    if ctx.runtime.thread(id).is_some() {
        ctx.runtime
            .notify_thread(
                id,
                &ServerNotification::ThreadStatusChanged(ThreadStatusChangedNotification {
                    thread_id: id.to_owned(),
                    status: ThreadStatus::NotLoaded,
                }),
            )
            .await;
        if let Some(t) = ctx.runtime.remove_thread(id) {
            t.stop().await;
        }
    }
    conns
}

pub async fn archive(ctx: &mut RequestCtx, p: ThreadIdParams) -> Result<Reply, RpcError> {
    let id = p.thread_id;
    read_thread(ctx, &id, false).await?;
    idle_or_refuse(ctx, &id)?;
    let home = ctx.runtime.config.home.clone();
    let mut meta = metadata::load(&home, &id).await;
    meta.archived = true;
    metadata::save(&home, &id, &meta)
        .await
        .map_err(RpcError::internal)?;
    let conns = unload(ctx, &id).await;
    ctx.after.push(After::NotifyConns(
        conns,
        Box::new(ServerNotification::ThreadArchived(ThreadIdNotification {
            thread_id: id,
        })),
    ));
    ok(&EmptyResponse {})
}

pub async fn unarchive(ctx: &mut RequestCtx, p: ThreadIdParams) -> Result<Reply, RpcError> {
    let id = p.thread_id;
    let (mut thread, _) = read_thread(ctx, &id, false).await?;
    let home = ctx.runtime.config.home.clone();
    let mut meta = metadata::load(&home, &id).await;
    if meta.archived {
        meta.archived = false;
        metadata::save(&home, &id, &meta)
            .await
            .map_err(RpcError::internal)?;
    }
    metadata::decorate(&home, &mut thread).await;
    ctx.after.push(After::NotifyConns(
        vec![ctx.conn.clone()],
        Box::new(ServerNotification::ThreadUnarchived(ThreadIdNotification {
            thread_id: id,
        })),
    ));
    ok(&ThreadResponse { thread })
}

pub async fn delete(ctx: &mut RequestCtx, p: ThreadIdParams) -> Result<Reply, RpcError> {
    let id = p.thread_id;
    idle_or_refuse(ctx, &id)?;
    let loaded_path = ctx.runtime.thread(&id).map(|t| t.state().path.clone());
    let path = match loaded_path {
        Some(path) => path,
        None => Some(
            sessions::find_session_file(&ctx.runtime, &id)
                .await
                .ok_or_else(|| RpcError::thread_not_found(&id))?,
        ),
    };
    let conns = unload(ctx, &id).await;
    if let Some(path) = path {
        match ctx.runtime.store.remove(&path).await {
            Ok(()) => {}
            Err(keel_session_store::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(RpcError::internal(e)),
        }
    }
    metadata::remove(&ctx.runtime.config.home, &id).await;
    crate::approvals::cancel_thread(&ctx.runtime, &id).await;
    ctx.after.push(After::NotifyConns(
        conns,
        Box::new(ServerNotification::ThreadDeleted(ThreadIdNotification {
            thread_id: id,
        })),
    ));
    ok(&EmptyResponse {})
}

pub async fn metadata_update(
    ctx: &mut RequestCtx,
    p: ThreadMetadataUpdateParams,
) -> Result<Reply, RpcError> {
    let (mut thread, _) = read_thread(ctx, &p.thread_id, false).await?;
    let home = ctx.runtime.config.home.clone();
    let mut meta = metadata::load(&home, &p.thread_id).await;
    if let Some(patch) = p.git_info {
        meta.patch_git(patch);
        metadata::save(&home, &p.thread_id, &meta)
            .await
            .map_err(RpcError::internal)?;
    }
    thread.git_info = meta.git_info();
    ok(&ThreadResponse { thread })
}

pub async fn items_list(ctx: &mut RequestCtx, p: ThreadItemsListParams) -> Result<Reply, RpcError> {
    let (_, turns) = read_thread(ctx, &p.thread_id, false).await?;
    if let Some(turn) = &p.turn_id
        && !turns.iter().any(|t| &t.id == turn)
    {
        return Err(RpcError::invalid(format!("turn not found: {turn}")));
    }
    let mut entries: Vec<ThreadItemEntry> = turns
        .into_iter()
        .filter(|t| p.turn_id.as_ref().is_none_or(|id| &t.id == id))
        .flat_map(|t| {
            let turn_id = t.id.clone();
            t.items.into_iter().map(move |item| ThreadItemEntry {
                turn_id: turn_id.clone(),
                item,
                started_at_ms: None,
                completed_at_ms: None,
            })
        })
        .collect();
    if p.sort_direction == Some(SortDirection::Desc) {
        entries.reverse();
    }
    let cursor = match p.cursor {
        None => None,
        Some(ThreadItemsListCursor::Opaque(c)) => Some(c),
        Some(ThreadItemsListCursor::Anchor(ThreadItemsListAnchor::Item { item_id })) => {
            if p.turn_id.is_none() {
                return Err(RpcError::invalid(
                    "an item anchor needs a turnId".to_owned(),
                ));
            }
            let at = entries
                .iter()
                .position(|e| item_id_of(e) == item_id)
                .ok_or_else(|| RpcError::invalid(format!("item not found: {item_id}")))?;
            Some((at + 1).to_string())
        }
    };
    let (data, next_cursor) = page(entries, cursor.as_deref(), p.limit)?;
    ok(&ThreadItemsListResponse {
        data,
        next_cursor,
        backwards_cursor: None,
    })
}

fn item_id_of(e: &ThreadItemEntry) -> String {
    serde_json::to_value(&e.item)
        .ok()
        .and_then(|v| v["id"].as_str().map(str::to_owned))
        .unwrap_or_default()
}
