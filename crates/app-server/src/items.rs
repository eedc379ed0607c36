//! keel tool calls as thread items: `bash` → `commandExecution`, `write`
//! and `edit` → `fileChange` (with unified diffs), every other tool →
//! `dynamicToolCall`; plus the messages of a turn as items.
//!
//! Pure functions over tool names, arguments and results; the only I/O is
//! reading a file's current content to preview a change.

use std::path::Path;

use base64::Engine;
use keel_app_server_protocol::v2::{
    CommandAction, FileUpdateChange, ItemStatus, McpToolCallError, McpToolCallResult,
    PatchChangeKind, ThreadItem, ToolCallStatus, UserInput,
};
use keel_protocol::{ContentBlock, ToolResult};
use serde_json::{Value, json};
use similar::TextDiff;

/// The shell command of a `bash` call.
pub fn bash_command(args: &Value) -> String {
    args["command"].as_str().unwrap_or_default().to_owned()
}

/// What a shell command does, for the few read-only shapes that are clear;
/// everything else is `unknown`.
pub fn command_actions(command: &str) -> Vec<CommandAction> {
    let words: Vec<&str> = command.split_whitespace().collect();
    let simple = !command.contains(['|', ';', '&', '>', '<', '`', '$']);
    match words.as_slice() {
        ["cat", path] if simple => vec![CommandAction::Read {
            command: command.to_owned(),
            name: Path::new(path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| (*path).to_owned()),
            path: (*path).to_owned(),
        }],
        ["ls", rest @ ..] if simple => vec![CommandAction::ListFiles {
            command: command.to_owned(),
            path: rest
                .iter()
                .find(|a| !a.starts_with('-'))
                .map(|s| (*s).to_owned()),
        }],
        [cmd, rest @ ..] if simple && (*cmd == "rg" || *cmd == "grep") => {
            let operands: Vec<&&str> = rest.iter().filter(|a| !a.starts_with('-')).collect();
            vec![CommandAction::Search {
                command: command.to_owned(),
                query: operands.first().map(|s| (**s).to_owned()),
                path: operands.get(1).map(|s| (**s).to_owned()),
            }]
        }
        _ => vec![CommandAction::Unknown {
            command: command.to_owned(),
        }],
    }
}

/// A unified diff of one file, git style.
pub fn unified_diff(path: &str, old: &str, new: &str) -> String {
    TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{path}"), &format!("b/{path}"))
        .to_string()
}

fn absolute(cwd: &Path, path: &str) -> std::path::PathBuf {
    keel_tools::normalize_path(&cwd.join(path))
}

/// The change a `write` or `edit` call is about to make (read from disk
/// now; `None` for other tools).
pub fn preview_change(tool: &str, args: &Value, cwd: &Path) -> Option<FileUpdateChange> {
    let path = args["path"].as_str()?;
    let abs = absolute(cwd, path);
    let shown = abs.display().to_string();
    let label = abs
        .strip_prefix(cwd)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| shown.trim_start_matches('/').to_owned());
    let old = std::fs::read_to_string(&abs).ok();
    match tool {
        "write" => {
            let new = args["content"].as_str().unwrap_or_default();
            let kind = if old.is_some() {
                PatchChangeKind::Update { move_path: None }
            } else {
                PatchChangeKind::Add
            };
            Some(FileUpdateChange {
                diff: unified_diff(&label, old.as_deref().unwrap_or_default(), new),
                path: shown,
                kind,
            })
        }
        "edit" => {
            let old = old.unwrap_or_default();
            let mut new = old.clone();
            let edits: Vec<(String, String)> = match args["edits"].as_array() {
                Some(list) => list
                    .iter()
                    .map(|e| {
                        (
                            text_field(e, "oldText", "old_text"),
                            text_field(e, "newText", "new_text"),
                        )
                    })
                    .collect(),
                None => vec![(
                    text_field(args, "oldText", "old_text"),
                    text_field(args, "newText", "new_text"),
                )],
            };
            for (from, to) in edits {
                if !from.is_empty() {
                    new = new.replacen(&from, &to, 1);
                }
            }
            Some(FileUpdateChange {
                diff: unified_diff(&label, &old, &new),
                path: shown,
                kind: PatchChangeKind::Update { move_path: None },
            })
        }
        _ => None,
    }
}

