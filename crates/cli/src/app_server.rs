//! `keel app-server`: the Codex-compatible app-server.
//!
//! Owns the binary's side of it: the flags, the [`ModelSource`] over the
//! resolved configuration (the configured model first, then `--models`),
//! and starting the transport chosen with `--listen`, with the `--ws-*`
//! auth flags of the network listeners. The protocol itself lives in
//! `keel-app-server`. Stdout belongs to the protocol on stdio; a network
//! listener announces itself with one documented line on stderr:
//! `keel app-server listening on <url> (auth: <mode>)`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, ValueEnum};
use keel_app_server::{
    AppServerConfig, AuthMode, AuthPolicy, AuthSettings, Listen, NetworkServer, Runtime,
    parse_listen,
};

use crate::GlobalArgs;
use crate::config::{ModelArgs, Settings};
use crate::model_source::CliModels;

// Flags of `keel app-server`. (Plain comments on the types of subcommands:
// see `Command` in main.rs.)
#[derive(Debug, Clone, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AppServerArgs {
    #[command(subcommand)]
    pub command: Option<AppServerCommand>,
    /// Serve one client on stdin/stdout (the default; same as --listen stdio://).
    #[arg(long)]
    pub stdio: bool,
    /// Where to listen: stdio://, ws://HOST:PORT, unix://[PATH] or off.
    #[arg(long, default_value = "stdio://")]
    pub listen: String,
    /// The sandbox of threads and `command/exec` that name none:
    /// read-only, workspace-write (the default) or danger-full-access.
    /// Overrides `[sandbox] mode`.
    #[arg(long, value_name = "MODE", env = "KEEL_SANDBOX")]
    pub sandbox: Option<String>,
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
    pub ws: WsAuthArgs,
    #[command(flatten)]
    pub model: ModelArgs,
}

// `keel app-server <subcommand>`: keel's own schema of the protocol,
// generated from its Rust types (see docs/app-server.md).
#[derive(Debug, Clone, clap::Subcommand)]
pub enum AppServerCommand {
    /// Write keel's JSON Schema of the protocol (draft-07) into DIR.
    GenerateJsonSchema(SchemaArgs),
    /// Write keel's TypeScript types of the protocol into DIR.
    GenerateTs(SchemaArgs),
}

/// Flags of the schema subcommands.
#[derive(Debug, Clone, Args)]
pub struct SchemaArgs {
    /// The directory to write into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Accepted for compatibility with Codex; keel's schema has one profile
    /// (it implements no experimental-only method).
    #[arg(long)]
    pub experimental: bool,
}

// Auth of the `ws://` and `unix://` listeners (see docs/app-server.md). (A
// plain comment: see `Command` in main.rs.)
#[derive(Debug, Clone, Args)]
pub struct WsAuthArgs {
    /// Auth mode of ws:// and unix:// listeners (default: inferred from the flags below).
    #[arg(long = "ws-auth", value_enum, value_name = "MODE")]
    pub ws_auth: Option<WsAuthMode>,
    /// File holding the capability token clients send as `Authorization: Bearer <token>`.
    #[arg(long, value_name = "PATH", conflicts_with = "ws_token_sha256")]
    pub ws_token_file: Option<PathBuf>,
    /// SHA-256 (hex) of the capability token, instead of --ws-token-file.
    #[arg(long, value_name = "HEX")]
    pub ws_token_sha256: Option<String>,
    /// File holding the HS256 secret (32+ bytes) of signed bearer tokens (JWT).
    #[arg(long, visible_alias = "ws-jwt-secret-file", value_name = "PATH")]
    pub ws_shared_secret_file: Option<PathBuf>,
    /// Required `iss` of signed bearer tokens.
    #[arg(long, visible_alias = "ws-jwt-issuer", value_name = "ISSUER")]
    pub ws_issuer: Option<String>,
    /// Required `aud` of signed bearer tokens.
    #[arg(long, visible_alias = "ws-jwt-audience", value_name = "AUDIENCE")]
    pub ws_audience: Option<String>,
    /// Allowed clock difference on `exp`/`nbf` of signed bearer tokens (default 30).
    #[arg(long, value_name = "SECONDS")]
    pub ws_max_clock_skew_seconds: Option<u64>,
    /// No auth at all: only for a loopback ws:// address or a unix socket.
    #[arg(long)]
    pub ws_insecure_no_auth: bool,
}

/// `--ws-auth`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WsAuthMode {
    CapabilityToken,
    SignedBearerToken,
}

impl WsAuthArgs {
    fn settings(&self) -> AuthSettings {
        AuthSettings {
            mode: self.ws_auth.map(|m| match m {
                WsAuthMode::CapabilityToken => AuthMode::CapabilityToken,
                WsAuthMode::SignedBearerToken => AuthMode::SignedBearerToken,
            }),
            token_file: self.ws_token_file.clone(),
            token_sha256: self.ws_token_sha256.clone(),
            shared_secret_file: self.ws_shared_secret_file.clone(),
            issuer: self.ws_issuer.clone(),
            audience: self.ws_audience.clone(),
            max_clock_skew_secs: self.ws_max_clock_skew_seconds,
            insecure_no_auth: self.ws_insecure_no_auth,
        }
    }
}

