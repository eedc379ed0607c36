//! Building a session from resolved configuration, shared by every mode.
//!
//! Owns turning a [`Resolved`] model into a provider (through
//! [`keel_llm::build_provider`], whatever the dialect) and a [`ModelInfo`]
//! (from the model catalogue), recording the model in a session file, reading the workspace's project
//! instructions, and spawning a core [`Session`] with keel's built-in tools
//! over the local file system. It does not pick sessions (modes do that)
//! and does not print.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use keel_core::{
    ApprovalGate, CompactionSettings, ModelInfo, RetryPolicy, Session, SessionBuilder,
};
use keel_protocol::{Message, ThinkingLevel};
use keel_session_store::{EntryBody, SessionWriter};

use crate::config::Resolved;

/// A provider for the resolved model, in its provider's dialect. Fails
/// when the provider needs a key that is not set.
pub fn build_provider(r: &Resolved) -> anyhow::Result<Arc<dyn keel_llm::Provider>> {
    let mut spec = r.conf.spec();
    crate::models::fill_model_path(&mut spec, &r.home, &r.model);
    if let (None, Some(var)) = (&spec.api_key, &r.conf.api_key_env) {
        bail!("provider {:?} needs an API key: set {var}", r.provider);
    }
    keel_llm::build_provider(&spec).context("cannot set up the provider")
}

/// What the session knows about the resolved model (from the catalogue).
pub fn model_info(r: &Resolved) -> ModelInfo {
    r.model_info()
}

/// Appends a `model_change` entry (and returns it, for a tree that
/// mirrors the file).
pub async fn record_model(
    writer: &SessionWriter,
    provider: &str,
    model_id: &str,
) -> anyhow::Result<keel_session_store::Entry> {
    Ok(writer
        .append(EntryBody::ModelChange {
            provider: provider.to_owned(),
            model_id: model_id.to_owned(),
        })
        .await?)
}

/// A loaded session reopened for appending, `resolved`'s model recorded
/// when it is not the session's last one: its writer, history and tree.
pub async fn reopen_with_model(
    loaded: keel_session_store::LoadedSession,
    resolved: &Resolved,
) -> anyhow::Result<(SessionWriter, Vec<Message>, keel_session_store::SessionTree)> {
    let history = loaded.messages();
    let mut tree = loaded.tree();
    let changed_model =
        loaded.last_model() != Some((resolved.provider.clone(), resolved.model.clone()));
    let writer = loaded.into_writer().await?;
    if changed_model {
        tree.push(record_model(&writer, &resolved.provider, &resolved.model).await?);
    }
    Ok((writer, history, tree))
}

/// Everything a session is spawned from.
pub struct SessionSpec<'a> {
    pub cwd: &'a Path,
    pub home: &'a Path,
    pub model: ModelInfo,
    pub provider: Arc<dyn keel_llm::Provider>,
    pub thinking: ThinkingLevel,
    /// The session file's writer; `None` keeps the session in memory.
    pub writer: Option<&'a SessionWriter>,
    pub history: Vec<Message>,
    /// The entries of a resumed or forked session file (context with
    /// compactions, branching); `None` for a new session.
    pub tree: Option<keel_session_store::SessionTree>,
    pub retry: RetryPolicy,
    /// `[compaction]` of the configuration.
    pub compaction: CompactionSettings,
    /// The approval gate every tool call passes (see [`approval_gate`]).
    pub gate: Arc<dyn ApprovalGate>,
    /// Asked before a call that passed the gate runs (a worker's try).
    pub fence: Option<Arc<dyn keel_core::RunFence>>,
    /// The sandbox policy of its commands (`[sandbox]`, `--sandbox`).
    pub sandbox: crate::config::SandboxSettings,
    /// Tools beside the built-ins (the MCP servers' tools).
    pub extra_tools: Vec<Arc<dyn keel_tools::Tool>>,
    /// Where the session's runs run when not here (`crate::turns`).
    pub elsewhere: Option<Arc<dyn keel_core::RunsElsewhere>>,
    /// Sync new user messages before the model call (a worker's turn).
    pub sync_prompts: bool,
    /// The last place in the session's event log the host has seen (a
    /// host that reconnects to a session whose turns run on workers).
    pub log_seen: Option<u64>,
    /// The schema the runs' final answers follow (structured output).
    pub output_schema: Option<serde_json::Value>,
}

