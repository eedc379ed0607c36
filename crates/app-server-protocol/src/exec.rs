//! The JSON lines of `codex exec --experimental-json`, which keel writes
//! for `keel exec --experimental-json`: data only.
//!
//! One [`ExecEvent`] per line on stdout, tagged by `type` (dotted names:
//! `thread.started`, `item.completed`, …); items are tagged by `type` in
//! snake_case, their fields in snake_case. The shapes are those
//! `@openai/codex-sdk` parses (its `ThreadEvent` and `ThreadItem` types):
//!
//! ```json
//! {"type":"thread.started","thread_id":"0199…"}
//! {"type":"turn.started"}
//! {"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"","status":"in_progress"}}
//! {"type":"item.completed","item":{"id":"item_0","type":"command_execution","command":"ls","aggregated_output":"a\n","exit_code":0,"status":"completed"}}
//! {"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Done."}}
//! {"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":3,"reasoning_output_tokens":0}}
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One line of the stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum ExecEvent {
    /// First: the thread (keel's session) the turn runs in; the id resumes it.
    #[serde(rename = "thread.started")]
    ThreadStarted { thread_id: String },
    #[serde(rename = "turn.started")]
    TurnStarted,
    #[serde(rename = "turn.completed")]
    TurnCompleted { usage: ExecUsage },
    #[serde(rename = "turn.failed")]
    TurnFailed { error: ExecError },
    #[serde(rename = "item.started")]
    ItemStarted { item: ExecItem },
    #[serde(rename = "item.updated")]
    ItemUpdated { item: ExecItem },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: ExecItem },
    /// An error on the way: a model call tried again (`Reconnecting...
    /// 1/3 (…)`), as Codex says it.
    #[serde(rename = "error")]
    Error { message: String },
}

/// The tokens of one turn, summed over its model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecUsage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExecError {
    pub message: String,
}

/// One item of a turn; `id` is `item_N`, counted from 0 in the process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ExecItem {
    /// The model's answer: text, or JSON when an output schema was given.
    AgentMessage {
        id: String,
        text: String,
    },
    /// The model's reasoning (its thinking text).
    Reasoning {
        id: String,
        text: String,
    },
    CommandExecution {
        id: String,
        command: String,
        /// Stdout and stderr as captured so far.
        aggregated_output: String,
        /// `null` until the command has exited.
        #[serde(default)]
        exit_code: Option<i32>,
        status: CommandStatus,
    },
    /// Emitted once the change succeeded or failed.
    FileChange {
        id: String,
        changes: Vec<FileChange>,
        status: PatchStatus,
    },
    McpToolCall {
        id: String,
        server: String,
        tool: String,
        arguments: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<McpResult>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<ExecError>,
        status: CommandStatus,
    },
    WebSearch {
        id: String,
        query: String,
    },
    TodoList {
        id: String,
        items: Vec<TodoItem>,
    },
    /// A warning the turn went on after.
    Error {
        id: String,
        message: String,
    },
}

/// Of a command or MCP call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandStatus {
    InProgress,
    Completed,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatchStatus {
    Completed,
    Failed,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    pub kind: ChangeKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Add,
    Delete,
    Update,
}

/// An MCP tool's answer: its `content` blocks and structured content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpResult {
    pub content: Vec<Value>,
    pub structured_content: Value,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    pub text: String,
    pub completed: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn events_and_items_have_codex_names() {
        let line = serde_json::to_value(ExecEvent::ItemStarted {
            item: ExecItem::CommandExecution {
                id: "item_0".into(),
                command: "ls".into(),
                aggregated_output: String::new(),
                exit_code: None,
                status: CommandStatus::InProgress,
            },
        })
        .unwrap();
        assert_eq!(
            line,
            json!({"type": "item.started", "item": {"id": "item_0", "type": "command_execution", "command": "ls", "aggregated_output": "", "exit_code": null, "status": "in_progress"}})
        );
        assert_eq!(
            serde_json::to_value(ExecEvent::TurnStarted).unwrap(),
            json!({"type": "turn.started"})
        );
        let back: ExecEvent =
            serde_json::from_value(json!({"type": "thread.started", "thread_id": "t"})).unwrap();
        assert_eq!(
            back,
            ExecEvent::ThreadStarted {
                thread_id: "t".into()
            }
        );
    }
}
