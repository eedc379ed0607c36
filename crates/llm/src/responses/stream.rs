//! The response stream of the OpenAI Responses dialect.
//!
//! This module owns the mapping of Responses SSE events to [`ModelEvent`]s
//! ([`ResponsesDecoder`]). It sees SSE events only: framing, timeouts and
//! cancellation belong to the HTTP plumbing.
//!
//! Wire format consumed (each event is `event: TYPE` + one JSON `data:`
//! line whose `type` repeats the event name; the `type` in the data wins):
//!
//! ```text
//! response.created                      {"response":{"id":"resp_1","status":"in_progress",…}}
//! response.output_item.added            {"output_index":0,"item":{"type":"reasoning","id":"rs_1","summary":[]}}
//! response.reasoning_summary_part.added {"output_index":0,"summary_index":0,…}
//! response.reasoning_summary_text.delta {"output_index":0,"summary_index":0,"delta":"Plan"}
//! response.output_item.done             {"output_index":0,"item":{"type":"reasoning","id":"rs_1",
//!                                        "summary":[…],"encrypted_content":"gAAA…"}}
//! response.output_item.added            {"output_index":1,"item":{"type":"message","role":"assistant",…}}
//! response.output_text.delta            {"output_index":1,"content_index":0,"delta":"Hel"}
//! response.output_item.added            {"output_index":2,"item":{"type":"function_call","id":"fc_1",
//!                                        "call_id":"call_1","name":"bash","arguments":""}}
//! response.function_call_arguments.delta {"output_index":2,"delta":"{\"comm"}
//! response.function_call_arguments.done  {"output_index":2,"arguments":"{\"command\":\"ls\"}"}
//! response.completed                    {"response":{"id":"resp_1","status":"completed","usage":{
//!                                        "input_tokens":100,"input_tokens_details":{"cached_tokens":60},
//!                                        "output_tokens":20,"total_tokens":120}}}
//! ```
//!
//! Mapping: `response.created` → `Start{response_id}` (a stream that skips
//! it still starts with `Start{None}`). `output_text.delta` and
//! `refusal.delta` → `TextDelta`. `reasoning_summary_text.delta` and
//! `reasoning_text.delta` → `ThinkingDelta` (a second summary part of the
//! same item is preceded by a `\n\n` delta). A reasoning item's
//! `output_item.done` → `ThinkingDelta{delta: "", signature}` whose signature
//! is the item as JSON, when it carries `encrypted_content` (the summary text
//! is sent then too, if no delta carried it). `output_item.added` of a
//! `function_call` → `ToolCallStart{index: output_index, id: call_id, name}`;
//! `function_call_arguments.delta` → `ToolCallDelta`; the whole arguments of
//! `.done` / `output_item.done` are sent only when no delta came. A message
//! item whose text came in no delta sends it at `output_item.done`.
//! `response.completed` → `Usage` (input = input − cached, cache_read =
//! cached) and `Finish` (ToolUse when the response called tools, else Stop);
//! `response.incomplete` → `Usage` and `Finish{Length}` (`Error` for a
//! content filter). `response.failed` and `error` → an error classified from
//! their code and message. Other events (`in_progress`, `content_part.*`,
//! `*.done` of text, unknown types) are ignored. A body that ends before
//! `response.completed` → [`crate::ErrorKind::StreamCut`].

use std::collections::BTreeMap;

use keel_protocol::{StopReason, Usage};
use serde_json::{Value, json};

use crate::http::{SseDecoder, cut_error, parse_json_data};
use crate::sse::SseEvent;
use crate::{Error, ModelEvent, Result};

#[derive(Debug, Default)]
struct ItemState {
    /// A delta (text, summary or arguments) of this item was sent.
    streamed: bool,
    /// Function calls: `ToolCallStart` was sent.
    started: bool,
    /// Function calls: arguments that arrived before the call was started.
    buffered: String,
    /// Reasoning: summary parts seen.
    summary_parts: u32,
}

/// Decodes one Responses stream.
#[derive(Debug)]
pub(crate) struct ResponsesDecoder {
    url: String,
    started: bool,
    items: BTreeMap<u32, ItemState>,
    any_tool_call: bool,
}

impl ResponsesDecoder {
    pub(crate) fn new(url: &str) -> Self {
        ResponsesDecoder {
            url: crate::error::redact_url(url),
            started: false,
            items: BTreeMap::new(),
            any_tool_call: false,
        }
    }

