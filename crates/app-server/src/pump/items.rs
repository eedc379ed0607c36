//! The pump's items: the agent message and reasoning streamed as deltas,
//! and each tool call from its start through its output to its end, turned
//! into `item/*` notifications. The turn's lifecycle (start, status, usage,
//! end) stays in the pump itself.

use keel_app_server_protocol::v2::{
    ItemDeltaNotification, McpToolCallProgressNotification, ReasoningSummaryPartAddedNotification,
    ReasoningSummaryTextDeltaNotification, ServerNotification, ThreadItem,
    TurnDiffUpdatedNotification,
};
use keel_protocol::{AssistantMessageEvent, Message, StopReason, ToolResult};

use super::{OpenText, OpenTool, Pump, now_ms};
use crate::errors::turn_error;
use crate::items::{Ending, completed_item, result_text, started_item, user_inputs};

impl Pump {
    pub(super) async fn message_start(&mut self, message: Message) {
        let Message::User(user) = message else {
            return;
        };
        {
            let mut s = self.thread.state();
            if s.preview.is_empty() {
                s.preview = crate::history::preview_of(&[Message::User(user.clone())]);
            }
        }
        let id = self.next_item_id("user");
        let item = ThreadItem::UserMessage {
            id,
            client_id: None,
            content: user_inputs(&user.content),
        };
        let t = now_ms();
        self.item_started(item.clone(), t).await;
        self.item_completed(item).await;
    }

    pub(super) async fn open_agent(&mut self) {
        if self.turn.as_ref().is_some_and(|t| t.agent.is_some()) {
            return;
        }
        let id = self.next_item_id("msg");
        let started_ms = now_ms();
        if let Some(t) = self.turn.as_mut() {
            t.agent = Some(OpenText {
                id: id.clone(),
                text: String::new(),
                started_ms,
            });
        }
        self.item_started(
            ThreadItem::AgentMessage {
                id,
                text: String::new(),
                phase: None,
            },
            started_ms,
        )
        .await;
    }

    pub(super) async fn close_agent(&mut self, full: Option<String>) {
        let Some(open) = self.turn.as_mut().and_then(|t| t.agent.take()) else {
            return;
        };
        let _ = open.started_ms;
        self.item_completed(ThreadItem::AgentMessage {
            id: open.id,
            text: full.unwrap_or(open.text),
            phase: None,
        })
        .await;
    }

    pub(super) async fn open_reasoning(&mut self) {
        if self.turn.as_ref().is_some_and(|t| t.reasoning.is_some()) {
            return;
        }
        let id = self.next_item_id("rs");
        let started_ms = now_ms();
        if let Some(t) = self.turn.as_mut() {
            t.reasoning = Some(OpenText {
                id: id.clone(),
                text: String::new(),
                started_ms,
            });
        }
        self.item_started(
            ThreadItem::Reasoning {
                id: id.clone(),
                summary: Vec::new(),
                content: Vec::new(),
            },
            started_ms,
        )
        .await;
        self.send(ServerNotification::ReasoningSummaryPartAdded(
            ReasoningSummaryPartAddedNotification {
                thread_id: self.thread.id.clone(),
                turn_id: self.turn_id(),
                item_id: id,
                summary_index: 0,
            },
        ))
        .await;
    }

    pub(super) async fn close_reasoning(&mut self, full: Option<String>) {
        let Some(open) = self.turn.as_mut().and_then(|t| t.reasoning.take()) else {
            return;
        };
        let text = full.unwrap_or(open.text);
        self.item_completed(ThreadItem::Reasoning {
            id: open.id,
            summary: if text.is_empty() {
                Vec::new()
            } else {
                vec![text]
            },
            content: Vec::new(),
        })
        .await;
    }

    pub(super) async fn message_update(&mut self, event: AssistantMessageEvent) {
        if self.turn.is_none() {
            return;
        }
        match event {
            AssistantMessageEvent::TextStart { .. } => {
                self.close_agent(None).await;
                self.open_agent().await;
            }
            AssistantMessageEvent::TextDelta { delta, .. } => {
                self.open_agent().await;
                let item_id = match self.turn.as_mut().and_then(|t| t.agent.as_mut()) {
                    Some(open) => {
                        open.text.push_str(&delta);
                        open.id.clone()
                    }
                    None => return,
                };
                self.send(ServerNotification::AgentMessageDelta(
                    ItemDeltaNotification {
                        thread_id: self.thread.id.clone(),
                        turn_id: self.turn_id(),
                        item_id,
                        delta,
                    },
                ))
                .await;
            }
            AssistantMessageEvent::TextEnd { content, .. } => {
                self.open_agent().await;
                self.close_agent(Some(content)).await;
            }
            AssistantMessageEvent::ThinkingStart { .. } => self.open_reasoning().await,
            AssistantMessageEvent::ThinkingDelta { delta, .. } => {
                self.open_reasoning().await;
                let item_id = match self.turn.as_mut().and_then(|t| t.reasoning.as_mut()) {
                    Some(open) => {
                        open.text.push_str(&delta);
                        open.id.clone()
                    }
                    None => return,
                };
                self.send(ServerNotification::ReasoningSummaryTextDelta(
                    ReasoningSummaryTextDeltaNotification {
                        thread_id: self.thread.id.clone(),
                        turn_id: self.turn_id(),
                        item_id,
                        delta,
                        summary_index: 0,
                    },
                ))
                .await;
            }
            AssistantMessageEvent::ThinkingEnd { content, .. } => {
                self.open_reasoning().await;
                self.close_reasoning(Some(content)).await;
            }
            AssistantMessageEvent::ToolCallStart { .. }
            | AssistantMessageEvent::ToolCallDelta { .. }
            | AssistantMessageEvent::ToolCallEnd { .. } => {}
        }
    }

