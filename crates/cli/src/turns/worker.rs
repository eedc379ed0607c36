//! The worker's half of a turn: [`WorkerTurns`], the runner
//! `keel_temporal`'s turn activity calls.
//!
//! A try opens the turn's session from the shared database, with the
//! model of the worker's own configuration (recorded when it differs),
//! the approval gate of the turn's workspace (held calls wait; each wait
//! has its `keel.approval` workflow through the process's durable waits),
//! the built-in tools and the worker's own MCP servers'
//! (`super::worker_mcp`), beside stand-ins for the tools the front-end
//! runs (its host's, its MCP servers'; `super::proxy`; a name the worker
//! has a tool of its own for is the worker's). Then, in order: a turn a crash cut off is
//! resumed (core's crash resume: each unanswered call answered once,
//! through the gate); the prompt is sent unless an earlier try stored it
//! ([`super::prompt_stored`]); a prompt that an earlier try stored but the
//! model never answered is answered ([`keel_core::SessionHandle::answer_pending`]).
//! Every event of the session, and the gate's side of each held call
//! ([`super::LogRecord`]), is appended to the session's event log before
//! the try reports; each try claims the turn first, and its gate lets no
//! call run once a later try has claimed it (`super::fence`); a later try
//! first closes what a dead one left open
//! ([`super::closing_events`]). A front-end's interrupt (an
//! `interrupt_requested` record of the turn in the log, followed from where
//! the turn began) aborts the run. When the try must stop (the activity
//! was taken back by the server, or the worker drains past its grace) it
//! leaves the run where it is, like a crash but at once, and reports an
//! error so the next try starts. Failures of the store or the model's
//! setup are errors too (the activity is tried again, on any worker), and
//! a try that fails mid-run leaves it the same way: nothing its stopping
//! would write (an aborted answer) reaches the session for the next try
//! to take as the model's. A run that ends badly is an outcome. It must
//! not know Temporal.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, bail};
use futures::FutureExt;
use keel_core::keel_approvals::{ApprovalEngine, Mode, PendingRequest, Resolution};
use keel_core::{ApprovalFrontend, Session, ToolCallInfo, WaitGuard};
use keel_protocol::{AgentEvent, Op, UserInput};
use keel_session_store::{EventLog, SessionStore};
use keel_temporal::{TurnInput, TurnOutcome, TurnRunner};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::fence::TryFence;
use super::{LogRecord, Logged, closing_events, prompt_stored};
use crate::GlobalArgs;
use crate::config::{ModelArgs, resolve};
use crate::exec::{Outcome, outcome_of};
use crate::setup::{
    SessionSpec, approval_gate, build_provider, model_info, reopen_with_model, spawn_session,
};

/// Events appended to the log in one transaction at most.
const APPEND_BATCH: usize = 64;
/// The gate's records waiting for the loop that appends events.
const RECORDS_CAPACITY: usize = 64;

/// Runs turns for this worker; see the module docs.
pub struct WorkerTurns {
    global: GlobalArgs,
    model: ModelArgs,
    log: EventLog,
    /// Fires when the worker, draining, stops waiting for its turns.
    leave: CancellationToken,
    mcp: super::worker_mcp::WorkerMcp,
    /// How long earlier turns' events stay in the log (`--keep-events`).
    keep_events: std::time::Duration,
}

impl WorkerTurns {
    /// `None` when sessions are not in a shared database: a worker then
    /// runs approval waits only.
    /// `leave`: when it fires, each running try stops where it is (see
    /// [`drive`]) and reports an error, so the server gives the turn to
    /// another worker at once. `keep_events`: how long earlier turns'
    /// events stay in the log after a later turn ended (`--keep-events`).
    pub fn new(
        global: &GlobalArgs,
        model: &ModelArgs,
        leave: CancellationToken,
        keep_events: std::time::Duration,
    ) -> Option<Self> {
        Some(Self {
            global: global.clone(),
            model: model.clone(),
            log: EventLog::shared()?,
            leave,
            mcp: Default::default(),
            keep_events,
        })
    }

    /// Stops the MCP servers the worker's turns used.
    pub async fn stop(&self) {
        self.mcp.stop().await;
    }
}

