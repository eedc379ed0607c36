//! Building a session from resolved configuration, shared by every mode.
//!
//! Owns turning a [`Resolved`] model into a provider and a [`ModelInfo`],
//! recording the model in a session file, reading the workspace's project
//! instructions, and spawning a core [`Session`] with keel's built-in tools
//! over the local file system. It does not pick sessions (modes do that)
//! and does not print.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use keel_core::{
    AllowAll, ModelInfo, ModelPricing, Session, SessionConfig, SessionDeps, SessionLog, SystemClock,
};
use keel_llm::chat_completions::{ChatCompletionsConfig, ChatCompletionsProvider};
use keel_protocol::{Message, ThinkingLevel};
use keel_session_store::{EntryBody, SessionWriter};
use keel_tools::{LocalFileSystem, LocalProcessRunner, builtin_tools};

use crate::config::Resolved;

/// A provider for the resolved model.
pub fn build_provider(r: &Resolved) -> anyhow::Result<Arc<dyn keel_llm::Provider>> {
    let mut cfg = ChatCompletionsConfig::new(r.provider.clone(), r.base_url.clone());
    cfg.api_key = r.api_key();
    if let (None, Some(var)) = (&cfg.api_key, &r.api_key_env) {
        bail!("provider {:?} needs an API key: set {var}", r.provider);
    }
    cfg.extra_headers = r.headers.clone().into_iter().collect();
    cfg.idle_timeout = Duration::from_secs(r.idle_timeout_secs);
    let provider = ChatCompletionsProvider::new(cfg).context("cannot set up the HTTP client")?;
    Ok(Arc::new(provider))
}

/// What the session knows about the resolved model.
pub fn model_info(r: &Resolved) -> ModelInfo {
    ModelInfo {
        id: r.model.clone(),
        provider: r.provider.clone(),
        api: r.dialect.clone(),
        context_window: r.context_window,
        max_output_tokens: r.max_output_tokens,
        pricing: ModelPricing::default(),
    }
}

/// Appends a `model_change` entry.
pub async fn record_model(
    writer: &SessionWriter,
    provider: &str,
    model_id: &str,
) -> anyhow::Result<()> {
    writer
        .append(EntryBody::ModelChange {
            provider: provider.to_owned(),
            model_id: model_id.to_owned(),
        })
        .await?;
    Ok(())
}

/// `AGENTS.md` (or `CLAUDE.md`) of the workspace, if present.
pub fn project_context(cwd: &Path) -> Option<String> {
    ["AGENTS.md", "CLAUDE.md"]
        .iter()
        .find_map(|name| std::fs::read_to_string(cwd.join(name)).ok())
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
}

/// Spawns a session with the built-in tools over the local machine.
pub fn spawn_session(spec: SessionSpec<'_>) -> Session {
    let mut config = SessionConfig::new(
        spec.writer
            .map(|w| w.id().to_owned())
            .unwrap_or_else(|| format!("ephemeral-{}", uuid_like())),
        spec.cwd,
        spec.model,
    );
    config.session_file = spec.writer.map(|w| w.path().to_path_buf());
    config.thinking_level = spec.thinking;
    config.project_context = project_context(spec.cwd);
    config.scratch_dir = scratch_dir(spec.home);
    config.initial_messages = spec.history;
    let log: Arc<dyn SessionLog> = match spec.writer {
        Some(w) => Arc::new(w.clone()),
        None => Arc::new(keel_core::NullLog),
    };
    let deps = SessionDeps {
        provider: spec.provider,
        tools: builtin_tools(),
        fs: Arc::new(LocalFileSystem),
        process: Arc::new(LocalProcessRunner::default()),
        gate: Arc::new(AllowAll),
        clock: Arc::new(SystemClock),
        log,
    };
    Session::spawn(config, deps)
}

fn scratch_dir(home: &Path) -> PathBuf {
    home.join("tool-output")
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
