//! The session handle and the session task.
//!
//! [`Session::spawn`] starts one task per session. Ops go in through a bounded
//! channel; events come out through another. A `Prompt` starts a run (see
//! [`crate::run`]) in its own task so that steering, follow-ups and aborts are
//! handled while it streams. Settings (queue modes, thinking level, name,
//! todos, model, tools) are applied by the handle at once, so a read right
//! after a change sees it; only `Prompt`, `Abort` and `Shutdown` travel to
//! the session task.
//!
//! Approvals reach the session only through its gate: a steering message
//! while the run waits on held calls declines them instead of being queued;
//! an `Abort` marks the run aborted, so the loop has the gate cancel what it
//! waits on (a `Shutdown` leaves such requests pending for the next
//! process); a new run first hears what became of the session's drafts.
//! [`SessionHandle::resume_interrupted`] starts a run that finishes a turn
//! a crash or kill cut off (see [`crate::resume`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use keel_llm::Provider;
use keel_protocol::{
    AgentEvent, InterruptMode, Message, Op, QueueMode, ThinkingLevel, TodoPhase, ToolSpec,
    UserInput,
};
use keel_session_store::EntryBody;
use keel_tools::{FileSystem, ProcessRunner, Tool};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{ModelInfo, SessionConfig};
use crate::ctx::RunCtx;
use crate::event::SessionEvent;
use crate::queue::Queues;
use crate::run::{Start, run_agent};
use crate::state::{SessionDeps, Shared, SharedState, lock};
use crate::{EVENT_CHANNEL_CAPACITY, Error, OP_CHANNEL_CAPACITY, Result};

mod resume_ops;

/// A point-in-time view of a session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSnapshot {
    pub session_id: String,
    pub session_file: Option<PathBuf>,
    pub cwd: PathBuf,
    pub model: ModelInfo,
    pub thinking_level: ThinkingLevel,
    pub is_streaming: bool,
    pub message_count: usize,
    pub queued_message_count: usize,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    pub interrupt_mode: InterruptMode,
    pub session_name: Option<String>,
    pub todos: Vec<TodoPhase>,
    /// Whether failed model calls are retried.
    pub auto_retry_enabled: bool,
    /// Whether a run is waiting before a retry.
    pub is_retrying: bool,
    /// Whether the conversation is compacted automatically.
    pub auto_compaction_enabled: bool,
    /// Whether a compaction is running.
    pub is_compacting: bool,
    /// The sandbox policy in force (`None`: no sandbox).
    pub sandbox: Option<keel_protocol::SandboxPolicy>,
}

/// Which queue [`SessionHandle::enqueue_or_start`] uses while a run streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    Steer,
    FollowUp,
}

/// What [`SessionHandle::enqueue_or_start`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The session was idle: a run started with the message.
    Started,
    /// A run is streaming: the message was queued.
    Queued,
    /// A run waited on held tool calls: the message declined them and
    /// became their note (it is not queued; the turn goes on with it).
    Declined,
}

/// A cloneable handle that submits ops and reads state.
#[derive(Clone)]
pub struct SessionHandle {
    ops: mpsc::Sender<TaskOp>,
    shared: SharedState,
    deps: Arc<SessionDeps>,
    /// Weak, so the event stream ends when the session task stops even while
    /// handles are alive.
    events: mpsc::WeakSender<SessionEvent>,
}

impl SessionHandle {
    /// Whether the session's task has stopped (it was shut down or its
    /// last handle is going): ops submitted now are refused.
    pub fn is_closed(&self) -> bool {
        self.ops.is_closed()
    }

    /// Counts the runs elsewhere (on a cluster's workers) whose start is
    /// settled: durably started there, or ended. A front end that must
    /// not acknowledge a prompt it could still lose reads it before
    /// submitting the prompt and answers once it has grown.
    pub fn run_starts(&self) -> tokio::sync::watch::Receiver<u64> {
        lock(&self.shared).run_starts.subscribe()
    }

    /// Whether the session's runs run elsewhere (on a cluster's workers).
    pub fn runs_elsewhere(&self) -> bool {
        self.deps.elsewhere.is_some()
    }