fn text_field(v: &Value, camel: &str, snake: &str) -> String {
    v[camel]
        .as_str()
        .or_else(|| v[snake].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The item announced when a tool call starts.
pub fn started_item(call_id: &str, tool: &str, args: &Value, cwd: &Path) -> ThreadItem {
    match tool {
        "bash" => {
            let command = bash_command(args);
            ThreadItem::CommandExecution {
                id: call_id.to_owned(),
                command_actions: command_actions(&command),
                command,
                cwd: cwd.display().to_string(),
                process_id: None,
                source: "agent".to_owned(),
                status: ItemStatus::InProgress,
                aggregated_output: None,
                exit_code: None,
                duration_ms: None,
            }
        }
        "write" | "edit" => ThreadItem::FileChange {
            id: call_id.to_owned(),
            changes: preview_change(tool, args, cwd).into_iter().collect(),
            status: ItemStatus::InProgress,
        },
        t if t.starts_with("mcp__") => {
            let mut parts = t.splitn(3, "__").skip(1);
            let server = parts.next().unwrap_or_default().to_owned();
            let name = parts.next().unwrap_or_default().to_owned();
            ThreadItem::McpToolCall {
                id: call_id.to_owned(),
                server,
                tool: name,
                arguments: args.clone(),
                status: ToolCallStatus::InProgress,
                result: None,
                error: None,
                duration_ms: None,
            }
        }
        _ => ThreadItem::DynamicToolCall {
            id: call_id.to_owned(),
            namespace: None,
            tool: tool.to_owned(),
            arguments: args.clone(),
            status: ToolCallStatus::InProgress,
            content_items: None,
            success: None,
            duration_ms: None,
        },
    }
}

/// The text blocks of a tool result, joined.
pub fn result_text(result: &ToolResult) -> String {
    keel_protocol::joined_text(&result.content)
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Ran {
        is_error: bool,
    },
    Declined,
    /// The turn ended before the call finished.
    Cut,
}

/// The item announced when a tool call ends.
pub fn completed_item(
    started: ThreadItem,
    result: Option<&ToolResult>,
    ending: Ending,
    duration_ms: i64,
) -> ThreadItem {
    let failed = !matches!(ending, Ending::Ran { is_error: false });
    match started {
        ThreadItem::CommandExecution {
            id,
            command,
            cwd,
            process_id,
            source,
            command_actions,
            ..
        } => {
            let details = result.and_then(|r| r.details.as_ref());
            let exit_code = details
                .and_then(|d| d["exitCode"].as_i64())
                .and_then(|c| i32::try_from(c).ok());
            let status = match ending {
                Ending::Declined => ItemStatus::Declined,
                Ending::Ran { .. } if exit_code == Some(0) => ItemStatus::Completed,
                Ending::Ran { is_error: false } => ItemStatus::Completed,
                Ending::Ran { is_error: true } | Ending::Cut => ItemStatus::Failed,
            };
            ThreadItem::CommandExecution {
                id,
                command,
                cwd,
                process_id,
                source,
                status,
                command_actions,
                aggregated_output: result.map(result_text),
                exit_code,
                duration_ms: Some(duration_ms),
            }
        }
        ThreadItem::FileChange { id, changes, .. } => {
            let mut changes = changes;
            let details = result.and_then(|r| r.details.as_ref());
            if let Some(first) = changes.first_mut() {
                if let Some(diff) = details.and_then(|d| d["diff"].as_str())
                    && !diff.is_empty()
                {
                    first.diff = diff.to_owned();
                }
                // The preview read the disk when the start was seen, maybe
                // after the write; the tool knows whether it made the file.
                match details.and_then(|d| d["created"].as_bool()) {
                    Some(true) => first.kind = PatchChangeKind::Add,
                    Some(false) if first.kind == PatchChangeKind::Add => {
                        first.kind = PatchChangeKind::Update { move_path: None };
                    }
                    _ => {}
                }
            }
            ThreadItem::FileChange {
                id,
                changes,
                status: match ending {
                    Ending::Declined => ItemStatus::Declined,
                    _ if failed => ItemStatus::Failed,
                    _ => ItemStatus::Completed,
                },
            }
        }
        ThreadItem::DynamicToolCall {
            id,
            namespace,
            tool,
            arguments,
            ..
        } => ThreadItem::DynamicToolCall {
            id,
            namespace,
            tool,
            arguments,
            status: if failed {
                ToolCallStatus::Failed
            } else {
                ToolCallStatus::Completed
            },
            content_items: result.map(content_items),
            success: Some(!failed),
            duration_ms: Some(duration_ms),
        },
        ThreadItem::McpToolCall {
            id,
            server,
            tool,
            arguments,
            ..
        } => {
            let text = result.map(result_text).unwrap_or_default();
            ThreadItem::McpToolCall {
                id,
                server,
                tool,
                arguments,
                status: if failed {
                    ToolCallStatus::Failed
                } else {
                    ToolCallStatus::Completed
                },
                result: (!failed).then(|| McpToolCallResult {
                    content: result.map(mcp_content).unwrap_or_default(),
                    structured_content: result
                        .and_then(|r| r.details.as_ref())
                        .and_then(|d| d.get("structuredContent").cloned()),
                }),
                error: failed.then_some(McpToolCallError { message: text }),
                duration_ms: Some(duration_ms),
            }
        }
        other => other,
    }
}

/// A tool result as MCP `content` blocks.
fn mcp_content(result: &ToolResult) -> Vec<Value> {
    result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(serde_json::json!({"type": "text", "text": text})),
            ContentBlock::Image { data, mime_type } => {
                Some(serde_json::json!({"type": "image", "data": data, "mimeType": mime_type}))
            }
            _ => None,
        })
        .collect()
}

