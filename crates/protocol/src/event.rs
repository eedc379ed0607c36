//! Events a session emits, in the order a host sees them.
//!
//! Each prompt produces exactly one `agent_start` … `agent_end` run; inside it,
//! each model call is a `turn_start` … `turn_end`; messages are announced with
//! `message_start`, streamed with `message_update` (deltas only, never the
//! whole message again) and closed with `message_end`; tool runs with
//! `tool_execution_start/update/end`. A model call retried after a
//! transient failure shows as `auto_retry_start` (the assistant message in
//! progress is dropped; the next attempt starts a new one) and, once the
//! retries are over, one `auto_retry_end` before the final `message_end`.
//! Compacting the conversation shows as `auto_compaction_start` …
//! `auto_compaction_end` (inside a run when automatic, outside any run when
//! asked for).
//! When the agent is about to stop while the session's todo list still has
//! unfinished tasks (and the session reminds), `todo_reminder` announces one
//! more turn that asks the model to finish them; when it stops with every
//! task done, `todo_auto_clear` says the list was emptied. Both come before
//! the run's `agent_end`.
//!
//! Wire shape: `{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"Hel"}}`.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    CompactionReason, CompactionResult, ContentBlock, Message, ThinkingLevel, TodoTask, ToolResult,
};

/// A streaming change to the assistant message being produced.
/// `contentIndex` is the index of the block in the assistant message's `content`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AssistantMessageEvent {
    TextStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    TextDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    TextEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        content: String,
    },
    ThinkingStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
    },
    ThinkingDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    ThinkingEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        content: String,
    },
    #[serde(rename = "toolcall_start")]
    ToolCallStart {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        id: String,
        name: String,
    },
    #[serde(rename = "toolcall_delta")]
    ToolCallDelta {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        delta: String,
    },
    #[serde(rename = "toolcall_end")]
    ToolCallEnd {
        #[serde(rename = "contentIndex")]
        content_index: usize,
        #[serde(rename = "toolCall")]
        tool_call: ContentBlock,
    },
}

/// Queue mode for steering and follow-up messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum QueueMode {
    /// Deliver every queued message at once.
    #[serde(rename = "all")]
    All,
    /// Deliver one queued message per delivery point.
    #[default]
    #[serde(rename = "one-at-a-time")]
    OneAtATime,
}

/// What a steering message does to the tool calls still waiting in a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InterruptMode {
    /// Pending steering skips the remaining tool calls of the turn.
    #[default]
    Immediate,
    /// Steering waits for the turn's tool calls to finish.
    Wait,
}

/// An event emitted by a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentEvent {
    AgentStart,
    /// End of a run. `messages` are the messages the run added.
    AgentEnd {
        messages: Vec<Message>,
    },
    /// After the last `agent_end` of a prompt: nothing queued will start
    /// another run, the session is idle until the host sends more.
    AgentSettled,
    TurnStart,
    TurnEnd {
        message: Message,
        #[serde(rename = "toolResults")]
        tool_results: Vec<Message>,
    },
    MessageStart {
        message: Message,
    },
    MessageUpdate {
        #[serde(rename = "assistantMessageEvent")]
        assistant_message_event: AssistantMessageEvent,
    },
    MessageEnd {
        message: Message,
    },
    ToolExecutionStart {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
        args: Value,
    },
    ToolExecutionUpdate {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
        args: Value,
        #[serde(rename = "partialResult")]
        partial_result: ToolResult,
    },
    ToolExecutionEnd {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
        result: ToolResult,
        #[serde(rename = "isError")]
        is_error: bool,
    },
    /// The steering and follow-up queues changed.
    QueueUpdate {
        steering: Vec<String>,
        #[serde(rename = "followUp")]
        follow_up: Vec<String>,
    },
    /// The session was named (`None`: the name was cleared).
    SessionInfoChanged {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// The reasoning effort changed.
    ThinkingLevelChanged {
        level: ThinkingLevel,
    },
    /// The model used for the next calls changed.
    ModelChanged {
        provider: String,
        #[serde(rename = "modelId")]
        model_id: String,
    },
    /// A model call failed with a transient error (rate limit, overload,
    /// 5xx, connection reset, idle timeout, cut stream) and is tried again
    /// after `delayMs`. The assistant message in progress (announced by the
    /// last `message_start`, never ended) is discarded: it is not in the
    /// history, and the retry starts a new one with `message_start`.
    /// `attempt` counts the retries from 1; `maxAttempts` is the most that
    /// will be made.
    AutoRetryStart {
        attempt: u32,
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
        #[serde(rename = "delayMs")]
        delay_ms: u64,
        #[serde(rename = "errorMessage")]
        error_message: String,
        /// The error's kind (`rateLimitExceeded`, `serverOverloaded`, …).
        #[serde(rename = "errorKind", default, skip_serializing_if = "Option::is_none")]
        error_kind: Option<String>,
    },
    /// The retries that began with the first `auto_retry_start` are over:
    /// the last attempt succeeded, or failed for good (`finalError`), or the
    /// wait was cancelled. Exactly one follows a series of starts.
    AutoRetryEnd {
        success: bool,
        attempt: u32,
        #[serde(
            rename = "finalError",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        final_error: Option<String>,
    },
    /// The conversation is being summarised to make room (see
    /// [`CompactionReason`]). Inside a run for `threshold` and `overflow`.
    AutoCompactionStart {
        reason: CompactionReason,
    },
    /// The compaction that began with `auto_compaction_start` is over:
    /// `result` when it succeeded; `aborted` when it was cancelled;
    /// `errorMessage` when it failed (the session is as it was). `willRetry`:
    /// the model call that overflowed is made again now.
    AutoCompactionEnd {
        reason: CompactionReason,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<CompactionResult>,
        aborted: bool,
        #[serde(rename = "willRetry")]
        will_retry: bool,
        #[serde(
            rename = "errorMessage",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        error_message: Option<String>,
    },
    /// The agent was about to stop with unfinished todos (`todos`: the
    /// pending and in-progress tasks, in list order). A reminder goes to the
    /// model as a user message and the run continues with another turn.
    /// `attempt` counts the reminders of this run from 1; no more than
    /// `maxAttempts` are sent, after which the run stops as usual.
    TodoReminder {
        todos: Vec<TodoTask>,
        attempt: u32,
        #[serde(rename = "maxAttempts")]
        max_attempts: u32,
    },
    /// The agent stopped with every task of the todo list completed or
    /// cancelled: the list was emptied (`get_state.todoPhases` is `[]`).
    TodoAutoClear,
}

