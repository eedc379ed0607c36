//! Runs that run somewhere else: a front-end whose turns a worker runs.
//!
//! Owns the [`RunsElsewhere`] seam and the run that uses it. A session
//! given one (`SessionBuilder::runs_elsewhere`) keeps everything a
//! front-end asks of it here (its state, its tree, the queues, the getters,
//! the approval front end) but hands each run's start to the seam: the
//! seam runs it elsewhere and feeds back the run's events, in order, and
//! the calls the run holds there (a try that died there and the one that
//! went on are one run here: the `agent_end` and `agent_start` between
//! them are not passed on). When the run has ended there, the
//! session reads its log again (the other side appended to it) and ends
//! the run here as an in-process run ends: `running` cleared, the run's
//! last `agent_end`, `agent_settled`. Messages queued meanwhile (steering,
//! follow-ups) start the next run elsewhere, one user message each. The
//! tools only this side can run (the host's, its MCP servers') are offered
//! to the run there and run here when it calls them. A run
//! that could not be started there ends here at once with a failed
//! assistant message that says why. It must not know where "elsewhere"
//! is or how it is reached.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_approvals::{PendingRequest, Resolution};
use keel_protocol::{AgentEvent, AssistantMessage, Message, StopReason, UserInput};
use tokio_util::sync::CancellationToken;

use keel_protocol::ToolResult;
use keel_tools::ToolOutput;

use crate::ctx::RunCtx;
use crate::event::SessionEvent;
use crate::run::Start;
use crate::state::lock;
use crate::tries::RunEnd;

/// One run to start elsewhere.
#[derive(Debug, Clone)]
pub struct RemoteRun {
    pub session_id: String,
    pub cwd: PathBuf,
    /// The user's message; `None` resumes what the session holds (a turn a
    /// crash cut off).
    pub prompt: Option<String>,
    /// The session's last entry when the run starts.
    pub base_leaf: Option<String>,
    /// Fires when the user aborts the run here.
    pub interrupt: CancellationToken,
    /// The session's tools that only this side can run (the host's, a
    /// front-end's MCP servers'): offered there, run here through
    /// [`RemoteEvents::run_tool`].
    pub tools: Vec<RemoteTool>,
    /// The session's model id (`None`: it has none here) and thinking
    /// level, as the host set them: the run there uses them.
    pub model: Option<String>,
    pub thinking: keel_protocol::ThinkingLevel,
    /// The approval mode this side judges the session's calls by, when it
    /// has one of its own (the app-server's per-thread policy).
    pub approval_mode: Option<keel_approvals::Mode>,
    /// The URI schemes this side's host serves: a `read`, `write` or
    /// `edit` of such a path there is run here ([`RemoteEvents::run_tool`]).
    pub host_schemes: Vec<(String, keel_tools::host::HostScheme)>,
}

/// A run that runs elsewhere now.
#[derive(Debug, Clone, PartialEq)]
pub struct RunningThere {
    /// The session's last entry when it started (`None`: the session was
    /// empty); what the run stores follows it.
    pub base_leaf: Option<String>,
}

/// A tool of this side offered to a run elsewhere.
#[derive(Debug, Clone)]
pub struct RemoteTool {
    pub spec: keel_protocol::ToolSpec,
    /// What the approval gate there judges it by (its class).
    pub hints: keel_tools::ToolHints,
}

/// What the run elsewhere sends back.
#[async_trait::async_trait]
pub trait RemoteEvents: Send + Sync {
    /// The run's next event, stored at `log_seq` in the session's event
    /// log there.
    async fn event(&self, event: AgentEvent, log_seq: u64);
    /// The run holds a call there (its arguments `args`): announce it as
    /// if it were held here.
    async fn approval_requested(&self, request: &PendingRequest, args: &serde_json::Value);
    /// That wait ended there.
    async fn approval_resolved(&self, request: &PendingRequest, resolution: &Resolution);
    /// The run there calls `tool`, one of [`RemoteRun::tools`], for the
    /// model's call `call_id`: run it here (the gate there let it pass).
    async fn run_tool(&self, call_id: &str, tool: &str, args: serde_json::Value) -> ToolOutput;
    /// The run is durably started there: it goes on if this process dies
    /// now (see `SessionHandle::run_starts`).
    async fn started(&self) {}
}

