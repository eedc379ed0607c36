//! `keel mcp list`: the configured MCP servers, started as a session would
//! start them, with their state, sign-in and tools (`login` and `logout`
//! are [`crate::mcp_login`]'s).
//!
//! Owns printing each server (started, failed with its reason, disabled)
//! and its tools with the name the model sees and the class the approval
//! gate gives them. The servers are stopped before it returns. It must not
//! know how servers are reached.

use std::process::ExitCode;

use clap::Subcommand;
use keel_core::keel_approvals::Class;
use keel_tools::Tool;

use crate::GlobalArgs;
use crate::config::Settings;

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Show the MCP servers this workspace's `.keel/config.toml` names,
    /// and trust the file as it is now, so they start with sessions here.
    Trust,
    /// Start the configured servers and list their state and tools.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Sign in to an HTTP server with OAuth (its tokens are kept under
    /// keel's home, owner-only, and refreshed).
    Login(crate::mcp_login::LoginArgs),
    /// Forget an HTTP server's tokens.
    Logout {
        /// The server's name under [mcp_servers].
        name: String,
    },
}

#[allow(clippy::print_stdout)]
pub async fn run(global: &GlobalArgs, command: McpCommand) -> anyhow::Result<ExitCode> {
    let json = match command {
        McpCommand::List { json } => json,
        McpCommand::Trust => return trust(global),
        McpCommand::Login(args) => return crate::mcp_login::login(global, args).await,
        McpCommand::Logout { name } => return crate::mcp_login::logout(global, &name).await,
    };
    let settings = Settings::load(global)?;
    let cwd = std::env::current_dir()?;
    let configured =
        keel_mcp::workspace::servers_for(&settings.home, &settings.file.mcp_servers, &cwd);
    let Some(servers) = crate::setup::start_mcp(&configured, &cwd).await else {
        if json {
            println!("[]");
        } else {
            println!("no MCP servers configured ([mcp_servers.NAME] in config.toml; docs/mcp.md)");
        }
        return Ok(ExitCode::SUCCESS);
    };
    let tools = keel_mcp::McpTool::all(&servers);
    let class_of = |t: &dyn Tool| -> Class {
        let h = t.hints().unwrap_or_default();
        h.class
            .as_deref()
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| Class::from_mcp_hints(h.read_only, h.destructive, h.open_world))
    };
    let status = servers.status();
    // An HTTP server's sign-in (`keel mcp login`), as its tokens say.
    let mut signed = std::collections::BTreeMap::new();
    for (name, config) in &configured {
        if let (Some(path), Some(url)) = (&config.credentials, &config.url) {
            let store = keel_mcp::oauth::FileCredentials::new(path.clone(), url);
            signed.insert(name.clone(), keel_mcp::oauth::describe(&store).await);
        }
    }
    let sign_in = |name: &str| signed.get(name).cloned();
    if json {
        let out: Vec<serde_json::Value> = status
            .iter()
            .map(|s| {
                let mut v = serde_json::to_value(s).unwrap_or_default();
                if let Some(auth) = sign_in(&s.name) {
                    v["auth"] = serde_json::Value::String(auth);
                }
                v["toolNames"] = tools
                    .iter()
                    .filter(|t| t.hints().and_then(|h| h.server).as_deref() == Some(&s.name))
                    .map(|t| serde_json::json!({"name": t.name(), "class": class_of(t.as_ref()).as_str()}))
                    .collect();
                v
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        for s in &status {
            let state = serde_json::to_value(&s.state)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default();
            println!(
                "{}  {state}{}{}",
                s.name,
                sign_in(&s.name)
                    .map(|a| format!(" ({a})"))
                    .unwrap_or_default(),
                s.error
                    .as_deref()
                    .map(|e| format!(": {e}"))
                    .unwrap_or_default()
            );
            for t in tools
                .iter()
                .filter(|t| t.hints().and_then(|h| h.server).as_deref() == Some(&s.name))
            {
                println!("    {}  [{}]", t.name(), class_of(t.as_ref()));
            }
        }
    }
    servers.stop().await;
    Ok(ExitCode::SUCCESS)
}

/// `keel mcp trust`: shows what the workspace file starts, then records it.
#[allow(clippy::print_stdout)]
fn trust(global: &GlobalArgs) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(global)?;
    let cwd = std::env::current_dir()?;
    let Some(ws) = keel_mcp::workspace::read(&cwd)? else {
        println!(
            "{} names no MCP servers here; nothing to trust",
            keel_mcp::workspace::WORKSPACE_CONFIG
        );
        return Ok(ExitCode::SUCCESS);
    };
    println!("{} starts:", ws.path.display());
    for (name, c) in &ws.servers {
        match c.transport() {
            Ok(keel_mcp::Transport::Stdio { command, args, .. }) => {
                println!("  {name}: {command} {}", args.join(" "))
            }
            Ok(keel_mcp::Transport::Http { url, .. }) => println!("  {name}: {url}"),
            Err(e) => println!("  {name}: (unusable: {e})"),
        }
    }
    keel_mcp::workspace::trust(&settings.home, &cwd, &ws)?;
    println!("trusted: these servers start with sessions in this workspace until the file changes");
    Ok(ExitCode::SUCCESS)
}
