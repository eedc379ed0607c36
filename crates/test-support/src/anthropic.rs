//! The Anthropic Messages dialect of the mock: event builders and
//! whole-answer shortcuts.
//!
//! This module owns the JSON of the SSE events Anthropic sends on
//! `POST /v1/messages` with `stream: true`. It does not know about the HTTP
//! side (see the server module). Use it through its path
//! (`anthropic::ev_text_delta(0, "Hel")`, `anthropic::text("Hi")`).
//!
//! Wire format: each event is `event: TYPE` plus one `data:` line whose
//! JSON repeats the `type`:
//!
//! ```text
//! event: message_start
//! data: {"type":"message_start","message":{"id":"msg_mock","role":"assistant","content":[],
//!        "usage":{"input_tokens":10,"output_tokens":1,…}}}
//! event: content_block_start
//! data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}
//! event: content_block_delta
//! data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}
//! event: content_block_stop
//! data: {"type":"content_block_stop","index":0}
//! event: message_delta
//! data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}
//! event: message_stop
//! data: {"type":"message_stop"}
//! ```
//!
//! Errors: in the stream `event: error` with
//! `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`;
//! as HTTP bodies the same object ([`error_body`]), with status 529 for
//! `overloaded_error`.

use serde_json::{Value, json};

use crate::chat_completions::{MockToolCall, split_pieces};
use crate::response::{MockResponse, SseEvent};

/// The path this dialect is served on.
pub const PATH: &str = "/v1/messages";
/// The message `id` the builders use.
pub const MOCK_MESSAGE_ID: &str = "msg_mock";
/// The `model` the builders report.
pub const MOCK_MODEL: &str = "mock-model";
/// `input_tokens` reported by the whole-answer shortcuts.
pub const MOCK_INPUT_TOKENS: u64 = 10;
/// `output_tokens` reported by the whole-answer shortcuts.
pub const MOCK_OUTPUT_TOKENS: u64 = 5;

/// An event named `kind` whose data is `data` with `"type": kind` added.
pub fn ev(kind: &str, mut data: Value) -> SseEvent {
    data["type"] = json!(kind);
    SseEvent::named_json(kind, &data)
}

/// `message_start` with `input_tokens` and no cache use.
pub fn ev_message_start(input_tokens: u64) -> SseEvent {
    ev_message_start_cached(input_tokens, 0, 0)
}

/// `message_start` with cache reads and writes.
pub fn ev_message_start_cached(input_tokens: u64, cache_read: u64, cache_write: u64) -> SseEvent {
    ev(
        "message_start",
        json!({"message": {"id": MOCK_MESSAGE_ID, "type": "message", "role": "assistant",
            "model": MOCK_MODEL, "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input_tokens, "output_tokens": 1,
                "cache_read_input_tokens": cache_read,
                "cache_creation_input_tokens": cache_write}}}),
    )
}

/// `ping`.
pub fn ev_ping() -> SseEvent {
    ev("ping", json!({}))
}

fn block_start(index: u32, block: Value) -> SseEvent {
    ev(
        "content_block_start",
        json!({"index": index, "content_block": block}),
    )
}

fn block_delta(index: u32, delta: Value) -> SseEvent {
    ev(
        "content_block_delta",
        json!({"index": index, "delta": delta}),
    )
}

/// `content_block_start` of a text block.
pub fn ev_text_start(index: u32) -> SseEvent {
    block_start(index, json!({"type": "text", "text": ""}))
}

/// A piece of answer text: `text_delta`.
pub fn ev_text_delta(index: u32, text: &str) -> SseEvent {
    block_delta(index, json!({"type": "text_delta", "text": text}))
}

/// `content_block_start` of a thinking block.
pub fn ev_thinking_start(index: u32) -> SseEvent {
    block_start(
        index,
        json!({"type": "thinking", "thinking": "", "signature": ""}),
    )
}

/// A piece of thinking: `thinking_delta`.
pub fn ev_thinking_delta(index: u32, thinking: &str) -> SseEvent {
    block_delta(
        index,
        json!({"type": "thinking_delta", "thinking": thinking}),
    )
}

/// The thinking block's signature: `signature_delta`.
pub fn ev_signature_delta(index: u32, signature: &str) -> SseEvent {
    block_delta(
        index,
        json!({"type": "signature_delta", "signature": signature}),
    )
}

/// `content_block_start` of a `redacted_thinking` block.
pub fn ev_redacted_thinking(index: u32, data: &str) -> SseEvent {
    block_start(index, json!({"type": "redacted_thinking", "data": data}))
}

