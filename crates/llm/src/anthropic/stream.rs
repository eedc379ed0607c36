//! The response stream of the Anthropic Messages dialect.
//!
//! This module owns the mapping of Messages SSE events to [`ModelEvent`]s
//! ([`MessagesDecoder`]). It sees SSE events only: framing, timeouts and
//! cancellation belong to the HTTP plumbing.
//!
//! Wire format consumed (`event: TYPE` + one JSON `data:` line whose `type`
//! repeats the name; the `type` in the data wins):
//!
//! ```text
//! message_start       {"message":{"id":"msg_1","usage":{"input_tokens":12,"output_tokens":1,
//!                      "cache_read_input_tokens":1500,"cache_creation_input_tokens":300}}}
//! content_block_start {"index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}
//! content_block_delta {"index":0,"delta":{"type":"thinking_delta","thinking":"Let me"}}
//! content_block_delta {"index":0,"delta":{"type":"signature_delta","signature":"EqQB…"}}
//! content_block_stop  {"index":0}
//! content_block_start {"index":1,"content_block":{"type":"text","text":""}}
//! content_block_delta {"index":1,"delta":{"type":"text_delta","text":"Hel"}}
//! content_block_start {"index":2,"content_block":{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}}
//! content_block_delta {"index":2,"delta":{"type":"input_json_delta","partial_json":"{\"comm"}}
//! message_delta       {"delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":96}}
//! message_stop        {}
//! ping                {}
//! error               {"error":{"type":"overloaded_error","message":"Overloaded"}}
//! ```
//!
//! Mapping: `message_start` → `Start{response_id: message.id}` and the
//! initial usage. `text_delta` → `TextDelta`; `thinking_delta` →
//! `ThinkingDelta`; `tool_use` block start → `ToolCallStart{index: block
//! index, id, name}`; `input_json_delta` → `ToolCallDelta` (a tool_use whose
//! input came only in its start block sends it at its stop).
//! `signature_delta` is collected and sent when its block stops, as
//! `ThinkingDelta{delta: "", signature}`; a `redacted_thinking` block is sent
//! the same way. Adjacent thinking-type blocks (which keel's message
//! assembly merges into one thinking block) get, from the second one on, a
//! `\n\n` text separator and a signature that is a JSON array of the raw
//! blocks of the run, so the request builder can replay them one by one; a
//! lone signed thinking block keeps its plain signature. `message_delta` →
//! the stop reason (`end_turn`/`stop_sequence`/`pause_turn` → Stop,
//! `tool_use` → ToolUse, `max_tokens` and `model_context_window_exceeded` →
//! Length, `refusal` → Error) and `Usage` (input = `input_tokens`,
//! cache_read / cache_write from the cache fields, later fields replacing
//! earlier ones). `message_stop` → `Finish` (Stop with tool calls becomes
//! ToolUse). `error` → an error classified from its type and message
//! (`overloaded_error` → ServerOverloaded, `rate_limit_error` →
//! RateLimitExceeded). `ping` and unknown events or delta types are ignored.
//! A body that ends before `message_stop` → [`crate::ErrorKind::StreamCut`].

use std::collections::BTreeMap;

use keel_protocol::{StopReason, Usage};
use serde_json::{Value, json};

use crate::http::{SseDecoder, cut_error, parse_json_data};
use crate::sse::SseEvent;
use crate::{Error, ModelEvent, Result};

#[derive(Debug, PartialEq, Eq)]
enum Kind {
    Text,
    Thinking,
    RedactedThinking,
    ToolUse,
    Other,
}

#[derive(Debug)]
struct Block {
    kind: Kind,
    /// Thinking text so far.
    thinking: String,
    /// Collected `signature_delta`s (thinking) or the `data` (redacted).
    signature: String,
    /// Tool use: an `input_json_delta` with content arrived.
    streamed: bool,
    /// Tool use: the input given in the start block.
    initial_input: Value,
}

