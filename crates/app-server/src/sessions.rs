//! Threads are keel sessions: the same files under `KEEL_HOME/sessions`,
//! visible to RPC mode and the CLI. This module opens them (new, resumed),
//! spawns the core session with the app-server's approval gate, registers
//! the loaded thread and starts its event pump; it also lists sessions on
//! disk as `Thread` objects.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_app_server_protocol::v2::{
    ApprovalPolicyName, AskForApproval, SandboxMode, Thread, ThreadStatus,
};
use keel_core::{ModelInfo, ModelPricing, SessionBuilder};
use keel_llm::Provider;
use keel_protocol::Message;
use keel_session_store::{EntryBody, SessionSummary, SessionWriter};

use crate::rpc_error::RpcError;
use crate::runtime::Runtime;
use crate::thread_state::{LoadedThread, ThreadState};

/// What a new or resumed thread is opened with.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    pub cwd: Option<PathBuf>,
    pub model: Option<String>,
    pub model_provider: Option<String>,
    pub approval_policy: Option<AskForApproval>,
    pub sandbox: Option<SandboxMode>,
    pub base_instructions: Option<String>,
    pub developer_instructions: Option<String>,
    pub ephemeral: bool,
    pub originator: Option<String>,
    /// MCP servers of the thread's own (from the request's `config`).
    pub mcp_servers: std::collections::BTreeMap<String, keel_mcp::McpServerConfig>,
}

/// The default approval policy of a thread that names none.
pub const DEFAULT_APPROVAL_POLICY: AskForApproval =
    AskForApproval::Named(ApprovalPolicyName::OnRequest);

/// Picks the model: the requested one (same provider as the default when
/// only an id is given; what the catalogue knows about it), else the
/// default; an empty model when none is configured (turns then fail with a
/// clear error).
pub fn choose_model(runtime: &Runtime, id: Option<&str>, provider: Option<&str>) -> ModelInfo {
    let models = runtime.models.models();
    if let Some(id) = id.filter(|i| !i.is_empty()) {
        if let Some(m) = models
            .iter()
            .find(|m| m.id == id && provider.is_none_or(|p| p == m.provider))
        {
            return m.clone();
        }
        let default_provider = models.first().map(|m| m.provider.clone());
        if let Some((m, _)) = provider
            .map(str::to_owned)
            .or(default_provider)
            .and_then(|p| runtime.models.lookup(&p, id))
        {
            return m;
        }
        if let Some(default) = models.first() {
            let mut m = default.clone();
            m.id = id.to_owned();
            if let Some(p) = provider {
                m.provider = p.to_owned();
            }
            return m;
        }
    }
    models.first().cloned().unwrap_or_else(|| ModelInfo {
        id: String::new(),
        provider: "none".to_owned(),
        api: String::new(),
        context_window: 0,
        max_output_tokens: None,
        pricing: ModelPricing::default(),
        ..ModelInfo::default()
    })
}

/// A provider for `model`, or one that fails every call with the reason.
pub fn provider_for(runtime: &Runtime, model: &ModelInfo) -> Arc<dyn Provider> {
    if model.id.is_empty() {
        return Arc::new(keel_llm::UnavailableProvider::new(
            runtime.models.no_model_hint(),
        ));
    }
    match runtime.models.provider(model) {
        Ok(p) => p,
        Err(reason) => Arc::new(keel_llm::UnavailableProvider::new(reason)),
    }
}

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

fn rfc3339_secs(ts: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc3339(ts)
        .ok()
        .map(|t| t.timestamp())
}

/// The warning for a model the catalogue does not know (sent with every
/// turn on it, as Codex does).
pub fn model_warning(runtime: &Runtime, model: &ModelInfo) -> Option<String> {
    if model.id.is_empty() {
        return None;
    }
    runtime
        .models
        .lookup(&model.provider, &model.id)
        .and_then(|(_, warning)| warning)
}

fn resolve_cwd(runtime: &Runtime, cwd: Option<&Path>) -> PathBuf {
    match cwd {
        Some(c) if c.is_absolute() => keel_tools::normalize_path(c),
        Some(c) => keel_tools::normalize_path(&runtime.config.default_cwd.join(c)),
        None => runtime.config.default_cwd.clone(),
    }
}

struct Spawned {
    thread: Arc<LoadedThread>,
}

