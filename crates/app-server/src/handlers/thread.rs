//! `thread/*`: start, resume, fork, list, read, turns, loaded list, name,
//! unsubscribe, compact.

use std::path::PathBuf;

use keel_app_server_protocol::v2::{
    AskForApproval, DeprecationNoticeNotification, EmptyResponse, ServerNotification,
    SortDirection, Thread, ThreadForkParams, ThreadIdParams, ThreadListParams, ThreadListResponse,
    ThreadLoadedListParams, ThreadLoadedListResponse, ThreadOverrides, ThreadReadParams,
    ThreadReadResponse, ThreadResumeParams, ThreadSessionResponse, ThreadSetNameParams,
    ThreadStartParams, ThreadStartedNotification, ThreadTurnsListParams, ThreadTurnsListResponse,
    ThreadUnsubscribeResponse, ThreadUnsubscribeStatus, Turn, TurnStatus,
};
use keel_protocol::Op;

use crate::handlers::{After, Reply, RequestCtx, ok};
use crate::history::{steps, turns_of};
use crate::rpc_error::RpcError;
use crate::sessions::{self, OpenOptions};
use crate::thread_state::LoadedThread;

/// Default page size of list methods.
const DEFAULT_PAGE: usize = 50;

fn check_policy(ctx: &RequestCtx, policy: Option<&AskForApproval>) -> Result<(), RpcError> {
    if matches!(policy, Some(AskForApproval::Granular { .. })) && !ctx.conn.caps().experimental {
        return Err(RpcError::requires_experimental("askForApproval.granular"));
    }
    Ok(())
}

fn session_response(
    ctx: &RequestCtx,
    thread: &LoadedThread,
    turns: Vec<Turn>,
) -> ThreadSessionResponse {
    let t = thread.to_thread(&ctx.runtime.config.version, turns);
    let s = thread.state();
    ThreadSessionResponse {
        model: s.model.id.clone(),
        model_provider: s.model.provider.clone(),
        service_tier: None,
        cwd: s.cwd.display().to_string(),
        // The file the session reads (the first that exists).
        instruction_sources: keel_core::PROJECT_INSTRUCTION_FILES
            .iter()
            .map(|n| s.cwd.join(n))
            .filter(|p| p.is_file())
            .take(1)
            .map(|p| p.display().to_string())
            .collect(),
        approval_policy: s.approval_policy.clone(),
        approvals_reviewer: "user".to_owned(),
        sandbox: s.sandbox.clone(),
        reasoning_effort: None,
        thread: t,
    }
}

/// The full turns of a loaded thread, from its session history.
pub fn loaded_turns(thread: &LoadedThread) -> Vec<Turn> {
    let cwd = thread.state().cwd.clone();
    turns_of(&thread.id, &steps(&thread.handle.tree()), &cwd)
}

/// The thread's turns up to entry `leaf` (a turn running elsewhere began
/// after it).
fn turns_before(thread: &LoadedThread, leaf: Option<&str>) -> Vec<Turn> {
    let cwd = thread.state().cwd.clone();
    let tree = thread.handle.tree();
    turns_of(&thread.id, &crate::history::steps_to(&tree, leaf), &cwd)
}

/// How to open a thread: a request's overrides, checked.
fn open_options(
    ctx: &RequestCtx,
    o: ThreadOverrides,
    ephemeral: bool,
) -> Result<OpenOptions, RpcError> {
    check_policy(ctx, o.approval_policy.as_ref())?;
    let approval_policy = match &o.permissions {
        Some(id) => Some(crate::approvals::mode_for_profile(id)?),
        None => o.approval_policy,
    };
    let mcp_servers = match &o.config {
        Some(config) => keel_mcp::config::from_overrides(config).map_err(RpcError::invalid)?,
        None => Default::default(),
    };
    Ok(OpenOptions {
        mcp_servers,
        cwd: o.cwd.map(PathBuf::from),
        model: o.model,
        model_provider: o.model_provider,
        approval_policy,
        sandbox: o.sandbox,
        base_instructions: o.base_instructions,
        developer_instructions: o.developer_instructions,
        ephemeral,
        originator: Some(ctx.conn.caps().client_name),
    })
}