    /// Submits an op. A `Prompt` while a run is in progress fails with
    /// [`Error::Busy`]. Steering and follow-up messages are queued at once
    /// (while idle they wait for the next prompt); settings apply at once;
    /// `Abort` and `Shutdown` go to the session task.
    pub async fn submit(&self, op: Op) -> Result<()> {
        match op {
            Op::Prompt(input) => {
                {
                    let mut s = lock(&self.shared);
                    if s.running || s.compacting.is_some() {
                        return Err(Error::Busy);
                    }
                    s.running = true;
                }
                self.send_prompt(input).await
            }
            Op::Steer(input) => {
                if !self.declines_waiting(&input).await {
                    self.enqueue(input, QueueKind::Steer).await;
                }
                Ok(())
            }
            Op::FollowUp(input) => {
                self.enqueue(input, QueueKind::FollowUp).await;
                Ok(())
            }
            op @ (Op::Abort | Op::Shutdown) => {
                if matches!(op, Op::Abort)
                    && let Some(compaction) = lock(&self.shared).compacting.clone()
                {
                    compaction.cancel();
                }
                self.ops
                    .send(TaskOp::Op(op))
                    .await
                    .map_err(|_| Error::Closed)
            }
            Op::SetSteeringMode { mode } => {
                lock(&self.shared).queues.steering_mode = mode;
                Ok(())
            }
            Op::SetFollowUpMode { mode } => {
                lock(&self.shared).queues.follow_up_mode = mode;
                Ok(())
            }
            Op::SetInterruptMode { mode } => {
                lock(&self.shared).config.interrupt_mode = mode;
                Ok(())
            }
            Op::SetThinkingLevel { level } => {
                // The model's supported level closest to the request; the
                // event and the log say which one is used.
                let level = {
                    let mut s = lock(&self.shared);
                    let (level, _) = s.config.model.effective_thinking(level);
                    s.config.thinking_level = level;
                    level
                };
                self.log(EntryBody::ThinkingLevelChange {
                    thinking_level: level,
                })
                .await?;
                self.emit(AgentEvent::ThinkingLevelChanged { level }).await;
                Ok(())
            }
            Op::SetSessionName { name } => {
                lock(&self.shared).session_name = name.clone();
                self.log(EntryBody::SessionInfo { name: name.clone() })
                    .await?;
                self.emit(AgentEvent::SessionInfoChanged { name }).await;
                Ok(())
            }
            Op::SetTodos { phases } => {
                lock(&self.shared).todos = phases;
                Ok(())
            }
        }
    }

    /// Starts a run with `input` when the session is idle, or queues it as a
    /// steering or follow-up message when a run streams. Decided under one
    /// lock, so a message never lands in a queue that no run will drain.
    pub async fn enqueue_or_start(&self, input: UserInput, kind: QueueKind) -> Result<Delivery> {
        let running = lock(&self.shared).running;
        if running && kind == QueueKind::Steer && self.declines_waiting(&input).await {
            return Ok(Delivery::Declined);
        }
        let queued = {
            let mut s = lock(&self.shared);
            if s.compacting.is_some() {
                return Err(Error::Busy);
            }
            if s.running {
                match kind {
                    QueueKind::Steer => s.queues.steering.push_back(input),
                    QueueKind::FollowUp => s.queues.follow_up.push_back(input),
                }
                Ok(s.queues.snapshot())
            } else {
                s.running = true;
                Err(input)
            }
        };
        match queued {
            Ok((steering, follow_up)) => {
                self.emit(AgentEvent::QueueUpdate {
                    steering,
                    follow_up,
                })
                .await;
                Ok(Delivery::Queued)
            }
            Err(input) => {
                self.send_prompt(input).await?;
                Ok(Delivery::Started)
            }
        }
    }

