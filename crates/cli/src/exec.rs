//! `keel exec`: one agent run in a workspace.
//!
//! Streams assistant text to stdout and tool activity to stderr (or every
//! event as JSON lines with `--json`). SIGINT/SIGTERM abort the run; the
//! session file is left consistent and the process exits with 130. A model
//! failure exits with 1 and a one-line reason (after automatic retries of
//! transient failures, each announced on stderr); bad configuration with 2.
//! An unknown model or a clamped thinking level is one warning line on
//! stderr. Every tool call passes the approvals engine (`$KEEL_HOME/keel.db`):
//! a held call is asked on the terminal; without a terminal it becomes a
//! draft (the model reads "held for approval as draft …", stderr says how to
//! send it, and the run goes on), or, with `--wait-approvals`, it is waited
//! on with one stderr line saying how to decide it from another terminal.
//! A resumed session whose last turn a crash or kill cut off finishes that
//! turn first (its unanswered tool calls, then the model), then runs the
//! new prompt. With a Temporal cluster and a shared database configured,
//! the turn runs on a `keel worker` instead and this process shows it
//! (`crate::turns::remote`), unless `--here` says otherwise.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use keel_core::Session;
use keel_protocol::{AgentEvent, Message, Op, StopReason, UserInput};
use keel_session_store::{SessionStore, SessionWriter};
use tokio::signal::unix::{SignalKind, signal};

use crate::GlobalArgs;
use crate::approvals::ApprovalModeArg;
use crate::config::{ModelArgs, Resolved, resolve};
use crate::render::Renderer;
use crate::setup::{
    SessionSpec, approval_gate, build_provider, model_info, record_model, spawn_session,
};

#[derive(Debug, Args)]
pub struct ExecArgs {
    /// The prompt; `-` (or nothing, with stdin not a terminal) reads it from stdin.
    pub prompt: Option<String>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print every event as one JSON line on stdout.
    #[arg(long)]
    pub json: bool,
    /// The shape of --json's lines: `keel` (keel's own events, the
    /// default) or `codex` (`codex exec --json`'s thread, turn and item
    /// events, as --experimental-json writes them).
    #[arg(long, value_enum, value_name = "SHAPE", env = "KEEL_EXEC_JSON_FORMAT")]
    pub json_format: Option<JsonFormat>,
    /// Workspace directory (default: the current directory).
    #[arg(long, short = 'C', alias = "cd")]
    pub cwd: Option<PathBuf>,
    /// Resume a session by id, id prefix or file path.
    #[arg(long, conflicts_with = "continue_")]
    pub session: Option<String>,
    /// Resume the latest session of this workspace.
    #[arg(long = "continue", short = 'c')]
    pub continue_: bool,
    /// Do not save the session.
    #[arg(long, conflicts_with_all = ["session", "continue_"])]
    pub no_session: bool,
    /// With --session or --continue: start a new session file that
    /// continues from this entry of that session (its branch up to and
    /// including the entry is copied; `keel sessions show` lists entry ids).
    #[arg(long, value_name = "ENTRY_ID")]
    pub fork_from: Option<String>,
    /// Which tool calls ask for approval in this run (default: the
    /// workspace's stored mode, else `outside`).
    #[arg(long, value_enum)]
    pub approval_mode: Option<ApprovalModeArg>,
    /// What commands may touch: read-only, workspace-write (the default:
    /// the workspace and the temp dir, no network) or danger-full-access.
    /// Overrides `[sandbox] mode`.
    #[arg(long, value_name = "MODE", env = "KEEL_SANDBOX")]
    pub sandbox: Option<String>,
    /// Without a terminal, wait for held calls to be decided from another
    /// terminal (`keel approvals approve …`) instead of parking them as
    /// drafts and going on.
    #[arg(long)]
    pub wait_approvals: bool,
    /// With a Temporal cluster and a shared database configured, run the
    /// turn in this process anyway (its held calls still wait on Temporal)
    /// instead of on a `keel worker`.
    #[arg(long)]
    pub here: bool,
    /// With --session or --continue, on a cluster: show the turn a worker
    /// runs in that session now (started from anywhere) from its start,
    /// instead of starting one; exits when it ends, with the exit code of
    /// a turn started here. SIGINT interrupts it, as for a turn started here.
    #[arg(long, conflicts_with_all = ["prompt", "no_session", "fork_from", "here"])]
    pub attach: bool,
    #[command(flatten)]
    pub codex: crate::exec_codex::CodexArgs,
    #[command(subcommand)]
    pub resume: Option<crate::exec_codex::ExecCommand>,
}

