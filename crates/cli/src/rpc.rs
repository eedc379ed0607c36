//! `keel --mode rpc`: RPC mode on stdin/stdout.
//!
//! Owns the binary's side of RPC mode: the flags, the [`SessionFactory`]
//! that opens sessions from `$KEEL_HOME/sessions` with the configured model
//! (or without one: RPC mode still starts and answers commands, and only
//! prompting fails), and running [`keel_rpc::serve`]. Every session of the
//! process shares one approval gate on `$KEEL_HOME/keel.db`, which RPC mode
//! announces to the host. Stdout belongs to the protocol; nothing else may
//! write to it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use keel_core::{ModelInfo, ModelSource};
use keel_llm::Provider;
use keel_protocol::ThinkingLevel;
use keel_rpc::{OpenTarget, OpenedSession, RpcOptions, SessionCloser, SessionFactory};
use keel_session_store::{SessionStore, SessionTree, SessionWriter};
use tokio::signal::unix::{SignalKind, signal};

use crate::GlobalArgs;
use crate::approvals::ApprovalModeArg;
use crate::config::{ModelArgs, NO_MODEL_HINT, Settings};
use crate::model_source::CliModels;
use crate::setup::{SessionSpec, approval_gate_opening, record_model, session_builder};

/// Flags of RPC mode.
#[derive(Debug, Clone, Default, Args)]
pub struct RpcArgs {
    /// Write agent events flat (`{"type":"agent_start"}`), as pi and
    /// oh-my-pi do, instead of canonical event frames. Also
    /// `KEEL_RPC_FLAT_EVENTS=1`, for hosts that spawn keel with their own
    /// arguments (pi's `RpcClient`).
    #[arg(long, env = "KEEL_RPC_FLAT_EVENTS", value_parser = clap::builder::BoolishValueParser::new())]
    pub rpc_flat_events: bool,
    /// Do not save sessions.
    #[arg(long)]
    pub no_session: bool,
    /// Resume a session by id, id prefix or file path.
    #[arg(long)]
    pub session: Option<String>,
    /// With `--session`, when the session's turns run on workers: the
    /// last `log_seq` the host saw of it (a host that reconnects). Its
    /// turns' event frames resume after that one, and calls still held
    /// are offered again.
    #[arg(long, value_name = "LOG_SEQ", requires = "session")]
    pub after_log_seq: Option<u64>,
    /// Which tool calls ask for approval in this process (default: the
    /// workspace's stored mode, else `outside`); `set_approval_mode` replaces it.
    #[arg(long, value_enum)]
    pub approval_mode: Option<ApprovalModeArg>,
    /// What commands may touch: read-only, workspace-write (the default:
    /// the workspace and the temp dir, no network) or danger-full-access.
    /// Overrides `[sandbox] mode`.
    #[arg(long, value_name = "MODE", env = "KEEL_SANDBOX")]
    pub sandbox: Option<String>,
    /// Workspace directory (default: the current directory).
    #[arg(long = "cwd")]
    pub workspace: Option<PathBuf>,
    /// Models hosts cycle through, comma-separated `provider/id` or `id`
    /// (same provider as the configured model).
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    /// Offer the `ask_host` tool, through which the agent asks the host
    /// questions as workflow gates.
    #[arg(long)]
    pub rpc_gate_tool: bool,
    /// How long `ask_host` waits for an answer, in milliseconds.
    #[arg(long, env = "KEEL_RPC_GATE_TIMEOUT_MS", hide = true)]
    pub rpc_gate_timeout_ms: Option<u64>,
    /// Default timeout of extension UI dialogs, in milliseconds.
    #[arg(long, env = "KEEL_RPC_UI_TIMEOUT_MS", hide = true)]
    pub rpc_ui_timeout_ms: Option<u64>,
    /// Longest accepted input line, in bytes.
    #[arg(long, env = "KEEL_RPC_MAX_FRAME_BYTES", hide = true)]
    pub rpc_max_frame_bytes: Option<usize>,
    /// How long a host tool call may take, in milliseconds.
    #[arg(long, env = "KEEL_RPC_HOST_TOOL_TIMEOUT_MS", hide = true)]
    pub rpc_host_tool_timeout_ms: Option<u64>,
    /// How long a host URI request may take, in milliseconds.
    #[arg(long, env = "KEEL_RPC_HOST_URI_TIMEOUT_MS", hide = true)]
    pub rpc_host_uri_timeout_ms: Option<u64>,
    /// Accepted and ignored (pi's flag; keel has no themes), so hosts that
    /// spawn pi's command line (the ACP bridge `pi-acp`) can spawn keel.
    #[arg(long, hide = true)]
    pub no_themes: bool,
    /// Emit `setTitle` extension UI requests.
    #[arg(long, env = "KEEL_RPC_EMIT_TITLE", hide = true, value_parser = parse_flag)]
    pub rpc_emit_title: Option<bool>,
}

