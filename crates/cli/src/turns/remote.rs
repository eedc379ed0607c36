//! The front-end's half of a turn run on a worker: `keel exec` with a
//! Temporal cluster and a shared database.
//!
//! [`run`] stores the session (new, `--session`, or `--continue`) in the
//! database (the model is the worker's to choose and record; `--model`
//! is passed on), starts the turn's workflow (refused with a clear error while
//! another turn of the session runs), then shows the session's events
//! from the event log as the worker appends them — the same renderer, the
//! same `--json` lines as a turn run here — until the workflow has ended
//! and its last event has been shown. A held call is one stderr line that
//! says how to decide it (`keel approvals approve ID` from any machine
//! with the same database). SIGINT or SIGTERM interrupts the turn on its
//! worker (an `interrupt_requested` record in the log, which that worker
//! follows); a second one leaves at once (the turn is then interrupted
//! anyway). The exit codes are those of a turn run here. [`attach`]
//! shows a turn already running the same way (`keel exec --attach`).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use keel_session_store::{EventLog, SessionStore, StoredEvent};
use keel_temporal::{TemporalClient, TemporalSettings, TurnInput};
use tokio::signal::unix::{SignalKind, signal};

use super::following::{TurnEvents, interrupt};
use super::{LogRecord, Logged, resolution_name};
use crate::GlobalArgs;
use crate::exec::ExecArgs;
use crate::render::Renderer;

/// Runs `prompt` as a turn on the cluster; see the module docs.
pub async fn run(
    global: &GlobalArgs,
    args: &ExecArgs,
    cwd: &Path,
    prompt: String,
    settings: TemporalSettings,
) -> anyhow::Result<ExitCode> {
    // Reach the cluster before anything is stored for the turn.
    let (log, client, store) = cluster(global, &settings).await?;
    let (session_id, base_leaf) = match named_session(&store, cwd, args).await? {
        Some(named) => named,
        // A new, empty session (the worker records its model).
        None => {
            let writer = store.create(cwd, None).await?;
            let id = writer.id().to_owned();
            writer.close().await.context("cannot save the session")?;
            (id, None)
        }
    };
    let after = log.last_seq(&session_id).await?;
    let turn = TurnInput {
        session_id: session_id.clone(),
        cwd: cwd.display().to_string(),
        turn_id: format!("turn-{}", uuid::Uuid::now_v7()),
        prompt: Some(prompt),
        base_leaf,
        log_from: after,
        model: args.model.model.clone(),
        thinking: args.model.thinking.clone(),
        approval_mode: args
            .approval_mode
            .map(|m| keel_core::keel_approvals::Mode::from(m).to_string()),
        tools: Vec::new(),
        host_schemes: Vec::new(),
    };
    client.start_turn(&turn).await?;
    tracing::info!(session = %session_id, "the turn runs on a worker");
    follow(&client, &log, &turn, args.json).await
}

/// `keel exec --attach`: shows the turn running in the session that
/// `--session`/`--continue` names, from its start, as if it had been
/// started here; a session without a running turn is said on stderr
/// (exit 0).
#[allow(clippy::print_stderr)]
pub async fn attach(
    global: &GlobalArgs,
    args: &ExecArgs,
    cwd: &Path,
    settings: TemporalSettings,
) -> anyhow::Result<ExitCode> {
    let (log, client, store) = cluster(global, &settings).await?;
    let Some((session_id, _)) = named_session(&store, cwd, args).await? else {
        bail!("no session to attach to in {}", cwd.display());
    };
    let Some(running) = client.running_turn(&session_id).await? else {
        eprintln!("keel: no turn runs in session {session_id}");
        return Ok(ExitCode::SUCCESS);
    };
    tracing::info!(session = %session_id, turn = %running.turn_id, "attached to the turn");
    let turn = TurnInput {
        session_id,
        cwd: cwd.display().to_string(),
        turn_id: running.turn_id,
        prompt: None,
        base_leaf: None,
        log_from: running.log_from,
        model: None,
        thinking: None,
        approval_mode: None,
        tools: Vec::new(),
        host_schemes: Vec::new(),
    };
    follow(&client, &log, &turn, args.json).await
}

