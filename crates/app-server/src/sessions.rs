//! Threads are keel sessions: the same files under `KEEL_HOME/sessions`,
//! visible to RPC mode and the CLI. This module opens them (new, resumed),
//! spawns the core session with the app-server's approval gate, registers
//! the loaded thread and starts its event pump; it also lists sessions on
//! disk as `Thread` objects.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_app_server_protocol::v2::{
    ApprovalPolicyName, AskForApproval, SandboxMode, SandboxPolicy, Thread, ThreadStatus,
};
use keel_core::{
    ModelInfo, ModelPricing, Session, SessionConfig, SessionDeps, SessionLog, SystemClock,
};
use keel_llm::{ModelRequest, ModelStream, Provider};
use keel_protocol::{ContentBlock, Message};
use keel_session_store::{EntryBody, SessionSummary, SessionWriter};
use keel_tools::{LocalFileSystem, LocalProcessRunner, builtin_tools};
use tokio_util::sync::CancellationToken;

use crate::approvals::AppServerGate;
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
}

/// The default approval policy of a thread that names none.
pub const DEFAULT_APPROVAL_POLICY: AskForApproval =
    AskForApproval::Named(ApprovalPolicyName::OnRequest);

/// Picks the model: the requested one (same provider as the default when
/// only an id is given), else the default; an empty model when none is
/// configured (turns then fail with a clear error).
pub fn choose_model(runtime: &Runtime, id: Option<&str>, provider: Option<&str>) -> ModelInfo {
    let models = runtime.models.models();
    if let Some(id) = id.filter(|i| !i.is_empty()) {
        if let Some(m) = models
            .iter()
            .find(|m| m.id == id && provider.is_none_or(|p| p == m.provider))
        {
            return m.clone();
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
        return Arc::new(Unavailable(
            "no model configured: set KEEL_PROVIDER and KEEL_MODEL (or [model] in $KEEL_HOME/config.toml)".to_owned(),
        ));
    }
    match runtime.models.provider(model) {
        Ok(p) => p,
        Err(reason) => Arc::new(Unavailable(reason)),
    }
}

fn project_context(cwd: &Path, developer: Option<&str>) -> Option<String> {
    let file = ["AGENTS.md", "CLAUDE.md"]
        .iter()
        .find_map(|name| std::fs::read_to_string(cwd.join(name)).ok());
    match (file, developer) {
        (Some(f), Some(d)) => Some(format!("{f}\n\n{d}")),
        (Some(f), None) => Some(f),
        (None, Some(d)) => Some(d.to_owned()),
        (None, None) => None,
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

/// The text of the first user message.
pub fn preview_of(messages: &[Message]) -> String {
    messages
        .iter()
        .find_map(|m| match m {
            Message::User(u) => u.content.iter().find_map(|b| match b {
                ContentBlock::Text { text } => Some(text.clone()),
                _ => None,
            }),
            _ => None,
        })
        .unwrap_or_default()
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
fn spawn_thread(
    runtime: &Arc<Runtime>,
    id: String,
    writer: Option<SessionWriter>,
    history: Vec<Message>,
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
    let mut config = SessionConfig::new(id.clone(), cwd.clone(), model.clone());
    config.session_file = writer.as_ref().map(|w| w.path().to_path_buf());
    config.system_prompt = opts.base_instructions.clone();
    config.project_context = project_context(&cwd, opts.developer_instructions.as_deref());
    config.scratch_dir = runtime.config.home.join("tool-output");
    config.initial_messages = history.clone();
    config.retry = runtime.models.retry_policy();
    let log: Arc<dyn SessionLog> = match &writer {
        Some(w) => Arc::new(w.clone()),
        None => Arc::new(keel_core::NullLog),
    };
    let deps = SessionDeps {
        provider,
        tools: builtin_tools(),
        fs: Arc::new(LocalFileSystem),
        process: Arc::new(LocalProcessRunner::default()),
        gate: Arc::new(AppServerGate::new(Arc::downgrade(runtime))),
        clock: Arc::new(SystemClock),
        log,
    };
    let session = Session::spawn(config, deps);
    session.restore_name(name.clone());
    let (handle, events, task) = session.split();
    let sandbox = opts
        .sandbox
        .map(SandboxPolicy::from_mode)
        .unwrap_or(SandboxPolicy::DangerFullAccess);
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
        preview: preview_of(&history),
        originator: opts.originator.clone(),
        forked_from,
        status: ThreadStatus::Idle,
        active: None,
        turns: Vec::new(),
        session_grants: Default::default(),
        started_items: Default::default(),
        declined: Default::default(),
    };
    let thread = Arc::new(LoadedThread::new(id, handle, writer, state, task));
    runtime.insert_thread(thread.clone());
    let pump = tokio::spawn(crate::pump::run(runtime.clone(), thread.clone(), events));
    thread.set_pump(pump);
    Spawned { thread }
}

/// `thread/start`: a new session file (none when ephemeral).
pub async fn start_thread(
    runtime: &Arc<Runtime>,
    opts: OpenOptions,
) -> Result<Arc<LoadedThread>, RpcError> {
    let cwd = resolve_cwd(runtime, opts.cwd.as_deref());
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
        now_secs(),
        &opts,
        cwd,
        None,
    );
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
    let writer = loaded
        .into_writer()
        .await
        .map_err(|e| RpcError::internal(format!("cannot open session {}: {e}", path.display())))?;
    let spawned = spawn_thread(
        runtime,
        id.to_owned(),
        Some(writer),
        history,
        name,
        created,
        &opts,
        cwd,
        None,
    );
    Ok(spawned.thread)
}

/// Every session on disk, newest first.
pub async fn list_sessions(runtime: &Runtime) -> Vec<SessionSummary> {
    let root = runtime.store.root().to_path_buf();
    let cwds = tokio::task::spawn_blocking(move || workspace_cwds(&root))
        .await
        .unwrap_or_default();
    let mut out = Vec::new();
    for cwd in cwds {
        match runtime.store.list(&cwd).await {
            Ok(list) => out.extend(list),
            Err(e) => tracing::warn!(cwd = %cwd.display(), error = %e, "cannot list sessions"),
        }
    }
    out.sort_by_key(|s| std::cmp::Reverse(s.modified));
    out.dedup_by(|a, b| a.id == b.id);
    out
}

/// The workspace of each directory under the sessions root, read from the
/// header of one of its files.
fn workspace_cwds(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(dirs) = std::fs::read_dir(root) else {
        return out;
    };
    for dir in dirs.flatten() {
        let Ok(files) = std::fs::read_dir(dir.path()) else {
            continue;
        };
        for f in files.flatten() {
            let Ok(text) = std::fs::read_to_string(f.path()) else {
                continue;
            };
            let Some(first) = text.lines().next() else {
                continue;
            };
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(first)
                && let Some(cwd) = v["cwd"].as_str()
            {
                out.push(PathBuf::from(cwd));
                break;
            }
        }
    }
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
    }
}

/// A provider that fails every call with one reason (no model configured,
/// or the configured one cannot be set up).
struct Unavailable(String);

#[async_trait::async_trait]
impl Provider for Unavailable {
    fn name(&self) -> &str {
        "unavailable"
    }
    fn api(&self) -> &str {
        "none"
    }
    async fn stream(
        &self,
        _request: ModelRequest,
        _cancel: CancellationToken,
    ) -> keel_llm::Result<ModelStream> {
        Err(keel_llm::Error::new(
            keel_llm::ErrorKind::Other,
            self.0.clone(),
        ))
    }
}