#[async_trait::async_trait]
impl TurnRunner for WorkerTurns {
    async fn run(
        &self,
        turn: TurnInput,
        attempt: u32,
        stop: CancellationToken,
    ) -> keel_temporal::Result<TurnOutcome> {
        tracing::info!(session = %turn.session_id, turn = %turn.turn_id, attempt, "running a turn");
        self.run_turn(&turn, attempt, stop)
            .await
            .map_err(|e| {
                tracing::warn!(session = %turn.session_id, error = %format!("{e:#}"), "the turn's try failed");
                keel_temporal::Error::Turn(format!("{e:#}"))
            })
    }
}

/// Appends a try's events to the session's log.
struct Sink {
    log: EventLog,
    session_id: String,
    turn_id: String,
    attempt: u32,
    last_seq: u64,
    /// The gate's records ([`LogFrontend`]): appended by the same loop as
    /// the events, after every event the session emitted before them.
    records: mpsc::Receiver<String>,
    /// Where [`LogFrontend`] sends them.
    records_tx: mpsc::Sender<String>,
}

impl Sink {
    async fn append(&mut self, texts: &[String]) -> anyhow::Result<()> {
        self.last_seq = self
            .log
            .append(&self.session_id, &self.turn_id, self.attempt, texts)
            .await?;
        Ok(())
    }

    async fn events(&mut self, events: &[AgentEvent]) -> anyhow::Result<()> {
        let texts: Vec<String> = events
            .iter()
            .map(serde_json::to_string)
            .collect::<Result<_, _>>()?;
        self.append(&texts).await
    }
}

/// How a try's run ended here.
enum Ended {
    Run(Outcome),
    /// The try stopped where it was; the run goes on in another try.
    Left,
}

impl WorkerTurns {
    async fn run_turn(
        &self,
        turn: &TurnInput,
        attempt: u32,
        stop: CancellationToken,
    ) -> anyhow::Result<TurnOutcome> {
        let cwd = PathBuf::from(&turn.cwd);
        if !cwd.is_dir() {
            bail!(
                "workspace {} is not a directory on this worker",
                cwd.display()
            );
        }
        // This try is the turn's now; a try it replaces, should it come
        // back, finds that out before it runs a call (`super::fence`).
        if !self
            .log
            .claim_try(&turn.session_id, &turn.turn_id, attempt)
            .await?
        {
            bail!("a later try of this turn runs already; this one stops");
        }
        let (records_tx, records) = mpsc::channel(RECORDS_CAPACITY);
        let mut sink = Sink {
            log: self.log,
            session_id: turn.session_id.clone(),
            turn_id: turn.turn_id.clone(),
            attempt,
            last_seq: 0,
            records,
            records_tx,
        };
        let (mut session, writer, engine) = self.open(turn, attempt, &cwd, &sink).await?;
        let ended = match self
            .run_session(turn, stop, &mut sink, &mut session, engine.as_ref())
            .await
        {
            Ok(Ended::Run(outcome)) => outcome,
            Ok(Ended::Left) => {
                abandon(&writer, session).await;
                bail!(
                    "this try stopped (the worker drains, or the server took the turn back); another goes on with the turn"
                );
            }
            Err(e) => {
                abandon(&writer, session).await;
                return Err(e);
            }
        };
        session.shutdown().await;
        // The gate's last records, after the run's events.
        let mut rest = Vec::new();
        while let Ok(record) = sink.records.try_recv() {
            rest.push(record);
        }
        sink.append(&rest).await?;
        writer.close().await.context("cannot save the session")?;
        // What earlier turns logged is in the session now; this turn's
        // events stay for the front-ends still reading them.
        if let Err(e) = sink
            .log
            .forget_before(&turn.session_id, turn.log_from, self.keep_events)
            .await
        {
            tracing::warn!(error = %e, "cannot forget the earlier turns' events");
        }
        let (status, error) = match ended {
            Outcome::Done => ("done", None),
            Outcome::Aborted => ("aborted", None),
            Outcome::Failed(reason) => ("failed", Some(reason)),
        };
        Ok(TurnOutcome {
            status: status.to_owned(),
            error,
            last_seq: sink
                .log
                .last_seq(&turn.session_id)
                .await?
                .max(sink.last_seq),
        })
    }