/// The approvals engine on the configured store (`$KEEL_HOME/keel.db` by
/// default, see `keel_approvals::StoreLocation::for_home`), as the gate of sessions in
/// workspace `cwd`; `mode` (from `--approval-mode`) applies to this process
/// only. When the database cannot be opened the gate denies every call.
pub async fn approval_gate(
    home: &Path,
    cwd: &Path,
    mode: Option<keel_core::keel_approvals::Mode>,
) -> Arc<keel_core::EngineGate> {
    let gate = keel_core::EngineGate::open(home, keel_core::workspace_key(cwd)).await;
    if let Ok(engine) = gate.engine() {
        engine.set_mode_override(mode);
    }
    Arc::new(gate)
}

/// [`approval_gate`], opening in the background from now on: for a
/// process that answers its host first (RPC mode), the first command is
/// not kept waiting for the store.
pub fn approval_gate_opening(
    home: &Path,
    cwd: &Path,
    mode: Option<keel_core::keel_approvals::Mode>,
) -> Arc<keel_core::EngineGate> {
    let gate = Arc::new(keel_core::EngineGate::opening(
        home,
        keel_core::workspace_key(cwd),
        mode,
    ));
    gate.warm();
    gate
}

/// Spawns a session with the built-in tools over the local machine
/// (through core's [`SessionBuilder`]).
pub fn spawn_session(spec: SessionSpec<'_>) -> Session {
    session_builder(spec).spawn()
}

/// The builder [`spawn_session`] spawns, for a front end that adds to it
/// (a host's system prompt).
pub fn session_builder(spec: SessionSpec<'_>) -> SessionBuilder {
    let id = spec
        .writer
        .map(|w| w.id().to_owned())
        .unwrap_or_else(|| format!("ephemeral-{}", uuid_like()));
    let mut builder = SessionBuilder::new(
        id,
        spec.cwd,
        spec.home,
        spec.model,
        spec.provider,
        spec.gate,
    );
    for tool in spec.extra_tools {
        builder = builder.tool(tool);
    }
    builder
        .writer(spec.writer)
        .thinking(spec.thinking)
        .history(spec.history, spec.tree)
        .retry(spec.retry)
        .compaction(spec.compaction)
        .sandbox(spec.sandbox.policy, spec.sandbox.allow_unconfined)
        .runs_elsewhere(spec.elsewhere)
        .fence(spec.fence)
        .sync_prompts(spec.sync_prompts)
        .log_seen(spec.log_seen)
        .output_schema(spec.output_schema)
}

/// Keeps `session`'s MCP tools those of `servers` as their tool lists
/// change, until the session closes.
pub fn follow_mcp(servers: &Arc<keel_mcp::McpServers>, session: keel_core::SessionHandle) {
    let open = session.clone();
    keel_mcp::follow(
        servers,
        move || !open.is_closed(),
        move |tools| session.swap_tools(keel_mcp::TOOL_PREFIX, tools),
    );
}

/// Starts the MCP servers `config.toml` configures for sessions in `cwd`
/// (in parallel, each bounded by its startup timeout); `None` when there
/// are none.
pub async fn start_mcp(
    servers: &std::collections::BTreeMap<String, keel_mcp::McpServerConfig>,
    cwd: &Path,
) -> Option<Arc<keel_mcp::McpServers>> {
    if servers.is_empty() {
        return None;
    }
    Some(keel_mcp::McpServers::start_in(servers, cwd).await)
}

/// The tools of `servers`.
pub fn mcp_tools(servers: Option<&Arc<keel_mcp::McpServers>>) -> Vec<Arc<dyn keel_tools::Tool>> {
    servers.map(keel_mcp::McpTool::all).unwrap_or_default()
}

/// A short process-unique suffix for in-memory session ids.
fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{:x}{:x}-{}",
        std::process::id(),
        nanos,
        N.fetch_add(1, Ordering::Relaxed)
    )
}