/// What a session hears of runs of it that another front-end started.
#[derive(Debug, Clone)]
pub enum Watched {
    /// Such a run holds a call (its arguments `args`).
    Held {
        request: Box<PendingRequest>,
        args: serde_json::Value,
    },
    /// That wait ended.
    Resolved {
        request: Box<PendingRequest>,
        resolution: Resolution,
    },
    /// An event of such a run, in order, with its place in the log (its
    /// last `agent_end` comes with [`Watched::Ended`]; a try that died
    /// there and the one that went on are one run, as for this front-end's
    /// own runs).
    Event(Box<SessionEvent>),
    /// Such a run ended: the session holds more than this front-end read.
    /// `end` is the run's last `agent_end`, passed on once the session has
    /// been read again (`None` when the run's start was not seen here).
    Ended { end: Option<Box<RunEnd>> },
}

/// Runs a session's runs somewhere else; see the module docs.
#[async_trait::async_trait]
pub trait RunsElsewhere: Send + Sync {
    /// Starts `run` elsewhere and feeds its events to `events` until it has
    /// ended there. An error means the run did not (fully) happen there:
    /// the text says why, for the user.
    async fn run(&self, run: RemoteRun, events: &dyn RemoteEvents) -> Result<(), String>;

    /// The run of `session_id` that runs there now (started from
    /// anywhere); `None` (the default) when none does or that cannot be
    /// known.
    async fn running(&self, session_id: &str) -> Option<RunningThere> {
        let _ = session_id;
        None
    }

    /// The run of `session_id` whose events include the one stored at
    /// `log_seq`, running or ended (a front-end that hears a run it did
    /// not start after that run ended still names it as the others do);
    /// `None` when that cannot be known. By default: [`Self::running`].
    async fn run_at(&self, session_id: &str, log_seq: u64) -> Option<RunningThere> {
        let _ = log_seq;
        self.running(session_id).await
    }

    /// The calls held, from now on, by runs of `session_id` wherever they
    /// were started, so this front-end can offer them to its host too;
    /// `None` (the default): nothing is watched. `seen`: the last place in
    /// the session's log the host has seen (a host that reconnects): the
    /// events after it are passed on, and the calls still held.
    fn watch(
        &self,
        session_id: &str,
        seen: Option<u64>,
    ) -> Option<tokio::sync::mpsc::Receiver<Watched>> {
        let _ = (session_id, seen);
        None
    }
}

/// Passes on the events of runs of this session that another front-end
/// started, offers the calls they hold to this session's gate front end
/// (its own runs relay theirs), and reads the session again when such a
/// run ends, until the returned guard is dropped with the session. While
/// this front-end runs a run itself, what it hears of others is dropped
/// (there is one run of a session at a time; its own relay speaks).
pub(crate) fn watch(ctx: &RunCtx) -> Option<tokio_util::sync::DropGuard> {
    let elsewhere = ctx.deps.elsewhere.clone()?;
    let (session_id, cwd, seen) = {
        let s = lock(&ctx.shared);
        (
            s.config.session_id.clone(),
            s.config.cwd.clone(),
            s.config.log_seen,
        )
    };
    let mut watched = elsewhere.watch(&session_id, seen)?;
    let stop = CancellationToken::new();
    let (shared, gate, ended) = (ctx.shared.clone(), ctx.deps.gate.clone(), stop.clone());
    let ctx = ctx.clone();
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                () = ended.cancelled() => return,
                next = watched.recv() => next,
            };
            let Some(next) = next else { return };
            if lock(&shared).running {
                continue;
            }
            match next {
                Watched::Held { request, args } => {
                    let call = held_call(&request, args, cwd.clone());
                    gate.held_elsewhere(&request, &call).await;
                }
                Watched::Resolved {
                    request,
                    resolution,
                } => gate.resolved_elsewhere(&request, &resolution).await,
                Watched::Event(event) => match event.event {
                    // Said here when the run has ended.
                    AgentEvent::AgentSettled => {}
                    _ => ctx.send(*event).await,
                },
                Watched::Ended { end } => {
                    // Where the run began, if the session read here is
                    // up to date (else its end goes on as it is).
                    let since = {
                        let s = lock(&shared);
                        (!s.tree_stale).then(|| s.tree.leaf().map(str::to_owned))
                    };
                    // Not read: marked stale, read before the next run.
                    let _ = reload(&ctx).await;
                    if let Some(end) = end {
                        let end = match since {
                            Some(since) => whole_run(&ctx, *end, since.as_deref()),
                            None => end.end,
                        };
                        settle(&ctx, end).await;
                    }
                }
            }
        }
    });
    Some(stop.drop_guard())
}

