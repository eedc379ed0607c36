//! keel's events as Codex `exec` JSON lines: one run is one Codex turn.
//!
//! `agent_start` → `turn.started`; an assistant message → its reasoning
//! and its text as completed `reasoning` / `agent_message` items; a tool
//! call → `item.started`, `item.updated` (a command's output so far) and
//! `item.completed`, shaped as the app-server shapes it (`bash` →
//! `command_execution`, `write`/`edit` → `file_change`, announced once
//! done as Codex does, `mcp__server__tool` → `mcp_tool_call`, any other
//! keel tool → `mcp_tool_call` of server `keel`); a retried model call →
//! an `error` line (`Reconnecting... 1/3 (…)`, as Codex); `agent_end` → `turn.completed` with the run's tokens,
//! or `turn.failed` with the reason. [`CodexStream::event`] only
//! translates; [`CodexStream::write`] writes the lines on stdout.

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;

use keel_app_server::items::{Ending, completed_item, result_text, started_item};
use keel_app_server::protocol::exec::{
    ChangeKind, CommandStatus, ExecError, ExecEvent, ExecItem, ExecUsage, FileChange, McpResult,
    PatchStatus,
};
use keel_app_server::protocol::v2::{ItemStatus, PatchChangeKind, ThreadItem, ToolCallStatus};
use keel_protocol::{AgentEvent, ContentBlock, Message, StopReason};
use serde_json::json;

/// The server name keel's own tools (other than `bash`, `write`, `edit`)
/// are shown under, as MCP tool calls.
pub const KEEL_TOOLS_SERVER: &str = "keel";

/// The translation state of one process's turns.
pub struct CodexStream {
    cwd: PathBuf,
    next_item: u64,
    /// Calls started and not ended: their item id and started item.
    calls: HashMap<String, (String, ThreadItem)>,
    /// A command's output as it came (the last `tool_execution_update`):
    /// the result the model reads is trimmed and annotated.
    output: HashMap<String, String>,
    usage: ExecUsage,
}

impl CodexStream {
    pub fn new(cwd: PathBuf) -> Self {
        Self {
            cwd,
            next_item: 0,
            calls: HashMap::new(),
            output: HashMap::new(),
            usage: ExecUsage::default(),
        }
    }

    /// Writes the first line, `thread.started`, with the session's id.
    pub fn thread_started(&mut self, session_id: &str) {
        write_lines(&[ExecEvent::ThreadStarted {
            thread_id: session_id.to_owned(),
        }]);
    }

    /// Writes the lines of `event` on stdout.
    pub fn write(&mut self, event: &AgentEvent) {
        write_lines(&self.event(event));
    }

    fn item_id(&mut self) -> String {
        let id = format!("item_{}", self.next_item);
        self.next_item += 1;
        id
    }

