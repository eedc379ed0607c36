//! The OpenAI Chat Completions dialect of the mock: event builders and
//! whole-answer shortcuts.
//!
//! This module owns the JSON of `chat.completion.chunk` events as servers
//! send them on `POST /v1/chat/completions` with `stream: true`. It does not
//! know about the HTTP side (see the server module).
//!
//! Wire format, one SSE `data:` line per chunk, `data: [DONE]` last:
//!
//! ```text
//! data: {"id":"chatcmpl-mock","object":"chat.completion.chunk","created":0,"model":"mock-model",
//!        "choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}
//! data: {"id":"chatcmpl-mock",…,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,
//!        "id":"call_1","type":"function","function":{"name":"bash","arguments":""}}]}}]}
//! data: {"id":"chatcmpl-mock",…,"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}
//! data: {"id":"chatcmpl-mock",…,"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}
//! data: [DONE]
//! ```

use serde_json::{Value, json};

use crate::response::{MockResponse, SseEvent};

/// The path this dialect is served on.
pub const PATH: &str = "/v1/chat/completions";
/// The `id` every chunk built here carries.
pub const MOCK_RESPONSE_ID: &str = "chatcmpl-mock";
/// The `model` every chunk built here carries.
pub const MOCK_MODEL: &str = "mock-model";
/// `prompt_tokens` reported by the whole-answer shortcuts.
pub const MOCK_PROMPT_TOKENS: u64 = 10;
/// `completion_tokens` reported by the whole-answer shortcuts.
pub const MOCK_COMPLETION_TOKENS: u64 = 5;

/// One chat-completions stream event (an SSE event).
pub type ChatChunk = SseEvent;

/// A chunk with arbitrary JSON data (for shapes the builders do not cover).
pub fn ev_chunk(value: Value) -> ChatChunk {
    SseEvent::json(&value)
}

fn chunk(choices: Value) -> ChatChunk {
    ev_chunk(json!({
        "id": MOCK_RESPONSE_ID,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MOCK_MODEL,
        "choices": choices,
    }))
}

fn delta(delta: Value) -> ChatChunk {
    chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]))
}

/// The opening chunk: `delta: {"role":"assistant","content":""}`.
pub fn ev_role() -> ChatChunk {
    delta(json!({"role": "assistant", "content": ""}))
}

/// A piece of answer text: `delta.content`.
pub fn ev_text_delta(text: &str) -> ChatChunk {
    delta(json!({"content": text}))
}

/// A piece of reasoning: `delta.reasoning_content` (DeepSeek, llama.cpp).
pub fn ev_reasoning_delta(text: &str) -> ChatChunk {
    delta(json!({"reasoning_content": text}))
}

/// A piece of reasoning in `delta.reasoning` (OpenRouter, Ollama).
pub fn ev_reasoning_field_delta(text: &str) -> ChatChunk {
    delta(json!({"reasoning": text}))
}

/// The first piece of tool call `index`: its id and name, empty arguments.
pub fn ev_tool_call_start(index: u32, id: &str, name: &str) -> ChatChunk {
    delta(json!({"tool_calls": [{
        "index": index,
        "id": id,
        "type": "function",
        "function": {"name": name, "arguments": ""},
    }]}))
}

/// A piece of tool call `index`'s argument JSON.
pub fn ev_tool_call_args(index: u32, piece: &str) -> ChatChunk {
    delta(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
}

/// The chunk carrying `finish_reason` (`stop`, `tool_calls`, `length`, …).
pub fn ev_finish(reason: &str) -> ChatChunk {
    chunk(json!([{"index": 0, "delta": {}, "finish_reason": reason}]))
}

/// The usage chunk (`choices: []`), as sent with `include_usage`.
pub fn ev_usage(prompt: u64, completion: u64) -> ChatChunk {
    ev_usage_cached(prompt, completion, 0)
}

/// The usage chunk with `prompt_tokens_details.cached_tokens`.
pub fn ev_usage_cached(prompt: u64, completion: u64, cached: u64) -> ChatChunk {
    let mut usage = json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    });
    if cached > 0 {
        usage["prompt_tokens_details"] = json!({"cached_tokens": cached});
    }
    ev_chunk(json!({
        "id": MOCK_RESPONSE_ID,
        "object": "chat.completion.chunk",
        "created": 0,
        "model": MOCK_MODEL,
        "choices": [],
        "usage": usage,
    }))
}