/// The events of a run elsewhere, sent on as this session's; the last
/// `agent_end` is held back until the run has ended (see the module docs).
struct Relay<'a> {
    ctx: &'a RunCtx,
    /// The run's abort: it stops a tool run here too.
    cancel: &'a CancellationToken,
    state: Mutex<RelayState>,
}

/// What the relay of one run has seen.
#[derive(Default)]
struct RelayState {
    /// Its tries as one run; the last `agent_end` is passed on when the
    /// run has ended.
    tries: crate::tries::TryJoin<()>,
    /// An `agent_start` was passed on.
    started: bool,
    /// The user's message stored here for the run (see [`prompt_of`]):
    /// shown after the run's first `turn_start`, where a prompt shows.
    stored: Option<Message>,
    /// That message, once shown: the run's end lists it first.
    shown: Option<Message>,
}

impl Relay<'_> {
    fn state(&self) -> std::sync::MutexGuard<'_, RelayState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[async_trait::async_trait]
impl RemoteEvents for Relay<'_> {
    async fn started(&self) {
        settle_start(&self.ctx.shared);
    }

    async fn event(&self, event: AgentEvent, log_seq: u64) {
        // Said here once the run has ended here.
        if matches!(event, AgentEvent::AgentSettled) {
            return;
        }
        // A try that died elsewhere ended its run and the next try starts
        // another: here it is one run, as the user asked for one.
        let joined = self.state().tries.next(
            (),
            SessionEvent {
                event,
                log_seq: Some(log_seq),
            },
        );
        if let Some(ended) = joined.ended {
            self.ctx.send(ended.end).await;
        }
        let Some(event) = joined.event else { return };
        if event.event == AgentEvent::AgentStart {
            self.state().started = true;
        }
        let shows_prompt = event.event == AgentEvent::TurnStart;
        self.ctx.send(event).await;
        let stored = if shows_prompt {
            let mut state = self.state();
            state.shown = state.stored.take();
            state.shown.clone()
        } else {
            None
        };
        if let Some(message) = stored {
            self.ctx
                .emit(AgentEvent::MessageStart {
                    message: message.clone(),
                })
                .await;
            self.ctx.emit(AgentEvent::MessageEnd { message }).await;
        }
    }

    async fn approval_requested(&self, request: &PendingRequest, args: &serde_json::Value) {
        let cwd = lock(&self.ctx.shared).config.cwd.clone();
        let call = held_call(request, args.clone(), cwd);
        self.ctx.deps.gate.held_elsewhere(request, &call).await;
    }

    async fn approval_resolved(&self, request: &PendingRequest, resolution: &Resolution) {
        self.ctx
            .deps
            .gate
            .resolved_elsewhere(request, resolution)
            .await;
    }

    async fn run_tool(&self, call_id: &str, tool: &str, args: serde_json::Value) -> ToolOutput {
        let (found, cwd) = {
            let s = lock(&self.ctx.shared);
            let found = s
                .tools
                .iter()
                .find(|t| {
                    t.name() == tool
                        && (offered(t.as_ref(), self.ctx.deps.gate.as_ref())
                            || hosted_path(t.name(), &args, self.ctx.deps.gate.as_ref()))
                })
                .cloned();
            (found, s.config.cwd.clone())
        };
        let Some(found) = found else {
            return ToolOutput::error(ToolResult::text(format!(
                "Tool `{tool}` is not available here any more."
            )));
        };
        // Its partial results reach the host from here (the run there
        // knows only the end).
        let (events, name, call, shown) = (
            self.ctx.events.clone(),
            tool.to_owned(),
            call_id.to_owned(),
            args.clone(),
        );
        let updates: keel_tools::UpdateSink = Arc::new(move |partial_result| {
            let _ = events.try_send(SessionEvent::here(AgentEvent::ToolExecutionUpdate {
                tool_call_id: call.clone(),
                tool_name: name.clone(),
                args: shown.clone(),
                partial_result,
            }));
        });
        let mut context =
            keel_tools::ToolContext::local(cwd, self.cancel.child_token()).with_updates(updates);
        context.call_id = call_id.to_owned();
        // Its questions (an MCP server's) go to this side's person.
        context.asker = self.ctx.deps.asker.clone();
        match found.execute(&context, args).await {
            Ok(out) => out,
            Err(e) => ToolOutput::error(ToolResult::text(e.to_string())),
        }
    }
}