/// The shape of `keel exec --json`'s lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum JsonFormat {
    /// keel's own events.
    Keel,
    /// `codex exec --json`'s thread, turn and item events.
    Codex,
}

pub async fn run(global: &GlobalArgs, mut args: ExecArgs) -> anyhow::Result<ExitCode> {
    if args.json && args.json_format == Some(JsonFormat::Codex) {
        args.codex.experimental_json = true;
    }
    // Codex's options, mapped onto keel's (`crate::exec_codex`).
    let codex = crate::exec_codex::apply(&mut args, &mut |w| warn(w))?;
    let cwd = match &args.cwd {
        Some(c) => std::path::absolute(c)?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        bail!("workspace {} is not a directory", cwd.display());
    }
    if args.attach {
        return attach(global, &args, &cwd).await;
    }
    let prompt = read_prompt(args.prompt.as_deref())?;
    // What a turn on a worker does not carry runs here.
    let here_only =
        args.codex.experimental_json || codex.output_schema.is_some() || !codex.images.is_empty();
    if !here_only && let Some(settings) = on_worker(global, &args)? {
        return on_cluster(global, &args, &cwd, prompt, settings).await;
    }
    let mut sandbox = crate::config::Settings::load(global)?
        .file
        .sandbox
        .settings(args.sandbox.as_deref())?;
    if let Some(on) = codex.network_access {
        sandbox.policy.network_access = on;
    }
    sandbox
        .policy
        .writable_roots
        .extend(codex.writable_roots.iter().cloned());
    let resolved = resolve(global, &args.model)?;
    let provider = build_provider(&resolved)?;
    // An unknown model runs with conservative defaults; an unsupported
    // thinking level is clamped. Each is said in one line.
    if let Some(warning) = &resolved.warning {
        warn(warning);
    }
    if let Some(warning) = resolved.effective_thinking().1 {
        warn(&warning);
    }

    let store = SessionStore::for_home(&resolved.home);
    let (writer, history, tree) = open_session(&store, &cwd, &args, &resolved).await?;
    // Held calls are asked on the terminal when a person is there;
    // otherwise they become drafts (or, when asked to, the run waits and
    // says how to decide from elsewhere).
    let gate = approval_gate(&resolved.home, &cwd, args.approval_mode.map(Into::into)).await;
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    crate::approvals::terminal::install(&gate, interactive);
    if !interactive && !args.wait_approvals {
        drafts::install(&gate);
    }
    let settings_file = crate::config::Settings::load(global)?.file;
    let servers =
        keel_mcp::workspace::servers_for(&resolved.home, &settings_file.mcp_servers, &cwd);
    let mcp = crate::setup::start_mcp(&servers, &cwd).await;
    let mut session = spawn_session(SessionSpec {
        cwd: &cwd,
        home: &resolved.home,
        model: model_info(&resolved),
        provider,
        thinking: resolved.thinking,
        writer: writer.as_ref(),
        history,
        tree,
        retry: resolved.retry,
        compaction: resolved.compaction,
        gate,
        sandbox,
        extra_tools: crate::setup::mcp_tools(mcp.as_ref()),
        elsewhere: None,
        fence: None,
        sync_prompts: false,
        output_schema: codex.output_schema.clone(),
        log_seen: None,
    });
    if let Some(servers) = &mcp {
        crate::setup::follow_mcp(servers, session.handle());
    }
    // A turn cut off by a crash or kill goes on first; the prompt follows
    // once it has ended well.
    let resumed = session
        .handle()
        .resume_interrupted()
        .await
        .context("cannot resume the cut-off turn")?;
    let mut out = if args.codex.experimental_json {
        let mut stream = crate::exec_codex::stream::CodexStream::new(cwd.clone());
        stream.thread_started(&session.snapshot().session_id);
        Output::Codex(stream)
    } else {
        Output::Keel(Renderer::new(args.json))
    };
    let mut outcome = Outcome::Done;
    if resumed {
        outcome = drive(&mut session, &mut out).await?;
    }
    if matches!(outcome, Outcome::Done) {
        session
            .submit(Op::Prompt(UserInput {
                message: prompt,
                images: codex.images,
            }))
            .await
            .context("cannot start the run")?;
        outcome = drive(&mut session, &mut out).await?;
    }
    session.shutdown().await;
    // The session is over: its MCP servers (and their process groups) end.
    if let Some(mcp) = &mcp {
        mcp.stop().await;
    }
    if let Some(w) = &writer {
        w.close().await.context("cannot save the session")?;
    }
    Ok(match outcome {
        Outcome::Done => ExitCode::SUCCESS,
        Outcome::Aborted => ExitCode::from(130),
        Outcome::Failed(reason) => {
            crate::report_error(&anyhow::anyhow!(reason));
            ExitCode::from(1)
        }
    })
}

