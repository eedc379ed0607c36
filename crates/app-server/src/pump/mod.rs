//! The per-thread event pump: reads the core session's events and sends
//! the protocol's thread, turn and item notifications to the thread's
//! subscribers.
//!
//! One keel run (`agent_start` … `agent_end`) is one turn. Assistant text
//! becomes an `agentMessage` item (streamed with `item/agentMessage/delta`),
//! thinking a `reasoning` item (summary deltas), each tool call an item
//! from [`crate::items`]. Items still open when the turn ends abnormally
//! are closed. The match over [`AgentEvent`] is exhaustive on purpose: a
//! new core event must be translated (or consciously ignored) here.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use keel_app_server_protocol::RequestId;
use keel_app_server_protocol::v2::{
    ErrorNotification, ItemCompletedNotification, ItemStartedNotification, ServerNotification,
    ServerRequestResolvedNotification, ThreadItem, ThreadNameUpdatedNotification, ThreadStatus,
    ThreadStatusChangedNotification, ThreadTokenUsage, ThreadTokenUsageUpdatedNotification,
    TokenUsageBreakdown, Turn, TurnError, TurnItemsView, TurnNotification, TurnStatus,
};
use keel_protocol::{AgentEvent, Usage};
use tokio::sync::mpsc;

use crate::errors::turn_error;
use crate::history::{error_if_failed, summarize};
use crate::items::{Ending, completed_item};
use crate::notify::Notifier;
use crate::runtime::Runtime;
use crate::thread_state::{ActiveTurn, LoadedThread, TURN_READY_WAIT};

mod items;

pub use crate::thread_state::Control;

/// Room for control messages.
pub const CONTROL_CAPACITY: usize = 16;

/// Runs until the session's event stream ends. Core's events come first:
/// a control message is handled once every event emitted before it is.
pub async fn run(
    runtime: Arc<Runtime>,
    thread: Arc<LoadedThread>,
    mut events: mpsc::Receiver<keel_core::SessionEvent>,
    mut control: mpsc::Receiver<Control>,
) {
    let mut pump = Pump {
        runtime,
        thread,
        turn: None,
        usage_total: TokenUsageBreakdown::default(),
        compaction_turn: false,
        compaction_item: None,
    };
    loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                // Codex's notifications have no place for a log position.
                Some(event) => pump.on_event(event.event, event.log_seq).await,
                None => break,
            },
            Some(c) = control.recv() => pump.on_control(c).await,
        }
    }
    if pump.turn.is_some() {
        pump.end_turn().await;
    }
    pump.answer_interrupts().await;
}

/// An item that streams text (an agent message or reasoning).
struct OpenText {
    id: String,
    text: String,
    started_ms: i64,
}

struct OpenTool {
    item: ThreadItem,
    started_ms: i64,
    last_output: String,
}

struct TurnCtx {
    id: String,
    started_at_ms: i64,
    agent: Option<OpenText>,
    reasoning: Option<OpenText>,
    tools: HashMap<String, OpenTool>,
    items: Vec<ThreadItem>,
    error: Option<TurnError>,
    aborted: bool,
    diffs: BTreeMap<String, String>,
    next_item: u32,
}