pub async fn start(ctx: &mut RequestCtx, p: ThreadStartParams) -> Result<Reply, RpcError> {
    let opts = open_options(ctx, p.overrides, p.ephemeral.unwrap_or(false))?;
    let thread = sessions::start_thread(&ctx.runtime, opts).await?;
    ctx.runtime.subscribe(&thread.id, ctx.conn.id);
    let response = session_response(ctx, &thread, Vec::new());
    ctx.after.push(After::NotifyThread(
        thread.id.clone(),
        Box::new(ServerNotification::ThreadStarted(
            ThreadStartedNotification {
                thread: response.thread.clone(),
            },
        )),
    ));
    crate::handlers::mcp::announce_own(ctx, &thread);
    ok(&response)
}

pub async fn resume(ctx: &mut RequestCtx, p: ThreadResumeParams) -> Result<Reply, RpcError> {
    let opts = open_options(ctx, p.overrides, false)?;
    let policy = opts.approval_policy.clone();
    if ctx.runtime.thread(&p.thread_id).is_none()
        && crate::metadata::load(&ctx.runtime.config.home, &p.thread_id)
            .await
            .archived
    {
        return Err(RpcError::invalid(format!(
            "thread {} is archived; unarchive it first",
            p.thread_id
        )));
    }
    let thread = sessions::resume_thread(&ctx.runtime, &p.thread_id, opts).await?;
    if let Some(policy) = policy {
        thread.state().approval_policy = policy;
    }
    ctx.runtime.subscribe(&thread.id, ctx.conn.id);
    // A turn another front-end started, running on a worker, reaches this
    // connection live from its start: the history ends before it.
    let elsewhere = match ctx.runtime.runs_elsewhere() {
        Some(e) if !thread.handle.snapshot().is_streaming => e.running(&thread.id).await,
        _ => None,
    };
    let mut turns = match &elsewhere {
        _ if p.exclude_turns => Vec::new(),
        Some(running) => turns_before(&thread, running.base_leaf.as_deref()),
        None => loaded_turns(&thread),
    };
    // A turn a crash cut off goes on right after this response.
    if elsewhere.is_none()
        && thread.active_turn_id().is_none()
        && thread.handle.has_cut_off_turn()
        && let Some(last) = turns.last_mut()
    {
        last.status = TurnStatus::InProgress;
        last.completed_at = None;
    }
    ctx.after.push(After::ReplayApprovals(thread.id.clone()));
    ctx.after.push(After::ResumeInterrupted(thread.id.clone()));
    crate::handlers::mcp::announce_own(ctx, &thread);
    let mut response = session_response(ctx, &thread, turns);
    crate::metadata::decorate(&ctx.runtime.config.home, &mut response.thread).await;
    ok(&response)
}

/// `thread/fork`: a new thread (and session file, recording its parent)
/// with the source's history through `lastTurnId`; announced with
/// `thread/started`.
pub async fn fork(ctx: &mut RequestCtx, p: ThreadForkParams) -> Result<Reply, RpcError> {
    let opts = open_options(ctx, p.overrides, p.ephemeral)?;
    let thread = sessions::fork_thread(
        &ctx.runtime,
        &p.thread_id,
        p.path.as_deref(),
        p.last_turn_id.as_deref(),
        opts,
    )
    .await?;
    ctx.runtime.subscribe(&thread.id, ctx.conn.id);
    let turns = if p.exclude_turns {
        Vec::new()
    } else {
        loaded_turns(&thread)
    };
    let response = session_response(ctx, &thread, turns);
    let mut started = response.thread.clone();
    started.turns = Vec::new();
    ctx.after.push(After::NotifyThread(
        thread.id.clone(),
        Box::new(ServerNotification::ThreadStarted(
            ThreadStartedNotification { thread: started },
        )),
    ));
    crate::handlers::mcp::announce_own(ctx, &thread);
    ok(&response)
}