    /// The lines `event` becomes (often none).
    pub fn event(&mut self, event: &AgentEvent) -> Vec<ExecEvent> {
        match event {
            AgentEvent::AgentStart => {
                self.usage = ExecUsage::default();
                vec![ExecEvent::TurnStarted]
            }
            AgentEvent::MessageEnd {
                message: Message::Assistant(a),
            } => {
                self.usage.input_tokens += a.usage.input;
                self.usage.cached_input_tokens += a.usage.cache_read;
                self.usage.cache_write_input_tokens += a.usage.cache_write;
                self.usage.output_tokens += a.usage.output;
                if matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) {
                    return Vec::new();
                }
                let mut out = Vec::new();
                let (mut thinking, mut text) = (Vec::new(), Vec::new());
                for block in &a.content {
                    match block {
                        ContentBlock::Thinking { thinking: t, .. } if !t.trim().is_empty() => {
                            thinking.push(t.as_str())
                        }
                        ContentBlock::Text { text: t } if !t.is_empty() => text.push(t.as_str()),
                        ContentBlock::Thinking { .. }
                        | ContentBlock::Text { .. }
                        | ContentBlock::Image { .. }
                        | ContentBlock::ToolCall { .. } => {}
                    }
                }
                if !thinking.is_empty() {
                    let id = self.item_id();
                    out.push(ExecEvent::ItemCompleted {
                        item: ExecItem::Reasoning {
                            id,
                            text: thinking.join("\n\n"),
                        },
                    });
                }
                if !text.is_empty() {
                    let id = self.item_id();
                    out.push(ExecEvent::ItemCompleted {
                        item: ExecItem::AgentMessage {
                            id,
                            text: text.concat(),
                        },
                    });
                }
                out
            }
            AgentEvent::ToolExecutionStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                let id = self.item_id();
                let started = started_item(&id, tool_name, args, &self.cwd);
                let shown = exec_item(&started, tool_name, None);
                self.calls
                    .insert(tool_call_id.clone(), (id, started.clone()));
                match started {
                    // Codex announces a file change once it is made.
                    ThreadItem::FileChange { .. } => Vec::new(),
                    _ => shown
                        .map(|item| vec![ExecEvent::ItemStarted { item }])
                        .unwrap_or_default(),
                }
            }
            AgentEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result,
                ..
            } => {
                // A command's output so far; other calls show their end only.
                let Some((id, ThreadItem::CommandExecution { command, .. })) =
                    self.calls.get(tool_call_id)
                else {
                    return Vec::new();
                };
                let so_far = result_text(partial_result);
                self.output.insert(tool_call_id.clone(), so_far.clone());
                vec![ExecEvent::ItemUpdated {
                    item: ExecItem::CommandExecution {
                        id: id.clone(),
                        command: command.clone(),
                        aggregated_output: so_far,
                        exit_code: None,
                        status: CommandStatus::InProgress,
                    },
                }]
            }
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                tool_name,
                result,
                is_error,
            } => {
                let (_, started) = match self.calls.remove(tool_call_id) {
                    Some(call) => call,
                    None => {
                        let id = self.item_id();
                        let started = started_item(&id, tool_name, &json!({}), &self.cwd);
                        (id, started)
                    }
                };
                let done = completed_item(
                    started,
                    Some(result),
                    Ending::Ran {
                        is_error: *is_error,
                    },
                    0,
                );
                let mut item = exec_item(&done, tool_name, Some(result));
                let as_it_came = self.output.remove(tool_call_id);
                // Output that was not cut is shown as it came, as Codex does
                // (the model's copy drops the last newline, says `(no
                // output)` and notes the exit code).
                let whole = result
                    .details
                    .as_ref()
                    .is_some_and(|d| d["truncated"] == false);
                if let Some(ExecItem::CommandExecution {
                    aggregated_output, ..
                }) = item.as_mut()
                    && whole
                {
                    *aggregated_output = as_it_came.unwrap_or_default();
                }
                item.map(|item| vec![ExecEvent::ItemCompleted { item }])
                    .unwrap_or_default()
            }
            AgentEvent::AutoRetryStart {
                attempt,
                max_attempts,
                error_message,
                ..
            } => {
                vec![ExecEvent::Error {
                    message: format!("Reconnecting... {attempt}/{max_attempts} ({error_message})"),
                }]
            }
            AgentEvent::AgentEnd { messages } => {
                let last = messages.iter().rev().find_map(|m| match m {
                    Message::Assistant(a) => Some(a),
                    _ => None,
                });
                let failed = match last {
                    Some(a) if a.stop_reason == StopReason::Error => Some(
                        a.error_message
                            .clone()
                            .unwrap_or_else(|| "the model call failed".to_owned()),
                    ),
                    Some(a) if a.stop_reason == StopReason::Aborted => {
                        Some("the turn was interrupted".to_owned())
                    }
                    _ => None,
                };
                self.calls.clear();
                self.output.clear();
                match failed {
                    Some(message) => vec![ExecEvent::TurnFailed {
                        error: ExecError { message },
                    }],
                    None => vec![ExecEvent::TurnCompleted { usage: self.usage }],
                }
            }
            AgentEvent::MessageEnd { .. }
            | AgentEvent::AgentSettled
            | AgentEvent::TurnStart
            | AgentEvent::TurnEnd { .. }
            | AgentEvent::MessageStart { .. }
            | AgentEvent::MessageUpdate { .. }
            | AgentEvent::QueueUpdate { .. }
            | AgentEvent::SessionInfoChanged { .. }
            | AgentEvent::ThinkingLevelChanged { .. }
            | AgentEvent::ModelChanged { .. }
            | AgentEvent::AutoRetryEnd { .. }
            | AgentEvent::AutoCompactionStart { .. }
            | AgentEvent::AutoCompactionEnd { .. }
            | AgentEvent::TodoReminder { .. }
            | AgentEvent::TodoAutoClear => Vec::new(),
        }
    }
}

