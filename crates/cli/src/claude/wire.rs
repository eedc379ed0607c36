//! The messages Claude Code's headless mode writes on stdout
//! (`--output-format stream-json`), built from keel's messages: data and
//! pure functions only, no I/O.
//!
//! Wire shapes (one JSON object per line):
//!
//! - `{"type":"system","subtype":"init","session_id","cwd","model","tools":[…],"mcp_servers":[{name,status}],"permissionMode","apiKeySource","claude_code_version","slash_commands":[],"output_style","skills":[],"plugins":[],"uuid"}`
//! - `{"type":"assistant","message":{"id","type":"message","role":"assistant","model","content":[block],"stop_reason","stop_sequence":null,"usage"},"parent_tool_use_id":null,"session_id","uuid"}`,
//!   one per content block, as Claude Code writes them; a block is
//!   `{"type":"text","text"}`, `{"type":"thinking","thinking","signature"}`
//!   or `{"type":"tool_use","id","name","input"}`
//! - `{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id","content","is_error"}]},"parent_tool_use_id":null,"session_id","uuid"}`
//! - `{"type":"stream_event","event":{…an Anthropic streaming event…},"parent_tool_use_id":null,"session_id","uuid"}`
//!   with `--include-partial-messages`
//! - `{"type":"result","subtype":"success"|"error_during_execution"|"error_max_turns","is_error","duration_ms","duration_api_ms","num_turns","result","stop_reason","total_cost_usd","usage","modelUsage","permission_denials":[],"structured_output"?,"session_id","uuid"}`
//!
//! Tool names are Claude Code's (`Bash`, `Read`, `Write`, `Edit`, `Grep`,
//! `Glob`, `LS`; MCP tools keep `mcp__server__tool`); a file tool's `path`
//! is `file_path` on the wire, both ways.

use keel_protocol::{AssistantMessage, ContentBlock, StopReason, ToolResultMessage, Usage};
use serde_json::{Map, Value, json};

/// The Claude Code version keel's answers say they match.
pub const CLAUDE_CODE_VERSION: &str = "2.1.337";

/// keel's built-in tools and Claude Code's names for them.
const TOOL_NAMES: &[(&str, &str)] = &[
    ("bash", "Bash"),
    ("read", "Read"),
    ("write", "Write"),
    ("edit", "Edit"),
    ("grep", "Grep"),
    ("find", "Glob"),
    ("ls", "LS"),
];

/// Claude Code's name for keel's tool `name`.
pub fn claude_name(name: &str) -> String {
    TOOL_NAMES
        .iter()
        .find(|(k, _)| *k == name)
        .map_or_else(|| name.to_owned(), |(_, c)| (*c).to_owned())
}

/// keel's name for Claude Code's tool `name` (either spelling is taken).
pub fn keel_name(name: &str) -> String {
    TOOL_NAMES
        .iter()
        .find(|(k, c)| *c == name || *k == name)
        .map_or_else(|| name.to_owned(), |(k, _)| (*k).to_owned())
}

fn renames_path(tool: &str) -> bool {
    matches!(tool, "read" | "write" | "edit")
}

/// keel's arguments of `tool` as Claude Code names them.
pub fn input_out(tool: &str, args: &Value) -> Value {
    rename(tool, args, "path", "file_path")
}

/// An input the SDK gave for keel's `tool`, in keel's names.
pub fn input_in(tool: &str, input: &Value) -> Value {
    rename(tool, input, "file_path", "path")
}

fn rename(tool: &str, args: &Value, from: &str, to: &str) -> Value {
    match args {
        Value::Object(map) if renames_path(tool) && map.contains_key(from) => {
            let mut out = Map::new();
            for (k, v) in map {
                out.insert(if k == from { to.to_owned() } else { k.clone() }, v.clone());
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

/// A new message uuid.
pub fn uuid() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// The usage an `assistant` message carries (as Claude Code writes it).
pub fn message_usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input,
        "output_tokens": u.output,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cache_read,
    })
}

/// Anthropic's usage object for keel's usage (a `result`'s).
pub fn usage(u: &Usage) -> Value {
    json!({
        "input_tokens": u.input,
        "output_tokens": u.output,
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cache_read,
        "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
        "service_tier": "standard",
    })
}

/// Anthropic's stop reason for keel's.
pub fn stop_reason(reason: StopReason) -> Option<&'static str> {
    match reason {
        StopReason::Stop => Some("end_turn"),
        StopReason::Length => Some("max_tokens"),
        StopReason::ToolUse => Some("tool_use"),
        StopReason::Error | StopReason::Aborted => None,
    }
}