/// The shared event log, the cluster and the sessions.
async fn cluster(
    global: &GlobalArgs,
    settings: &TemporalSettings,
) -> anyhow::Result<(EventLog, TemporalClient, SessionStore)> {
    let log = EventLog::shared().context("turns on a worker need the shared database")?;
    let client = TemporalClient::connect(settings, &crate::cluster::identity("exec")).await?;
    let store = SessionStore::for_home(&crate::config::home_dir(global)?);
    Ok((log, client, store))
}

/// The id and last entry of the session `--session`/`--continue` names;
/// `None` when neither names one (or `--continue` finds none).
async fn named_session(
    store: &SessionStore,
    cwd: &Path,
    args: &ExecArgs,
) -> anyhow::Result<Option<(String, Option<String>)>> {
    let path = if let Some(id) = &args.session {
        Some(store.resolve(cwd, id).await?)
    } else if args.continue_ {
        store.latest(cwd).await?.map(|s| s.path)
    } else {
        None
    };
    let Some(path) = path else { return Ok(None) };
    let loaded = keel_session_store::load(&path)
        .await
        .with_context(|| format!("cannot load session {}", path.display()))?;
    let leaf = loaded.tree().leaf().map(str::to_owned);
    Ok(Some((loaded.header.id.clone(), leaf)))
}

async fn follow(
    client: &TemporalClient,
    log: &EventLog,
    turn: &TurnInput,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let mut events = TurnEvents::follow(client, log, turn);
    let mut renderer = Renderer::new(json);
    let mut sigint = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    let mut sigterm = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupts = 0u32;
    let mut ticker = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            event = events.next() => match event? {
                Some(event) => show(&mut renderer, &event, json),
                None => break,
            },
            _ = sigint.recv() => {
                interrupts += 1;
                if interrupts > 1 { return Ok(ExitCode::from(130)); }
                interrupt(log, turn).await;
            }
            _ = sigterm.recv() => {
                interrupts += 1;
                if interrupts > 1 { return Ok(ExitCode::from(130)); }
                interrupt(log, turn).await;
            }
            _ = ticker.tick() => renderer.tick(),
        }
    }
    let Some(outcome) = events.into_outcome() else {
        bail!("the turn ended without a result")
    };
    Ok(match outcome.status.as_str() {
        "done" if interrupts == 0 => ExitCode::SUCCESS,
        "failed" => {
            crate::report_error(&anyhow::anyhow!(
                outcome
                    .error
                    .unwrap_or_else(|| "the turn failed".to_owned())
            ));
            ExitCode::from(1)
        }
        _ => ExitCode::from(130),
    })
}

/// One stored event on the terminal (or as its JSON line); a held call
/// is also one line on stderr, `--json` or not: someone has to decide it.
#[allow(clippy::print_stdout, clippy::print_stderr)]
fn show(renderer: &mut Renderer, stored: &StoredEvent, json: bool) {
    match Logged::read(&stored.event) {
        Ok(Logged::Record(record)) => {
            // A front-end's word that it still runs a call is for the
            // worker, every 2 s.
            if json && !matches!(record, LogRecord::ToolRunning { .. }) {
                println!("{}", stored.event);
            }
            match record {
                LogRecord::ApprovalRequest { request, .. } => eprintln!(
                    "keel: held for approval: {}; decide with `keel approvals approve {}` (or decline)",
                    request.title, request.id
                ),
                LogRecord::ApprovalResolved {
                    request,
                    resolution,
                } => {
                    eprintln!("keel: {}: {}", request.id, resolution_name(&resolution));
                }
                LogRecord::InterruptRequested
                | LogRecord::ToolCall { .. }
                | LogRecord::ToolRunning { .. }
                | LogRecord::ToolResult { .. } => {}
            }
        }
        Ok(Logged::Event(event)) => renderer.event(&event),
        Err(e) => tracing::warn!(seq = stored.seq, error = %e, "an event this keel cannot read"),
    }
}