    /// Runs a try's opened session: closes what a dead try left open,
    /// resumes a cut-off turn, sends the prompt or answers what is owed.
    /// An error leaves the session running: the caller
    /// [`abandon`]s it.
    async fn run_session(
        &self,
        turn: &TurnInput,
        stop: CancellationToken,
        sink: &mut Sink,
        session: &mut Session,
        engine: Option<&ApprovalEngine>,
    ) -> anyhow::Result<Ended> {
        self.close_dead_try(sink, turn.log_from, engine).await?;
        // No prompt: the turn goes on with what the session holds.
        let prompt_done = turn.prompt.is_none()
            || prompt_stored(&session_tree(session), turn.base_leaf.as_deref());
        let handle = session.handle();
        let mut ended = Ended::Run(Outcome::Done);
        // Both tasks below end when the try does (the guards cancel them).
        let interrupted = self.interrupts(turn);
        let _following = interrupted.clone().drop_guard();
        let leave = CancellationToken::new();
        let _left = leave.clone().drop_guard();
        {
            let (leave, stop, drain) = (leave.clone(), stop.clone(), self.leave.clone());
            tokio::spawn(async move {
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = drain.cancelled() => {}
                    () = leave.cancelled() => {}
                }
                leave.cancel();
            });
        }
        let resumed = handle.resume_interrupted().await?;
        let mut driving = Driving {
            sink,
            cancel: &interrupted,
            leave: &leave,
        };
        if resumed {
            ended = driving.drive(session).await?;
        }
        if matches!(ended, Ended::Run(Outcome::Done)) {
            if let (false, Some(prompt)) = (prompt_done, &turn.prompt) {
                session
                    .submit(Op::Prompt(UserInput::text(prompt.clone())))
                    .await?;
                ended = driving.drive(session).await?;
            } else if !resumed && handle.answer_pending().await? {
                ended = driving.drive(session).await?;
            } else if !resumed && turn.prompt.is_some() {
                // A later try of a prompt's turn with nothing left to do:
                // the prompt is stored and answered. Said, with what the
                // session holds, for a look should it have been otherwise.
                let tree = session_tree(session);
                let branch = tree.branch();
                let base_found = turn
                    .base_leaf
                    .as_deref()
                    .is_none_or(|base| branch.iter().any(|e| e.id == base));
                let last = branch.iter().rev().find_map(|e| match &e.body {
                    keel_session_store::EntryBody::Message { message } => Some(message.role()),
                    _ => None,
                });
                tracing::info!(
                    session = %turn.session_id,
                    attempt = sink.attempt,
                    base_found,
                    last_message = ?last,
                    entries = branch.len(),
                    "a later try found the turn's prompt stored and answered; nothing to run"
                );
            }
        }
        Ok(ended)
    }

    /// Fires when a front-end asks to interrupt `turn` (an
    /// `interrupt_requested` record of it in the session's log, looked for
    /// from where the turn began, so one sent while no try ran counts).
    /// Cancel it to stop following the log.
    fn interrupts(&self, turn: &TurnInput) -> CancellationToken {
        let fired = CancellationToken::new();
        let mut records = self.log.follow(&turn.session_id, turn.log_from);
        let (token, turn_id) = (fired.clone(), turn.turn_id.clone());
        tokio::spawn(async move {
            loop {
                let record = tokio::select! {
                    () = token.cancelled() => return,
                    record = records.recv() => record,
                };
                let Some(record) = record else { return };
                if record.turn == turn_id
                    && matches!(
                        Logged::read(&record.event),
                        Ok(Logged::Record(LogRecord::InterruptRequested))
                    )
                {
                    tracing::info!(turn = %turn_id, "interrupted by a front-end");
                    token.cancel();
                    return;
                }
            }
        });
        fired
    }

    /// Appends what closes the events of this turn's previous try, when it
    /// died with a run or a message open, and the end of each wait it
    /// announced that was decided meanwhile (one still pending is
    /// announced again by the gate when the resumed turn reaches it).
    async fn close_dead_try(
        &self,
        sink: &mut Sink,
        log_from: u64,
        engine: Option<&ApprovalEngine>,
    ) -> anyhow::Result<()> {
        // The turn's records all come after where it began: the session's
        // earlier history is not read again on every try.
        let mut after = log_from;
        let mut stored = Vec::new();
        let mut waits: Vec<PendingRequest> = Vec::new();
        loop {
            let batch = self.log.after(&sink.session_id, after).await?;
            let Some(last) = batch.last() else { break };
            after = last.seq;
            for e in batch.into_iter().filter(|e| e.turn == sink.turn_id) {
                match Logged::read(&e.event) {
                    Ok(Logged::Record(LogRecord::ApprovalRequest { request, .. })) => {
                        waits.push(*request);
                    }
                    Ok(Logged::Record(LogRecord::ApprovalResolved { request, .. })) => {
                        waits.retain(|w| w.id != request.id);
                    }
                    Ok(Logged::Event(event)) => stored.push(*event),
                    Ok(Logged::Record(
                        LogRecord::InterruptRequested
                        | LogRecord::ToolCall { .. }
                        | LogRecord::ToolRunning { .. }
                        | LogRecord::ToolResult { .. },
                    ))
                    | Err(_) => {}
                }
            }
        }
        let closing = closing_events(&stored);
        if !closing.is_empty() {
            tracing::info!(session = %sink.session_id, "closing the events of a try that died");
            sink.events(&closing).await?;
        }
        let Some(engine) = engine else { return Ok(()) };
        waits.dedup_by(|a, b| a.id == b.id);
        for request in waits {
            let row = engine.request(&request.id).await?;
            if let Some(resolution) = Resolution::from_record(&row) {
                let record = LogRecord::ApprovalResolved {
                    request: Box::new(request),
                    resolution,
                };
                sink.append(&[serde_json::to_string(&record)?]).await?;
            }
        }
        Ok(())
    }

    /// The turn's session, spawned over the shared database, and its writer.
    async fn open(
        &self,
        turn: &TurnInput,
        attempt: u32,
        cwd: &Path,
        sink: &Sink,
    ) -> anyhow::Result<(
        Session,
        keel_session_store::SessionWriter,
        Option<ApprovalEngine>,
    )> {
        let mut model = self.model.clone();
        if let Some(id) = &turn.model {
            model.model = Some(id.clone());
        }
        if let Some(level) = &turn.thinking {
            model.thinking = Some(level.clone());
        }
        let resolved = resolve(&self.global, &model)?;
        let provider = build_provider(&resolved)?;
        let settings = crate::config::Settings::load(&self.global)?.file;
        let sandbox = settings.sandbox.settings(None)?;
        let mut tools = self
            .mcp
            .tools(&resolved.home, &settings.mcp_servers, cwd)
            .await;
        let mut own = own_tool_names();
        own.extend(tools.iter().map(|t| t.name().to_owned()));
        // The front-end's own tools, run there.
        tools.extend(super::proxy::proxies(
            turn,
            &own,
            self.log,
            &sink.records_tx,
        ));
        let store = SessionStore::for_home(&resolved.home);
        let path = store.resolve(cwd, &turn.session_id).await?;
        let loaded = keel_session_store::load(&path)
            .await
            .with_context(|| format!("cannot load session {}", turn.session_id))?;
        let (writer, history, tree) = reopen_with_model(loaded, &resolved).await?;
        let mode = turn
            .approval_mode
            .as_deref()
            .map(str::parse::<Mode>)
            .transpose()?;
        let gate = approval_gate(&resolved.home, cwd, mode).await;
        let engine = gate.engine().ok().cloned();
        gate.set_frontend(Arc::new(LogFrontend {
            records: sink.records_tx.clone(),
        }));
        let session = spawn_session(SessionSpec {
            cwd,
            home: &resolved.home,
            model: model_info(&resolved),
            provider,
            thinking: resolved.thinking,
            writer: Some(&writer),
            history,
            tree: Some(tree),
            retry: resolved.retry,
            compaction: resolved.compaction,
            gate,
            fence: Some(Arc::new(TryFence {
                log: self.log,
                session_id: turn.session_id.clone(),
                turn_id: turn.turn_id.clone(),
                attempt,
            })),
            sandbox,
            extra_tools: tools,
            elsewhere: None,
            sync_prompts: true,
            output_schema: None,
            log_seen: None,
        });
        // The host's URIs are the front-end's to serve.
        let handle = session.handle();
        handle.set_tools(super::proxy::forward_host_uris(
            handle.tools(),
            turn,
            self.log,
            &sink.records_tx,
        ));
        Ok((session, writer, engine))
    }
}