#[allow(clippy::too_many_arguments)]
async fn spawn_thread(
    runtime: &Arc<Runtime>,
    id: String,
    writer: Option<SessionWriter>,
    history: Vec<Message>,
    tree: Option<keel_session_store::SessionTree>,
    name: Option<String>,
    created_at: i64,
    opts: &OpenOptions,
    cwd: PathBuf,
    forked_from: Option<String>,
) -> Spawned {
    let model = choose_model(
        runtime,
        opts.model.as_deref(),
        opts.model_provider.as_deref(),
    );
    let provider = provider_for(runtime, &model);
    let own_mcp = crate::thread_mcp::start_own(&opts.mcp_servers, &cwd).await;
    let configured = &runtime.config.sandbox;
    let policy = match opts.sandbox {
        Some(mode) => crate::sandbox::from_mode(mode, configured),
        None => configured.clone(),
    };
    let session = SessionBuilder::new(
        id.clone(),
        &cwd,
        &runtime.config.home,
        model.clone(),
        provider,
        runtime.gate.clone(),
    )
    .writer(writer.as_ref())
    .system_prompt(opts.base_instructions.clone())
    .developer_instructions(opts.developer_instructions.as_deref())
    .history(history.clone(), tree)
    .retry(runtime.models.retry_policy())
    .compaction(runtime.models.compaction())
    .tool(Arc::new(crate::plan::PlanTool))
    .tools(crate::thread_mcp::tools_for(
        runtime.mcp().as_ref(),
        own_mcp.as_ref(),
    ))
    .sandbox(policy.clone(), runtime.config.allow_unconfined)
    .runs_elsewhere(runtime.runs_elsewhere())
    .asker(Some(crate::elicitation::ThreadAsker::for_thread(
        runtime, &id,
    )))
    .spawn();
    session.restore_name(name.clone());
    let (handle, events, task) = session.split();
    let sandbox = crate::sandbox::to_wire(&policy);
    let state = ThreadState {
        cwd,
        model,
        approval_policy: opts
            .approval_policy
            .clone()
            .unwrap_or(DEFAULT_APPROVAL_POLICY),
        sandbox,
        ephemeral: writer.is_none(),
        path: writer.as_ref().map(|w| w.path().to_path_buf()),
        created_at,
        updated_at: now_secs(),
        name,
        preview: crate::history::preview_of(&history),
        originator: opts.originator.clone(),
        forked_from,
        status: ThreadStatus::Idle,
        active: None,
        turns: Vec::new(),
        declined: Default::default(),
    };
    let thread = Arc::new(LoadedThread::new(id, handle, writer, own_mcp, state, task));
    crate::thread_mcp::follow_all(runtime, &thread);
    runtime.insert_thread(thread.clone());
    let (control_tx, control_rx) = tokio::sync::mpsc::channel(crate::pump::CONTROL_CAPACITY);
    let pump = tokio::spawn(crate::pump::run(
        runtime.clone(),
        thread.clone(),
        events,
        control_rx,
    ));
    thread.set_pump(pump, control_tx);
    Spawned { thread }
}

/// `thread/start`: a new session file (none when ephemeral).
pub async fn start_thread(
    runtime: &Arc<Runtime>,
    opts: OpenOptions,
) -> Result<Arc<LoadedThread>, RpcError> {
    let cwd = resolve_cwd(runtime, opts.cwd.as_deref());
    let mut opts = opts;
    if opts.approval_policy.is_none() {
        opts.approval_policy = Some(crate::approvals::default_policy(runtime, &cwd).await);
    }
    let (id, writer) = if opts.ephemeral {
        (uuid::Uuid::now_v7().to_string(), None)
    } else {
        let writer = runtime
            .store
            .create(&cwd, None)
            .await
            .map_err(|e| RpcError::internal(format!("cannot create the session file: {e}")))?;
        (writer.id().to_owned(), Some(writer))
    };
    let spawned = spawn_thread(
        runtime,
        id,
        writer,
        Vec::new(),
        None,
        None,
        now_secs(),
        &opts,
        cwd,
        None,
    )
    .await;
    record_model(&spawned.thread).await;
    Ok(spawned.thread)
}

async fn record_model(thread: &LoadedThread) {
    let model = thread.state().model.clone();
    if let Some(w) = &thread.writer
        && !model.id.is_empty()
        && let Err(e) = w
            .append(EntryBody::ModelChange {
                provider: model.provider.clone(),
                model_id: model.id.clone(),
            })
            .await
    {
        tracing::warn!(error = %e, "cannot record the model in the session file");
    }
}