/// The cluster to run this turn on: this keel can, Temporal and a shared
/// database are configured, the session is kept, and neither `--here` nor
/// `[temporal] turns = "here"` says otherwise.
fn on_worker(
    global: &GlobalArgs,
    args: &ExecArgs,
) -> anyhow::Result<Option<keel_temporal::TemporalSettings>> {
    // A build without Temporal runs here (its held calls say so once).
    if args.here
        || !keel_temporal::BUILT
        || args.no_session
        || keel_session_store::database_in_use().is_none()
        || crate::cluster::turns_here(global)?
    {
        return Ok(None);
    }
    let settings = crate::cluster::temporal_settings(global)?;
    if settings.is_some() && args.fork_from.is_some() {
        bail!("--fork-from runs here only: add --here");
    }
    Ok(settings)
}

#[cfg(feature = "temporal")]
async fn on_cluster(
    global: &GlobalArgs,
    args: &ExecArgs,
    cwd: &Path,
    prompt: String,
    settings: keel_temporal::TemporalSettings,
) -> anyhow::Result<ExitCode> {
    crate::turns::remote::run(global, args, cwd, prompt, settings).await
}

#[cfg(not(feature = "temporal"))]
async fn on_cluster(
    _global: &GlobalArgs,
    _args: &ExecArgs,
    _cwd: &Path,
    _prompt: String,
    _settings: keel_temporal::TemporalSettings,
) -> anyhow::Result<ExitCode> {
    bail!(
        "turns run on workers only in a keel with Temporal support (add --here to run it in this process): {}",
        keel_temporal::NOT_BUILT
    )
}

/// `keel exec --attach`: follows the turn running in the session.
async fn attach(global: &GlobalArgs, args: &ExecArgs, cwd: &Path) -> anyhow::Result<ExitCode> {
    if args.session.is_none() && !args.continue_ {
        bail!("--attach needs the session: --session ID or --continue");
    }
    if !keel_temporal::BUILT {
        bail!(
            "--attach follows a turn on a worker: {}",
            keel_temporal::NOT_BUILT
        );
    }
    let Some(settings) = on_worker(global, args)? else {
        bail!(
            "--attach follows a turn a worker runs: it needs the shared database and a Temporal cluster (--database, --temporal; docs/deploy.md)"
        );
    };
    attach_on_cluster(global, args, cwd, settings).await
}