impl AgentEvent {
    /// The `type` tag of this event on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            AgentEvent::AgentStart => "agent_start",
            AgentEvent::AgentEnd { .. } => "agent_end",
            AgentEvent::AgentSettled => "agent_settled",
            AgentEvent::TurnStart => "turn_start",
            AgentEvent::TurnEnd { .. } => "turn_end",
            AgentEvent::MessageStart { .. } => "message_start",
            AgentEvent::MessageUpdate { .. } => "message_update",
            AgentEvent::MessageEnd { .. } => "message_end",
            AgentEvent::ToolExecutionStart { .. } => "tool_execution_start",
            AgentEvent::ToolExecutionUpdate { .. } => "tool_execution_update",
            AgentEvent::ToolExecutionEnd { .. } => "tool_execution_end",
            AgentEvent::QueueUpdate { .. } => "queue_update",
            AgentEvent::SessionInfoChanged { .. } => "session_info_changed",
            AgentEvent::ThinkingLevelChanged { .. } => "thinking_level_changed",
            AgentEvent::ModelChanged { .. } => "model_changed",
            AgentEvent::AutoRetryStart { .. } => "auto_retry_start",
            AgentEvent::AutoRetryEnd { .. } => "auto_retry_end",
            AgentEvent::AutoCompactionStart { .. } => "auto_compaction_start",
            AgentEvent::AutoCompactionEnd { .. } => "auto_compaction_end",
            AgentEvent::TodoReminder { .. } => "todo_reminder",
            AgentEvent::TodoAutoClear => "todo_auto_clear",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn delta_event_is_small_and_tagged() {
        let ev = AgentEvent::MessageUpdate {
            assistant_message_event: AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: "Hel".into(),
            },
        };
        let v = serde_json::to_value(&ev).unwrap();
        assert_eq!(
            v,
            json!({"type":"message_update","assistantMessageEvent":
                {"type":"text_delta","contentIndex":0,"delta":"Hel"}})
        );
        assert_eq!(ev.type_name(), v["type"]);
    }

    #[test]
    fn toolcall_tags_match_pi() {
        let ev = AssistantMessageEvent::ToolCallStart {
            content_index: 1,
            id: "c".into(),
            name: "bash".into(),
        };
        assert_eq!(serde_json::to_value(&ev).unwrap()["type"], "toolcall_start");
        let m: QueueMode = serde_json::from_str("\"one-at-a-time\"").unwrap();
        assert_eq!(m, QueueMode::OneAtATime);
    }

    #[test]
    fn retry_events_use_pi_field_names() {
        let start = AgentEvent::AutoRetryStart {
            attempt: 1,
            max_attempts: 3,
            delay_ms: 1000,
            error_message: "HTTP 429".into(),
            error_kind: Some("rateLimitExceeded".into()),
        };
        assert_eq!(
            serde_json::to_value(&start).unwrap(),
            json!({"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":1000,
                   "errorMessage":"HTTP 429","errorKind":"rateLimitExceeded"})
        );
        let end = AgentEvent::AutoRetryEnd {
            success: true,
            attempt: 1,
            final_error: None,
        };
        assert_eq!(
            serde_json::to_value(&end).unwrap(),
            json!({"type":"auto_retry_end","success":true,"attempt":1})
        );
        assert_eq!(end.type_name(), "auto_retry_end");
    }

    #[test]
    fn todo_events_use_the_spec_shapes() {
        let reminder = AgentEvent::TodoReminder {
            todos: vec![TodoTask {
                id: Some("task-1".into()),
                content: "Map the tool surface".into(),
                status: crate::TodoStatus::InProgress,
            }],
            attempt: 1,
            max_attempts: 3,
        };
        let v = serde_json::to_value(&reminder).unwrap();
        assert_eq!(
            v,
            json!({"type":"todo_reminder","todos":[{"id":"task-1",
                   "content":"Map the tool surface","status":"in_progress"}],
                   "attempt":1,"maxAttempts":3})
        );
        assert_eq!(reminder.type_name(), v["type"]);
        let clear = serde_json::to_value(AgentEvent::TodoAutoClear).unwrap();
        assert_eq!(clear, json!({"type":"todo_auto_clear"}));
        assert_eq!(AgentEvent::TodoAutoClear.type_name(), clear["type"]);
        let back: AgentEvent = serde_json::from_value(v).unwrap();
        assert_eq!(back, reminder);
    }
}