fn parse_flag(s: &str) -> Result<bool, String> {
    Ok(matches!(s.trim(), "1" | "true" | "yes" | "on"))
}

pub async fn run(
    global: &GlobalArgs,
    model: &ModelArgs,
    args: RpcArgs,
) -> anyhow::Result<ExitCode> {
    let cwd = match &args.workspace {
        Some(c) => std::path::absolute(c)?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        bail!("workspace {} is not a directory", cwd.display());
    }
    let settings = Settings::load(global)?;
    let home = settings.home.clone();
    let scope = settings.scope(model, &args.models)?;
    if let Some(main) = scope.scoped.first() {
        // Unknown models run with conservative defaults: say so in the log.
        if let Some(warning) = &main.warning {
            tracing::warn!("{warning}");
        }
        if let Some(warning) = main.effective_thinking().1 {
            tracing::warn!("{warning}");
        }
    }
    let thinking = scope.scoped.first().map(|m| m.thinking).unwrap_or_default();
    let state_dir = home.join("rpc");
    let gate = approval_gate_opening(&home, &cwd, args.approval_mode.map(Into::into));
    let servers = keel_mcp::workspace::servers_for(&home, &settings.file.mcp_servers, &cwd);
    let mcp = crate::setup::start_mcp(&servers, &cwd).await;
    // With a cluster and the shared database, runs go to its workers.
    let elsewhere = crate::turns::on_workers(global, model.model.clone()).await?;
    let factory = Arc::new(CliFactory {
        elsewhere,
        gate: gate.clone(),
        store: SessionStore::for_home(&home),
        home,
        cwd,
        no_session: args.no_session,
        sandbox: settings.file.sandbox.settings(args.sandbox.as_deref())?,
        mcp: std::sync::RwLock::new(mcp),
        current: std::sync::Mutex::new(None),
        models: CliModels::new(scope, settings.retry, settings.compaction),
    });
    let defaults = RpcOptions::default();
    let options = RpcOptions {
        flat_events: args.rpc_flat_events,
        max_frame_bytes: args
            .rpc_max_frame_bytes
            .filter(|n| *n > 0)
            .unwrap_or(defaults.max_frame_bytes),
        host_tool_timeout: args
            .rpc_host_tool_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(defaults.host_tool_timeout),
        host_uri_timeout: args
            .rpc_host_uri_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(defaults.host_uri_timeout),
        emit_title: args.rpc_emit_title.unwrap_or(false),
        gate_tool: args.rpc_gate_tool,
        gate_timeout: args
            .rpc_gate_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(defaults.gate_timeout),
        ui_timeout: args
            .rpc_ui_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(defaults.ui_timeout),
        state_dir: Some(state_dir),
        initial: match args.session {
            Some(session) => OpenTarget::Resume {
                session,
                log_seen: args.after_log_seq,
            },
            None => OpenTarget::New {
                parent_session: None,
            },
        },
        thinking,
        approvals: Some(gate),
        ..defaults
    };
    // SIGTERM and SIGINT end RPC mode like closing stdin does: pending host
    // requests fail, a running run is aborted, the session is flushed.
    let shutdown = options.shutdown.clone();
    let mut sigterm = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut sigint = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let watcher = tokio::spawn(async move {
        tokio::select! {
            _ = sigterm.recv() => {}
            _ = sigint.recv() => {}
            _ = shutdown.cancelled() => {}
        }
        shutdown.cancel();
    });
    let served = keel_rpc::serve(
        crate::stdio::stdin(),
        crate::stdio::stdout(),
        factory,
        options.clone(),
    )
    .await;
    options.shutdown.cancel();
    let _ = watcher.await;
    served?;
    Ok(ExitCode::SUCCESS)
}

