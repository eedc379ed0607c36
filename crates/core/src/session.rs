//! The session handle and the session task.
//!
//! [`Session::spawn`] starts one task per session. Ops go in through a bounded
//! channel; events come out through another. A `Prompt` starts a run (see
//! [`crate::run`]) in its own task so that steering, follow-ups and aborts are
//! handled while it streams.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use keel_llm::Provider;
use keel_protocol::{AgentEvent, InterruptMode, Message, Op, QueueMode, ThinkingLevel, UserInput};
use keel_tools::{FileSystem, ProcessRunner, Tool};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::config::{ModelInfo, SessionConfig};
use crate::deps::{ApprovalGate, Clock, SessionLog};
use crate::queue::Queues;
use crate::run::{RunCtx, run_agent};
use crate::{EVENT_CHANNEL_CAPACITY, Error, OP_CHANNEL_CAPACITY, Result};

/// Everything the loop reaches through a trait.
#[derive(Clone)]
pub struct SessionDeps {
    pub provider: Arc<dyn Provider>,
    pub tools: Vec<Arc<dyn Tool>>,
    pub fs: Arc<dyn FileSystem>,
    pub process: Arc<dyn ProcessRunner>,
    pub gate: Arc<dyn ApprovalGate>,
    pub clock: Arc<dyn Clock>,
    pub log: Arc<dyn SessionLog>,
}

/// State shared between the handle, the session task and a running run.
pub(crate) struct Shared {
    pub config: SessionConfig,
    pub messages: Vec<Message>,
    pub queues: Queues,
    pub running: bool,
}

pub(crate) type SharedState = Arc<Mutex<Shared>>;

/// Locks the shared state, recovering from a poisoned lock (a panicking
/// task must not take the whole session down).
pub(crate) fn lock(shared: &SharedState) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

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
}

/// A cloneable handle that submits ops and reads state.
#[derive(Clone)]
pub struct SessionHandle {
    ops: mpsc::Sender<Op>,
    shared: SharedState,
}

impl SessionHandle {
    /// Submits an op. A `Prompt` while a run is in progress fails with
    /// [`Error::Busy`]; everything else is queued for the session task.
    pub async fn submit(&self, op: Op) -> Result<()> {
        if let Op::Prompt(_) = op {
            let mut s = lock(&self.shared);
            if s.running {
                return Err(Error::Busy);
            }
            s.running = true;
        }
        let was_prompt = matches!(op, Op::Prompt(_));
        if self.ops.send(op).await.is_err() {
            if was_prompt {
                lock(&self.shared).running = false;
            }
            return Err(Error::Closed);
        }
        Ok(())
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
            message_count: s.messages.len(),
            queued_message_count: s.queues.len(),
            steering_mode: s.queues.steering_mode,
            follow_up_mode: s.queues.follow_up_mode,
            interrupt_mode: s.config.interrupt_mode,
        }
    }

    /// The conversation so far.
    pub fn messages(&self) -> Vec<Message> {
        lock(&self.shared).messages.clone()
    }

    /// Text of the last assistant message, if any.
    pub fn last_assistant_text(&self) -> Option<String> {
        lock(&self.shared)
            .messages
            .iter()
            .rev()
            .find_map(|m| match m {
                Message::Assistant(a) => Some(a.text()),
                _ => None,
            })
    }
}

/// A running session: a handle plus the event stream.
pub struct Session {
    handle: SessionHandle,
    events: mpsc::Receiver<AgentEvent>,
    task: JoinHandle<()>,
}

impl Session {
    /// Starts the session task. Must be called inside a tokio runtime.
    pub fn spawn(config: SessionConfig, deps: SessionDeps) -> Self {
        let (ops_tx, ops_rx) = mpsc::channel(OP_CHANNEL_CAPACITY);
        let (events_tx, events_rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
        let queues = Queues::new(config.steering_mode, config.follow_up_mode);
        let shared = Arc::new(Mutex::new(Shared {
            messages: config.initial_messages.clone(),
            config,
            queues,
            running: false,
        }));
        let ctx = RunCtx {
            shared: shared.clone(),
            deps: Arc::new(deps),
            events: events_tx,
        };
        let task = tokio::spawn(session_task(ops_rx, ctx));
        Self {
            handle: SessionHandle {
                ops: ops_tx,
                shared,
            },
            events: events_rx,
            task,
        }
    }

    pub fn handle(&self) -> SessionHandle {
        self.handle.clone()
    }

    pub async fn submit(&self, op: Op) -> Result<()> {
        self.handle.submit(op).await
    }

    /// The next event; `None` once the session task has stopped.
    pub async fn next_event(&mut self) -> Option<AgentEvent> {
        self.events.recv().await
    }

    pub fn snapshot(&self) -> SessionSnapshot {
        self.handle.snapshot()
    }

    pub fn messages(&self) -> Vec<Message> {
        self.handle.messages()
    }

    /// Splits into the handle and the raw event receiver (for a pump task).
    pub fn split(self) -> (SessionHandle, mpsc::Receiver<AgentEvent>, JoinHandle<()>) {
        (self.handle, self.events, self.task)
    }

    /// Aborts any run, flushes the log and waits for the task to stop.
    pub async fn shutdown(self) {
        let _ = self.handle.ops.send(Op::Shutdown).await;
        drop(self.events);
        let _ = self.task.await;
    }
}

struct CurrentRun {
    task: JoinHandle<()>,
    cancel: CancellationToken,
}

async fn session_task(mut ops: mpsc::Receiver<Op>, ctx: RunCtx) {
    let mut current: Option<CurrentRun> = None;
    loop {
        tokio::select! {
            op = ops.recv() => {
                let Some(op) = op else { break };
                match op {
                    Op::Prompt(input) => {
                        let cancel = CancellationToken::new();
                        let task = tokio::spawn(run_agent(ctx.clone(), input, cancel.clone()));
                        current = Some(CurrentRun { task, cancel });
                    }
                    Op::Steer(input) => enqueue(&ctx, input, true).await,
                    Op::FollowUp(input) => enqueue(&ctx, input, false).await,
                    Op::Abort => {
                        if let Some(run) = &current {
                            run.cancel.cancel();
                        }
                    }
                    Op::SetSteeringMode { mode } => lock(&ctx.shared).queues.steering_mode = mode,
                    Op::SetFollowUpMode { mode } => lock(&ctx.shared).queues.follow_up_mode = mode,
                    Op::SetInterruptMode { mode } => lock(&ctx.shared).config.interrupt_mode = mode,
                    Op::Shutdown => break,
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

async fn enqueue(ctx: &RunCtx, input: UserInput, steering: bool) {
    let (s, f) = {
        let mut shared = lock(&ctx.shared);
        if steering {
            shared.queues.steering.push_back(input);
        } else {
            shared.queues.follow_up.push_back(input);
        }
        shared.queues.snapshot()
    };
    ctx.emit(AgentEvent::QueueUpdate {
        steering: s,
        follow_up: f,
    })
    .await;
}