/// One content block in Anthropic's shape; `None` for what has none.
pub fn block(b: &ContentBlock) -> Option<Value> {
    Some(match b {
        ContentBlock::Text { text } => json!({"type": "text", "text": text}),
        ContentBlock::Thinking {
            thinking,
            thinking_signature,
        } => json!({
            "type": "thinking",
            "thinking": thinking,
            "signature": thinking_signature.clone().unwrap_or_default(),
        }),
        ContentBlock::ToolCall {
            id,
            name,
            arguments,
        } => json!({
            "type": "tool_use",
            "id": id,
            "name": claude_name(name),
            "input": input_out(name, arguments),
        }),
        ContentBlock::Image { data, mime_type } => json!({
            "type": "image",
            "source": {"type": "base64", "media_type": mime_type, "data": data},
        }),
    })
}

/// The `assistant` messages for one finished model answer: one per block.
pub fn assistant_frames(m: &AssistantMessage, message_id: &str, session_id: &str) -> Vec<Value> {
    m.content
        .iter()
        .filter_map(block)
        .map(|b| {
            json!({
                "type": "assistant",
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": m.model,
                    "content": [b],
                    "stop_reason": stop_reason(m.stop_reason),
                    "stop_sequence": null,
                    "usage": message_usage(&m.usage),
                },
                "parent_tool_use_id": null,
                "session_id": session_id,
                "uuid": uuid(),
            })
        })
        .collect()
}

/// The `user` message carrying one tool's result.
pub fn tool_result_frame(r: &ToolResultMessage, session_id: &str) -> Value {
    let text = keel_protocol::joined_text(&r.content);
    json!({
        "type": "user",
        "message": {
            "role": "user",
            "content": [{
                "type": "tool_result",
                "tool_use_id": r.tool_call_id,
                "content": text,
                "is_error": r.is_error,
            }],
        },
        "parent_tool_use_id": null,
        "session_id": session_id,
        "uuid": uuid(),
        "tool_use_result": if r.is_error { json!(format!("Error: {text}")) } else { json!({"content": text}) },
    })
}

/// A `stream_event` wrapping one Anthropic streaming event.
pub fn stream_event(event: Value, session_id: &str) -> Value {
    json!({
        "type": "stream_event",
        "event": event,
        "parent_tool_use_id": null,
        "session_id": session_id,
        "uuid": uuid(),
    })
}

/// What `system`/`init` says of the session.
pub struct Init<'a> {
    pub session_id: &'a str,
    pub cwd: &'a str,
    pub model: &'a str,
    pub tools: Vec<String>,
    pub mcp_servers: Vec<(String, String)>,
    pub permission_mode: &'a str,
    pub api_key_source: &'a str,
}

pub fn init(i: &Init<'_>) -> Value {
    let servers: Vec<Value> = i
        .mcp_servers
        .iter()
        .map(|(name, status)| json!({"name": name, "status": status}))
        .collect();
    json!({
        "type": "system",
        "subtype": "init",
        "cwd": i.cwd,
        "session_id": i.session_id,
        "tools": i.tools,
        "mcp_servers": servers,
        "model": i.model,
        "permissionMode": i.permission_mode,
        "slash_commands": [],
        "apiKeySource": i.api_key_source,
        "claude_code_version": CLAUDE_CODE_VERSION,
        "output_style": "default",
        "agents": [],
        "skills": [],
        "plugins": [],
        "uuid": uuid(),
    })
}

/// How a run ended, for its `result`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    Success,
    /// The model call failed, or the run was interrupted.
    Error,
    /// `--max-turns` was reached.
    MaxTurns,
}

/// What a `result` reports.
pub struct Summary<'a> {
    pub ending: Ending,
    pub text: &'a str,
    pub errors: Vec<String>,
    pub session_id: &'a str,
    pub model: &'a str,
    pub duration_ms: u64,
    pub duration_api_ms: u64,
    pub num_turns: u32,
    pub stop_reason: Option<&'a str>,
    /// This run's tokens.
    pub usage: &'a Usage,
    /// Cost since the process started (Claude Code's running total).
    pub total_cost_usd: f64,
    pub context_window: u64,
    pub max_output_tokens: u64,
    pub denials: Vec<Value>,
    pub structured_output: Option<Value>,
}