    async fn send_prompt(&self, input: UserInput) -> Result<()> {
        if self.ops.send(TaskOp::Op(Op::Prompt(input))).await.is_err() {
            lock(&self.shared).running = false;
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// A steering message while the run may wait on held calls: the gate
    /// declines them with the message as their note, and the message is
    /// not queued (the turn goes on with the note). False when nothing
    /// waited.
    async fn declines_waiting(&self, input: &UserInput) -> bool {
        let (running, session_id) = {
            let s = lock(&self.shared);
            (s.running, s.config.session_id.clone())
        };
        running
            && self
                .deps
                .gate
                .decline_waiting(&session_id, &input.message)
                .await
                > 0
    }

    async fn enqueue(&self, input: UserInput, kind: QueueKind) {
        let (steering, follow_up) = {
            let mut s = lock(&self.shared);
            match kind {
                QueueKind::Steer => s.queues.steering.push_back(input),
                QueueKind::FollowUp => s.queues.follow_up.push_back(input),
            }
            s.queues.snapshot()
        };
        self.emit(AgentEvent::QueueUpdate {
            steering,
            follow_up,
        })
        .await;
    }

    async fn emit(&self, event: AgentEvent) {
        if let Some(tx) = self.events.upgrade() {
            let _ = tx.send(SessionEvent::here(event)).await;
        }
    }

    async fn log(&self, body: EntryBody) -> Result<()> {
        crate::history::record(
            &self.shared,
            self.deps.log.as_ref(),
            self.deps.clock.as_ref(),
            body,
        )
        .await?;
        self.deps.log.flush().await
    }

    /// Switches the model (and its provider) for the next model calls; the
    /// change is logged and announced with `model_changed`. The thinking
    /// level is clamped to what the new model supports (announced with
    /// `thinking_level_changed` when that changes it).
    pub async fn set_model(&self, model: ModelInfo, provider: Arc<dyn Provider>) -> Result<()> {
        let (p, id) = (model.provider.clone(), model.id.clone());
        let clamped = {
            let mut s = lock(&self.shared);
            let (level, _) = model.effective_thinking(s.config.thinking_level);
            let changed = level != s.config.thinking_level;
            s.config.model = model;
            s.config.thinking_level = level;
            s.provider = provider;
            changed.then_some(level)
        };
        self.log(EntryBody::ModelChange {
            provider: p.clone(),
            model_id: id.clone(),
        })
        .await?;
        self.emit(AgentEvent::ModelChanged {
            provider: p,
            model_id: id,
        })
        .await;
        if let Some(level) = clamped {
            self.log(EntryBody::ThinkingLevelChange {
                thinking_level: level,
            })
            .await?;
            self.emit(AgentEvent::ThinkingLevelChanged { level }).await;
        }
        Ok(())
    }

    /// Turns automatic retries of failed model calls on or off for this
    /// session (from the next failure on).
    pub fn set_auto_retry(&self, enabled: bool) {
        lock(&self.shared).auto_retry = enabled;
    }

    /// Sets what the todo list does when a run is about to stop (reminders,
    /// clearing a finished list); off until set.
    pub fn set_todo_policy(&self, policy: crate::todo::TodoPolicy) {
        lock(&self.shared).todo_policy = policy;
    }

    /// Moves the session to another working directory: tool calls and the
    /// system prompt use it from the next model call on.
    pub fn set_cwd(&self, cwd: PathBuf) {
        lock(&self.shared).config.cwd = cwd;
    }

    /// Gives up the retry a run is waiting for: the run ends with the error
    /// that caused it. Returns whether a run was waiting.
    pub fn abort_retry(&self) -> bool {
        match lock(&self.shared).retry_wait.take() {
            Some(wait) => {
                wait.cancel();
                true
            }
            None => false,
        }
    }

    /// Replaces the tools offered from the next model call on.
    pub fn set_tools(&self, tools: Vec<Arc<dyn Tool>>) {
        lock(&self.shared).tools = tools;
    }

    /// The tools offered to the model now.
    /// Replaces the tools whose names start with `prefix` (a family such
    /// as MCP's `mcp__`) with `tools`, keeping every other tool; from the
    /// next model call on.
    pub fn swap_tools(&self, prefix: &str, tools: Vec<Arc<dyn Tool>>) {
        let mut s = lock(&self.shared);
        s.tools.retain(|t| !t.name().starts_with(prefix));
        s.tools.extend(tools);
    }

    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        lock(&self.shared).tools.clone()
    }

    /// The specs of the tools offered to the model now.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        lock(&self.shared).tools.iter().map(|t| t.spec()).collect()
    }

    /// The system prompt the next model call will use.
    pub fn system_prompt(&self) -> String {
        let s = lock(&self.shared);
        let tools: Vec<_> = s.tools.iter().map(|t| t.spec()).collect();
        crate::run::effective_system_prompt(&s.config, &tools, &self.deps.clock.today())
    }

    /// Adds a user message (for example the output of a command the host
    /// ran) that enters the conversation ahead of the next prompt.
    pub fn add_context(&self, input: UserInput) {
        lock(&self.shared).pending_context.push(input);
    }

    /// The backends the session's tools use (for host-side commands that
    /// should run exactly like the agent's own).
    pub fn backends(&self) -> (Arc<dyn FileSystem>, Arc<dyn ProcessRunner>) {
        (self.deps.fs.clone(), self.deps.process.clone())
    }