struct Pump {
    runtime: Arc<Runtime>,
    thread: Arc<LoadedThread>,
    turn: Option<TurnCtx>,
    usage_total: TokenUsageBreakdown,
    /// The current turn was opened for a compaction (not a run).
    compaction_turn: bool,
    /// The `contextCompaction` item in progress.
    compaction_item: Option<String>,
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl Pump {
    async fn send(&self, n: ServerNotification) {
        self.runtime.notify_thread(&self.thread.id, &n).await;
    }

    async fn send_status_if_changed(&self) {
        if let Some(status) = self.thread.refresh_status() {
            self.send(ServerNotification::ThreadStatusChanged(
                ThreadStatusChangedNotification {
                    thread_id: self.thread.id.clone(),
                    status,
                },
            ))
            .await;
        }
    }

    fn turn_id(&self) -> String {
        self.turn.as_ref().map(|t| t.id.clone()).unwrap_or_default()
    }

    fn next_item_id(&mut self, prefix: &str) -> String {
        let thread = self.thread.id.clone();
        match self.turn.as_mut() {
            Some(t) => {
                t.next_item += 1;
                format!("{prefix}_{}_{}", short(&t.id), t.next_item)
            }
            None => format!("{prefix}_{}", short(&thread)),
        }
    }

    async fn item_started(&self, item: ThreadItem, started_ms: i64) {
        self.send(ServerNotification::ItemStarted(ItemStartedNotification {
            thread_id: self.thread.id.clone(),
            turn_id: self.turn_id(),
            item,
            started_at_ms: started_ms,
        }))
        .await;
    }

    async fn item_completed(&mut self, item: ThreadItem) {
        if let Some(t) = self.turn.as_mut() {
            t.items.push(item.clone());
        }
        self.send(ServerNotification::ItemCompleted(
            ItemCompletedNotification {
                thread_id: self.thread.id.clone(),
                turn_id: self.turn_id(),
                item,
                completed_at_ms: now_ms(),
            },
        ))
        .await;
    }

    async fn on_event(&mut self, event: AgentEvent, log_seq: Option<u64>) {
        match event {
            AgentEvent::AgentStart => self.start_turn(log_seq).await,
            AgentEvent::AgentEnd { messages: _ } => self.end_turn().await,
            AgentEvent::TurnStart | AgentEvent::TurnEnd { .. } | AgentEvent::AgentSettled => {}
            AgentEvent::AutoRetryStart {
                error_message,
                error_kind,
                ..
            } => self.retry_start(error_kind, error_message).await,
            AgentEvent::AutoRetryEnd { .. } => {}
            AgentEvent::MessageStart { message } => self.message_start(message).await,
            AgentEvent::MessageUpdate {
                assistant_message_event,
            } => self.message_update(assistant_message_event).await,
            AgentEvent::MessageEnd { message } => self.message_end(message).await,
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => self.tool_start(tool_call_id, tool_name, args).await,
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => self.tool_update(tool_call_id, partial_result).await,
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                result,
                is_error,
                ..
            } => self.tool_end(tool_call_id, result, is_error).await,
            AgentEvent::SessionInfoChanged { name } => {
                self.thread.state().name = name.clone();
                self.send(ServerNotification::ThreadNameUpdated(
                    ThreadNameUpdatedNotification {
                        thread_id: self.thread.id.clone(),
                        thread_name: name,
                    },
                ))
                .await;
            }
            AgentEvent::QueueUpdate { .. }
            | AgentEvent::ThinkingLevelChanged { .. }
            | AgentEvent::ModelChanged { .. } => {}
            AgentEvent::AutoCompactionStart { .. } => self.compaction_start().await,
            AgentEvent::AutoCompactionEnd {
                result,
                error_message,
                ..
            } => self.compaction_end(result.is_some(), error_message).await,
            // Codex has no reminder notification, and app-server sessions
            // keep the todo policy off, so a reminder is not expected here;
            // were one sent, the plan it is about is unchanged: nothing to say.
            AgentEvent::TodoReminder { .. } => {}
            // The plan was emptied: the nearest Codex notification is an
            // empty `turn/plan/updated`.
            AgentEvent::TodoAutoClear => {
                let cleared = keel_app_server_protocol::v2::TurnPlanUpdatedNotification {
                    thread_id: self.thread.id.clone(),
                    turn_id: self.turn_id(),
                    explanation: None,
                    plan: Vec::new(),
                };
                self.send(ServerNotification::TurnPlanUpdated(cleared))
                    .await;
            }
        }
    }

    /// A compaction began: a `contextCompaction` item, inside the running
    /// turn or (asked for with `thread/compact/start`) in a turn of its own.
    async fn compaction_start(&mut self) {
        if self.turn.is_none() {
            self.start_turn(None).await;
            self.compaction_turn = true;
        }
        let id = self.next_item_id("compact");
        self.compaction_item = Some(id.clone());
        self.item_started(ThreadItem::ContextCompaction { id }, now_ms())
            .await;
    }