/// Counts one more run whose start is settled (see
/// `SessionHandle::run_starts`).
fn settle_start(shared: &crate::state::SharedState) {
    lock(shared).run_starts.send_modify(|n| *n += 1);
}

/// Runs `start` elsewhere, then each message queued meanwhile.
pub(crate) async fn run(
    ctx: RunCtx,
    start: Start,
    cancel: CancellationToken,
    elsewhere: Arc<dyn RunsElsewhere>,
) {
    let (mut prompt, mut stored) = match start {
        Start::Prompt(input) => prompt_of(&ctx, input).await,
        Start::Resume => (None, None),
    };
    loop {
        ctx.flush_log().await;
        let fresh = !lock(&ctx.shared).tree_stale || reload(&ctx).await;
        let run = {
            let s = lock(&ctx.shared);
            RemoteRun {
                session_id: s.config.session_id.clone(),
                cwd: s.config.cwd.clone(),
                prompt: prompt.take(),
                base_leaf: s.tree.leaf().map(str::to_owned),
                interrupt: cancel.clone(),
                tools: remote_tools(&s.tools, ctx.deps.gate.as_ref()),
                model: Some(s.config.model.id.clone()).filter(|id| !id.is_empty()),
                thinking: s.config.thinking_level,
                host_schemes: ctx.deps.gate.host_schemes(),
                approval_mode: ctx.deps.gate.session_mode(&crate::deps::ToolCallInfo {
                    session_id: s.config.session_id.clone(),
                    call_id: String::new(),
                    tool_name: String::new(),
                    args: serde_json::Value::Null,
                    cwd: s.config.cwd.clone(),
                    write_target: None,
                    hints: None,
                }),
            }
        };
        let run_base = run.base_leaf.clone();
        let relay = Relay {
            ctx: &ctx,
            cancel: &cancel,
            state: Mutex::new(RelayState {
                stored: stored.take(),
                ..RelayState::default()
            }),
        };
        let ran = if fresh {
            let ran = elsewhere.run(run, &relay).await;
            // Started or not, the run's fate is known now.
            settle_start(&ctx.shared);
            reload(&ctx).await;
            ran
        } else {
            settle_start(&ctx.shared);
            Err("the session could not be read again since its last run; try again once its database is back".to_owned())
        };
        let RelayState {
            mut tries,
            started,
            // The run there began after the stored message: its end lists
            // it first, as a run here lists its prompt.
            shown,
            ..
        } = std::mem::take(&mut *relay.state());
        let since = run_base.as_deref();
        let end = match (ran, tries.take().map(|e| whole_run(&ctx, e, since))) {
            (
                Ok(()),
                Some(SessionEvent {
                    event: AgentEvent::AgentEnd { mut messages },
                    log_seq,
                }),
            ) => {
                messages.splice(0..0, shown);
                SessionEvent {
                    event: AgentEvent::AgentEnd { messages },
                    log_seq,
                }
            }
            (Ok(()), Some(end)) => end,
            (ran, end) => {
                let reason = ran
                    .err()
                    .unwrap_or_else(|| "the run elsewhere ended without finishing".to_owned());
                tracing::warn!(error = %reason, "a run elsewhere failed");
                if let Some(end) = end {
                    ctx.send(end).await;
                }
                if !started {
                    ctx.emit(AgentEvent::AgentStart).await;
                }
                let failed = say_failed(&ctx, reason).await;
                SessionEvent::here(AgentEvent::AgentEnd {
                    messages: vec![failed],
                })
            }
        };
        // What was queued meanwhile goes next, one message per run,
        // unless the user aborted.
        let next = {
            let mut s = lock(&ctx.shared);
            let next = if cancel.is_cancelled() {
                None
            } else {
                s.queues
                    .steering
                    .pop_front()
                    .or_else(|| s.queues.follow_up.pop_front())
            };
            if next.is_none() {
                s.running = false;
            }
            next
        };
        let Some(next) = next else {
            settle(&ctx, end).await;
            return;
        };
        ctx.send(end).await;
        let (steering, follow_up) = lock(&ctx.shared).queues.snapshot();
        ctx.emit(AgentEvent::QueueUpdate {
            steering,
            follow_up,
        })
        .await;
        (prompt, stored) = prompt_of(&ctx, next).await;
    }
}

