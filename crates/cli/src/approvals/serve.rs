//! `keel approvals serve`: the web inbox over the configured approvals store.
//!
//! Owns the command's flags (`--listen HOST:PORT` or `unix://PATH`,
//! `--token-file`, `--public-url`), the login token (read from the file,
//! or made up and printed once), which `Host` names the inbox answers to,
//! and running approved drafts for it through the same code as `keel
//! approvals send`. It must not know pages.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;
use keel_core::keel_approvals::{ApprovalEngine, ApprovalRecord, SystemClock};
use keel_inbox::{Auth, DraftSender, Inbox, Served};
use keel_session_store::SessionStore;

/// Shortest token accepted from `--token-file`.
const MIN_TOKEN_CHARS: usize = 16;

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Where to listen: HOST:PORT (default 127.0.0.1:4600) or unix://PATH.
    #[arg(long, default_value = "127.0.0.1:4600")]
    pub listen: String,
    /// Read the login token from this file instead of making one up.
    #[arg(long)]
    pub token_file: Option<PathBuf>,
    /// The address people open when the inbox is served behind a proxy
    /// (for example https://keel.example.org); its host is accepted, and
    /// `https://` makes the session cookie `Secure`.
    #[arg(long)]
    pub public_url: Option<String>,
}

struct Drafts {
    home: PathBuf,
}

#[async_trait::async_trait]
impl DraftSender for Drafts {
    async fn send(&self, engine: &ApprovalEngine, row: &ApprovalRecord) -> Result<String, String> {
        super::run_draft(engine, &self.home, row)
            .await
            .map(|(text, _)| text)
            .map_err(|e| format!("{e:#}"))
    }
}

#[allow(clippy::print_stdout)]
pub async fn run(home: &Path, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let engine = ApprovalEngine::open_home(home, Arc::new(SystemClock)).await?;
    let (token, printed) = match &args.token_file {
        Some(path) => {
            let token = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the token file {}", path.display()))?
                .trim()
                .to_owned();
            if token.chars().count() < MIN_TOKEN_CHARS {
                bail!(
                    "the token in {} is shorter than {MIN_TOKEN_CHARS} characters",
                    path.display()
                );
            }
            (token, false)
        }
        None => (keel_inbox::random_hex(24)?, true),
    };
    let public = args.public_url.as_deref().map(public_host).transpose()?;
    let tls = args
        .public_url
        .as_deref()
        .is_some_and(|u| u.starts_with("https://"));
    let sessions = SessionStore::for_home(home);
    let drafts: Arc<dyn DraftSender> = Arc::new(Drafts {
        home: home.to_path_buf(),
    });
    let make = |hosts: Vec<String>| {
        Arc::new(Inbox {
            engine: engine.clone(),
            auth: Auth::new(token.clone(), Served { hosts, tls }),
            sessions: sessions.clone(),
            drafts: Some(drafts.clone()),
        })
    };
    if let Some(path) = args.listen.strip_prefix("unix://") {
        let path = PathBuf::from(path);
        let _ = std::fs::remove_file(&path);
        let listener = tokio::net::UnixListener::bind(&path)
            .with_context(|| format!("cannot listen on {}", path.display()))?;
        let mut hosts = vec!["localhost".to_owned()];
        hosts.extend(public);
        println!("keel inbox on unix://{}", path.display());
        if printed {
            println!("token: {token}");
        }
        flush();
        let app = keel_inbox::router(make(hosts));
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown())
            .await?;
        let _ = std::fs::remove_file(&path);
        return Ok(ExitCode::SUCCESS);
    }
    let addr: SocketAddr = args
        .listen
        .trim_start_matches("http://")
        .parse()
        .with_context(|| format!("--listen {:?}: use HOST:PORT or unix://PATH", args.listen))?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let mut hosts = vec![bound.to_string()];
    if bound.ip().is_loopback() {
        hosts.push(format!("localhost:{}", bound.port()));
    }
    hosts.extend(public);
    println!("keel inbox on http://{bound}/");
    if printed {
        println!("token: {token}");
    }
    flush();
    axum::serve(listener, keel_inbox::router(make(hosts)))
        .with_graceful_shutdown(shutdown())
        .await?;
    Ok(ExitCode::SUCCESS)
}

/// The `Host` a public URL is reached under (`keel.example.org`,
/// `keel.example.org:8443`).
fn public_host(url: &str) -> anyhow::Result<String> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .with_context(|| format!("--public-url {url:?} must start with https:// or http://"))?;
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() {
        bail!("--public-url {url:?} names no host");
    }
    Ok(host.to_owned())
}

fn flush() {
    use std::io::Write;
    let _ = std::io::stdout().flush();
}

async fn shutdown() {
    if crate::app_server::stop_signal().await.is_err() {
        std::future::pending::<()>().await;
    }
}