/// Stops a try's session as a crash would, but at once: the writer is
/// closed first, so stopping the run stores nothing. A run cut off here
/// leaves no aborted answer that a later try would take for the model's;
/// a held call stays pending, a running command is killed, and the next
/// try goes on from what the session held.
async fn abandon(writer: &keel_session_store::SessionWriter, session: Session) {
    if let Err(e) = writer.close().await {
        tracing::warn!(error = %e, "closing the session of a try that stops");
    }
    session.shutdown().await;
}

/// The names of the tools a worker's session has of its own.
fn own_tool_names() -> Vec<String> {
    keel_tools::builtin_tools()
        .iter()
        .map(|t| t.name().to_owned())
        .collect()
}

fn session_tree(session: &Session) -> keel_session_store::SessionTree {
    session.handle().tree()
}

/// What a try's runs are driven with.
struct Driving<'a> {
    sink: &'a mut Sink,
    /// The turn was interrupted: abort the run.
    cancel: &'a CancellationToken,
    /// The worker is leaving: stop following the run, touch nothing.
    leave: &'a CancellationToken,
}

impl Driving<'_> {
    /// Runs the session until its run ends, appending every event.
    async fn drive(&mut self, session: &mut Session) -> anyhow::Result<Ended> {
        let mut aborting = false;
        loop {
            let event = tokio::select! {
                // Events first: a record follows the events emitted before it.
                biased;
                event = session.next_event() => event,
                Some(record) = self.sink.records.recv() => {
                    let mut batch = Vec::new();
                    while let Some(Some(event)) = session.next_event().now_or_never() {
                        batch.push(event);
                    }
                    self.sink.events(&batch).await?;
                    self.sink.append(&[record]).await?;
                    if let Some(AgentEvent::AgentEnd { messages }) = batch.last() {
                        return Ok(self.ended(aborting, messages));
                    }
                    continue;
                }
                () = self.cancel.cancelled(), if !aborting => {
                    aborting = true;
                    let _ = session.submit(Op::Abort).await;
                    continue;
                }
                () = self.leave.cancelled() => return Ok(Ended::Left),
            };
            let Some(event) = event else {
                bail!("the session stopped unexpectedly")
            };
            // What else is ready goes in the same append.
            let mut batch = vec![event];
            while batch.len() < APPEND_BATCH
                && !matches!(batch.last(), Some(AgentEvent::AgentEnd { .. }))
            {
                match session.next_event().now_or_never() {
                    Some(Some(event)) => batch.push(event),
                    Some(None) | None => break,
                }
            }
            self.sink.events(&batch).await?;
            if let Some(AgentEvent::AgentEnd { messages }) = batch.last() {
                return Ok(self.ended(aborting, messages));
            }
        }
    }

    fn ended(&self, aborting: bool, messages: &[keel_protocol::Message]) -> Ended {
        if aborting {
            Ended::Run(Outcome::Aborted)
        } else {
            Ended::Run(outcome_of(messages))
        }
    }
}