/// Decodes one Messages stream.
#[derive(Debug)]
pub(crate) struct MessagesDecoder {
    url: String,
    started: bool,
    blocks: BTreeMap<u32, Block>,
    /// Raw thinking-type blocks since the last other block.
    thinking_run: Vec<Value>,
    usage: Usage,
    stop_reason: Option<StopReason>,
    any_tool_use: bool,
}

impl MessagesDecoder {
    pub(crate) fn new(url: &str) -> Self {
        MessagesDecoder {
            url: crate::error::redact_url(url),
            started: false,
            blocks: BTreeMap::new(),
            thinking_run: Vec::new(),
            usage: Usage::default(),
            stop_reason: None,
            any_tool_use: false,
        }
    }

    /// Decodes one event: `name` is the SSE event name, `data` its JSON.
    pub(crate) fn on_data(&mut self, name: &str, data: &str) -> Result<Vec<ModelEvent>> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let value = parse_json_data(data, &self.url)?;
        let kind = value["type"].as_str().unwrap_or(name);
        let mut events = Vec::new();
        match kind {
            "error" => {
                let error = if value["error"].is_object() {
                    value["error"].clone()
                } else {
                    json!({"message": value["error"].as_str().unwrap_or("error event")})
                };
                return Err(Error::from_stream_error(&error, &self.url));
            }
            "ping" => return Ok(events),
            _ => {}
        }
        if !self.started {
            self.started = true;
            let id = value["message"]["id"].as_str().map(str::to_owned);
            events.push(ModelEvent::Start { response_id: id });
        }
        let index = value["index"]
            .as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0);
        match kind {
            "message_start" => self.merge_usage(&value["message"]["usage"]),
            "content_block_start" => self.block_start(index, &value["content_block"], &mut events),
            "content_block_delta" => self.block_delta(index, &value["delta"], &mut events),
            "content_block_stop" => self.block_stop(index, &mut events),
            "message_delta" => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(stop_reason(reason));
                }
                if value["usage"].is_object() {
                    self.merge_usage(&value["usage"]);
                    events.push(ModelEvent::Usage(self.usage));
                }
            }
            "message_stop" => {
                let stop_reason = match self.stop_reason {
                    Some(StopReason::Stop) | None if self.any_tool_use => StopReason::ToolUse,
                    Some(reason) => reason,
                    None => StopReason::Stop,
                };
                events.push(ModelEvent::Finish { stop_reason });
            }
            _ => {}
        }
        Ok(events)
    }

    fn block_start(&mut self, index: u32, block: &Value, events: &mut Vec<ModelEvent>) {
        let kind = match block["type"].as_str() {
            Some("text") => Kind::Text,
            Some("thinking") => Kind::Thinking,
            Some("redacted_thinking") => Kind::RedactedThinking,
            Some("tool_use") => Kind::ToolUse,
            _ => Kind::Other,
        };
        let mut state = Block {
            kind,
            thinking: String::new(),
            signature: String::new(),
            streamed: false,
            initial_input: block["input"].clone(),
        };
        match state.kind {
            Kind::Text => {
                self.thinking_run.clear();
                if let Some(text) = block["text"].as_str().filter(|t| !t.is_empty()) {
                    events.push(ModelEvent::TextDelta(text.to_owned()));
                }
            }
            Kind::Thinking => {
                if let Some(text) = block["thinking"].as_str().filter(|t| !t.is_empty()) {
                    self.thinking_text(&mut state, text, events);
                }
            }
            Kind::RedactedThinking => {
                state.signature = block["data"].as_str().unwrap_or("").to_owned();
            }
            Kind::ToolUse => {
                self.thinking_run.clear();
                self.any_tool_use = true;
                let id = block["id"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| format!("toolu_{index}"));
                let name = block["name"].as_str().unwrap_or("").to_owned();
                events.push(ModelEvent::ToolCallStart { index, id, name });
            }
            Kind::Other => {}
        }
        self.blocks.insert(index, state);
    }

    /// Sends thinking text, with a `\n\n` separator before the first text of
    /// a block that follows another thinking-type block.
    fn thinking_text(&self, block: &mut Block, text: &str, events: &mut Vec<ModelEvent>) {
        let delta = if block.thinking.is_empty() && !self.thinking_run.is_empty() {
            format!("\n\n{text}")
        } else {
            text.to_owned()
        };
        block.thinking.push_str(text);
        events.push(ModelEvent::ThinkingDelta {
            delta,
            signature: None,
        });
    }

    fn block_delta(&mut self, index: u32, delta: &Value, events: &mut Vec<ModelEvent>) {
        let Some(mut block) = self.blocks.remove(&index) else {
            tracing::debug!(index, "delta for an unknown content block");
            return;
        };
        match (delta["type"].as_str(), &block.kind) {
            (Some("text_delta"), Kind::Text) => {
                if let Some(text) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                    events.push(ModelEvent::TextDelta(text.to_owned()));
                }
            }
            (Some("thinking_delta"), Kind::Thinking) => {
                if let Some(text) = delta["thinking"].as_str().filter(|t| !t.is_empty()) {
                    self.thinking_text(&mut block, text, events);
                }
            }
            (Some("signature_delta"), Kind::Thinking) => {
                block
                    .signature
                    .push_str(delta["signature"].as_str().unwrap_or(""));
            }
            (Some("input_json_delta"), Kind::ToolUse) => {
                if let Some(piece) = delta["partial_json"].as_str().filter(|p| !p.is_empty()) {
                    block.streamed = true;
                    events.push(ModelEvent::ToolCallDelta {
                        index,
                        delta: piece.to_owned(),
                    });
                }
            }
            _ => {}
        }
        self.blocks.insert(index, block);
    }

    fn block_stop(&mut self, index: u32, events: &mut Vec<ModelEvent>) {
        let Some(block) = self.blocks.remove(&index) else {
            return;
        };
        let raw = match block.kind {
            Kind::Thinking if !block.signature.is_empty() => json!({
                "type": "thinking", "thinking": block.thinking, "signature": block.signature,
            }),
            Kind::RedactedThinking => json!({"type": "redacted_thinking", "data": block.signature}),
            Kind::ToolUse => {
                let input = &block.initial_input;
                if !block.streamed && input.as_object().is_some_and(|o| !o.is_empty()) {
                    events.push(ModelEvent::ToolCallDelta {
                        index,
                        delta: input.to_string(),
                    });
                }
                return;
            }
            Kind::Thinking | Kind::Text | Kind::Other => return,
        };
        self.thinking_run.push(raw);
        let signature = match self.thinking_run.as_slice() {
            [only] if only["type"] == "thinking" => {
                only["signature"].as_str().unwrap_or("").to_owned()
            }
            run => Value::Array(run.to_vec()).to_string(),
        };
        events.push(ModelEvent::ThinkingDelta {
            delta: String::new(),
            signature: Some(signature),
        });
    }

    /// Takes the fields present in `usage` (later events repeat or extend
    /// the earlier ones).
    fn merge_usage(&mut self, usage: &Value) {
        let field = |name: &str| usage[name].as_u64();
        if let Some(n) = field("input_tokens") {
            self.usage.input = n;
        }
        if let Some(n) = field("output_tokens") {
            self.usage.output = n;
        }
        if let Some(n) = field("cache_read_input_tokens") {
            self.usage.cache_read = n;
        }
        if let Some(n) = field("cache_creation_input_tokens") {
            self.usage.cache_write = n;
        }
        let u = &mut self.usage;
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write;
    }
}

impl SseDecoder for MessagesDecoder {
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<ModelEvent>> {
        self.on_data(&event.event, &event.data)
    }

    fn on_end(&mut self, mid_event: bool) -> Result<Vec<ModelEvent>> {
        Err(cut_error(&self.url, mid_event))
    }
}

/// Maps a `stop_reason`.
pub(crate) fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "tool_use" => StopReason::ToolUse,
        "max_tokens" | "model_context_window_exceeded" => StopReason::Length,
        "refusal" => StopReason::Error,
        _ => StopReason::Stop,
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