/// `content_block_start` of a `tool_use` block (empty input).
pub fn ev_tool_use_start(index: u32, id: &str, name: &str) -> SseEvent {
    block_start(
        index,
        json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
    )
}

/// A piece of a tool call's input JSON: `input_json_delta`.
pub fn ev_input_json_delta(index: u32, partial_json: &str) -> SseEvent {
    block_delta(
        index,
        json!({"type": "input_json_delta", "partial_json": partial_json}),
    )
}

/// `content_block_stop`.
pub fn ev_block_stop(index: u32) -> SseEvent {
    ev("content_block_stop", json!({"index": index}))
}

/// `message_delta` with the stop reason (`end_turn`, `tool_use`,
/// `max_tokens`, …) and the output token count.
pub fn ev_message_delta(stop_reason: &str, output_tokens: u64) -> SseEvent {
    ev(
        "message_delta",
        json!({"delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output_tokens}}),
    )
}

/// `message_stop`.
pub fn ev_message_stop() -> SseEvent {
    ev("message_stop", json!({}))
}

/// An in-stream `error` event (`overloaded_error`, `api_error`, …).
pub fn ev_error(error_type: &str, message: &str) -> SseEvent {
    ev(
        "error",
        json!({"error": {"type": error_type, "message": message}}),
    )
}

/// An HTTP error body as Anthropic sends it, for [`MockResponse::error`]
/// (529 with `overloaded_error`, 429 with `rate_limit_error`, 401 with
/// `authentication_error`, …).
pub fn error_body(error_type: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type, "message": message}})
}

/// A text block at `index` with `text` in a few deltas.
pub fn text_block(index: u32, text: &str) -> Vec<SseEvent> {
    let mut events = vec![ev_text_start(index)];
    events.extend(
        split_pieces(text, 3)
            .iter()
            .map(|p| ev_text_delta(index, p)),
    );
    events.push(ev_block_stop(index));
    events
}

/// A signed thinking block at `index` with `thinking` in a few deltas.
pub fn thinking_block(index: u32, thinking: &str, signature: &str) -> Vec<SseEvent> {
    let mut events = vec![ev_thinking_start(index)];
    events.extend(
        split_pieces(thinking, 3)
            .iter()
            .map(|p| ev_thinking_delta(index, p)),
    );
    events.push(ev_signature_delta(index, signature));
    events.push(ev_block_stop(index));
    events
}

/// `tool_use` blocks from `first_index` on, input in several deltas (the
/// first one empty, as Anthropic sends it).
pub fn tool_use_blocks(first_index: u32, calls: &[MockToolCall]) -> Vec<SseEvent> {
    let mut events = Vec::new();
    for (index, call) in (first_index..).zip(calls) {
        events.push(ev_tool_use_start(index, &call.id, &call.name));
        events.push(ev_input_json_delta(index, ""));
        events.extend(
            split_pieces(&call.arguments.to_string(), 4)
                .iter()
                .map(|p| ev_input_json_delta(index, p)),
        );
        events.push(ev_block_stop(index));
    }
    events
}

fn whole(mut blocks: Vec<SseEvent>, stop_reason: &str) -> MockResponse {
    let mut events = vec![ev_message_start(MOCK_INPUT_TOKENS), ev_ping()];
    events.append(&mut blocks);
    events.push(ev_message_delta(stop_reason, MOCK_OUTPUT_TOKENS));
    events.push(ev_message_stop());
    MockResponse::sse(events)
}

/// A whole text answer: message_start, ping, a text block in a few deltas,
/// `end_turn` with usage ([`MOCK_INPUT_TOKENS`], [`MOCK_OUTPUT_TOKENS`]),
/// message_stop.
pub fn text(text: &str) -> MockResponse {
    whole(text_block(0, text), "end_turn")
}

/// A whole tool-use answer (`stop_reason: tool_use`).
pub fn tool_calls(calls: Vec<MockToolCall>) -> MockResponse {
    text_and_tool_calls("", calls)
}

/// Some text (skipped when empty) followed by tool calls.
pub fn text_and_tool_calls(text: &str, calls: Vec<MockToolCall>) -> MockResponse {
    let (mut blocks, first) = if text.is_empty() {
        (Vec::new(), 0)
    } else {
        (text_block(0, text), 1)
    };
    blocks.extend(tool_use_blocks(first, &calls));
    whole(blocks, "tool_use")
}

/// A signed thinking block, then a text answer.
pub fn thinking_and_text(thinking: &str, signature: &str, answer: &str) -> MockResponse {
    let mut blocks = thinking_block(0, thinking, signature);
    blocks.extend(text_block(1, answer));
    whole(blocks, "end_turn")
}