    async fn compaction_end(&mut self, ok: bool, error: Option<String>) {
        if let Some(id) = self.compaction_item.take() {
            self.item_completed(ThreadItem::ContextCompaction { id })
                .await;
        }
        let own_turn = std::mem::take(&mut self.compaction_turn);
        if !ok
            && own_turn
            && let (Some(message), Some(t)) = (error, self.turn.as_mut())
        {
            t.error = Some(turn_error(None, &message));
        }
        if own_turn {
            self.end_turn().await;
        }
    }

    /// A model call failed and is retried: the items of the failed attempt
    /// that are still open are abandoned (never completed, not part of the
    /// turn), and `error` with `willRetry: true` tells the client, as Codex
    /// does for a stream it retries.
    async fn retry_start(&mut self, kind: Option<String>, message: String) {
        let Some(turn) = self.turn.as_mut() else {
            return;
        };
        turn.agent = None;
        turn.reasoning = None;
        let turn_id = turn.id.clone();
        self.send(ServerNotification::Error(ErrorNotification {
            error: turn_error(kind.as_deref(), &message),
            will_retry: true,
            thread_id: self.thread.id.clone(),
            turn_id,
        }))
        .await;
    }

    async fn start_turn(&mut self, log_seq: Option<u64>) {
        let next_id = if self.thread.active_turn_id().is_none() {
            Some(self.runtime.unnamed_turn_id(&self.thread, log_seq).await)
        } else {
            None
        };
        let ready = {
            let mut s = self.thread.state();
            if s.active.is_none()
                && let Some(id) = next_id
            {
                s.active = Some(ActiveTurn::new(id, None));
            }
            s.active.as_mut().and_then(|t| t.ready.take())
        };
        if let Some(ready) = ready {
            let _ = tokio::time::timeout(TURN_READY_WAIT, ready).await;
        }
        let (id, started_at_ms) = {
            let s = self.thread.state();
            s.active
                .as_ref()
                .map(|t| (t.id.clone(), t.started_at_ms))
                .unwrap_or_default()
        };
        self.turn = Some(TurnCtx {
            id: id.clone(),
            started_at_ms,
            agent: None,
            reasoning: None,
            tools: HashMap::new(),
            items: Vec::new(),
            error: None,
            aborted: false,
            diffs: BTreeMap::new(),
            next_item: 0,
        });
        self.send_status_if_changed().await;
        self.send(ServerNotification::TurnStarted(TurnNotification {
            thread_id: self.thread.id.clone(),
            turn: Turn {
                id: id.clone(),
                root_turn_id: Some(id),
                items: Vec::new(),
                items_view: TurnItemsView::NotLoaded,
                status: TurnStatus::InProgress,
                error: None,
                started_at: Some(started_at_ms / 1000),
                completed_at: None,
                duration_ms: None,
            },
        }))
        .await;
    }

    async fn token_usage(&mut self, usage: &Usage) {
        let last = TokenUsageBreakdown {
            total_tokens: usage.total_tokens,
            input_tokens: usage.input + usage.cache_read,
            cached_input_tokens: usage.cache_read,
            cache_write_input_tokens: usage.cache_write,
            output_tokens: usage.output,
            reasoning_output_tokens: 0,
        };
        let t = &mut self.usage_total;
        t.total_tokens += last.total_tokens;
        t.input_tokens += last.input_tokens;
        t.cached_input_tokens += last.cached_input_tokens;
        t.cache_write_input_tokens += last.cache_write_input_tokens;
        t.output_tokens += last.output_tokens;
        let window = self.thread.state().model.context_window;
        self.send(ServerNotification::ThreadTokenUsageUpdated(
            ThreadTokenUsageUpdatedNotification {
                thread_id: self.thread.id.clone(),
                turn_id: self.turn_id(),
                token_usage: ThreadTokenUsage {
                    total: self.usage_total,
                    last,
                    model_context_window: (window > 0).then_some(window),
                },
            },
        ))
        .await;
    }