/// The gate's front end on a worker: nobody is there to ask, so a held
/// call waits for a decision from elsewhere, and the log says so.
struct LogFrontend {
    records: mpsc::Sender<String>,
}

impl LogFrontend {
    async fn record(&self, record: LogRecord) {
        match serde_json::to_string(&record) {
            Ok(text) => {
                // The try is over when nobody receives; the next try
                // announces what is still pending.
                let _ = self.records.send(text).await;
            }
            Err(e) => tracing::warn!(error = %e, "cannot encode a log record"),
        }
    }
}

#[async_trait::async_trait]
impl ApprovalFrontend for LogFrontend {
    async fn requested(&self, request: &PendingRequest) {
        self.record(LogRecord::ApprovalRequest {
            request: Box::new(request.clone()),
            args: serde_json::Value::Null,
        })
        .await;
    }

    async fn held(&self, request: &PendingRequest, call: &ToolCallInfo) -> WaitGuard {
        self.record(LogRecord::ApprovalRequest {
            request: Box::new(request.clone()),
            args: call.args.clone(),
        })
        .await;
        Box::new(())
    }

    async fn resolved(&self, request: &PendingRequest, resolution: &Resolution) {
        self.record(LogRecord::ApprovalResolved {
            request: Box::new(request.clone()),
            resolution: resolution.clone(),
        })
        .await;
    }
}