/// What a run elsewhere is started with for `input`: its text, or, for a
/// message with images, nothing (the message is stored in the session
/// first and the run there answers it: images do not travel in a turn's
/// input), with the stored message to show the host when the run starts.
async fn prompt_of(ctx: &RunCtx, input: UserInput) -> (Option<String>, Option<Message>) {
    if input.images.is_empty() {
        return (Some(input.message), None);
    }
    let message = ctx.user_message(input);
    ctx.store_message(message.clone()).await;
    (None, Some(message))
}

/// Whether a run elsewhere is offered `tool` to run here: a tool the host
/// serves, or one that says what it is (an MCP server's). keel's own tools
/// are there already.
fn offered(tool: &dyn keel_tools::Tool, gate: &dyn crate::deps::ApprovalGate) -> bool {
    gate.host_hints(tool.name()).is_some() || tool.hints().is_some()
}

/// Whether `tool` with `args` is a file tool's call on a URI of a scheme
/// this side's host serves: run here for a run elsewhere (a plain path
/// never is: this side's files are not the run's).
fn hosted_path(tool: &str, args: &serde_json::Value, gate: &dyn crate::deps::ApprovalGate) -> bool {
    matches!(tool, "read" | "write" | "edit")
        && keel_tools::host::path_scheme(args)
            .is_some_and(|s| gate.host_schemes().iter().any(|(known, _)| *known == s))
}

/// The session's tools a run elsewhere is offered, with what its gate
/// judges them by.
fn remote_tools(
    tools: &[Arc<dyn keel_tools::Tool>],
    gate: &dyn crate::deps::ApprovalGate,
) -> Vec<RemoteTool> {
    tools
        .iter()
        .filter_map(|t| {
            let hints = gate.host_hints(t.name()).or_else(|| t.hints())?;
            Some(RemoteTool {
                spec: t.spec(),
                hints,
            })
        })
        .collect()
}

/// The call a run elsewhere holds (its arguments `args`), as this side's
/// gate front end announces a call held here.
fn held_call(
    request: &PendingRequest,
    args: serde_json::Value,
    cwd: PathBuf,
) -> crate::deps::ToolCallInfo {
    crate::deps::ToolCallInfo {
        session_id: request.session_id.clone(),
        call_id: request.call_id.clone(),
        tool_name: request.tool.clone(),
        args,
        cwd,
        write_target: None,
        hints: None,
    }
}