pub fn result(s: &Summary<'_>) -> Value {
    let (subtype, is_error) = match s.ending {
        Ending::Success => ("success", false),
        Ending::Error => ("error_during_execution", true),
        Ending::MaxTurns => ("error_max_turns", true),
    };
    let mut out = json!({
        "type": "result",
        "subtype": subtype,
        "is_error": is_error,
        "duration_ms": s.duration_ms,
        "duration_api_ms": s.duration_api_ms,
        "num_turns": s.num_turns,
        "stop_reason": s.stop_reason,
        "session_id": s.session_id,
        "total_cost_usd": s.total_cost_usd,
        "usage": usage(s.usage),
        "modelUsage": {
            s.model: {
                "inputTokens": s.usage.input,
                "outputTokens": s.usage.output,
                "cacheReadInputTokens": s.usage.cache_read,
                "cacheCreationInputTokens": s.usage.cache_write,
                "webSearchRequests": 0,
                "costUSD": s.usage.cost.total,
                "contextWindow": s.context_window,
                "maxOutputTokens": s.max_output_tokens,
            }
        },
        "permission_denials": s.denials,
        "uuid": uuid(),
    });
    if let Value::Object(map) = &mut out {
        match s.ending {
            Ending::Success => {
                map.insert("result".into(), json!(s.text));
                if let Some(v) = &s.structured_output {
                    map.insert("structured_output".into(), v.clone());
                }
            }
            Ending::Error | Ending::MaxTurns => {
                map.insert("errors".into(), json!(s.errors));
            }
        }
    }
    out
}

/// A `control_response` that answers `request_id` with `response`.
pub fn control_success(request_id: &str, response: Value) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "success", "request_id": request_id, "response": response},
    })
}

/// A `control_response` that refuses `request_id`.
pub fn control_error(request_id: &str, error: &str) -> Value {
    json!({
        "type": "control_response",
        "response": {"subtype": "error", "request_id": request_id, "error": error},
    })
}

/// The `hook_callback` request for the SDK's hook `callback_id`.
pub fn hook_request(callback_id: &str, input: Value, tool_use_id: &str) -> Value {
    json!({
        "subtype": "hook_callback",
        "callback_id": callback_id,
        "input": input,
        "tool_use_id": tool_use_id,
    })
}

/// A `control_request` keel sends the SDK.
pub fn control_request(request_id: &str, request: Value) -> Value {
    json!({"type": "control_request", "request_id": request_id, "request": request})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_and_paths_are_claude_codes_both_ways() {
        assert_eq!(claude_name("bash"), "Bash");
        assert_eq!(claude_name("find"), "Glob");
        assert_eq!(
            claude_name("mcp__everything__echo"),
            "mcp__everything__echo"
        );
        assert_eq!(keel_name("Glob"), "find");
        assert_eq!(keel_name("write"), "write");
        let out = input_out("write", &json!({"path": "a.txt", "content": "x"}));
        assert_eq!(out, json!({"file_path": "a.txt", "content": "x"}));
        assert_eq!(
            input_in("write", &out),
            json!({"path": "a.txt", "content": "x"})
        );
        // A command keeps its input.
        let bash = json!({"command": "ls", "path": "kept"});
        assert_eq!(input_out("bash", &bash), bash);
    }

    #[test]
    fn a_success_has_its_result_and_an_error_its_errors() {
        let usage = Usage {
            input: 10,
            output: 5,
            ..Usage::default()
        };
        let mut s = Summary {
            ending: Ending::Success,
            text: "done",
            errors: vec![],
            session_id: "s1",
            model: "m",
            duration_ms: 3,
            duration_api_ms: 2,
            num_turns: 1,
            stop_reason: Some("end_turn"),
            usage: &usage,
            total_cost_usd: 0.0,
            context_window: 200_000,
            max_output_tokens: 8192,
            denials: vec![],
            structured_output: Some(json!({"ok": true})),
        };
        let ok = result(&s);
        assert_eq!(ok["subtype"], "success");
        assert_eq!(ok["result"], "done");
        assert_eq!(ok["structured_output"], json!({"ok": true}));
        assert_eq!(ok["usage"]["input_tokens"], 10);
        assert_eq!(ok["modelUsage"]["m"]["outputTokens"], 5);
        s.ending = Ending::MaxTurns;
        s.errors = vec!["Reached maximum number of turns (1)".into()];
        let err = result(&s);
        assert_eq!(err["subtype"], "error_max_turns");
        assert_eq!(err["is_error"], true);
        assert!(err.get("result").is_none());
        assert_eq!(err["errors"][0], "Reached maximum number of turns (1)");
    }
}
