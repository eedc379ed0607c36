//! `keel approvals …`: deciding held tool calls and managing modes and
//! always-allow rules from the command line, on the configured approvals
//! store (`$KEEL_HOME/keel.db` by default).
//!
//! Owns the subcommands (`list`, `approve`/`send`, `decline`, `mode`,
//! `rules`, `explain`), the `--approval-mode` value, and the terminal front
//! end `keel exec` uses ([`terminal`]). A decision written here wakes a
//! waiting keel process on the same database within milliseconds (the
//! store's change feed), and a wait on Temporal through a nudge. Output goes to stdout (`--json` for machines); nothing
//! here decides anything the engine does not.

mod serve;
pub mod terminal;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use keel_core::keel_approvals::{
    ApprovalEngine, ApprovalRecord, AuditEntry, Decision, Delivery, Lifetime, Mode, PendingRequest,
    RequestFilter, Rule, RuleScope, Status,
};
use keel_tools::{ToolContext, builtin_tools};
use tokio_util::sync::CancellationToken;

use crate::GlobalArgs;
use crate::config::home_dir;

/// Who decisions made here are recorded as.
const DECIDER: &str = "cli";

/// `--approval-mode`: which classes of tool calls ask (this process only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApprovalModeArg {
    /// Ask before anything that reaches outside (send) and money (default).
    Outside,
    /// Ask before every change (write), send and money.
    Everything,
    /// Ask only for money and deletes.
    #[value(name = "money_only", alias = "money-only")]
    MoneyOnly,
}

impl From<ApprovalModeArg> for Mode {
    fn from(m: ApprovalModeArg) -> Self {
        match m {
            ApprovalModeArg::Outside => Mode::Outside,
            ApprovalModeArg::Everything => Mode::Everything,
            ApprovalModeArg::MoneyOnly => Mode::MoneyOnly,
        }
    }
}

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// The workspace whose mode and rules are meant (default: the current directory).
    #[arg(long = "cwd", short = 'C', global = true)]
    pub workspace: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: ApprovalsCommand,
}

#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List pending requests (every workspace); `--all`: recent ones in any state.
    List {
        #[arg(long)]
        all: bool,
    },
    /// Approve a request (a draft is sent: run now, its session hears the outcome).
    #[command(alias = "send")]
    Approve {
        id: String,
        /// Also save an always-allow rule (never for money).
        #[arg(long)]
        always: bool,
        /// What the rule covers: a command prefix for bash (`"cargo test"`),
        /// `host:<name>`, `glob:<pattern>` or `tool` (default: the offer).
        #[arg(long, requires = "always")]
        scope: Option<String>,
        /// The rule lasts for the request's session only.
        #[arg(long, requires = "always")]
        session_only: bool,
    },
    /// Decline a request; the model reads the note.
    Decline {
        id: String,
        #[arg(long)]
        note: Option<String>,
        /// End the agent's turn instead of letting it go on.
        #[arg(long)]
        stop: bool,
    },
    /// Show the workspace's mode, or set it (stored).
    Mode { mode: Option<ApprovalModeArg> },
    /// List the workspace's always-allow rules, or remove one.
    Rules {
        #[command(subcommand)]
        command: Option<RulesCommand>,
    },
    /// Why did this tool call run (or not)? The audit lines for a call id.
    Explain { call_id: String },
    /// Serve the web inbox: held calls as cards, decisions, modes and rules
    /// (docs/inbox.md).
    Serve(serve::ServeArgs),
    /// Accept the SQLite approvals database as keel's own after checking it
    /// (when keel refuses it as "not the one keel wrote").
    TrustStore,
}

#[derive(Debug, Subcommand)]
pub enum RulesCommand {
    /// List the rules (default).
    List,
    /// Remove a rule by id.
    Remove { id: String },
}

/// `keel approvals trust-store`: records the identity of the configured
/// SQLite database anew.
#[allow(clippy::print_stdout)]
fn trust_store(home: &std::path::Path) -> anyhow::Result<ExitCode> {
    use keel_core::keel_approvals::{SqliteStore, StoreLocation};
    match StoreLocation::for_home(home)? {
        StoreLocation::Sqlite(db) => {
            SqliteStore::trust_blocking(&db)?;
            println!("trusted {}", db.display());
            Ok(ExitCode::SUCCESS)
        }
        StoreLocation::Postgres { .. } => {
            anyhow::bail!("trust-store applies to an SQLite database; PostgreSQL is not a file")
        }
    }
}