/// An in-stream error event: `data: {"error":{"message":…,"type":"server_error"}}`.
pub fn ev_error(message: &str) -> ChatChunk {
    ev_chunk(json!({"error": {"message": message, "type": "server_error"}}))
}

/// A `: keep-alive` comment line.
pub fn ev_keep_alive() -> ChatChunk {
    SseEvent::Comment("keep-alive".into())
}

/// The terminator: `data: [DONE]`.
pub fn ev_done() -> ChatChunk {
    SseEvent::data("[DONE]")
}

/// A tool call for [`MockResponse::tool_calls`].
#[derive(Debug, Clone, PartialEq)]
pub struct MockToolCall {
    pub id: String,
    pub name: String,
    pub arguments: Value,
}

/// A tool call `id` to tool `name` with these arguments.
pub fn tool_call(id: &str, name: &str, arguments: Value) -> MockToolCall {
    MockToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments,
    }
}

/// Splits `s` into up to `n` pieces of similar length, on char boundaries.
/// Concatenating the pieces gives `s` back.
pub fn split_pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// Text deltas for `text`, split into a few pieces.
pub fn text_events(text: &str) -> Vec<ChatChunk> {
    split_pieces(text, 3)
        .iter()
        .map(|p| ev_text_delta(p))
        .collect()
}

/// Start + argument pieces for each call (indices by position).
pub fn tool_call_events(calls: &[MockToolCall]) -> Vec<ChatChunk> {
    let mut events = Vec::new();
    for (index, call) in (0u32..).zip(calls) {
        events.push(ev_tool_call_start(index, &call.id, &call.name));
        for piece in split_pieces(&call.arguments.to_string(), 4) {
            events.push(ev_tool_call_args(index, &piece));
        }
    }
    events
}

fn finish_events(reason: &str) -> Vec<ChatChunk> {
    vec![
        ev_finish(reason),
        ev_usage(MOCK_PROMPT_TOKENS, MOCK_COMPLETION_TOKENS),
        ev_done(),
    ]
}

impl MockResponse {
    /// A whole text answer: role, the text in a few deltas, `finish_reason:
    /// stop`, usage ([`MOCK_PROMPT_TOKENS`], [`MOCK_COMPLETION_TOKENS`]),
    /// `[DONE]`.
    pub fn text(text: &str) -> MockResponse {
        let mut events = vec![ev_role()];
        events.extend(text_events(text));
        events.extend(finish_events("stop"));
        MockResponse::sse(events)
    }

    /// Reasoning deltas, then a text answer, as [`MockResponse::text`].
    pub fn thinking_and_text(thinking: &str, text: &str) -> MockResponse {
        let mut events = vec![ev_role()];
        events.extend(
            split_pieces(thinking, 3)
                .iter()
                .map(|p| ev_reasoning_delta(p)),
        );
        events.extend(text_events(text));
        events.extend(finish_events("stop"));
        MockResponse::sse(events)
    }

    /// A whole tool-call answer: role, each call's start and its arguments
    /// in several pieces, `finish_reason: tool_calls`, usage, `[DONE]`.
    pub fn tool_calls(calls: Vec<MockToolCall>) -> MockResponse {
        MockResponse::text_and_tool_calls("", calls)
    }

    /// Some text (skipped when empty) followed by tool calls.
    pub fn text_and_tool_calls(text: &str, calls: Vec<MockToolCall>) -> MockResponse {
        let mut events = vec![ev_role()];
        events.extend(text_events(text));
        events.extend(tool_call_events(&calls));
        events.extend(finish_events("tool_calls"));
        MockResponse::sse(events)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_rejoin() {
        let s = "héllo wörld, this is long";
        let pieces = split_pieces(s, 4);
        assert_eq!(pieces.len(), 4);
        assert_eq!(pieces.concat(), s);
        assert!(split_pieces("", 3).is_empty());
        assert_eq!(split_pieces("ab", 5), vec!["a", "b"]);
    }

    #[test]
    fn tool_call_arguments_rejoin() {
        let args = json!({"command": "echo hi"});
        let r = MockResponse::tool_calls(vec![tool_call("call_1", "bash", args.clone())]);
        let mut joined = String::new();
        for ev in r.events() {
            let SseEvent::Event { data, .. } = ev else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(data) else {
                continue;
            };
            if let Some(piece) =
                v["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"].as_str()
            {
                joined.push_str(piece);
            }
        }
        assert_eq!(serde_json::from_str::<Value>(&joined).unwrap(), args);
        assert_eq!(r.events().last(), Some(&ev_done()));
    }
}