/// The session file of a thread id (exact id match), searched in the
/// default workspace first, then everywhere.
pub async fn find_session_file(runtime: &Runtime, id: &str) -> Option<PathBuf> {
    let path = runtime
        .store
        .resolve(&runtime.config.default_cwd, id)
        .await
        .ok()?;
    let loaded = keel_session_store::load(&path).await.ok()?;
    (loaded.header.id == id).then_some(path)
}

/// `thread/resume` (and `thread/fork` with `fork`): loads a thread from
/// its session file unless it is loaded already.
pub async fn resume_thread(
    runtime: &Arc<Runtime>,
    id: &str,
    opts: OpenOptions,
) -> Result<Arc<LoadedThread>, RpcError> {
    if let Some(t) = runtime.thread(id) {
        return Ok(t);
    }
    let path = find_session_file(runtime, id)
        .await
        .ok_or_else(|| RpcError::thread_not_found(id))?;
    let loaded = keel_session_store::load(&path)
        .await
        .map_err(|e| RpcError::internal(format!("cannot load session {}: {e}", path.display())))?;
    let history = loaded.messages();
    let tree = loaded.tree();
    let name = loaded.name();
    let created = rfc3339_secs(&loaded.header.timestamp).unwrap_or_else(now_secs);
    let mut opts = opts;
    if opts.model.is_none()
        && let Some((provider, model)) = loaded.last_model()
    {
        opts.model = Some(model);
        opts.model_provider = Some(provider);
    }
    let cwd = opts
        .cwd
        .clone()
        .map(|c| resolve_cwd(runtime, Some(&c)))
        .unwrap_or_else(|| PathBuf::from(&loaded.header.cwd));
    if opts.approval_policy.is_none() {
        opts.approval_policy = Some(crate::approvals::default_policy(runtime, &cwd).await);
    }
    let writer = loaded
        .into_writer()
        .await
        .map_err(|e| RpcError::internal(format!("cannot open session {}: {e}", path.display())))?;
    let spawned = spawn_thread(
        runtime,
        id.to_owned(),
        Some(writer),
        history,
        Some(tree),
        name,
        created,
        &opts,
        cwd,
        None,
    )
    .await;
    Ok(spawned.thread)
}

/// After `thread/resume` answered: a turn of the thread that a crash or
/// kill cut off (the model's tool calls have no results) goes on as the
/// same turn (`turn/started` with the id the response listed it under).
/// Its pending requests are announced again with the ids the replay gave
/// them, and a decision made while keel was down is honoured once. Nothing
/// happens when the thread is busy or nothing was cut off.
pub async fn resume_interrupted(runtime: &Arc<Runtime>, thread_id: &str) {
    let Some(thread) = runtime.thread(thread_id) else {
        return;
    };
    let Some(turn_id) =
        crate::history::last_turn_id(thread_id, &crate::history::steps(&thread.handle.tree()))
    else {
        return;
    };
    {
        let mut s = thread.state();
        if s.active.is_some() {
            return;
        }
        s.active = Some(crate::thread_state::ActiveTurn::new(turn_id.clone(), None));
    }
    let started = match thread.handle.resume_interrupted().await {
        Ok(started) => started,
        Err(e) => {
            tracing::warn!(error = %e, thread = thread_id, "cannot resume the cut-off turn");
            false
        }
    };
    if started {
        tracing::info!(thread = thread_id, "resuming a turn that was cut off");
        return;
    }
    let mut s = thread.state();
    if s.active.as_ref().is_some_and(|t| t.id == turn_id) {
        s.active = None;
    }
}

/// The entry the fork of history turn `turn_id` (`<thread>-turn-<n>`, as
/// [`crate::history::turns_of`] numbers them) ends with: the last entry
/// before turn `n + 1` starts; `None` when the turn is the last one.
fn fork_end(
    thread_id: &str,
    ctx: &keel_session_store::Context,
    turn_id: &str,
) -> Result<Option<String>, RpcError> {
    let unknown = || RpcError::invalid(format!("unknown turn id: {turn_id}"));
    let n: usize = turn_id
        .strip_prefix(&format!("{thread_id}-turn-"))
        .and_then(|n| n.parse().ok())
        .ok_or_else(unknown)?;
    let mut turn = None::<usize>;
    let mut last_was_assistant = true;
    for (i, m) in ctx.messages.iter().enumerate() {
        match m {
            Message::User(_) => {
                if turn.is_none() || last_was_assistant {
                    let next = turn.map_or(0, |t| t + 1);
                    if next == n + 1 {
                        return Ok(i.checked_sub(1).map(|p| ctx.entry_ids[p].clone()));
                    }
                    turn = Some(next);
                }
                last_was_assistant = false;
            }
            Message::Assistant(_) => last_was_assistant = true,
            Message::ToolResult(_) => {}
        }
    }
    if turn.is_some_and(|t| t >= n) {
        Ok(None)
    } else {
        Err(unknown())
    }
}