#[cfg(feature = "temporal")]
async fn attach_on_cluster(
    global: &GlobalArgs,
    args: &ExecArgs,
    cwd: &Path,
    settings: keel_temporal::TemporalSettings,
) -> anyhow::Result<ExitCode> {
    crate::turns::remote::attach(global, args, cwd, settings).await
}

#[cfg(not(feature = "temporal"))]
async fn attach_on_cluster(
    _global: &GlobalArgs,
    _args: &ExecArgs,
    _cwd: &Path,
    _settings: keel_temporal::TemporalSettings,
) -> anyhow::Result<ExitCode> {
    bail!("{}", keel_temporal::NOT_BUILT)
}

/// One warning line on stderr: `keel: warning: <text>`.
#[allow(clippy::print_stderr)]
fn warn(text: &str) {
    eprintln!("keel: warning: {text}");
}

/// How a run ended, for the exit code.
pub(crate) enum Outcome {
    Done,
    Aborted,
    Failed(String),
}

/// Where a run's events go: keel's output, or Codex's JSON lines.
enum Output {
    Keel(Renderer),
    Codex(crate::exec_codex::stream::CodexStream),
}

impl Output {
    fn event(&mut self, event: &AgentEvent) {
        match self {
            Output::Keel(renderer) => renderer.event(event),
            Output::Codex(stream) => stream.write(event),
        }
    }

    fn tick(&mut self) {
        match self {
            Output::Keel(renderer) => renderer.tick(),
            Output::Codex(_) => {}
        }
    }
}

async fn drive(session: &mut Session, renderer: &mut Output) -> anyhow::Result<Outcome> {
    let mut sigint = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut sigterm = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    let mut interrupts = 0u32;
    loop {
        tokio::select! {
            ev = session.next_event() => {
                let Some(ev) = ev else { bail!("the session stopped unexpectedly") };
                renderer.event(&ev);
                if let AgentEvent::AgentEnd { messages } = &ev {
                    // An abort we asked for ends the run as aborted even when
                    // it landed between model calls.
                    if interrupts > 0 {
                        return Ok(Outcome::Aborted);
                    }
                    return Ok(outcome_of(messages));
                }
            }
            _ = sigint.recv() => {
                interrupts += 1;
                if interrupts > 1 {
                    return Ok(Outcome::Aborted);
                }
                let _ = session.submit(Op::Abort).await;
            }
            _ = sigterm.recv() => {
                interrupts += 1;
                if interrupts > 1 {
                    return Ok(Outcome::Aborted);
                }
                let _ = session.submit(Op::Abort).await;
            }
            _ = ticker.tick() => renderer.tick(),
        }
    }
}

/// How the run whose `agent_end` carried `messages` ended.
pub(crate) fn outcome_of(messages: &[Message]) -> Outcome {
    let last = messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a),
        _ => None,
    });
    match last {
        Some(a) if a.stop_reason == StopReason::Aborted => Outcome::Aborted,
        Some(a) if a.stop_reason == StopReason::Error => Outcome::Failed(
            a.error_message
                .clone()
                .unwrap_or_else(|| "the model call failed".to_owned()),
        ),
        _ => Outcome::Done,
    }
}

fn read_prompt(arg: Option<&str>) -> anyhow::Result<String> {
    let from_stdin = match arg {
        Some("-") => true,
        Some(_) => false,
        None => !std::io::stdin().is_terminal(),
    };
    let prompt = if from_stdin {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .context("cannot read the prompt from stdin")?;
        s
    } else {
        arg.unwrap_or_default().to_owned()
    };
    if prompt.trim().is_empty() {
        bail!("no prompt given: keel exec \"what to do\" (or pipe it on stdin)");
    }
    Ok(prompt)
}

