//! The OpenAI Responses dialect of the mock: event builders and
//! whole-answer shortcuts.
//!
//! This module owns the JSON of the SSE events servers send on
//! `POST /v1/responses` with `stream: true`. It does not know about the HTTP
//! side (see the server module). Use it through its path
//! (`responses::ev_output_text_delta(0, "Hel")`, `responses::text("Hi")`).
//!
//! Wire format: each event is `event: TYPE` plus one `data:` line whose
//! JSON repeats the `type`:
//!
//! ```text
//! event: response.created
//! data: {"type":"response.created","response":{"id":"resp_mock","status":"in_progress",…}}
//! event: response.output_item.added
//! data: {"type":"response.output_item.added","output_index":0,"item":{"type":"message",…}}
//! event: response.output_text.delta
//! data: {"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"Hel"}
//! event: response.output_item.added
//! data: {"type":"response.output_item.added","output_index":1,"item":{"type":"function_call",
//!        "id":"fc_1","call_id":"call_1","name":"bash","arguments":""}}
//! event: response.function_call_arguments.delta
//! data: {"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"comm"}
//! event: response.completed
//! data: {"type":"response.completed","response":{"id":"resp_mock","status":"completed",
//!        "usage":{"input_tokens":10,"output_tokens":5,"total_tokens":15}}}
//! ```

use serde_json::{Value, json};

use crate::chat_completions::{MockToolCall, split_pieces};
use crate::response::{MockResponse, SseEvent};

/// The path this dialect is served on.
pub const PATH: &str = "/v1/responses";
/// The response `id` the builders use.
pub const MOCK_RESPONSE_ID: &str = "resp_mock";
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

fn response(status: &str, usage: Value) -> Value {
    json!({"id": MOCK_RESPONSE_ID, "object": "response", "created_at": 0,
        "status": status, "model": MOCK_MODEL, "output": [], "usage": usage})
}

/// `response.created`.
pub fn ev_created() -> SseEvent {
    ev(
        "response.created",
        json!({"response": response("in_progress", Value::Null)}),
    )
}

/// `response.in_progress`.
pub fn ev_in_progress() -> SseEvent {
    ev(
        "response.in_progress",
        json!({"response": response("in_progress", Value::Null)}),
    )
}

/// `response.output_item.added` for an assistant message.
pub fn ev_message_added(output_index: u32) -> SseEvent {
    ev(
        "response.output_item.added",
        json!({"output_index": output_index, "item": {"type": "message",
            "id": format!("msg_{output_index}"), "role": "assistant", "status": "in_progress",
            "content": []}}),
    )
}

/// A piece of answer text: `response.output_text.delta`.
pub fn ev_output_text_delta(output_index: u32, delta: &str) -> SseEvent {
    ev(
        "response.output_text.delta",
        json!({"output_index": output_index, "item_id": format!("msg_{output_index}"),
            "content_index": 0, "delta": delta}),
    )
}