    /// Decodes one event: `name` is the SSE event name, `data` its JSON.
    pub(crate) fn on_data(&mut self, name: &str, data: &str) -> Result<Vec<ModelEvent>> {
        let data = data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(Vec::new());
        }
        let value = parse_json_data(data, &self.url)?;
        let kind = value["type"].as_str().unwrap_or(name);
        let mut events = Vec::new();
        if kind == "response.created" {
            if !self.started {
                self.started = true;
                let id = value["response"]["id"].as_str().map(str::to_owned);
                events.push(ModelEvent::Start { response_id: id });
            }
            return Ok(events);
        }
        if kind == "error" {
            return Err(self.stream_error(&value, "error event"));
        }
        if kind == "response.failed" {
            return Err(self.stream_error(&value["response"]["error"], "response failed"));
        }
        if !self.started {
            self.started = true;
            events.push(ModelEvent::Start { response_id: None });
        }
        let index = value["output_index"]
            .as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or(0);
        let delta = || value["delta"].as_str().unwrap_or("").to_owned();
        match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                self.item(index).streamed = true;
                events.push(ModelEvent::TextDelta(delta()));
            }
            "response.reasoning_summary_part.added" => {
                let item = self.item(index);
                item.summary_parts += 1;
                if item.summary_parts > 1 && item.streamed {
                    events.push(thinking("\n\n".into(), None));
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.item(index).streamed = true;
                events.push(thinking(delta(), None));
            }
            "response.output_item.added" => {
                let item = &value["item"];
                if item["type"] == "function_call" {
                    self.start_call(index, item, &mut events);
                    let args = item["arguments"].as_str().unwrap_or("");
                    self.arguments(index, args, &mut events);
                }
            }
            "response.function_call_arguments.delta" => {
                self.arguments(index, &delta(), &mut events);
            }
            "response.function_call_arguments.done" if !self.item(index).streamed => {
                let args = value["arguments"].as_str().unwrap_or("");
                self.arguments(index, args, &mut events);
            }
            "response.output_item.done" => self.item_done(index, &value["item"], &mut events),
            "response.completed" | "response.incomplete" => {
                let response = &value["response"];
                if response["usage"].is_object() {
                    events.push(ModelEvent::Usage(parse_usage(&response["usage"])));
                }
                let stop_reason = if kind == "response.completed" {
                    if self.any_tool_call {
                        StopReason::ToolUse
                    } else {
                        StopReason::Stop
                    }
                } else if response["incomplete_details"]["reason"] == "content_filter" {
                    StopReason::Error
                } else {
                    StopReason::Length
                };
                events.push(ModelEvent::Finish { stop_reason });
            }
            _ => {}
        }
        Ok(events)
    }

    fn item(&mut self, index: u32) -> &mut ItemState {
        self.items.entry(index).or_default()
    }

    fn stream_error(&self, error: &Value, fallback: &str) -> Error {
        let error = if error["error"].is_object() {
            &error["error"]
        } else {
            error
        };
        if error.is_object() {
            Error::from_stream_error(error, &self.url)
        } else {
            Error::from_stream_error(&json!({"message": fallback}), &self.url)
        }
    }

    fn start_call(&mut self, index: u32, item: &Value, events: &mut Vec<ModelEvent>) {
        let state = self.items.entry(index).or_default();
        if state.started {
            return;
        }
        state.started = true;
        self.any_tool_call = true;
        let id = ["call_id", "id"]
            .iter()
            .find_map(|k| item[*k].as_str().filter(|s| !s.is_empty()))
            .map(str::to_owned)
            .unwrap_or_else(|| format!("call_{index}"));
        let name = item["name"].as_str().unwrap_or("").to_owned();
        events.push(ModelEvent::ToolCallStart { index, id, name });
        let buffered = std::mem::take(&mut state.buffered);
        if !buffered.is_empty() {
            events.push(ModelEvent::ToolCallDelta {
                index,
                delta: buffered,
            });
        }
    }

    /// A piece of a call's arguments: sent, or held until the call starts.
    fn arguments(&mut self, index: u32, piece: &str, events: &mut Vec<ModelEvent>) {
        if piece.is_empty() {
            return;
        }
        let state = self.item(index);
        state.streamed = true;
        if state.started {
            events.push(ModelEvent::ToolCallDelta {
                index,
                delta: piece.to_owned(),
            });
        } else {
            state.buffered.push_str(piece);
        }
    }

    fn item_done(&mut self, index: u32, item: &Value, events: &mut Vec<ModelEvent>) {
        let streamed = self.item(index).streamed;
        match item["type"].as_str() {
            Some("function_call") => {
                self.start_call(index, item, events);
                if !streamed {
                    let args = item["arguments"].as_str().unwrap_or("");
                    self.arguments(index, args, events);
                }
            }
            Some("message") if !streamed => {
                let text: String = item["content"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|part| part["text"].as_str().or(part["refusal"].as_str()))
                    .collect();
                if !text.is_empty() {
                    events.push(ModelEvent::TextDelta(text));
                }
            }
            Some("reasoning") => {
                let text = if streamed {
                    String::new()
                } else {
                    let parts: Vec<&str> = item["summary"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|part| part["text"].as_str())
                        .collect();
                    parts.join("\n\n")
                };
                let signature = item["encrypted_content"]
                    .is_string()
                    .then(|| reasoning_signature(item));
                if !text.is_empty() || signature.is_some() {
                    events.push(thinking(text, signature));
                }
            }
            _ => {}
        }
    }
}

fn thinking(delta: String, signature: Option<String>) -> ModelEvent {
    ModelEvent::ThinkingDelta { delta, signature }
}

/// The reasoning item as stored in a thinking signature: the item without
/// its `status`.
fn reasoning_signature(item: &Value) -> String {
    let mut item = item.clone();
    if let Some(object) = item.as_object_mut() {
        object.remove("status");
    }
    item.to_string()
}

impl SseDecoder for ResponsesDecoder {
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<ModelEvent>> {
        self.on_data(&event.event, &event.data)
    }

    fn on_end(&mut self, mid_event: bool) -> Result<Vec<ModelEvent>> {
        Err(cut_error(&self.url, mid_event))
    }
}

/// Maps a Responses `usage` object. Cost is left at zero: the core prices
/// usage.
pub(crate) fn parse_usage(usage: &Value) -> Usage {
    let input = usage["input_tokens"].as_u64().unwrap_or(0);
    let output = usage["output_tokens"].as_u64().unwrap_or(0);
    let cached = usage["input_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0)
        .min(input);
    Usage {
        input: input - cached,
        output,
        cache_read: cached,
        cache_write: 0,
        total_tokens: usage["total_tokens"].as_u64().unwrap_or(input + output),
        ..Usage::default()
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