    pub fn snapshot(&self) -> SessionSnapshot {
        let s = lock(&self.shared);
        SessionSnapshot {
            session_id: s.config.session_id.clone(),
            session_file: s.config.session_file.clone(),
            cwd: s.config.cwd.clone(),
            model: s.config.model.clone(),
            thinking_level: s.config.thinking_level,
            is_streaming: s.running,
            message_count: s.context.view(&s.tree).len(),
            queued_message_count: s.queues.len(),
            steering_mode: s.queues.steering_mode,
            follow_up_mode: s.queues.follow_up_mode,
            interrupt_mode: s.config.interrupt_mode,
            session_name: s.session_name.clone(),
            todos: s.todos.clone(),
            auto_retry_enabled: s.auto_retry,
            is_retrying: s.retry_wait.is_some(),
            auto_compaction_enabled: s.auto_compaction,
            is_compacting: s.is_compacting,
            sandbox: s.config.sandbox.clone(),
        }
    }

    /// Changes the sandbox policy for the session's next commands.
    pub fn set_sandbox(&self, policy: keel_protocol::SandboxPolicy) {
        lock(&self.shared).config.sandbox = Some(policy);
    }

    /// What a command the host runs for this session (RPC `bash`) runs
    /// under: the session's policy in its workspace, nothing granted.
    pub fn sandbox_spec(&self) -> Option<keel_tools::SandboxSpec> {
        let s = lock(&self.shared);
        s.config
            .sandbox
            .clone()
            .map(|p| keel_tools::SandboxSpec::new(p, s.config.cwd.clone()))
    }

    /// The session's sandbox (`None`: built without one).
    pub fn sandbox(&self) -> Option<Arc<keel_sandbox::Sandbox>> {
        self.deps.sandbox.clone()
    }

    /// The scratch directory where tools save full outputs.
    pub fn scratch_dir(&self) -> PathBuf {
        lock(&self.shared).config.scratch_dir.clone()
    }

    /// The conversation so far.
    pub fn messages(&self) -> Vec<Message> {
        let s = lock(&self.shared);
        s.context.view(&s.tree).to_vec()
    }

    /// Turns automatic compaction (threshold and overflow) on or off.
    pub fn set_auto_compaction(&self, enabled: bool) {
        lock(&self.shared).auto_compaction = enabled;
    }

    /// Compacts the conversation now (`custom_instructions`: what the
    /// summary should focus on), announced with `auto_compaction_start/end`
    /// (reason `manual`). The session must be idle; `Op::Abort` cancels it.
    /// A failure leaves the session as it was.
    pub async fn compact(
        &self,
        custom_instructions: Option<String>,
    ) -> Result<keel_protocol::CompactionResult> {
        let cancel = {
            let mut s = lock(&self.shared);
            if s.running || s.compacting.is_some() {
                return Err(Error::Busy);
            }
            let cancel = CancellationToken::new();
            s.compacting = Some(cancel.clone());
            cancel
        };
        let Some(events) = self.events.upgrade() else {
            lock(&self.shared).compacting = None;
            return Err(Error::Closed);
        };
        let ctx = RunCtx {
            shared: self.shared.clone(),
            deps: self.deps.clone(),
            events,
        };
        let outcome = crate::compaction::run(
            &ctx,
            keel_protocol::CompactionReason::Manual,
            custom_instructions.as_deref(),
            &cancel,
            None,
            false,
        )
        .await;
        lock(&self.shared).compacting = None;
        outcome.map_err(|e| Error::Compaction(e.message()))
    }

    /// The user messages on the active branch one can branch from:
    /// `(entry id, text)`, oldest first.
    pub fn branch_messages(&self) -> Vec<(String, String)> {
        lock(&self.shared).tree.user_messages()
    }

    /// Continues from before the user message `entry_id` (in the same
    /// session file): the leaf moves to its parent and the context follows.
    /// Returns the message's text, for the host to edit and send again. The
    /// session must be idle.
    pub async fn branch(&self, entry_id: &str) -> Result<String> {
        {
            let s = lock(&self.shared);
            if s.running || s.compacting.is_some() {
                return Err(Error::Busy);
            }
        }
        let (text, parent) = crate::history::branch_point(&self.shared, entry_id)?;
        let from = lock(&self.shared).tree.leaf().map(str::to_owned);
        crate::history::move_leaf(&self.shared, self.deps.log.as_ref(), parent).await?;
        // A marker after the branch point, so a reload continues here.
        self.log(EntryBody::Branch { from_id: from }).await?;
        Ok(text)
    }

