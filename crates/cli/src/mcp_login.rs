//! `keel mcp login <server>` and `keel mcp logout <server>`: signing in to
//! a remote (HTTP) MCP server with OAuth, and forgetting it.
//!
//! Owns the terminal side of a login: which configured server, the address
//! printed (and opened in a browser where there is a display), the
//! redirected address read from stdin for a machine without a browser,
//! and what is said when it is done. The protocol and the token file are
//! `keel_mcp::oauth`'s. No token is ever printed.

use std::io::IsTerminal;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tokio::io::AsyncBufReadExt;

use crate::GlobalArgs;
use crate::config::Settings;

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server's name under [mcp_servers] (an HTTP one).
    pub name: String,
    /// Scopes to ask for, comma-separated (default: what the server says).
    #[arg(long, value_delimiter = ',')]
    pub scopes: Vec<String>,
    /// A client registered with the authorization server beforehand
    /// (default: keel registers itself).
    #[arg(long)]
    pub client_id: Option<String>,
    /// The environment variable holding that client's secret.
    #[arg(long, requires = "client_id")]
    pub client_secret_env: Option<String>,
    /// The loopback port the browser is sent back to (default: any free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Do not open a browser; only print the address.
    #[arg(long)]
    pub no_browser: bool,
}

/// The configured HTTP server `name`: its URL and where its tokens go.
fn server(
    global: &GlobalArgs,
    name: &str,
) -> anyhow::Result<(String, keel_mcp::oauth::FileCredentials)> {
    let settings = Settings::load(global)?;
    let cwd = std::env::current_dir()?;
    let servers =
        keel_mcp::workspace::servers_for(&settings.home, &settings.file.mcp_servers, &cwd);
    let Some(config) = servers.get(name) else {
        let known: Vec<&str> = servers.keys().map(String::as_str).collect();
        anyhow::bail!(
            "no MCP server named {name} (configured: {})",
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
    };
    let (Some(url), Some(path)) = (&config.url, &config.credentials) else {
        anyhow::bail!("{name} is a stdio server: only HTTP servers sign in");
    };
    Ok((
        url.clone(),
        keel_mcp::oauth::FileCredentials::new(path.clone(), url),
    ))
}

#[allow(clippy::print_stdout)]
pub async fn login(global: &GlobalArgs, args: LoginArgs) -> anyhow::Result<ExitCode> {
    let (url, store) = server(global, &args.name)?;
    let client_secret = match &args.client_secret_env {
        Some(var) => Some(std::env::var(var).with_context(|| format!("{var} is not set"))?),
        None => None,
    };
    let request = keel_mcp::oauth::LoginRequest {
        scopes: args.scopes.clone(),
        client_id: args.client_id.clone(),
        client_secret,
        port: args.port,
    };
    // Lines a person pastes: the address the browser was sent to.
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).await.is_err() {
                return;
            }
        }
    });
    let name = args.name.clone();
    let open = !args.no_browser && has_display();
    keel_mcp::oauth::login(
        &url,
        store.clone(),
        &request,
        |address, redirect| {
            println!("To sign in to {name}, open:\n\n{address}\n");
            println!(
                "keel waits for the browser at {redirect}. On a machine without a browser, open the address elsewhere and paste here the address the browser ends up at."
            );
            if open {
                open_browser(address);
            }
        },
        rx,
    )
    .await
    .with_context(|| format!("signing in to {}", args.name))?;
    println!(
        "Signed in to {}; the tokens are in {} (refreshed as they expire).",
        args.name,
        store.path().display()
    );
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::print_stdout)]
pub async fn logout(global: &GlobalArgs, name: &str) -> anyhow::Result<ExitCode> {
    let (_, store) = server(global, name)?;
    match store.remove().await.map_err(anyhow::Error::msg)? {
        true => println!("Signed out of {name}: its tokens are gone."),
        false => println!("{name} was not signed in."),
    }
    Ok(ExitCode::SUCCESS)
}

/// Whether a browser can be shown here (a terminal with a display).
fn has_display() -> bool {
    std::io::stdout().is_terminal()
        && (std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some())
}

/// Opens `address` with the desktop's opener, if there is one; the printed
/// address is there either way.
fn open_browser(address: &str) {
    let opener = std::env::var("BROWSER").unwrap_or_else(|_| "xdg-open".to_owned());
    let spawned = std::process::Command::new(opener)
        .arg(address)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    if let Err(e) = spawned {
        tracing::debug!(error = %e, "no browser opened");
    }
}
