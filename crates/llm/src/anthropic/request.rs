//! The request body of the Anthropic Messages dialect.
//!
//! This module owns the conversion of a [`ModelRequest`] into the JSON body
//! of `POST {base_url}/messages`, the thinking budgets and the output-token
//! arithmetic they need. It does no I/O and knows nothing of the response
//! events.
//!
//! Wire format produced:
//!
//! ```json
//! {"model":"claude-sonnet-4-5","max_tokens":64000,"stream":true,
//!  "system":[{"type":"text","text":"You are keel.","cache_control":{"type":"ephemeral"}}],
//!  "thinking":{"type":"enabled","budget_tokens":10000},
//!  "tools":[{"name":"bash","description":"…","input_schema":{…}}],
//!  "messages":[
//!   {"role":"user","content":[{"type":"text","text":"list files"},
//!     {"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBO…"}}]},
//!   {"role":"assistant","content":[
//!     {"type":"thinking","thinking":"…","signature":"EqQB…"},
//!     {"type":"text","text":"Listing."},
//!     {"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls"}}]},
//!   {"role":"user","content":[
//!     {"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"Cargo.toml"}],
//!      "cache_control":{"type":"ephemeral"}}]}]}
//! ```
//!
//! Conversion rules:
//! - the system prompt is one text block with `cache_control: ephemeral`
//!   (omitted when empty); tools follow the Messages shape (`input_schema`);
//! - consecutive messages of the same role are merged into one (the API
//!   wants alternating roles); all results of a run of tool results are
//!   `tool_result` blocks of one user message (text, and images as image
//!   blocks, no `content` when both are empty, `is_error` when set); the
//!   shared history rules add synthetic
//!   results for unanswered calls;
//! - empty text blocks are dropped; a message left with no blocks is skipped;
//! - assistant thinking blocks are replayed only for messages from this
//!   dialect, provider and model, and only with their signature: a plain
//!   signature gives `{"type":"thinking","thinking","signature"}`; a
//!   signature holding a JSON array (a run of thinking / `redacted_thinking`
//!   blocks, see the stream module) is replayed block for block; others are
//!   dropped (the API rejects unsigned or foreign thinking);
//! - tool call ids are made to match `^[a-zA-Z0-9_-]+$` (other characters
//!   become `_`), for histories that came from another dialect; arguments
//!   are sent as an object;
//! - `cache_control: ephemeral` goes on the last block of the last two user
//!   messages, so each turn reads the previous turn's cache;
//! - with an output schema, `output_config: {"format": {"type":
//!   "json_schema", "schema"}}`;
//! - thinking: `{"type":"enabled","budget_tokens"}` with the budget of the
//!   level ([`thinking_budget`]); `max_tokens` is `max_output_tokens`, else
//!   budget + [`DEFAULT_MAX_TOKENS`]; a budget that leaves fewer than
//!   [`MIN_ANSWER_TOKENS`] is shrunk, and thinking is left off when less
//!   than [`MIN_THINKING_BUDGET`] would remain. Thinking is also left off
//!   when the last assistant message calls tools without starting with a
//!   thinking block (the API rejects that combination: for example thinking
//!   was turned on in the middle of a tool loop).

use keel_protocol::{AssistantMessage, ContentBlock, ThinkingLevel};
use serde_json::{Value, json};

use super::API;
use crate::ModelRequest;
use crate::history::{self, Image, Item};

/// `max_tokens` when the request sets no limit and thinking is off (added
/// to the budget when thinking is on).
pub const DEFAULT_MAX_TOKENS: u64 = 8192;
/// The smallest thinking budget the API accepts.
pub const MIN_THINKING_BUDGET: u64 = 1024;
/// Output tokens always left for the answer after the thinking budget.
pub const MIN_ANSWER_TOKENS: u64 = 1024;

/// The thinking budget of a level (`None` when off).
pub fn thinking_budget(level: ThinkingLevel) -> Option<u64> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some(MIN_THINKING_BUDGET),
        ThinkingLevel::Low => Some(4_096),
        ThinkingLevel::Medium => Some(10_000),
        ThinkingLevel::High => Some(20_000),
        ThinkingLevel::Xhigh => Some(32_000),
    }
}

/// `(max_tokens, thinking budget)` for an output limit and a wanted budget.
pub fn token_limits(max_output_tokens: Option<u64>, budget: Option<u64>) -> (u64, Option<u64>) {
    let Some(budget) = budget else {
        return (max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS), None);
    };
    let max = max_output_tokens.unwrap_or(budget + DEFAULT_MAX_TOKENS);
    let room = max.saturating_sub(MIN_ANSWER_TOKENS);
    if room >= budget {
        (max, Some(budget))
    } else if room >= MIN_THINKING_BUDGET {
        (max, Some(room))
    } else {
        (max, None)
    }
}