/// A tool result as `contentItems` (`inputText` / `inputImage`).
fn content_items(result: &ToolResult) -> Vec<Value> {
    result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(json!({"type": "inputText", "text": text})),
            ContentBlock::Image { data, mime_type } => Some(
                json!({"type": "inputImage", "imageUrl": format!("data:{mime_type};base64,{data}")}),
            ),
            ContentBlock::Thinking { .. } | ContentBlock::ToolCall { .. } => None,
        })
        .collect()
}

/// The content of a user message as protocol input.
pub fn user_inputs(content: &[ContentBlock]) -> Vec<UserInput> {
    content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(UserInput::Text {
                text: text.clone(),
                text_elements: Vec::new(),
            }),
            ContentBlock::Image { data, mime_type } => Some(UserInput::Image {
                url: Some(format!("data:{mime_type};base64,{data}")),
                file_id: None,
                detail: None,
            }),
            ContentBlock::Thinking { .. } | ContentBlock::ToolCall { .. } => None,
        })
        .collect()
}

/// Decodes a `data:` URL into `(mime type, base64 data)`.
pub fn data_url(url: &str) -> Option<(String, String)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    Some((mime.to_owned(), data.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_becomes_a_command_execution() {
        let item = started_item(
            "c1",
            "bash",
            &json!({"command": "ls -la src"}),
            Path::new("/w"),
        );
        let ThreadItem::CommandExecution {
            command_actions, ..
        } = &item
        else {
            panic!("{item:?}")
        };
        assert_eq!(
            command_actions[0],
            CommandAction::ListFiles {
                command: "ls -la src".into(),
                path: Some("src".into())
            }
        );
        let result = ToolResult {
            content: vec![ContentBlock::text("hi")],
            details: Some(json!({"exitCode": 0})),
        };
        let done = completed_item(item, Some(&result), Ending::Ran { is_error: false }, 5);
        let v = serde_json::to_value(&done).unwrap();
        assert_eq!(v["status"], "completed");
        assert_eq!(v["aggregatedOutput"], "hi");
        assert_eq!(v["exitCode"], 0);
    }

    #[test]
    fn write_previews_an_add_with_a_diff() {
        let dir = tempfile::tempdir().unwrap();
        let item = started_item(
            "c2",
            "write",
            &json!({"path": "hello.txt", "content": "hi\n"}),
            dir.path(),
        );
        let ThreadItem::FileChange { changes, .. } = &item else {
            panic!()
        };
        assert_eq!(changes[0].kind, PatchChangeKind::Add);
        assert!(changes[0].diff.contains("+hi"), "{}", changes[0].diff);
        assert!(changes[0].path.ends_with("hello.txt"));
        let declined = completed_item(item, None, Ending::Declined, 0);
        assert_eq!(
            serde_json::to_value(&declined).unwrap()["status"],
            "declined"
        );
    }

    /// The start may be seen after the write made the file: the tool's
    /// `created` decides the kind.
    #[test]
    fn a_write_seen_late_is_still_an_add() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("new.txt"), "hi\n").unwrap();
        let args = json!({"path": "new.txt", "content": "hi\n"});
        let kind = |created: bool| {
            let item = started_item("c4", "write", &args, dir.path());
            let result = ToolResult {
                content: vec![ContentBlock::text("Wrote 3 bytes")],
                details: Some(json!({"created": created})),
            };
            match completed_item(item, Some(&result), Ending::Ran { is_error: false }, 1) {
                ThreadItem::FileChange { changes, .. } => changes[0].kind.clone(),
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(kind(true), PatchChangeKind::Add);
        assert_eq!(kind(false), PatchChangeKind::Update { move_path: None });
    }

    #[test]
    fn other_tools_are_dynamic_calls() {
        let item = started_item("c3", "read", &json!({"path": "a"}), Path::new("/w"));
        let done = completed_item(
            item,
            Some(&ToolResult::text("x")),
            Ending::Ran { is_error: true },
            1,
        );
        let v = serde_json::to_value(&done).unwrap();
        assert_eq!(v["type"], "dynamicToolCall");
        assert_eq!(v["status"], "failed");
        assert_eq!(v["success"], false);
        assert_eq!(v["contentItems"][0]["text"], "x");
        assert_eq!(
            data_url("data:image/png;base64,aGk="),
            Some(("image/png".into(), "aGk=".into()))
        );
    }
}