#[allow(clippy::print_stdout)]
pub async fn run(global: &GlobalArgs, args: ApprovalsArgs) -> anyhow::Result<ExitCode> {
    let home = home_dir(global)?;
    if matches!(args.command, ApprovalsCommand::TrustStore) {
        return trust_store(&home);
    }
    if let ApprovalsCommand::Serve(serve_args) = args.command {
        return serve::run(&home, serve_args).await;
    }
    let engine =
        ApprovalEngine::open_home(&home, Arc::new(keel_core::keel_approvals::SystemClock)).await?;
    let cwd = match &args.workspace {
        Some(c) => std::path::absolute(c)?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    let workspace = keel_core::workspace_key(&cwd);
    let json = args.json;
    match args.command {
        ApprovalsCommand::List { all } => list(&engine, all, json).await?,
        ApprovalsCommand::Approve {
            id,
            always,
            scope,
            session_only,
        } => {
            approve(
                &engine,
                &home,
                &id,
                always,
                scope.as_deref(),
                session_only,
                json,
            )
            .await?;
            crate::cluster::nudge_after_decision(global, &id).await;
        }
        ApprovalsCommand::Decline { id, note, stop } => {
            let decision = Decision::Decline {
                note: note.filter(|n| !n.trim().is_empty()),
                stop_turn: stop,
            };
            let row = engine.decide(&id, decision, DECIDER, None).await?;
            print_decided(&row, json)?;
            crate::cluster::nudge_after_decision(global, &id).await;
        }
        ApprovalsCommand::Mode { mode } => {
            if let Some(m) = mode {
                engine.set_mode(&workspace, m.into(), DECIDER).await?;
            }
            let mode = engine.mode(&workspace).await?;
            if json {
                print_json(&serde_json::json!({"workspace": workspace, "mode": mode}))?;
            } else {
                println!("{mode} ({}) in {workspace}", mode.label());
            }
        }
        ApprovalsCommand::Rules { command } => match command.unwrap_or(RulesCommand::List) {
            RulesCommand::List => {
                let rules = engine.rules(Some(&workspace)).await?;
                if json {
                    print_json(&rules)?;
                } else if rules.is_empty() {
                    println!("no always-allow rules in {workspace}");
                } else {
                    rules.iter().for_each(print_rule);
                }
            }
            RulesCommand::Remove { id } => {
                let rule = engine.remove_rule(&id, DECIDER).await?;
                if json {
                    print_json(&rule)?;
                } else {
                    println!("removed {}: {}", rule.id, rule.label);
                }
            }
        },
        ApprovalsCommand::Explain { call_id } => explain(&engine, &call_id, json).await?,
        ApprovalsCommand::TrustStore => return trust_store(&home),
        ApprovalsCommand::Serve(_) => unreachable_serve()?,
    }
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::print_stdout)]
fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Milliseconds since the epoch as local-free UTC text.
fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default()
}

#[allow(clippy::print_stdout)]
async fn list(engine: &ApprovalEngine, all: bool, json: bool) -> anyhow::Result<()> {
    if all {
        let rows = engine
            .requests(RequestFilter {
                limit: Some(50),
                ..Default::default()
            })
            .await?;
        let shown: Vec<PendingRequest> = rows.iter().map(PendingRequest::from_record).collect();
        if json {
            return print_json(&shown);
        }
        shown.iter().for_each(print_request);
        return Ok(());
    }
    let pending = engine.pending(None).await?;
    if json {
        return print_json(&pending);
    }
    if pending.is_empty() {
        println!("nothing is waiting for approval");
    }
    pending.iter().for_each(print_request);
    Ok(())
}

#[allow(clippy::print_stdout)]
fn print_request(r: &PendingRequest) {
    let kind = match r.delivery {
        Delivery::Wait => "waits",
        Delivery::Draft => "draft",
    };
    println!(
        "{}  {}  {} ({})  {}",
        r.id, r.status, r.class, kind, r.title
    );
    for line in &r.arg_lines {
        println!("    {line}");
    }
    println!(
        "    {} · session {} · {} · expires {}",
        r.workspace,
        r.session_id,
        r.reason,
        when(r.expires_at)
    );
    if let Some(offer) = &r.always {
        println!("    always-allow offer: {}", offer.label);
    }
}

#[allow(clippy::print_stdout)]
fn print_rule(r: &Rule) {
    let life = match &r.lifetime {
        Lifetime::Permanent => "permanent".to_owned(),
        Lifetime::Session { session_id } => format!("session {session_id}"),
    };
    let origin = match &r.created_from {
        Some(request) => format!("from request {request}"),
        None => "by hand".to_owned(),
    };
    println!(
        "{}  {}  ({life}; created {} {origin}; matched {} times{})",
        r.id,
        r.label,
        when(r.created_at),
        r.match_count,
        r.last_matched_at
            .map(|t| format!(", last {}", when(t)))
            .unwrap_or_default()
    );
}

#[allow(clippy::print_stdout)]
fn print_decided(row: &ApprovalRecord, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(row);
    }
    let rule = row
        .rule_id
        .as_deref()
        .map(|r| format!(" (rule {r} saved)"))
        .unwrap_or_default();
    let note = row
        .note
        .as_deref()
        .map(|n| format!(": {n}"))
        .unwrap_or_default();
    println!("{} {}{rule}{note}", row.id, row.status);
    Ok(())
}