/// `thread/fork`: a new session file holding the source thread's active
/// branch (through `last_turn_id` when given; entry ids kept), with the
/// source recorded as its parent; then loaded like a resumed thread.
pub async fn fork_thread(
    runtime: &Arc<Runtime>,
    source_id: &str,
    path: Option<&str>,
    last_turn_id: Option<&str>,
    opts: OpenOptions,
) -> Result<Arc<LoadedThread>, RpcError> {
    let source_path = match path.filter(|p| !p.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => {
            if let Some(t) = runtime.thread(source_id) {
                if let Some(w) = &t.writer {
                    w.flush().await.map_err(|e| {
                        RpcError::internal(format!("cannot flush the source thread: {e}"))
                    })?;
                }
                t.state()
                    .path
                    .clone()
                    .ok_or_else(|| RpcError::invalid("an ephemeral thread cannot be forked"))?
            } else {
                find_session_file(runtime, source_id)
                    .await
                    .ok_or_else(|| RpcError::thread_not_found(source_id))?
            }
        }
    };
    let loaded = keel_session_store::load(&source_path).await.map_err(|e| {
        RpcError::internal(format!(
            "cannot load session {}: {e}",
            source_path.display()
        ))
    })?;
    let source_tree = loaded.tree();
    let end = match last_turn_id {
        Some(turn) => fork_end(&loaded.header.id, &source_tree.context(), turn)?,
        None => source_tree.leaf().map(str::to_owned),
    };
    let branch: Vec<keel_session_store::Entry> = source_tree
        .branch_to(end.as_deref())
        .into_iter()
        .cloned()
        .collect();
    let cwd = opts
        .cwd
        .clone()
        .map(|c| resolve_cwd(runtime, Some(&c)))
        .unwrap_or_else(|| PathBuf::from(&loaded.header.cwd));
    let mut opts = opts;
    if opts.model.is_none()
        && let Some((provider, model)) = loaded.last_model()
    {
        opts.model = Some(model);
        opts.model_provider = Some(provider);
    }
    let tree = keel_session_store::SessionTree::new(branch.clone(), Default::default(), end);
    let history = tree.context().messages;
    let (id, writer, tree) = if opts.ephemeral {
        (uuid::Uuid::now_v7().to_string(), None, Some(tree))
    } else {
        let writer = runtime
            .store
            .create_with(&cwd, Some(source_path.display().to_string()), branch)
            .await
            .map_err(|e| RpcError::internal(format!("cannot create the session file: {e}")))?;
        (writer.id().to_owned(), Some(writer), Some(tree))
    };
    let spawned = spawn_thread(
        runtime,
        id,
        writer,
        history,
        tree,
        loaded.name(),
        now_secs(),
        &opts,
        cwd,
        Some(loaded.header.id.clone()),
    )
    .await;
    Ok(spawned.thread)
}

/// Every session on disk, newest first.
pub async fn list_sessions(runtime: &Runtime) -> Vec<SessionSummary> {
    let mut out = match runtime.store.list_all().await {
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(error = %e, "cannot list sessions");
            Vec::new()
        }
    };
    out.dedup_by(|a, b| a.id == b.id);
    out
}

/// A session on disk as a `Thread` (not loaded).
pub fn summary_thread(runtime: &Runtime, s: &SessionSummary) -> Thread {
    let modified = s
        .modified
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    Thread {
        id: s.id.clone(),
        session_id: s.id.clone(),
        forked_from_id: None,
        parent_thread_id: None,
        preview: s.first_message.clone().unwrap_or_default(),
        ephemeral: false,
        model_provider: runtime
            .models
            .models()
            .first()
            .map(|m| m.provider.clone())
            .unwrap_or_default(),
        model: None,
        reasoning_effort: None,
        created_at: rfc3339_secs(&s.created).unwrap_or(modified),
        updated_at: modified,
        status: ThreadStatus::NotLoaded,
        path: Some(s.path.display().to_string()),
        cwd: s.cwd.clone(),
        cli_version: runtime.config.version.clone(),
        originator: None,
        source: "appServer".to_owned(),
        thread_source: None,
        agent_nickname: None,
        agent_role: None,
        git_info: None,
        name: s.name.clone(),
        project_id: None,
        turns: Vec::new(),
        history_mode: Default::default(),
    }
}
