//! The response stream of the Chat Completions dialect.
//!
//! This module owns the mapping of `chat.completion.chunk` SSE events to
//! [`ModelEvent`]s ([`ChunkDecoder`]). It sees SSE events only: framing,
//! timeouts and cancellation belong to the HTTP plumbing.
//!
//! Wire format consumed (one JSON chunk per `data:` event):
//!
//! ```text
//! data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}
//! data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}
//! data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Hel"}}]}
//! data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",
//!        "type":"function","function":{"name":"bash","arguments":"{\"comm"}}]}}]}
//! data: {"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}
//! data: {"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,
//!        "total_tokens":15,"prompt_tokens_details":{"cached_tokens":4}}}
//! data: [DONE]
//! ```
//!
//! Mapping: the first chunk gives `Start{response_id: id}`; `delta.content`
//! → `TextDelta`; `delta.reasoning_content` or `delta.reasoning` →
//! `ThinkingDelta` (no signature); `delta.tool_calls[]` → `ToolCallStart`
//! once per `index` (when its name is first seen; the id is the first one
//! seen, or `call_<index>` if the server sends none; servers that repeat
//! id/name in every piece are handled), then `ToolCallDelta` per arguments
//! piece; `usage` → `Usage` (input = prompt − cached, cache_read = cached);
//! `finish_reason` is remembered and `Finish` is emitted at `[DONE]`, or when
//! the body ends (cleanly or not) after a finish_reason, so a usage chunk
//! after the finish chunk is not lost. `finish_reason`: `stop` → Stop,
//! `length` → Length, `tool_calls`/`function_call` → ToolUse,
//! `content_filter` → Error, anything else → Stop; `stop` with tool calls in
//! the response → ToolUse. `{"error":{…}}` → an error. A body that ends
//! before any finish_reason or `[DONE]` → [`crate::ErrorKind::StreamCut`].

use std::collections::BTreeMap;

use keel_protocol::{StopReason, Usage};
use serde_json::Value;

use crate::http::SseDecoder;
use crate::sse::SseEvent;
use crate::{Error, ModelEvent, Result};

#[derive(Debug, Default)]
struct ToolCallState {
    id: String,
    started: bool,
    /// Argument pieces that arrived before the call's name.
    buffered: String,
}

/// Decodes one Chat Completions response.
#[derive(Debug)]
pub(crate) struct ChunkDecoder {
    url: String,
    started: bool,
    tool_calls: BTreeMap<u32, ToolCallState>,
    finish_reason: Option<StopReason>,
}

impl ChunkDecoder {
    pub(crate) fn new(url: &str) -> Self {
        ChunkDecoder {
            url: crate::error::redact_url(url),
            started: false,
            tool_calls: BTreeMap::new(),
            finish_reason: None,
        }
    }

    /// Decodes the `data` of one SSE event.
    pub(crate) fn on_data(&mut self, data: &str) -> Result<Vec<ModelEvent>> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(self.finish());
        }
        if data.is_empty() {
            return Ok(Vec::new());
        }
        let chunk = crate::http::parse_json_data(data, &self.url)?;
        let error = &chunk["error"];
        if !error.is_null() {
            let error = if error.is_object() {
                error.clone()
            } else {
                serde_json::json!({"message": error})
            };
            return Err(Error::from_stream_error(&error, &self.url));
        }

        let mut events = Vec::new();
        if !self.started {
            self.started = true;
            let response_id = chunk["id"]
                .as_str()
                .filter(|id| !id.is_empty())
                .map(str::to_owned);
            events.push(ModelEvent::Start { response_id });
        }
        let choice = &chunk["choices"][0];
        let delta = &choice["delta"];
        for key in ["reasoning_content", "reasoning"] {
            if let Some(text) = delta[key].as_str().filter(|t| !t.is_empty()) {
                events.push(ModelEvent::ThinkingDelta {
                    delta: text.to_owned(),
                    signature: None,
                });
                break;
            }
        }
        if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
            events.push(ModelEvent::TextDelta(text.to_owned()));
        }
        if let Some(calls) = delta["tool_calls"].as_array() {
            for (position, call) in calls.iter().enumerate() {
                self.tool_call(position, call, &mut events);
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            self.finish_reason = Some(stop_reason(reason));
        }
        let usage = if chunk["usage"].is_object() {
            &chunk["usage"]
        } else {
            &choice["usage"]
        };
        if usage.is_object() {
            events.push(ModelEvent::Usage(parse_usage(usage)));
        }
        Ok(events)
    }

    fn tool_call(&mut self, position: usize, call: &Value, events: &mut Vec<ModelEvent>) {
        let index = call["index"]
            .as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .unwrap_or_else(|| u32::try_from(position).unwrap_or(u32::MAX));
        let state = self.tool_calls.entry(index).or_default();
        if state.id.is_empty()
            && let Some(id) = call["id"].as_str()
        {
            state.id = id.to_owned();
        }
        let function = &call["function"];
        let piece = match &function["arguments"] {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        if !state.started {
            if let Some(name) = function["name"].as_str().filter(|n| !n.is_empty()) {
                state.started = true;
                let id = if state.id.is_empty() {
                    format!("call_{index}")
                } else {
                    state.id.clone()
                };
                events.push(ModelEvent::ToolCallStart {
                    index,
                    id,
                    name: name.to_owned(),
                });
                let buffered = std::mem::take(&mut state.buffered);
                if !buffered.is_empty() {
                    events.push(ModelEvent::ToolCallDelta {
                        index,
                        delta: buffered,
                    });
                }
            } else {
                state.buffered.push_str(&piece);
                return;
            }
        }
        if !piece.is_empty() {
            events.push(ModelEvent::ToolCallDelta {
                index,
                delta: piece,
            });
        }
    }

    /// The closing events: `Start` if nothing came, then `Finish`.
    fn finish(&mut self) -> Vec<ModelEvent> {
        let mut events = Vec::new();
        if !self.started {
            self.started = true;
            events.push(ModelEvent::Start { response_id: None });
        }
        let any_tool_call = self.tool_calls.values().any(|c| c.started);
        let stop_reason = match self.finish_reason {
            Some(StopReason::Stop) | None if any_tool_call => StopReason::ToolUse,
            Some(reason) => reason,
            None => StopReason::Stop,
        };
        events.push(ModelEvent::Finish { stop_reason });
        events
    }
}