/// `response.output_item.done` for an assistant message with this text.
pub fn ev_message_done(output_index: u32, text: &str) -> SseEvent {
    ev(
        "response.output_item.done",
        json!({"output_index": output_index, "item": {"type": "message",
            "id": format!("msg_{output_index}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}}),
    )
}

/// `response.output_item.added` for a reasoning item.
pub fn ev_reasoning_added(output_index: u32) -> SseEvent {
    ev(
        "response.output_item.added",
        json!({"output_index": output_index,
            "item": {"type": "reasoning", "id": format!("rs_{output_index}"), "summary": []}}),
    )
}

/// `response.reasoning_summary_part.added`.
pub fn ev_reasoning_summary_part_added(output_index: u32, summary_index: u32) -> SseEvent {
    ev(
        "response.reasoning_summary_part.added",
        json!({"output_index": output_index, "summary_index": summary_index,
            "part": {"type": "summary_text", "text": ""}}),
    )
}

/// A piece of reasoning summary: `response.reasoning_summary_text.delta`.
pub fn ev_reasoning_summary_text_delta(
    output_index: u32,
    summary_index: u32,
    delta: &str,
) -> SseEvent {
    ev(
        "response.reasoning_summary_text.delta",
        json!({"output_index": output_index, "summary_index": summary_index, "delta": delta}),
    )
}

/// `response.output_item.done` for a reasoning item with one summary part
/// and, when given, its `encrypted_content`.
pub fn ev_reasoning_done(output_index: u32, summary: &str, encrypted: Option<&str>) -> SseEvent {
    ev(
        "response.output_item.done",
        json!({"output_index": output_index, "item": {"type": "reasoning",
            "id": format!("rs_{output_index}"),
            "summary": [{"type": "summary_text", "text": summary}],
            "encrypted_content": encrypted}}),
    )
}

fn function_call(
    output_index: u32,
    call_id: &str,
    name: &str,
    arguments: &str,
    status: &str,
) -> Value {
    json!({"type": "function_call", "id": format!("fc_{output_index}"), "call_id": call_id,
        "name": name, "arguments": arguments, "status": status})
}

/// `response.output_item.added` for a function call (empty arguments).
pub fn ev_function_call_added(output_index: u32, call_id: &str, name: &str) -> SseEvent {
    ev(
        "response.output_item.added",
        json!({"output_index": output_index,
            "item": function_call(output_index, call_id, name, "", "in_progress")}),
    )
}

/// A piece of a call's arguments: `response.function_call_arguments.delta`.
pub fn ev_function_call_arguments_delta(output_index: u32, delta: &str) -> SseEvent {
    ev(
        "response.function_call_arguments.delta",
        json!({"output_index": output_index, "item_id": format!("fc_{output_index}"), "delta": delta}),
    )
}

/// `response.function_call_arguments.done` with the whole arguments.
pub fn ev_function_call_arguments_done(output_index: u32, arguments: &str) -> SseEvent {
    ev(
        "response.function_call_arguments.done",
        json!({"output_index": output_index, "item_id": format!("fc_{output_index}"),
            "arguments": arguments}),
    )
}

/// `response.output_item.done` for a function call.
pub fn ev_function_call_done(
    output_index: u32,
    call_id: &str,
    name: &str,
    arguments: &str,
) -> SseEvent {
    ev(
        "response.output_item.done",
        json!({"output_index": output_index,
            "item": function_call(output_index, call_id, name, arguments, "completed")}),
    )
}

/// `response.completed` with usage.
pub fn ev_completed(input: u64, output: u64) -> SseEvent {
    ev_completed_cached(input, output, 0)
}

/// `response.completed` with usage, `cached` of the input tokens cached.
pub fn ev_completed_cached(input: u64, output: u64, cached: u64) -> SseEvent {
    let usage = json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached},
        "output_tokens": output, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": input + output});
    ev(
        "response.completed",
        json!({"response": response("completed", usage)}),
    )
}

/// `response.incomplete` (for example `max_output_tokens`).
pub fn ev_incomplete(reason: &str) -> SseEvent {
    let mut r = response("incomplete", json!({"input_tokens": 1, "output_tokens": 1}));
    r["incomplete_details"] = json!({"reason": reason});
    ev("response.incomplete", json!({"response": r}))
}

/// `response.failed` with an error `code` and `message`.
pub fn ev_failed(code: &str, message: &str) -> SseEvent {
    let mut r = response("failed", Value::Null);
    r["error"] = json!({"code": code, "message": message});
    ev("response.failed", json!({"response": r}))
}

/// A top-level `error` event.
pub fn ev_error(code: &str, message: &str) -> SseEvent {
    ev(
        "error",
        json!({"code": code, "message": message, "param": null}),
    )
}

/// A `: keep-alive` comment line.
pub fn ev_keep_alive() -> SseEvent {
    SseEvent::Comment("keep-alive".into())
}

/// An HTTP error body as OpenAI sends it, for [`MockResponse::error`].
pub fn error_body(message: &str, kind: &str, code: Option<&str>) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// An assistant message item at `output_index` with `text` in a few deltas.
pub fn message_events(output_index: u32, text: &str) -> Vec<SseEvent> {
    let mut events = vec![ev_message_added(output_index)];
    events.extend(
        split_pieces(text, 3)
            .iter()
            .map(|p| ev_output_text_delta(output_index, p)),
    );
    events.push(ev_message_done(output_index, text));
    events
}

/// Function call items from `first_index` on, arguments in several deltas.
pub fn function_call_events(first_index: u32, calls: &[MockToolCall]) -> Vec<SseEvent> {
    let mut events = Vec::new();
    for (index, call) in (first_index..).zip(calls) {
        let args = call.arguments.to_string();
        events.push(ev_function_call_added(index, &call.id, &call.name));
        events.extend(
            split_pieces(&args, 4)
                .iter()
                .map(|p| ev_function_call_arguments_delta(index, p)),
        );
        events.push(ev_function_call_arguments_done(index, &args));
        events.push(ev_function_call_done(index, &call.id, &call.name, &args));
    }
    events
}

fn whole(mut body: Vec<SseEvent>) -> MockResponse {
    let mut events = vec![ev_created(), ev_in_progress()];
    events.append(&mut body);
    events.push(ev_completed(MOCK_INPUT_TOKENS, MOCK_OUTPUT_TOKENS));
    MockResponse::sse(events)
}

/// A whole text answer: created, a message in a few deltas, completed with
/// usage ([`MOCK_INPUT_TOKENS`], [`MOCK_OUTPUT_TOKENS`]).
pub fn text(text: &str) -> MockResponse {
    whole(message_events(0, text))
}

/// A whole tool-call answer (arguments in several deltas each).
pub fn tool_calls(calls: Vec<MockToolCall>) -> MockResponse {
    whole(function_call_events(0, &calls))
}

/// Some text (skipped when empty) followed by tool calls.
pub fn text_and_tool_calls(text: &str, calls: Vec<MockToolCall>) -> MockResponse {
    let (mut events, first) = if text.is_empty() {
        (Vec::new(), 0)
    } else {
        (message_events(0, text), 1)
    };
    events.extend(function_call_events(first, &calls));
    whole(events)
}

/// A reasoning item (summary in a few deltas, `encrypted_content`), then a
/// text answer.
pub fn reasoning_and_text(summary: &str, encrypted: &str, answer: &str) -> MockResponse {
    let mut events = vec![ev_reasoning_added(0), ev_reasoning_summary_part_added(0, 0)];
    events.extend(
        split_pieces(summary, 3)
            .iter()
            .map(|p| ev_reasoning_summary_text_delta(0, 0, p)),
    );
    events.push(ev_reasoning_done(0, summary, Some(encrypted)));
    events.extend(message_events(1, answer));
    whole(events)
}