/// The `agent_end` the host gets for a run elsewhere that ended with
/// `ended`. Of a run that took several tries, the end lists the last try's
/// messages only (a try that died ended with none): it lists the run's
/// messages as the session, just read again, holds them after `since`
/// (its last entry before the run) instead, as the end of a run of one
/// try does. Unchanged when the session could not be read, or holds
/// `since` no more.
fn whole_run(ctx: &RunCtx, ended: RunEnd, since: Option<&str>) -> SessionEvent {
    let RunEnd { end, several_tries } = ended;
    let SessionEvent {
        event: AgentEvent::AgentEnd { messages: listed },
        log_seq,
    } = &end
    else {
        return end;
    };
    let log_seq = *log_seq;
    let s = lock(&ctx.shared);
    // A try that died is closed with an end that lists nothing; when no
    // next try had anything left to run (it found the answer stored), that
    // end is the run's, and the session holds what the run did.
    if !(several_tries || listed.is_empty()) || s.tree_stale {
        return end;
    }
    let branch = s.tree.branch();
    let from = match since {
        None => 0,
        Some(id) => match branch.iter().position(|e| e.id == id) {
            Some(at) => at + 1,
            None => return end,
        },
    };
    let messages = branch[from..]
        .iter()
        .filter_map(|e| match &e.body {
            keel_session_store::EntryBody::Message { message } => Some(message.clone()),
            _ => None,
        })
        .collect();
    SessionEvent {
        event: AgentEvent::AgentEnd { messages },
        log_seq,
    }
}

/// Passes on a run's last `agent_end` and says the session settled (at
/// the end's place in the log: a host that saw the end has seen both).
async fn settle(ctx: &RunCtx, end: SessionEvent) {
    let log_seq = end.log_seq;
    ctx.send(end).await;
    ctx.send(SessionEvent {
        event: AgentEvent::AgentSettled,
        log_seq,
    })
    .await;
}

/// How long reading the session again after a run elsewhere keeps trying
/// while the store is away (a database restarting).
const RELOAD_WINDOW: Duration = Duration::from_secs(60);
/// The longest pause between two tries of a reload.
const RELOAD_PAUSE: Duration = Duration::from_secs(2);

/// The session's tree as the log holds it now, tried again while the store
/// is away for up to [`RELOAD_WINDOW`]; whether it was read. A tree not
/// read is marked stale, so the next run reads it before it starts: a run
/// begun after a stale leaf would fork the session, and its turn would
/// take the id of the one before.
async fn reload(ctx: &RunCtx) -> bool {
    let started = Instant::now();
    let mut pause = Duration::from_millis(100);
    loop {
        match ctx.deps.log.reload().await {
            Ok(tree) => {
                let mut s = lock(&ctx.shared);
                if let Some(tree) = tree {
                    s.tree = tree;
                    s.context = crate::context::ModelContext::from_tree();
                }
                s.tree_stale = false;
                return true;
            }
            Err(e) if started.elapsed() < RELOAD_WINDOW => {
                tracing::warn!(error = %e, "cannot read the session again after a run elsewhere; trying again");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(RELOAD_PAUSE);
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot read the session again after a run elsewhere");
                lock(&ctx.shared).tree_stale = true;
                return false;
            }
        }
    }
}

/// Announces the failed assistant message of a run that could not run
/// elsewhere (it is not stored: nothing ran), and returns it.
async fn say_failed(ctx: &RunCtx, reason: String) -> Message {
    let failed = failed_message(ctx, reason);
    ctx.emit(AgentEvent::MessageStart {
        message: failed.clone(),
    })
    .await;
    ctx.emit(AgentEvent::MessageEnd {
        message: failed.clone(),
    })
    .await;
    failed
}

/// The assistant message of a run that could not run elsewhere.
fn failed_message(ctx: &RunCtx, reason: String) -> Message {
    let model = lock(&ctx.shared).config.model.clone();
    Message::Assistant(AssistantMessage {
        content: Vec::new(),
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        usage: Default::default(),
        stop_reason: StopReason::Error,
        error_message: Some(reason),
        error_kind: None,
        timestamp: ctx.deps.clock.now_ms(),
        response_id: None,
    })
}