/// `thread/compact/start`: answers `{}` at once; the compaction runs as a
/// turn of its own (`turn/started`, a `contextCompaction` item,
/// `turn/completed`).
pub async fn compact_start(ctx: &mut RequestCtx, p: ThreadIdParams) -> Result<Reply, RpcError> {
    let thread = ctx
        .runtime
        .thread(&p.thread_id)
        .ok_or_else(|| RpcError::thread_not_found(&p.thread_id))?;
    if thread.active_turn_id().is_some() || thread.handle.snapshot().is_compacting {
        return Err(RpcError::invalid("a turn is in progress on this thread"));
    }
    ctx.runtime.subscribe(&thread.id, ctx.conn.id);
    let handle = thread.handle.clone();
    // The compaction starts once the response is queued, so the response
    // always comes before the compaction turn's notifications.
    let (queued_tx, queued_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if queued_rx.await.is_err() {
            return;
        }
        if let Err(e) = handle.compact(None).await {
            tracing::info!(error = %e, "thread/compact/start: the compaction did not complete");
        }
    });
    ctx.after.push(After::Signal(queued_tx));
    ok(&EmptyResponse {})
}

fn matches_filters(t: &Thread, p: &ThreadListParams) -> bool {
    if let Some(cwd) = &p.cwd
        && !cwd.paths().iter().any(|c| c == &t.cwd)
    {
        return false;
    }
    if let Some(term) = p.search_term.as_deref().filter(|s| !s.is_empty()) {
        let term = term.to_lowercase();
        let hay = format!("{} {}", t.preview, t.name.clone().unwrap_or_default()).to_lowercase();
        if !hay.contains(&term) {
            return false;
        }
    }
    if let Some(providers) = &p.model_providers
        && !providers.is_empty()
        && !providers.contains(&t.model_provider)
    {
        return false;
    }
    true
}

/// [`page`] whose default page holds everything.
pub(crate) fn page_all<T>(
    items: Vec<T>,
    cursor: Option<&str>,
    limit: Option<u32>,
) -> Result<(Vec<T>, Option<String>), RpcError> {
    let limit = limit.filter(|l| *l > 0).unwrap_or(u32::MAX);
    page(items, cursor, Some(limit))
}

/// A cursor is the offset of the next item.
pub(crate) fn page<T>(
    items: Vec<T>,
    cursor: Option<&str>,
    limit: Option<u32>,
) -> Result<(Vec<T>, Option<String>), RpcError> {
    let start = match cursor {
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| RpcError::invalid(format!("invalid cursor: {c}")))?,
        None => 0,
    };
    let limit = limit
        .map(|l| l as usize)
        .filter(|l| *l > 0)
        .unwrap_or(DEFAULT_PAGE);
    let total = items.len();
    let data: Vec<T> = items.into_iter().skip(start).take(limit).collect();
    let next = (start + data.len() < total).then(|| (start + data.len()).to_string());
    Ok((data, next))
}

pub async fn list(ctx: &mut RequestCtx, p: ThreadListParams) -> Result<Reply, RpcError> {
    let archived = p.archived.unwrap_or(false);
    let mut threads: Vec<Thread> = Vec::new();
    for s in sessions::list_sessions(&ctx.runtime).await {
        // As Codex: a thread is listed once it has a turn.
        let loaded = ctx.runtime.thread(&s.id);
        let has_turn = s.message_count > 0
            || loaded
                .as_ref()
                .is_some_and(|t| t.state().active.is_some() || !t.handle.messages().is_empty());
        if !has_turn {
            continue;
        }
        let mut t = match loaded {
            Some(loaded) => loaded.to_thread(&ctx.runtime.config.version, Vec::new()),
            None => sessions::summary_thread(&ctx.runtime, &s),
        };
        let meta = crate::metadata::decorate(&ctx.runtime.config.home, &mut t).await;
        if meta.archived == archived && matches_filters(&t, &p) {
            threads.push(t);
        }
    }
    threads.sort_by_key(|t| match p.sort_key {
        Some(keel_app_server_protocol::v2::ThreadSortKey::CreatedAt) => t.created_at,
        _ => t.updated_at,
    });
    if p.sort_direction.unwrap_or_default() == SortDirection::Desc {
        threads.reverse();
    }
    let (data, next_cursor) = page(threads, p.cursor.as_deref(), p.limit)?;
    ok(&ThreadListResponse {
        data,
        next_cursor,
        backwards_cursor: None,
    })
}