    /// Where a fork before the user message `entry_id` starts: the
    /// message's text and its parent entry (none: the first message).
    pub fn fork_point(&self, entry_id: &str) -> Result<(String, Option<String>)> {
        crate::history::branch_point(&self.shared, entry_id).map_err(|e| match e {
            Error::InvalidEntry(_) => {
                Error::InvalidEntry("Invalid entry ID for forking".to_owned())
            }
            other => other,
        })
    }

    /// The session's entries in memory (the active branch's leaf included).
    pub fn tree(&self) -> keel_session_store::SessionTree {
        lock(&self.shared).tree.clone()
    }

    /// Messages by role, tool calls, tokens, cost and context usage.
    pub fn stats(&self) -> crate::history::SessionStats {
        crate::history::stats(&self.shared)
    }

    /// How full the model's window is.
    pub fn context_usage(&self) -> crate::history::ContextUsage {
        let s = lock(&self.shared);
        crate::history::ContextUsage::new(
            s.context.view(&s.tree).tokens(),
            s.config.model.context_window,
        )
    }

    /// Text of the last assistant message, if any.
    pub fn last_assistant_text(&self) -> Option<String> {
        let s = lock(&self.shared);
        s.context.view(&s.tree).last_assistant_text()
    }
}

/// A running session: a handle plus the event stream.
pub struct Session {
    handle: SessionHandle,
    events: mpsc::Receiver<SessionEvent>,
    task: JoinHandle<()>,
}