/// The session file to write to, the history to start from and the
/// entries of a resumed or forked session.
type Opened = (
    Option<SessionWriter>,
    Vec<Message>,
    Option<keel_session_store::SessionTree>,
);

async fn open_session(
    store: &SessionStore,
    cwd: &Path,
    args: &ExecArgs,
    resolved: &Resolved,
) -> anyhow::Result<Opened> {
    if args.no_session {
        return Ok((None, Vec::new(), None));
    }
    if args.fork_from.is_some() && args.session.is_none() && !args.continue_ {
        bail!("--fork-from needs the session to fork: add --session ID (or --continue)");
    }
    let existing = if let Some(id) = &args.session {
        Some(store.resolve(cwd, id).await?)
    } else if args.continue_ {
        match store.latest(cwd).await? {
            Some(s) => Some(s.path),
            None => {
                tracing::info!("no previous session in this workspace; starting a new one");
                None
            }
        }
    } else {
        None
    };
    let writer = match existing {
        Some(path) => {
            let loaded = keel_session_store::load(&path)
                .await
                .with_context(|| format!("cannot load session {}", path.display()))?;
            if let Some(entry) = &args.fork_from {
                return fork(store, cwd, &loaded, entry, resolved).await;
            }
            let (writer, history, tree) = crate::setup::reopen_with_model(loaded, resolved).await?;
            return Ok((Some(writer), history, Some(tree)));
        }
        None => store.create(cwd, None).await?,
    };
    record_model(&writer, &resolved.provider, &resolved.model).await?;
    Ok((Some(writer), Vec::new(), None))
}

/// A new session file holding `loaded`'s branch up to and including the
/// entry `query` (an id or a unique id prefix), recording its parent.
async fn fork(
    store: &SessionStore,
    cwd: &Path,
    loaded: &keel_session_store::LoadedSession,
    query: &str,
    resolved: &Resolved,
) -> anyhow::Result<Opened> {
    let matches: Vec<&str> = loaded
        .entries
        .iter()
        .map(|e| e.id.as_str())
        .filter(|id| id.starts_with(query.trim()))
        .collect();
    let id = match matches.as_slice() {
        [one] => (*one).to_owned(),
        [] => bail!("no entry `{query}` in session {}", loaded.header.id),
        _ => bail!(
            "entry id prefix `{query}` is ambiguous in session {}",
            loaded.header.id
        ),
    };
    let source = loaded.tree();
    let branch: Vec<keel_session_store::Entry> =
        source.branch_to(Some(&id)).into_iter().cloned().collect();
    let (writer, mut tree) = store
        .create_branch(cwd, Some(loaded.path.display().to_string()), branch)
        .await?;
    let history = tree.context().messages;
    tree.push(record_model(&writer, &resolved.provider, &resolved.model).await?);
    Ok((Some(writer), history, Some(tree)))
}

/// Held calls of a run nobody attends become drafts.
mod drafts {
    use std::sync::Arc;

    use keel_core::keel_approvals::{PendingRequest, Resolution};
    use keel_core::{ApprovalFrontend, EngineGate};

    use crate::approvals::terminal::ExecFrontend;

    /// The exec front end without a terminal, saying the run is unattended:
    /// the engine parks held calls as drafts instead of waiting.
    struct Drafts(Arc<ExecFrontend>);

    #[async_trait::async_trait]
    impl ApprovalFrontend for Drafts {
        async fn requested(&self, request: &PendingRequest) {
            self.0.requested(request).await;
        }

        async fn resolved(&self, request: &PendingRequest, resolution: &Resolution) {
            self.0.resolved(request, resolution).await;
        }

        fn unattended(&self) -> bool {
            true
        }
    }

    /// Installs the drafting front end on `gate`.
    pub fn install(gate: &EngineGate) {
        if let Ok(engine) = gate.engine() {
            gate.set_frontend(Arc::new(Drafts(ExecFrontend::new(engine.clone(), false))));
        }
    }
}