/// Writes the schema files; prints how many on stderr.
#[allow(clippy::print_stderr)]
fn generate(command: AppServerCommand) -> anyhow::Result<ExitCode> {
    use keel_app_server::protocol::export;
    let (args, files) = match command {
        AppServerCommand::GenerateJsonSchema(a) => (a, export::json_files()),
        AppServerCommand::GenerateTs(a) => (a, export::ts_files()),
    };
    let n = files.len();
    for (rel, text) in files {
        let path = args.out.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("cannot create {}", parent.display()))?;
        }
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    eprintln!("wrote {n} files into {}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

impl AppServerArgs {
    /// Where to serve: `--stdio`, else `--listen`.
    fn listen(&self) -> keel_app_server::Result<Listen> {
        if self.stdio {
            Ok(Listen::Stdio)
        } else {
            parse_listen(&self.listen)
        }
    }

    /// True when this serves one client on stdin/stdout (no subcommand, and
    /// `--stdio` or a `--listen` of stdio). A bad `--listen` is false here;
    /// [`run`] reports it.
    pub fn serves_stdio(&self) -> bool {
        self.command.is_none() && matches!(self.listen(), Ok(Listen::Stdio))
    }
}

pub async fn run(global: &GlobalArgs, args: AppServerArgs) -> anyhow::Result<ExitCode> {
    if let Some(command) = args.command.clone() {
        return generate(command);
    }
    let listen = args.listen()?;
    let cwd = match &args.workspace {
        Some(c) => std::path::absolute(c)?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let settings = Settings::load(global)?;
    let home = settings.home.clone();
    let scope = settings.scope(&args.model, &args.models)?;
    if let Some(warning) = scope.scoped.first().and_then(|m| m.warning.as_ref()) {
        tracing::warn!("{warning}");
    }
    let models = CliModels::new(scope, settings.retry, settings.compaction);
    let sandbox = settings.file.sandbox.settings(args.sandbox.as_deref())?;
    let mut config = AppServerConfig::new(home, cwd);
    config.sandbox = sandbox.policy;
    config.allow_unconfined = sandbox.allow_unconfined;
    if let Some(n) = args.max_frame_bytes.filter(|n| *n > 0) {
        config.max_frame_bytes = n;
    }
    if let Some(secs) = args.approval_timeout_secs.filter(|s| *s > 0) {
        config.approval_timeout = Some(std::time::Duration::from_secs(secs));
    }
    let auth = args.ws.settings();
    if matches!(listen, Listen::Stdio | Listen::Off) && auth.any() {
        tracing::warn!("the --ws-* flags only apply to ws:// and unix:// listeners; ignored");
    }
    let servers = keel_mcp::workspace::servers_for(
        &config.home,
        &settings.file.mcp_servers,
        &config.default_cwd,
    );
    let mcp = crate::setup::start_mcp(&servers, &config.default_cwd).await;
    let runtime = Runtime::new(
        config,
        Arc::new(models),
        keel_app_server::approvals::frontend,
    );
    runtime.set_mcp(mcp);
    // With a cluster and the shared database, turns run on its workers.
    runtime.set_runs_elsewhere(crate::turns::on_workers(global, None).await?);
    let servers = runtime.clone();
    match listen {
        Listen::Stdio => {
            keel_app_server::serve_stdio(runtime, crate::stdio::stdin(), crate::stdio::stdout())
                .await?;
        }
        Listen::Off => {
            stop_signal().await?;
            runtime.shutdown_threads().await;
        }
        listen @ (Listen::Ws(_) | Listen::Unix(_)) => {
            // Reads the secret files: a bad flag fails before anything listens.
            let auth = AuthPolicy::from_settings(&auth)?;
            let server = NetworkServer::bind(runtime.clone(), &listen, auth).await?;
            announce(&server);
            let mut serving = tokio::spawn(server.serve());
            let early = tokio::select! {
                r = &mut serving => Some(r),
                r = stop_signal() => { r?; None }
            };
            runtime.shutdown_threads().await;
            let served = match early {
                Some(r) => r,
                None => serving.await,
            };
            served.context("the listener task failed")??;
        }
    }
    // The MCP servers (and their process groups) end with the server.
    if let Some(servers) = servers.mcp() {
        servers.stop().await;
    }
    Ok(ExitCode::SUCCESS)
}

/// The documented startup line of a network listener, on stderr.
#[allow(clippy::print_stderr)]
fn announce(server: &NetworkServer) {
    eprintln!(
        "keel app-server listening on {} (auth: {})",
        server.url(),
        server.auth_mode()
    );
}

/// Ctrl-C or SIGTERM (also what `keel worker` stops on).
pub(crate) async fn stop_signal() -> anyhow::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("cannot wait for Ctrl-C"),
        _ = term.recv() => Ok(()),
    }
}