    async fn on_control(&mut self, control: Control) {
        match control {
            Control::AnnounceHeld {
                call_id,
                tool,
                args,
                done,
            } => {
                // Codex's order: a command's item after the status, a file
                // change's before it.
                let file = matches!(tool.as_str(), "write" | "edit");
                if !file {
                    self.send_status_if_changed().await;
                }
                self.tool_start(call_id, tool, args).await;
                if file {
                    self.send_status_if_changed().await;
                }
                let _ = done.send(());
            }
        }
    }

    /// Answers `turn/interrupt` before the turn's end is announced.
    async fn answer_interrupts(&self) {
        let requests = self.thread.take_interrupt_requests();
        self.runtime.answer_interrupts(requests).await;
    }

    /// Answers `turn/interrupt`, closes open items, settles the status and
    /// announces the end.
    async fn end_turn(&mut self) {
        self.answer_interrupts().await;
        self.close_reasoning(None).await;
        self.close_agent(None).await;
        let open: Vec<(String, OpenTool)> = self
            .turn
            .as_mut()
            .map(|t| t.tools.drain().collect())
            .unwrap_or_default();
        for (_, tool) in open {
            let item = completed_item(tool.item, None, Ending::Cut, now_ms() - tool.started_ms);
            self.item_completed(item).await;
        }
        let Some(turn) = self.turn.take() else {
            return;
        };
        let (interrupted, late_interrupts) = {
            let mut s = self.thread.state();
            let active = s.active.take();
            s.declined.clear();
            s.updated_at = chrono::Utc::now().timestamp();
            active.map_or((false, Vec::new()), |t| {
                (t.interrupted, t.interrupt_requests)
            })
        };
        self.runtime.answer_interrupts(late_interrupts).await;
        for id in self.runtime.broker.withdraw_live(&self.thread.id) {
            self.send(ServerNotification::ServerRequestResolved(
                ServerRequestResolvedNotification {
                    thread_id: self.thread.id.clone(),
                    request_id: RequestId::Integer(id),
                },
            ))
            .await;
        }
        let status = if interrupted || turn.aborted {
            TurnStatus::Interrupted
        } else if turn.error.is_some() {
            TurnStatus::Failed
        } else {
            TurnStatus::Completed
        };
        let completed_ms = now_ms();
        let full = Turn {
            id: turn.id.clone(),
            root_turn_id: Some(turn.id.clone()),
            items: turn.items,
            items_view: TurnItemsView::Full,
            status,
            error: error_if_failed(status, turn.error.clone()),
            started_at: Some(turn.started_at_ms / 1000),
            completed_at: Some(completed_ms / 1000),
            duration_ms: Some(completed_ms - turn.started_at_ms),
        };
        let announced = match status {
            TurnStatus::Completed => summarize(full.clone()),
            TurnStatus::Failed | TurnStatus::Interrupted | TurnStatus::InProgress => Turn {
                items: Vec::new(),
                items_view: TurnItemsView::NotLoaded,
                ..full.clone()
            },
        };
        {
            let mut s = self.thread.state();
            s.turns.push(full);
            s.status = if status == TurnStatus::Failed {
                ThreadStatus::SystemError
            } else {
                ThreadStatus::Idle
            };
        }
        self.send(ServerNotification::ThreadStatusChanged(
            ThreadStatusChangedNotification {
                thread_id: self.thread.id.clone(),
                status: self.thread.status(),
            },
        ))
        .await;
        if let (TurnStatus::Failed, Some(error)) = (status, turn.error) {
            self.send(ServerNotification::Error(ErrorNotification {
                error,
                will_retry: false,
                thread_id: self.thread.id.clone(),
                turn_id: turn.id.clone(),
            }))
            .await;
        }
        self.send(ServerNotification::TurnCompleted(TurnNotification {
            thread_id: self.thread.id.clone(),
            turn: announced,
        }))
        .await;
    }
}

/// The first 8 characters of an id without dashes.
fn short(id: &str) -> String {
    id.chars().filter(|c| *c != '-').rev().take(8).collect()
}
