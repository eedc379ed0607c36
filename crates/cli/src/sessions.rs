//! `keel sessions list`: the saved sessions of a workspace.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use keel_session_store::SessionStore;

use crate::GlobalArgs;
use crate::config::home_dir;

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// List the sessions of a workspace, newest first.
    List {
        /// The workspace (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
}

#[allow(clippy::print_stdout)]
pub async fn run(global: &GlobalArgs, command: SessionsCommand) -> anyhow::Result<ExitCode> {
    match command {
        SessionsCommand::List { cwd, json } => {
            let cwd = match cwd {
                Some(c) => std::path::absolute(c)?,
                None => std::env::current_dir()?,
            };
            let store = SessionStore::new(home_dir(global)?.join("sessions"));
            let sessions = store.list(&cwd).await?;
            for s in sessions {
                if json {
                    println!(
                        "{}",
                        serde_json::json!({
                            "id": s.id, "path": s.path, "created": s.created,
                            "messages": s.message_count, "name": s.name,
                            "firstMessage": s.first_message,
                        })
                    );
                } else {
                    println!(
                        "{}  {:>4} msgs  {}  {}",
                        s.id,
                        s.message_count,
                        s.created,
                        s.name.or(s.first_message).unwrap_or_default()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