    pub(super) async fn message_end(&mut self, message: Message) {
        let Message::Assistant(a) = message else {
            return;
        };
        self.close_reasoning(None).await;
        self.close_agent(None).await;
        match a.stop_reason {
            StopReason::Error => {
                let error = turn_error(
                    a.error_kind.as_deref(),
                    a.error_message
                        .as_deref()
                        .unwrap_or("the model call failed"),
                );
                if let Some(t) = self.turn.as_mut() {
                    t.error = Some(error);
                }
                return;
            }
            StopReason::Aborted => {
                if let Some(t) = self.turn.as_mut() {
                    t.aborted = true;
                }
                return;
            }
            StopReason::Stop | StopReason::Length | StopReason::ToolUse => {}
        }
        self.token_usage(&a.usage).await;
    }

    pub(super) async fn tool_start(
        &mut self,
        call_id: String,
        tool: String,
        args: serde_json::Value,
    ) {
        // Already announced while it waited for approval.
        if self
            .turn
            .as_ref()
            .is_none_or(|t| t.tools.contains_key(&call_id))
        {
            return;
        }
        if tool == crate::plan::PLAN_TOOL {
            let turn_id = self.turn_id();
            crate::plan::announce(self.runtime.as_ref(), &self.thread, turn_id, &args).await;
            return;
        }
        let cwd = self.thread.state().cwd.clone();
        let item = started_item(&call_id, &tool, &args, &cwd);
        let started_ms = now_ms();
        if let Some(t) = self.turn.as_mut() {
            t.tools.insert(
                call_id.clone(),
                OpenTool {
                    item: item.clone(),
                    started_ms,
                    last_output: String::new(),
                },
            );
        }
        self.item_started(item, started_ms).await;
    }

    pub(super) async fn tool_update(&mut self, call_id: String, partial: ToolResult) {
        let text = result_text(&partial);
        let mcp = self
            .turn
            .as_ref()
            .and_then(|t| t.tools.get(&call_id))
            .is_some_and(|open| matches!(open.item, ThreadItem::McpToolCall { .. }));
        if mcp {
            // An MCP server's progress: each message as it comes.
            self.send(ServerNotification::McpToolCallProgress(
                McpToolCallProgressNotification {
                    thread_id: self.thread.id.clone(),
                    turn_id: self.turn_id(),
                    item_id: call_id,
                    message: text,
                },
            ))
            .await;
            return;
        }
        let delta = {
            let Some(open) = self.turn.as_mut().and_then(|t| t.tools.get_mut(&call_id)) else {
                return;
            };
            if !matches!(open.item, ThreadItem::CommandExecution { .. }) {
                return;
            }
            let delta = match text.strip_prefix(open.last_output.as_str()) {
                Some(rest) => rest.to_owned(),
                None => text.clone(),
            };
            open.last_output = text;
            delta
        };
        if delta.is_empty() {
            return;
        }
        self.send(ServerNotification::CommandExecutionOutputDelta(
            ItemDeltaNotification {
                thread_id: self.thread.id.clone(),
                turn_id: self.turn_id(),
                item_id: call_id,
                delta,
            },
        ))
        .await;
    }

    pub(super) async fn tool_end(&mut self, call_id: String, result: ToolResult, is_error: bool) {
        let Some(open) = self.turn.as_mut().and_then(|t| t.tools.remove(&call_id)) else {
            return;
        };
        let declined = self.thread.state().declined.remove(&call_id);
        let ending = if declined {
            Ending::Declined
        } else {
            Ending::Ran { is_error }
        };
        let item = completed_item(open.item, Some(&result), ending, now_ms() - open.started_ms);
        let diff_changed = match (&item, ending) {
            (ThreadItem::FileChange { changes, .. }, Ending::Ran { is_error: false }) => {
                if let Some(t) = self.turn.as_mut() {
                    for c in changes {
                        t.diffs.insert(c.path.clone(), c.diff.clone());
                    }
                }
                true
            }
            _ => false,
        };
        self.item_completed(item).await;
        if diff_changed {
            let diff: String = self
                .turn
                .as_ref()
                .map(|t| t.diffs.values().cloned().collect())
                .unwrap_or_default();
            self.send(ServerNotification::TurnDiffUpdated(
                TurnDiffUpdatedNotification {
                    thread_id: self.thread.id.clone(),
                    turn_id: self.turn_id(),
                    diff,
                },
            ))
            .await;
        }
    }
}