/// The writer, history, name and tree of a session being opened.
type Writer = (
    Option<SessionWriter>,
    Vec<keel_protocol::Message>,
    Option<String>,
    Option<SessionTree>,
);

/// Opens sessions for RPC mode.
struct CliFactory {
    store: SessionStore,
    home: PathBuf,
    cwd: PathBuf,
    no_session: bool,
    models: CliModels,
    /// The sandbox of every session's commands.
    sandbox: crate::config::SandboxSettings,
    /// The MCP servers whose tools every session gets.
    mcp: std::sync::RwLock<Option<Arc<keel_mcp::McpServers>>>,
    /// The session opened last (the one `set_mcp_servers` re-wires).
    current: std::sync::Mutex<Option<keel_core::SessionHandle>>,
    /// The approval gate every session of the process shares.
    gate: Arc<keel_core::EngineGate>,
    /// Where sessions' runs run when not here (a cluster's workers).
    elsewhere: Option<Arc<dyn keel_core::RunsElsewhere>>,
}

/// The servers' statuses as `get_state.mcpServers` lists them.
fn statuses_of(servers: Option<&Arc<keel_mcp::McpServers>>) -> Vec<serde_json::Value> {
    servers
        .map(|m| {
            m.status()
                .into_iter()
                .filter_map(|s| serde_json::to_value(s).ok())
                .collect()
        })
        .unwrap_or_default()
}

impl CliFactory {
    /// The MCP servers sessions get tools from now.
    fn mcp(&self) -> Option<Arc<keel_mcp::McpServers>> {
        self.mcp.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    async fn writer(
        &self,
        target: &OpenTarget,
        model: Option<&ModelInfo>,
    ) -> anyhow::Result<Writer> {
        let record = |writer: SessionWriter| async move {
            if let Some(m) = model {
                record_model(&writer, &m.provider, &m.id).await?;
            }
            anyhow::Ok(writer)
        };
        match target {
            OpenTarget::New { .. } if self.no_session => Ok((None, Vec::new(), None, None)),
            OpenTarget::New { parent_session } => {
                let writer = self.store.create(&self.cwd, parent_session.clone()).await?;
                Ok((Some(record(writer).await?), Vec::new(), None, None))
            }
            OpenTarget::Fork { entries, .. } if self.no_session => {
                let leaf = entries.last().map(|e| e.id.clone());
                let tree = SessionTree::new(entries.clone(), Default::default(), leaf);
                Ok((None, Vec::new(), None, Some(tree)))
            }
            OpenTarget::Fork {
                parent_session,
                entries,
            } => {
                let (writer, mut tree) = self
                    .store
                    .create_branch(&self.cwd, parent_session.clone(), entries.clone())
                    .await?;
                if let Some(m) = model {
                    tree.push(record_model(&writer, &m.provider, &m.id).await?);
                }
                Ok((Some(writer), Vec::new(), None, Some(tree)))
            }
            OpenTarget::Resume { .. } if self.no_session => {
                bail!("sessions are not saved in this process (--no-session)")
            }
            OpenTarget::Resume { session: query, .. } => {
                let path = self.store.resolve(&self.cwd, query).await?;
                let loaded = keel_session_store::load(&path)
                    .await
                    .with_context(|| format!("cannot load session {}", path.display()))?;
                let name = loaded.name();
                let last = loaded.last_model();
                // The session takes its history from the tree (moved, not
                // copied), so no separate list of messages.
                let (mut tree, writer) = loaded.into_tree_and_writer().await?;
                if let Some(m) = model
                    && last != Some((m.provider.clone(), m.id.clone()))
                {
                    tree.push(record_model(&writer, &m.provider, &m.id).await?);
                }
                Ok((Some(writer), Vec::new(), name, Some(tree)))
            }
        }
    }
}

#[async_trait::async_trait]
impl SessionFactory for CliFactory {
    fn models(&self) -> &dyn ModelSource {
        &self.models
    }