impl Session {
    /// Starts the session task. Must be called inside a tokio runtime. The
    /// thinking level is clamped to what the model supports.
    pub fn spawn(mut config: SessionConfig, deps: SessionDeps) -> Self {
        config.thinking_level = config.model.effective_thinking(config.thinking_level).0;
        let (ops_tx, ops_rx) = mpsc::channel(OP_CHANNEL_CAPACITY);
        let (events_tx, events_rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
        let queues = Queues::new(config.steering_mode, config.follow_up_mode);
        let deps = Arc::new(deps);
        let tree = config.history.take().unwrap_or_default();
        // A session opened from a file reads its context from the tree
        // until the loop needs a copy (no copy of a long history to open it).
        let context = if tree.entries().is_empty() {
            crate::context::ModelContext::of(config.initial_messages.clone())
        } else {
            crate::context::ModelContext::from_tree()
        };
        let shared = Arc::new(Mutex::new(Shared {
            context,
            tree,
            record_lock: Arc::default(),
            auto_compaction: config.compaction.enabled,
            compacting: None,
            tree_stale: false,
            is_compacting: false,
            run_starts: tokio::sync::watch::Sender::new(0),
            session_name: None,
            queues,
            running: false,
            provider: deps.provider.clone(),
            tools: deps.tools.clone(),
            todos: Vec::new(),
            todo_policy: crate::todo::TodoPolicy::OFF,
            pending_context: Vec::new(),
            auto_retry: config.retry.enabled,
            retry_wait: None,
            abort_requested: false,
            config,
        }));
        let weak_events = events_tx.downgrade();
        let ctx = RunCtx {
            shared: shared.clone(),
            deps: deps.clone(),
            events: events_tx,
        };
        let watching = crate::elsewhere::watch(&ctx);
        let task = tokio::spawn(async move {
            // The watch of runs elsewhere ends with the session.
            let _watching = watching;
            session_task(ops_rx, ctx).await;
        });
        Self {
            handle: SessionHandle {
                ops: ops_tx,
                shared,
                deps,
                events: weak_events,
            },
            events: events_rx,
            task,
        }
    }

    /// Sets the session name restored from a session file (not logged again).
    pub fn restore_name(&self, name: Option<String>) {
        lock(&self.handle.shared).session_name = name;
    }

    pub fn handle(&self) -> SessionHandle {
        self.handle.clone()
    }

    pub async fn submit(&self, op: Op) -> Result<()> {
        self.handle.submit(op).await
    }

    /// The next event; `None` once the session task has stopped.
    pub async fn next_event(&mut self) -> Option<AgentEvent> {
        self.events.recv().await.map(|e| e.event)
    }

    /// The next event with its place in the session's shared event log
    /// (see [`SessionEvent`]); `None` once the session task has stopped.
    pub async fn next_session_event(&mut self) -> Option<SessionEvent> {
        self.events.recv().await
    }

    pub fn snapshot(&self) -> SessionSnapshot {
        self.handle.snapshot()
    }

    pub fn messages(&self) -> Vec<Message> {
        self.handle.messages()
    }

    /// Splits into the handle and the raw event receiver (for a pump task).
    pub fn split(self) -> (SessionHandle, mpsc::Receiver<SessionEvent>, JoinHandle<()>) {
        (self.handle, self.events, self.task)
    }

    /// Aborts any run, flushes the log and waits for the task to stop.
    pub async fn shutdown(self) {
        let _ = self.handle.ops.send(TaskOp::Op(Op::Shutdown)).await;
        drop(self.events);
        let _ = self.task.await;
    }
}

/// Stops a session whose parts were [`Session::split`]: aborts any run,
/// flushes the log and waits for the task. The event receiver stays with
/// the caller, who should drain it until it ends.
pub async fn shutdown_split(handle: &SessionHandle, task: JoinHandle<()>) {
    let _ = handle.ops.send(TaskOp::Op(Op::Shutdown)).await;
    let _ = task.await;
}

/// What travels to the session task: an op, or the start of a run that
/// resumes a cut-off turn.
enum TaskOp {
    Op(Op),
    Resume,
}

struct CurrentRun {
    task: JoinHandle<()>,
    cancel: CancellationToken,
}

/// Starts a run: what became of the session's drafts goes to the model
/// first (as context ahead of the prompt), then the run proper. A resumed
/// turn leaves the notes for the next prompt (nothing may come between
/// tool calls and their results). A session that never called a tool has
/// no drafts: its turns do not wait for the approvals store on their way
/// to the model.
async fn start_run(ctx: RunCtx, start: Start, cancel: CancellationToken) {
    if let Some(elsewhere) = ctx.deps.elsewhere.clone() {
        crate::elsewhere::run(ctx, start, cancel, elsewhere).await;
        return;
    }
    let drafts = {
        let s = lock(&ctx.shared);
        s.tree.has_tool_calls().then(|| s.config.session_id.clone())
    };
    if let (Start::Prompt(_), Some(session_id)) = (&start, drafts) {
        let notes = ctx.deps.gate.take_notes(&session_id).await;
        if !notes.is_empty() {
            lock(&ctx.shared)
                .pending_context
                .extend(notes.into_iter().map(UserInput::text));
        }
    }
    run_agent(ctx, start, cancel).await;
}

fn spawn_run(ctx: &RunCtx, start: Start) -> CurrentRun {
    let cancel = CancellationToken::new();
    lock(&ctx.shared).abort_requested = false;
    let task = tokio::spawn(start_run(ctx.clone(), start, cancel.clone()));
    CurrentRun { task, cancel }
}

async fn session_task(mut ops: mpsc::Receiver<TaskOp>, ctx: RunCtx) {
    let mut current: Option<CurrentRun> = None;
    loop {
        tokio::select! {
            op = ops.recv() => {
                let Some(op) = op else { break };
                let op = match op {
                    TaskOp::Op(op) => op,
                    TaskOp::Resume => {
                        if let Some(run) = current.take() {
                            let _ = run.task.await;
                        }
                        current = Some(spawn_run(&ctx, Start::Resume));
                        continue;
                    }
                };
                match op {
                    Op::Prompt(input) => {
                        // The previous run has already given up the session
                        // (`running` is false); let it finish announcing its
                        // end so runs never interleave on the event stream.
                        if let Some(run) = current.take() {
                            let _ = run.task.await;
                        }
                        current = Some(spawn_run(&ctx, Start::Prompt(input)));
                    }
                    Op::Abort => {
                        if let Some(run) = &current {
                            lock(&ctx.shared).abort_requested = true;
                            run.cancel.cancel();
                        }
                    }
                    Op::Shutdown => break,
                    // Applied by the handle; nothing for the task to do.
                    Op::Steer(_)
                    | Op::FollowUp(_)
                    | Op::SetSteeringMode { .. }
                    | Op::SetFollowUpMode { .. }
                    | Op::SetInterruptMode { .. }
                    | Op::SetThinkingLevel { .. }
                    | Op::SetSessionName { .. }
                    | Op::SetTodos { .. } => {}
                }
            }
            _ = async {
                if let Some(run) = current.as_mut() {
                    let _ = (&mut run.task).await;
                }
            }, if current.is_some() => {
                current = None;
            }
        }
    }
    if let Some(run) = current.take() {
        run.cancel.cancel();
        let _ = run.task.await;
    }
    if let Err(e) = ctx.deps.log.flush().await {
        tracing::error!(error = %e, "flushing the session log at shutdown failed");
    }
}
