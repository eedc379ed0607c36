//! `keel sessions list|show|export|rm`: the saved sessions of a workspace.
//!
//! `list` shows each session's id, message count, start time and title
//! (its name, else its first user message); `show` prints the active branch
//! entry by entry with the entry ids (what `keel exec --fork-from` and RPC
//! `branch` take) and marks compactions, approval decisions and branch
//! points; `export --html` writes the self-contained HTML page of a
//! session; `rm` deletes a session file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Subcommand;
use keel_protocol::Message;
use keel_session_store::{EntryBody, LoadedSession, SessionStore};

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
    /// Print a session's active branch, entry by entry, with entry ids.
    Show {
        /// Session id, id prefix or file path (default: the latest of the workspace).
        session: Option<String>,
        /// The workspace (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
    },
    /// Write a session as one self-contained HTML file.
    Export {
        /// Write HTML (the only format).
        #[arg(long)]
        html: bool,
        /// Session id, id prefix or file path (default: the latest of the workspace).
        #[arg(long)]
        session: Option<String>,
        /// Output file (default: keel-session-<id>.html in the current directory).
        #[arg(long, short = 'o')]
        output: Option<PathBuf>,
        /// The workspace (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
    },
    /// Delete a session file.
    Rm {
        /// Session id, id prefix or file path.
        session: String,
        /// The workspace (default: the current directory).
        #[arg(long)]
        cwd: Option<PathBuf>,
    },
}

fn workspace(cwd: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    Ok(match cwd {
        Some(c) => std::path::absolute(c)?,
        None => std::env::current_dir()?,
    })
}

/// The session file a user named, or the workspace's latest.
async fn pick(store: &SessionStore, cwd: &Path, query: Option<&str>) -> anyhow::Result<PathBuf> {
    match query {
        Some(q) => Ok(store.resolve(cwd, q).await?),
        None => match store.latest(cwd).await? {
            Some(s) => Ok(s.path),
            None => bail!("no session in {}; name one with --session", cwd.display()),
        },
    }
}

async fn load(path: &Path) -> anyhow::Result<LoadedSession> {
    keel_session_store::load(path)
        .await
        .with_context(|| format!("cannot load session {}", path.display()))
}

#[allow(clippy::print_stdout)]
pub async fn run(global: &GlobalArgs, command: SessionsCommand) -> anyhow::Result<ExitCode> {
    let store = SessionStore::for_home(&home_dir(global)?);
    match command {
        SessionsCommand::List { cwd, json } => {
            let cwd = workspace(cwd)?;
            for s in store.list(&cwd).await? {
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
        }
        SessionsCommand::Show { session, cwd } => {
            let cwd = workspace(cwd)?;
            let loaded = load(&pick(&store, &cwd, session.as_deref()).await?).await?;
            print!("{}", show(&loaded));
        }
        SessionsCommand::Export {
            html,
            session,
            output,
            cwd,
        } => {
            if !html {
                bail!("choose the format: keel sessions export --html");
            }
            let cwd = workspace(cwd)?;
            let loaded = load(&pick(&store, &cwd, session.as_deref()).await?).await?;
            let out = output.unwrap_or_else(|| {
                PathBuf::from(keel_export::default_file_name(&loaded.header.id))
            });
            std::fs::write(&out, keel_export::render_loaded(&loaded))
                .with_context(|| format!("cannot write {}", out.display()))?;
            println!("{}", std::path::absolute(&out).unwrap_or(out).display());
        }
        SessionsCommand::Rm { session, cwd } => {
            let cwd = workspace(cwd)?;
            let path = store.resolve(&cwd, &session).await?;
            store
                .remove(&path)
                .await
                .with_context(|| format!("cannot remove {}", path.display()))?;
            println!("removed {}", path.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of text: whitespace collapsed, cut to `max` characters.
fn line(text: &str, max: usize) -> String {
    let one = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &one[..at]),
        None => one,
    }
}

/// The active branch as text.
fn show(loaded: &LoadedSession) -> String {
    let mut out = format!(
        "session {}\nfile    {}\ncwd     {}\nstarted {}\n",
        loaded.header.id,
        loaded.path.display(),
        loaded.header.cwd,
        loaded.header.timestamp
    );
    if let Some(name) = loaded.name() {
        out.push_str(&format!("name    {name}\n"));
    }
    if let Some(parent) = &loaded.header.parent_session {
        out.push_str(&format!("forked from {parent}\n"));
    }
    out.push('\n');
    let tree = loaded.tree();
    for e in tree.branch() {
        let forks = tree
            .entries()
            .iter()
            .filter(|c| c.parent_id.as_deref() == Some(e.id.as_str()))
            .count();
        let text = match &e.body {
            EntryBody::Message { message } => match message {
                Message::User(u) => format!(
                    "user       {}",
                    line(&keel_session_store::user_text(u), 100)
                ),
                Message::Assistant(a) => {
                    let calls: Vec<&str> = a.tool_calls().iter().map(|(_, n, _)| *n).collect();
                    let mut t = format!("assistant  {}", line(&a.text(), 80));
                    if !calls.is_empty() {
                        t.push_str(&format!(" [calls: {}]", calls.join(", ")));
                    }
                    t
                }
                Message::ToolResult(r) => format!(
                    "tool       {}{}",
                    r.tool_name,
                    if r.is_error { " (error)" } else { "" }
                ),
            },
            EntryBody::ModelChange { provider, model_id } => {
                format!("model      {provider}/{model_id}")
            }
            EntryBody::ThinkingLevelChange { thinking_level } => {
                format!("thinking   {thinking_level:?}")
            }
            EntryBody::SessionInfo { name } => {
                format!("name       {}", name.as_deref().unwrap_or("(cleared)"))
            }
            EntryBody::Branch { from_id } => format!(
                "branch     went back here (left {})",
                from_id.as_deref().unwrap_or("the start")
            ),
            EntryBody::Compaction {
                tokens_before,
                first_kept_entry_id,
                ..
            } => format!(
                "compaction ~{tokens_before} tokens summarised; kept from {first_kept_entry_id}"
            ),
            EntryBody::Approval(a) => {
                let mut t = format!(
                    "approval   {} {}: {}",
                    a.tool_name,
                    a.tool_call_id,
                    a.decision.as_str()
                );
                if !a.rule_ids.is_empty() {
                    t.push_str(&format!(" ({})", a.rule_ids.join(", ")));
                }
                if let Some(by) = a.decided_by.as_deref().filter(|b| *b != "rule") {
                    t.push_str(&format!(" by {by}"));
                }
                if let Some(note) = &a.note {
                    t.push_str(&format!(" — {}", line(note, 80)));
                }
                t
            }
        };
        let fork = if forks > 1 {
            format!("  ⑂ {} branches", forks)
        } else {
            String::new()
        };
        out.push_str(&format!("{}  {text}{fork}\n", e.id));
    }
    out
}