    async fn set_mcp_servers(
        &self,
        servers: serde_json::Value,
    ) -> Result<(Vec<Arc<dyn keel_tools::Tool>>, Vec<serde_json::Value>), String> {
        let configs: std::collections::BTreeMap<String, keel_mcp::McpServerConfig> =
            serde_json::from_value(servers).map_err(|e| format!("servers: {e}"))?;
        for (name, c) in &configs {
            c.transport().map_err(|e| format!("servers.{name}: {e}"))?;
        }
        let started = crate::setup::start_mcp(&configs, &self.cwd).await;
        let old = std::mem::replace(
            &mut *self.mcp.write().unwrap_or_else(|e| e.into_inner()),
            started.clone(),
        );
        if let Some(old) = old {
            old.stop().await;
        }
        if let (Some(servers), Some(handle)) = (
            &started,
            self.current
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        ) {
            crate::setup::follow_mcp(servers, handle);
        }
        let statuses = statuses_of(started.as_ref());
        Ok((crate::setup::mcp_tools(started.as_ref()), statuses))
    }

    fn mcp_servers(&self) -> Vec<serde_json::Value> {
        statuses_of(self.mcp().as_ref())
    }

    async fn open(
        &self,
        target: OpenTarget,
        model: Option<&ModelInfo>,
        thinking: ThinkingLevel,
        asker: Option<Arc<dyn keel_tools::Asker>>,
    ) -> Result<OpenedSession, String> {
        let provider: Arc<dyn Provider> = match model {
            Some(m) => self.models.provider(m)?,
            None => Arc::new(keel_llm::UnavailableProvider::new(NO_MODEL_HINT)),
        };
        let (writer, history, name, tree) = self
            .writer(&target, model)
            .await
            .map_err(|e| format!("{e:#}"))?;
        let info = model.cloned().unwrap_or_default();
        let session = session_builder(SessionSpec {
            cwd: &self.cwd,
            home: &self.home,
            model: info,
            provider,
            thinking,
            writer: writer.as_ref(),
            history,
            tree,
            retry: self.models.retry_policy(),
            compaction: self.models.compaction(),
            gate: self.gate.clone(),
            sandbox: self.sandbox.clone(),
            extra_tools: crate::setup::mcp_tools(self.mcp().as_ref()),
            elsewhere: self.elsewhere.clone(),
            fence: None,
            sync_prompts: false,
            output_schema: None,
            log_seen: match &target {
                OpenTarget::Resume { log_seen, .. } => *log_seen,
                OpenTarget::New { .. } | OpenTarget::Fork { .. } => None,
            },
        })
        .asker(asker)
        .spawn();
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(session.handle());
        if let Some(servers) = self.mcp() {
            crate::setup::follow_mcp(&servers, session.handle());
        }
        let file = writer.as_ref().map(|w| w.path().to_path_buf());
        Ok(OpenedSession {
            session,
            closer: writer.map(|w| Arc::new(WriterCloser(w)) as Arc<dyn SessionCloser>),
            name,
            file,
        })
    }
}

/// Closes a session file's writer.
struct WriterCloser(SessionWriter);

#[async_trait::async_trait]
impl SessionCloser for WriterCloser {
    async fn close(&self) -> Result<(), String> {
        self.0.close().await.map_err(|e| e.to_string())
    }
}