impl SseDecoder for ChunkDecoder {
    fn on_event(&mut self, event: SseEvent) -> Result<Vec<ModelEvent>> {
        self.on_data(&event.data)
    }

    fn on_end(&mut self, mid_event: bool) -> Result<Vec<ModelEvent>> {
        if self.finish_reason.is_some() {
            return Ok(self.finish());
        }
        Err(crate::http::cut_error(&self.url, mid_event))
    }

    fn on_body_error(&mut self, error: Error) -> Result<Vec<ModelEvent>> {
        if self.finish_reason.is_some() {
            return Ok(self.finish());
        }
        Err(error)
    }
}

/// Maps a `finish_reason`.
pub(crate) fn stop_reason(reason: &str) -> StopReason {
    match reason {
        "length" => StopReason::Length,
        "tool_calls" | "function_call" => StopReason::ToolUse,
        "content_filter" => StopReason::Error,
        _ => StopReason::Stop,
    }
}

/// Maps a `usage` object. Cost is left at zero: the core prices usage.
pub(crate) fn parse_usage(usage: &Value) -> Usage {
    let prompt = usage["prompt_tokens"].as_u64().unwrap_or(0);
    let completion = usage["completion_tokens"].as_u64().unwrap_or(0);
    let cached = usage["prompt_tokens_details"]["cached_tokens"]
        .as_u64()
        .unwrap_or(0)
        .min(prompt);
    Usage {
        input: prompt - cached,
        output: completion,
        cache_read: cached,
        cache_write: 0,
        total_tokens: usage["total_tokens"]
            .as_u64()
            .unwrap_or(prompt + completion),
        ..Usage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;
    use serde_json::json;

    fn chunk(delta: Value) -> String {
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
            .to_string()
    }

    fn finish(reason: &str) -> String {
        json!({"id": "chatcmpl-1", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
            .to_string()
    }

    fn decode(data: &[String]) -> (Vec<ModelEvent>, ChunkDecoder) {
        let mut d = ChunkDecoder::new("http://x/v1/chat/completions");
        let mut out = Vec::new();
        for item in data {
            out.extend(d.on_data(item).unwrap());
        }
        (out, d)
    }

    #[test]
    fn text_reasoning_usage_and_finish_order() {
        let usage = json!({"id": "chatcmpl-1", "choices": [], "usage": {
            "prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120,
            "prompt_tokens_details": {"cached_tokens": 30}}})
        .to_string();
        let (events, _) = decode(&[
            chunk(json!({"role": "assistant", "content": ""})),
            chunk(json!({"reasoning_content": "think"})),
            chunk(json!({"reasoning": "ing"})),
            chunk(json!({"content": "Hel"})),
            chunk(json!({"content": "lo"})),
            finish("stop"),
            usage,
            "[DONE]".into(),
        ]);
        assert_eq!(
            events,
            vec![
                ModelEvent::Start {
                    response_id: Some("chatcmpl-1".into())
                },
                ModelEvent::ThinkingDelta {
                    delta: "think".into(),
                    signature: None
                },
                ModelEvent::ThinkingDelta {
                    delta: "ing".into(),
                    signature: None
                },
                ModelEvent::TextDelta("Hel".into()),
                ModelEvent::TextDelta("lo".into()),
                ModelEvent::Usage(Usage {
                    input: 70,
                    output: 20,
                    cache_read: 30,
                    cache_write: 0,
                    total_tokens: 120,
                    ..Usage::default()
                }),
                ModelEvent::Finish {
                    stop_reason: StopReason::Stop
                },
            ]
        );
    }

    #[test]
    fn tool_calls_start_once_and_stream_arguments() {
        let (events, _) = decode(&[
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                "function": {"name": "bash", "arguments": ""}}]}),
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"com"}}]})),
            // A server that repeats id and name in every piece.
            chunk(json!({"tool_calls": [{"index": 0, "id": "call_a",
                "function": {"name": "bash", "arguments": "mand\":1}"}}]})),
            // Arguments before the name are held back until it arrives.
            chunk(json!({"tool_calls": [{"index": 1, "function": {"arguments": "{"}}]})),
            chunk(
                json!({"tool_calls": [{"index": 1, "function": {"name": "read", "arguments": "}"}}]}),
            ),
            finish("tool_calls"),
            "[DONE]".into(),
        ]);
        let starts: Vec<_> = events
            .iter()
            .filter(|e| matches!(e, ModelEvent::ToolCallStart { .. }))
            .collect();
        assert_eq!(
            starts,
            [
                &ModelEvent::ToolCallStart {
                    index: 0,
                    id: "call_a".into(),
                    name: "bash".into()
                },
                &ModelEvent::ToolCallStart {
                    index: 1,
                    id: "call_1".into(),
                    name: "read".into()
                },
            ]
        );
        let args = |index: u32| -> String {
            events
                .iter()
                .filter_map(|e| match e {
                    ModelEvent::ToolCallDelta { index: i, delta } if *i == index => {
                        Some(delta.as_str())
                    }
                    _ => None,
                })
                .collect()
        };
        assert_eq!(args(0), "{\"command\":1}");
        assert_eq!(args(1), "{}");
        assert_eq!(
            events.last(),
            Some(&ModelEvent::Finish {
                stop_reason: StopReason::ToolUse
            })
        );
    }

    #[test]
    fn finish_reasons_map() {
        assert_eq!(stop_reason("stop"), StopReason::Stop);
        assert_eq!(stop_reason("length"), StopReason::Length);
        assert_eq!(stop_reason("tool_calls"), StopReason::ToolUse);
        assert_eq!(stop_reason("function_call"), StopReason::ToolUse);
        assert_eq!(stop_reason("content_filter"), StopReason::Error);
        assert_eq!(stop_reason("eos"), StopReason::Stop);
        // `stop` with tool calls means the tools must run.
        let (events, _) = decode(&[
            chunk(json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "x"}}]})),
            finish("stop"),
            "[DONE]".into(),
        ]);
        assert_eq!(
            events.last(),
            Some(&ModelEvent::Finish {
                stop_reason: StopReason::ToolUse
            })
        );
    }

    #[test]
    fn end_of_body_needs_a_finish_reason() {
        let (_, mut d) = decode(&[chunk(json!({"content": "Hel"}))]);
        let err = d.on_end(true).unwrap_err();
        assert_eq!(err.kind, ErrorKind::StreamCut);
        assert!(err.message.contains("mid-event"), "{}", err.message);

        // finish_reason seen, usage may follow, no [DONE]: still complete.
        let (_, mut d) = decode(&[chunk(json!({"content": "Hi"})), finish("length")]);
        assert_eq!(
            d.on_end(false).unwrap(),
            vec![ModelEvent::Finish {
                stop_reason: StopReason::Length
            }]
        );
        let (_, mut d) = decode(&[finish("stop")]);
        let cut = Error::new(ErrorKind::StreamCut, "cut");
        assert!(d.on_body_error(cut.clone()).is_ok());
        let (_, mut d) = decode(&[chunk(json!({"content": "Hi"}))]);
        assert_eq!(d.on_body_error(cut.clone()), Err(cut));
    }

    #[test]
    fn error_events_and_garbage() {
        let mut d = ChunkDecoder::new("http://x/v1/chat/completions");
        let err = d
            .on_data(r#"{"error":{"message":"model overloaded","type":"server_error"}}"#)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::ServerOverloaded);
        assert!(err.message.contains("model overloaded"));
        let err = d
            .on_data(r#"{"error":"context_length_exceeded"}"#)
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::ContextWindowExceeded);
        let err = d.on_data("{not json").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Decode);
    }

    #[test]
    fn done_without_chunks_still_starts_and_finishes() {
        let (events, _) = decode(&["[DONE]".into()]);
        assert_eq!(
            events,
            vec![
                ModelEvent::Start { response_id: None },
                ModelEvent::Finish {
                    stop_reason: StopReason::Stop
                }
            ]
        );
    }
}
