//! `keel app-server`: the Codex-compatible app-server.
//!
//! Owns the binary's side of it: the flags, the [`ModelSource`] over the
//! resolved configuration (the configured model first, then `--models`),
//! and starting the transport chosen with `--listen`. The protocol itself
//! lives in `keel-app-server`. Stdout belongs to the protocol on stdio.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use keel_app_server::{AppServerConfig, Listen, ModelSource, Runtime, parse_listen};
use keel_core::ModelInfo;
use keel_llm::Provider;

use crate::GlobalArgs;
use crate::config::{ModelArgs, Resolved, home_dir, resolve_optional};
use crate::setup::{build_provider, model_info};

/// Flags of `keel app-server`.
#[derive(Debug, Clone, Args)]
pub struct AppServerArgs {
    /// Serve one client on stdin/stdout (the default; same as --listen stdio://).
    #[arg(long)]
    pub stdio: bool,
    /// Where to listen: stdio://, ws://HOST:PORT, unix://[PATH] or off.
    #[arg(long, default_value = "stdio://")]
    pub listen: String,
    /// Longest accepted inbound frame, in bytes.
    #[arg(long, env = "KEEL_APP_SERVER_MAX_FRAME_BYTES")]
    pub max_frame_bytes: Option<usize>,
    /// Directory of threads that name no cwd (default: the current directory).
    #[arg(long = "cwd")]
    pub workspace: Option<PathBuf>,
    /// More models clients may pick, comma-separated `provider/id` or `id`.
    #[arg(long, value_delimiter = ',')]
    pub models: Vec<String>,
    /// How long an approval request waits for an answer, in seconds.
    #[arg(long, env = "KEEL_APP_SERVER_APPROVAL_TIMEOUT_SECS", hide = true)]
    pub approval_timeout_secs: Option<u64>,
    #[command(flatten)]
    pub model: ModelArgs,
}

pub async fn run(global: &GlobalArgs, args: AppServerArgs) -> anyhow::Result<ExitCode> {
    let listen = if args.stdio {
        Listen::Stdio
    } else {
        parse_listen(&args.listen)?
    };
    let cwd = match &args.workspace {
        Some(c) => std::path::absolute(c)?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let home = home_dir(global)?;
    let mut models = Vec::new();
    if let Some(main) = resolve_optional(global, &args.model)? {
        for extra in &args.models {
            let (provider, id) = match extra.trim().split_once('/') {
                Some((p, id)) => (p.to_owned(), id.to_owned()),
                None => (main.provider.clone(), extra.trim().to_owned()),
            };
            if id.is_empty() || (provider == main.provider && id == main.model) {
                continue;
            }
            let same = provider == main.provider;
            let extra_args = ModelArgs {
                model: Some(id),
                provider: Some(provider),
                base_url: if same {
                    args.model.base_url.clone()
                } else {
                    None
                },
                api_key_env: if same {
                    args.model.api_key_env.clone()
                } else {
                    None
                },
                thinking: args.model.thinking.clone(),
            };
            if let Some(r) = resolve_optional(global, &extra_args)? {
                models.push(r);
            }
        }
        models.insert(0, main);
    }
    let mut config = AppServerConfig::new(home, cwd);
    if let Some(n) = args.max_frame_bytes.filter(|n| *n > 0) {
        config.max_frame_bytes = n;
    }
    if let Some(secs) = args.approval_timeout_secs.filter(|s| *s > 0) {
        config.approval_timeout = std::time::Duration::from_secs(secs);
    }
    let runtime = Runtime::new(config, Arc::new(CliModels { models }));
    match listen {
        Listen::Stdio => {
            keel_app_server::serve_stdio(runtime, tokio::io::stdin(), tokio::io::stdout()).await?;
        }
        Listen::Off => {
            tokio::signal::ctrl_c()
                .await
                .context("cannot wait for Ctrl-C")?;
            runtime.shutdown_threads().await;
        }
        Listen::Ws(_) | Listen::Unix(_) => {
            bail!(
                "--listen {}: only stdio:// is available in this build",
                args.listen
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The configured models, as the app-server sees them.
struct CliModels {
    models: Vec<Resolved>,
}

impl CliModels {
    /// The resolved configuration for `model`: an exact match, else the
    /// first of its provider with the id replaced.
    fn resolved(&self, model: &ModelInfo) -> Option<Resolved> {
        if let Some(r) = self
            .models
            .iter()
            .find(|r| r.provider == model.provider && r.model == model.id)
        {
            return Some(r.clone());
        }
        self.models
            .iter()
            .find(|r| r.provider == model.provider)
            .map(|r| Resolved {
                model: model.id.clone(),
                ..r.clone()
            })
    }
}

impl ModelSource for CliModels {
    fn models(&self) -> Vec<ModelInfo> {
        self.models.iter().map(model_info).collect()
    }

    fn provider(&self, model: &ModelInfo) -> Result<Arc<dyn Provider>, String> {
        let r = self
            .resolved(model)
            .ok_or_else(|| format!("provider {:?} is not configured", model.provider))?;
        build_provider(&r).map_err(|e| format!("{e:#}"))
    }

    fn base_url(&self, model: &ModelInfo) -> Option<String> {
        self.resolved(model).map(|r| r.base_url)
    }

    fn has_api_key(&self) -> bool {
        self.models.iter().any(|r| r.api_key().is_some())
    }
}