/// A thread by id: loaded, or read from its session file (with its
/// stored metadata applied).
pub(crate) async fn read_thread(
    ctx: &RequestCtx,
    id: &str,
    include_turns: bool,
) -> Result<(Thread, Vec<Turn>), RpcError> {
    if let Some(t) = ctx.runtime.thread(id) {
        let turns = loaded_turns(&t);
        let shown = if include_turns {
            turns.clone()
        } else {
            Vec::new()
        };
        let mut thread = t.to_thread(&ctx.runtime.config.version, shown);
        crate::metadata::decorate(&ctx.runtime.config.home, &mut thread).await;
        return Ok((thread, turns));
    }
    let path = sessions::find_session_file(&ctx.runtime, id)
        .await
        .ok_or_else(|| RpcError::thread_not_found(id))?;
    let loaded = keel_session_store::load(&path)
        .await
        .map_err(|e| RpcError::internal(format!("cannot load session {}: {e}", path.display())))?;
    let summary = ctx
        .runtime
        .store
        .list(std::path::Path::new(&loaded.header.cwd))
        .await
        .ok()
        .and_then(|l| l.into_iter().find(|s| s.id == id))
        .ok_or_else(|| RpcError::thread_not_found(id))?;
    let tree = loaded.tree();
    let turns = turns_of(id, &steps(&tree), std::path::Path::new(&loaded.header.cwd));
    let mut thread = sessions::summary_thread(&ctx.runtime, &summary);
    if include_turns {
        thread.turns = turns.clone();
    }
    crate::metadata::decorate(&ctx.runtime.config.home, &mut thread).await;
    Ok((thread, turns))
}

pub async fn read(ctx: &mut RequestCtx, p: ThreadReadParams) -> Result<Reply, RpcError> {
    let (thread, _) = read_thread(ctx, &p.thread_id, p.include_turns).await?;
    if p.include_turns {
        ctx.after.push(After::NotifyThread(
            p.thread_id.clone(),
            Box::new(ServerNotification::DeprecationNotice(
                DeprecationNoticeNotification {
                    summary:
                        "thread/read with includeTurns is deprecated; page with thread/turns/list"
                            .to_owned(),
                    details: None,
                },
            )),
        ));
    }
    ok(&ThreadReadResponse { thread })
}

pub async fn turns_list(ctx: &mut RequestCtx, p: ThreadTurnsListParams) -> Result<Reply, RpcError> {
    let (_, mut turns) = read_thread(ctx, &p.thread_id, false).await?;
    if p.sort_direction.unwrap_or_default() == SortDirection::Desc {
        turns.reverse();
    }
    let (data, next_cursor) = page(turns, p.cursor.as_deref(), p.limit)?;
    ok(&ThreadTurnsListResponse {
        data,
        next_cursor,
        backwards_cursor: None,
    })
}

pub fn loaded_list(ctx: &mut RequestCtx, p: ThreadLoadedListParams) -> Result<Reply, RpcError> {
    let (data, next_cursor) = page(
        ctx.runtime.loaded_thread_ids(),
        p.cursor.as_deref(),
        p.limit,
    )?;
    ok(&ThreadLoadedListResponse { data, next_cursor })
}

pub async fn name_set(ctx: &mut RequestCtx, p: ThreadSetNameParams) -> Result<Reply, RpcError> {
    let thread = ctx
        .runtime
        .thread(&p.thread_id)
        .ok_or_else(|| RpcError::thread_not_found(&p.thread_id))?;
    thread
        .handle
        .submit(Op::SetSessionName { name: Some(p.name) })
        .await
        .map_err(RpcError::internal)?;
    ok(&EmptyResponse {})
}

pub fn unsubscribe(ctx: &mut RequestCtx, p: ThreadIdParams) -> Result<Reply, RpcError> {
    let status = if ctx.runtime.thread(&p.thread_id).is_none() {
        ThreadUnsubscribeStatus::NotLoaded
    } else if ctx.runtime.unsubscribe(&p.thread_id, ctx.conn.id) {
        ThreadUnsubscribeStatus::Unsubscribed
    } else {
        ThreadUnsubscribeStatus::NotSubscribed
    };
    ok(&ThreadUnsubscribeResponse { status })
}