/// The JSON body for `request` sent to provider `provider` (its name decides
/// whether thinking blocks of earlier messages may be replayed).
pub fn build_request_body(request: &ModelRequest, provider: &str) -> Value {
    let messages = convert_messages(request, provider);
    let mut budget = thinking_budget(request.thinking_level);
    if budget.is_some() && !thinking_allowed(&messages) {
        tracing::debug!(
            "thinking left off: the last assistant message calls tools without thinking"
        );
        budget = None;
    }
    let (max_tokens, budget) = token_limits(request.max_output_tokens, budget);
    let mut body = json!({
        "model": request.model,
        "max_tokens": max_tokens,
        "stream": true,
        "messages": messages,
    });
    if !request.system_prompt.is_empty() {
        body["system"] = json!([{
            "type": "text",
            "text": request.system_prompt,
            "cache_control": {"type": "ephemeral"},
        }]);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}))
            .collect();
        body["tools"] = Value::Array(tools);
    }
    if let Some(budget) = budget {
        body["thinking"] = json!({"type": "enabled", "budget_tokens": budget});
    }
    if let Some(schema) = &request.output_schema {
        body["output_config"] = json!({"format": {"type": "json_schema", "schema": schema}});
    }
    body
}

/// Whether the API accepts thinking for this history: the last assistant
/// message, if it calls tools, must start with a thinking block.
fn thinking_allowed(messages: &[Value]) -> bool {
    let Some(last) = messages.iter().rev().find(|m| m["role"] == "assistant") else {
        return true;
    };
    let blocks = last["content"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    let calls_tools = blocks.iter().any(|b| b["type"] == "tool_use");
    let first = blocks.first().map(|b| &b["type"]);
    !calls_tools || first.is_some_and(|t| t == "thinking" || t == "redacted_thinking")
}

/// Builds `messages`, merging consecutive messages of the same role.
struct Messages(Vec<Value>);

impl Messages {
    fn push(&mut self, role: &str, mut blocks: Vec<Value>) {
        if blocks.is_empty() {
            return;
        }
        if let Some(last) = self.0.last_mut()
            && last["role"] == role
            && let Some(content) = last["content"].as_array_mut()
        {
            content.append(&mut blocks);
            return;
        }
        self.0.push(json!({"role": role, "content": blocks}));
    }
}

fn convert_messages(request: &ModelRequest, provider: &str) -> Vec<Value> {
    let mut out = Messages(Vec::new());
    for item in history::items(&request.messages) {
        match item {
            Item::User(blocks) => out.push("user", user_blocks(blocks)),
            Item::Assistant(message) => {
                let replay = history::same_model(message, API, provider, &request.model);
                out.push("assistant", assistant_blocks(message, replay));
            }
            Item::ToolResults(run) => {
                let blocks = run
                    .iter()
                    .map(|result| {
                        let mut content = Vec::new();
                        let text = result.text_or_placeholder();
                        if !text.is_empty() {
                            content.push(json!({"type": "text", "text": text}));
                        }
                        content.extend(result.images.iter().map(image_block));
                        let mut block = json!({
                            "type": "tool_result",
                            "tool_use_id": tool_id(result.call_id),
                        });
                        if !content.is_empty() {
                            block["content"] = Value::Array(content);
                        }
                        if result.is_error {
                            block["is_error"] = json!(true);
                        }
                        block
                    })
                    .collect();
                out.push("user", blocks);
            }
        }
    }
    let mut messages = out.0;
    for message in messages
        .iter_mut()
        .rev()
        .filter(|m| m["role"] == "user")
        .take(2)
    {
        if let Some(block) = message["content"].as_array_mut().and_then(|c| c.last_mut()) {
            block["cache_control"] = json!({"type": "ephemeral"});
        }
    }
    messages
}

fn image_block(image: &Image<'_>) -> Value {
    json!({"type": "image", "source": {
        "type": "base64", "media_type": image.mime_type, "data": image.data,
    }})
}

fn user_blocks(blocks: &[ContentBlock]) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } if !text.is_empty() => {
                Some(json!({"type": "text", "text": text}))
            }
            ContentBlock::Image { data, mime_type } => {
                Some(image_block(&Image { mime_type, data }))
            }
            _ => None,
        })
        .collect()
}

fn assistant_blocks(message: &AssistantMessage, replay_thinking: bool) -> Vec<Value> {
    let mut out = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text } if !text.is_empty() => {
                out.push(json!({"type": "text", "text": text}));
            }
            ContentBlock::Thinking {
                thinking,
                thinking_signature: Some(signature),
            } if replay_thinking && !signature.is_empty() => {
                match serde_json::from_str::<Value>(signature) {
                    Ok(Value::Array(blocks)) => out.extend(blocks),
                    _ => out.push(json!({
                        "type": "thinking", "thinking": thinking, "signature": signature,
                    })),
                }
            }
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => out.push(json!({
                "type": "tool_use",
                "id": tool_id(id),
                "name": name,
                "input": history::arguments_object(arguments),
            })),
            ContentBlock::Text { .. }
            | ContentBlock::Thinking { .. }
            | ContentBlock::Image { .. } => {}
        }
    }
    out
}

/// `id` with every character outside `[a-zA-Z0-9_-]` replaced by `_`.
fn tool_id(id: &str) -> String {
    let clean: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.is_empty() {
        "toolu_".to_owned()
    } else {
        clean
    }
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