/// Parses `--scope` for a request's tool.
fn parse_scope(tool: &str, text: &str) -> anyhow::Result<RuleScope> {
    let text = text.trim();
    Ok(if text == "tool" {
        RuleScope::Tool
    } else if let Some(host) = text.strip_prefix("host:") {
        RuleScope::Host {
            host: host.trim().to_ascii_lowercase(),
        }
    } else if let Some(glob) = text.strip_prefix("glob:") {
        RuleScope::PathGlob {
            glob: glob.trim().to_owned(),
        }
    } else if tool == "bash" {
        RuleScope::Command {
            prefix: text.split_whitespace().map(str::to_owned).collect(),
        }
    } else {
        bail!("--scope for `{tool}` is `tool`, `host:<name>` or `glob:<pattern>`, not {text:?}")
    })
}

#[allow(clippy::too_many_arguments)]
async fn approve(
    engine: &ApprovalEngine,
    home: &Path,
    id: &str,
    always: bool,
    scope: Option<&str>,
    session_only: bool,
    json: bool,
) -> anyhow::Result<()> {
    let row = engine.request(id).await?;
    if row.delivery == Delivery::Draft && !is_builtin(&row.tool) {
        bail!(
            "{id} is a draft of the host tool `{}`; only its host can send it (RPC: approval_response)",
            row.tool
        );
    }
    let decision = if always {
        Decision::ApproveAlways {
            scope: scope.map(|s| parse_scope(&row.tool, s)).transpose()?,
            lifetime: if session_only {
                Lifetime::Session {
                    session_id: row.session_id.clone(),
                }
            } else {
                Lifetime::Permanent
            },
        }
    } else {
        Decision::Approve
    };
    let decided = engine.decide(id, decision, DECIDER, None).await?;
    print_decided(&decided, json)?;
    if decided.delivery == Delivery::Draft && decided.status == Status::Approved {
        send_draft(engine, home, &decided, json).await?;
    }
    Ok(())
}

fn is_builtin(tool: &str) -> bool {
    builtin_tools().iter().any(|t| t.name() == tool)
}

/// Runs an approved draft of a built-in tool here, once, and records what
/// it produced (the agent hears it on its session's next turn).
#[allow(clippy::print_stdout)]
async fn send_draft(
    engine: &ApprovalEngine,
    home: &Path,
    row: &ApprovalRecord,
    json: bool,
) -> anyhow::Result<()> {
    let (text, is_error) = run_draft(engine, home, row).await?;
    if !json {
        let how = if is_error { "failed" } else { "ran" };
        println!("sent {}: `{}` {how}\n{text}", row.id, row.tool);
    }
    Ok(())
}

/// Runs the approved draft `row` of a built-in tool here, once, behind the
/// configured sandbox: the tool's text and whether it failed.
pub(crate) async fn run_draft(
    engine: &ApprovalEngine,
    home: &Path,
    row: &ApprovalRecord,
) -> anyhow::Result<(String, bool)> {
    let tools = builtin_tools();
    if !tools.iter().any(|t| t.name() == row.tool) {
        bail!("`{}` is not a built-in tool", row.tool);
    }
    let cwd = Path::new(&row.workspace);
    // It runs behind the same walls as the agent's own commands, widened by
    // what the person's yes covered.
    let sandbox = crate::config::load_file(&home.join("config.toml"))?
        .sandbox
        .settings(None)?;
    let walls = std::sync::Arc::new(
        keel_sandbox::Sandbox::new(vec![home.to_path_buf()])
            .allow_unconfined(sandbox.allow_unconfined),
    );
    let mut ctx = ToolContext::local(cwd, CancellationToken::new());
    ctx.process = std::sync::Arc::new(keel_tools::LocalProcessRunner::confined(walls));
    ctx.sandbox = Some(keel_tools::SandboxSpec::new(sandbox.policy, cwd));
    Ok(keel_core::send_draft(engine, &row.id, &tools, ctx).await?)
}

#[allow(clippy::print_stdout)]
async fn explain(engine: &ApprovalEngine, call_id: &str, json: bool) -> anyhow::Result<()> {
    let mut lines: Vec<AuditEntry> = engine.explain(call_id).await?;
    lines.reverse();
    if json {
        return print_json(&lines);
    }
    if lines.is_empty() {
        bail!("no approval records for tool call {call_id}");
    }
    for l in &lines {
        let e = &l.entry;
        let mut parts = vec![when(e.at), e.outcome.clone()];
        if let Some(tool) = &e.tool {
            parts.push(tool.clone());
        }
        if let Some(class) = e.class {
            parts.push(format!("class {class}"));
        }
        if let Some(mode) = e.mode {
            parts.push(format!("mode {mode}"));
        }
        if let Some(by) = e.approved_by {
            parts.push(format!("approved_by {by}"));
        }
        if !e.rule_ids.is_empty() {
            parts.push(format!("rules {}", e.rule_ids.join(",")));
        }
        if let Some(d) = &e.decider {
            parts.push(format!("by {d}"));
        }
        if let Some(r) = &e.request_id {
            parts.push(r.clone());
        }
        println!("{} — {}", parts.join(" · "), e.detail);
    }
    Ok(())
}

/// `serve` is answered before the engine is opened here.
fn unreachable_serve() -> anyhow::Result<()> {
    bail!("`keel approvals serve` is started before any other subcommand")
}