fn write_lines(lines: &[ExecEvent]) {
    if lines.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    for line in lines {
        if let Ok(text) = serde_json::to_string(line) {
            let _ = writeln!(out, "{text}");
        }
    }
    let _ = out.flush();
}

/// The Codex `exec` item of an app-server item of a tool call.
fn exec_item(
    item: &ThreadItem,
    tool: &str,
    result: Option<&keel_protocol::ToolResult>,
) -> Option<ExecItem> {
    Some(match item.clone() {
        ThreadItem::CommandExecution {
            id,
            command,
            status,
            aggregated_output,
            exit_code,
            ..
        } => ExecItem::CommandExecution {
            id,
            command,
            aggregated_output: aggregated_output.unwrap_or_default(),
            exit_code,
            status: match status {
                ItemStatus::InProgress => CommandStatus::InProgress,
                ItemStatus::Completed => CommandStatus::Completed,
                ItemStatus::Failed | ItemStatus::Declined => CommandStatus::Failed,
            },
        },
        ThreadItem::FileChange {
            id,
            changes,
            status,
        } => ExecItem::FileChange {
            id,
            changes: changes
                .into_iter()
                .map(|c| FileChange {
                    path: c.path,
                    kind: match c.kind {
                        PatchChangeKind::Add => ChangeKind::Add,
                        PatchChangeKind::Delete => ChangeKind::Delete,
                        PatchChangeKind::Update { .. } => ChangeKind::Update,
                    },
                })
                .collect(),
            status: match status {
                ItemStatus::Completed => PatchStatus::Completed,
                ItemStatus::InProgress | ItemStatus::Failed | ItemStatus::Declined => {
                    PatchStatus::Failed
                }
            },
        },
        ThreadItem::McpToolCall {
            id,
            server,
            tool,
            arguments,
            status,
            result: answer,
            error,
            ..
        } => ExecItem::McpToolCall {
            id,
            server,
            tool,
            arguments,
            result: answer.map(|r| McpResult {
                content: r.content,
                structured_content: r.structured_content.unwrap_or_default(),
            }),
            error: error.map(|e| ExecError { message: e.message }),
            status: call_status(status),
        },
        ThreadItem::DynamicToolCall {
            id,
            arguments,
            status,
            ..
        } => {
            let failed = status == ToolCallStatus::Failed;
            let text = result.map(result_text).unwrap_or_default();
            ExecItem::McpToolCall {
                id,
                server: KEEL_TOOLS_SERVER.to_owned(),
                tool: tool.to_owned(),
                arguments,
                result: (status == ToolCallStatus::Completed).then(|| McpResult {
                    content: vec![json!({"type": "text", "text": text})],
                    structured_content: serde_json::Value::Null,
                }),
                error: failed.then(|| ExecError {
                    message: text.clone(),
                }),
                status: call_status(status),
            }
        }
        ThreadItem::UserMessage { .. }
        | ThreadItem::AgentMessage { .. }
        | ThreadItem::Reasoning { .. }
        | ThreadItem::Plan { .. }
        | ThreadItem::ContextCompaction { .. } => return None,
    })
}

fn call_status(status: ToolCallStatus) -> CommandStatus {
    match status {
        ToolCallStatus::InProgress => CommandStatus::InProgress,
        ToolCallStatus::Completed => CommandStatus::Completed,
        ToolCallStatus::Failed => CommandStatus::Failed,
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
