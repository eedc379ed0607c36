//! Thread items: what a turn is made of (`ThreadItem`, tagged by `type`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::v2::UserInput;

/// Status of a command execution or a file change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ItemStatus {
    InProgress,
    Completed,
    Failed,
    Declined,
}

/// Status of a dynamic tool call (no `declined`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ToolCallStatus {
    InProgress,
    Completed,
    Failed,
}

/// What an MCP tool returned (MCP's `content` blocks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpToolCallResult {
    pub content: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
}

/// Why an MCP tool call failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct McpToolCallError {
    pub message: String,
}

/// What a shell command does, as far as it is understood.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum CommandAction {
    Read {
        command: String,
        name: String,
        path: String,
    },
    ListFiles {
        command: String,
        path: Option<String>,
    },
    Search {
        command: String,
        path: Option<String>,
        query: Option<String>,
    },
    Unknown {
        command: String,
    },
}

/// The kind of one file change. `update` carries `move_path` (snake_case,
/// as in Codex).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum PatchChangeKind {
    Add,
    Delete,
    Update { move_path: Option<String> },
}

/// One file of a file change, with its unified diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileUpdateChange {
    pub path: String,
    pub kind: PatchChangeKind,
    pub diff: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ThreadItem {
    UserMessage {
        id: String,
        client_id: Option<String>,
        content: Vec<UserInput>,
    },
    AgentMessage {
        id: String,
        text: String,
        phase: Option<String>,
    },
    Reasoning {
        id: String,
        summary: Vec<String>,
        content: Vec<String>,
    },
    CommandExecution {
        id: String,
        command: String,
        cwd: String,
        process_id: Option<String>,
        source: String,
        status: ItemStatus,
        command_actions: Vec<CommandAction>,
        aggregated_output: Option<String>,
        exit_code: Option<i32>,
        duration_ms: Option<i64>,
    },
    FileChange {
        id: String,
        changes: Vec<FileUpdateChange>,
        status: ItemStatus,
    },
    DynamicToolCall {
        id: String,
        namespace: Option<String>,
        tool: String,
        arguments: Value,
        status: ToolCallStatus,
        content_items: Option<Vec<Value>>,
        success: Option<bool>,
        duration_ms: Option<i64>,
    },
    /// A call of an MCP server's tool (`mcp__<server>__<tool>` in keel).
    McpToolCall {
        id: String,
        server: String,
        tool: String,
        arguments: Value,
        status: ToolCallStatus,
        result: Option<McpToolCallResult>,
        error: Option<McpToolCallError>,
        duration_ms: Option<i64>,
    },
    Plan {
        id: String,
        text: String,
    },
    ContextCompaction {
        id: String,
    },
}

impl ThreadItem {
    /// The item's id.
    pub fn id(&self) -> &str {
        match self {
            ThreadItem::UserMessage { id, .. }
            | ThreadItem::AgentMessage { id, .. }
            | ThreadItem::Reasoning { id, .. }
            | ThreadItem::CommandExecution { id, .. }
            | ThreadItem::FileChange { id, .. }
            | ThreadItem::DynamicToolCall { id, .. }
            | ThreadItem::McpToolCall { id, .. }
            | ThreadItem::Plan { id, .. }
            | ThreadItem::ContextCompaction { id } => id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn command_execution_shape() {
        let item = ThreadItem::CommandExecution {
            id: "c1".into(),
            command: "ls".into(),
            cwd: "/w".into(),
            process_id: None,
            source: "agent".into(),
            status: ItemStatus::InProgress,
            command_actions: vec![CommandAction::Unknown {
                command: "ls".into(),
            }],
            aggregated_output: None,
            exit_code: None,
            duration_ms: None,
        };
        let v = serde_json::to_value(&item).unwrap();
        assert_eq!(v["type"], "commandExecution");
        assert_eq!(
            v["commandActions"][0],
            json!({"type": "unknown", "command": "ls"})
        );
        assert_eq!(v["processId"], Value::Null);
        let kind = serde_json::to_value(PatchChangeKind::Update { move_path: None }).unwrap();
        assert_eq!(kind, json!({"type": "update", "move_path": null}));
    }
}
