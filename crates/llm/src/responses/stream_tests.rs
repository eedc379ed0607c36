//! Unit tests of the Responses decoder: the recorded fixture and every SSE
//! edge case (split events, multi-line data, keep-alives, cuts, unknown and
//! error events).

use super::*;
use crate::ErrorKind;
use crate::http::decode_chunks;
use crate::stream_test_support::{args_of, assert_any_split_decodes_the_same, ev, ok, text_of};

const FIXTURE: &str = include_str!("../../tests/fixtures/responses_reasoning_tool_calls.sse");
const URL: &str = "http://x/v1/responses";

fn decode(chunks: &[&[u8]]) -> Vec<Result<ModelEvent>> {
    decode_chunks(ResponsesDecoder::new(URL), chunks)
}

fn created() -> String {
    ev("response.created", json!({"response": {"id": "resp_1"}}))
}

fn completed() -> String {
    ev(
        "response.completed",
        json!({"response": {"id": "resp_1", "status": "completed",
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}}),
    )
}

fn text_delta(index: u32, delta: &str) -> String {
    ev(
        "response.output_text.delta",
        json!({"output_index": index, "content_index": 0, "delta": delta}),
    )
}

#[test]
fn fixture_maps_reasoning_text_calls_and_usage() {
    let events = ok(decode(&[FIXTURE.as_bytes()]));
    assert_eq!(
        events[0],
        ModelEvent::Start {
            response_id: Some("resp_fx1".into())
        }
    );
    let thinking: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ThinkingDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        thinking,
        "**Listing files**\n\nThe user wants to see the files.\n\n**Reading**\n\nThen read the README."
    );
    let signatures: Vec<Value> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ThinkingDelta {
                signature: Some(s),
                delta,
            } => {
                assert_eq!(delta, "", "the summary was already streamed");
                Some(serde_json::from_str(s).unwrap())
            }
            _ => None,
        })
        .collect();
    assert_eq!(signatures.len(), 1);
    assert_eq!(signatures[0]["type"], "reasoning");
    assert_eq!(signatures[0]["id"], "rs_fx1");
    assert_eq!(
        signatures[0]["encrypted_content"],
        "gAAAAABo_fixture_encrypted_reasoning=="
    );
    assert_eq!(signatures[0]["summary"].as_array().unwrap().len(), 2);
    assert_eq!(text_of(&events), "I'll list the files and read the README.");
    let starts: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::ToolCallStart { .. }))
        .cloned()
        .collect();
    assert_eq!(
        starts,
        [
            ModelEvent::ToolCallStart {
                index: 2,
                id: "call_fx1".into(),
                name: "bash".into()
            },
            ModelEvent::ToolCallStart {
                index: 3,
                id: "call_fx2".into(),
                name: "read".into()
            },
        ]
    );
    assert_eq!(args_of(&events, 2), r#"{"command":"ls -la","timeout":30}"#);
    assert_eq!(args_of(&events, 3), r#"{"path":"README.md"}"#);
    let n = events.len();
    assert_eq!(
        events[n - 2],
        ModelEvent::Usage(Usage {
            input: 176,
            output: 180,
            cache_read: 1024,
            cache_write: 0,
            total_tokens: 1380,
            ..Usage::default()
        })
    );
    assert_eq!(
        events[n - 1],
        ModelEvent::Finish {
            stop_reason: StopReason::ToolUse
        }
    );
}

#[test]
fn any_split_of_the_fixture_decodes_the_same() {
    assert_any_split_decodes_the_same(decode, FIXTURE, &[1, 2, 7, 64, 1000]);
}

#[test]
fn keep_alives_multi_line_data_and_unknown_events() {
    // A data object spread over several `data:` lines is joined with `\n`,
    // which JSON treats as whitespace.
    let multi_line = "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\ndata: \"output_index\":0,\ndata: \"delta\":\"Hi\"}\n\n";
    let body = [
        ": keep-alive\n\n".to_owned(),
        created(),
        ev("response.in_progress", json!({"response": {}})),
        ev("response.future_feature.delta", json!({"delta": "??"})),
        ev("keepalive", json!({})),
        multi_line.to_owned(),
        text_delta(0, " there"),
        ": ping\n\n".to_owned(),
        ev(
            "response.output_text.done",
            json!({"output_index": 0, "text": "Hi there"}),
        ),
        completed(),
    ]
    .concat();
    let events = ok(decode(&[body.as_bytes()]));
    assert_eq!(text_of(&events), "Hi there");
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Finish {
            stop_reason: StopReason::Stop
        })
    );
}

#[test]
fn cut_mid_event_and_clean_end_without_completion() {
    let body = [created(), text_delta(0, "Hel")].concat();
    let half = "event: response.output_text.delta\ndata: {\"type\":\"resp";
    let items = decode(&[body.as_bytes(), half.as_bytes()]);
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::StreamCut);
    assert!(err.message.contains("mid-event"), "{err}");
    let items = decode(&[body.as_bytes()]);
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::StreamCut);
    assert!(!err.message.contains("mid-event"), "{err}");
}

#[test]
fn error_and_failed_events() {
    let cases = [
        (
            ev(
                "error",
                json!({"code": "rate_limit_exceeded", "message": "Rate limit reached", "param": null}),
            ),
            ErrorKind::RateLimitExceeded,
            "Rate limit reached",
        ),
        (
            ev(
                "response.failed",
                json!({"response": {"id": "r", "status": "failed",
                    "error": {"code": "server_error", "message": "The model is overloaded"}}}),
            ),
            ErrorKind::ServerOverloaded,
            "overloaded",
        ),
        (
            ev(
                "response.failed",
                json!({"response": {"error": {"code": "context_length_exceeded",
                    "message": "Your input exceeds the context window of this model."}}}),
            ),
            ErrorKind::ContextWindowExceeded,
            "context window",
        ),
        (
            ev("response.failed", json!({"response": {"status": "failed"}})),
            ErrorKind::Other,
            "response failed",
        ),
        (
            ev(
                "error",
                json!({"error": {"type": "server_error", "message": "boom"}}),
            ),
            ErrorKind::ServerOverloaded,
            "boom",
        ),
    ];
    for (event, kind, needle) in cases {
        let body = [
            created(),
            text_delta(0, "par"),
            event,
            text_delta(0, "never"),
        ]
        .concat();
        let items = decode(&[body.as_bytes()]);
        assert_eq!(text_of(&ok(items[..2].to_vec())), "par");
        assert_eq!(items.len(), 3, "the error ends the stream: {items:?}");
        let err = items[2].as_ref().unwrap_err();
        assert_eq!(err.kind, kind, "{err}");
        assert!(err.message.contains(needle), "{err}");
    }
    let items = decode(&[b"data: {not json\n\n"]);
    assert_eq!(items[0].as_ref().unwrap_err().kind, ErrorKind::Decode);
}

#[test]
fn incomplete_maps_to_length() {
    let body = [
        created(),
        text_delta(0, "Hi"),
        ev(
            "response.incomplete",
            json!({"response": {"status": "incomplete",
                "incomplete_details": {"reason": "max_output_tokens"},
                "usage": {"input_tokens": 3, "output_tokens": 4}}}),
        ),
    ]
    .concat();
    let events = ok(decode(&[body.as_bytes()]));
    assert_eq!(
        events[events.len() - 2],
        ModelEvent::Usage(Usage {
            input: 3,
            output: 4,
            total_tokens: 7,
            ..Usage::default()
        })
    );
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Finish {
            stop_reason: StopReason::Length
        })
    );
}

#[test]
fn items_without_deltas_are_sent_whole() {
    // A server that only sends `output_item.done` items (and no `created`).
    let body = [
        ev(
            "response.output_item.done",
            json!({"output_index": 0, "item": {"type": "reasoning", "id": "rs_9",
                "summary": [{"type": "summary_text", "text": "A"}, {"type": "summary_text", "text": "B"}]}}),
        ),
        ev(
            "response.output_item.done",
            json!({"output_index": 1, "item": {"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "Hello"}]}}),
        ),
        ev(
            "response.output_item.done",
            json!({"output_index": 2, "item": {"type": "function_call", "id": "fc_9",
                "call_id": "call_9", "name": "ls", "arguments": "{}"}}),
        ),
        // Arguments only in `.done` for a started call.
        ev(
            "response.output_item.added",
            json!({"output_index": 3, "item": {"type": "function_call", "call_id": "call_10", "name": "x"}}),
        ),
        ev(
            "response.function_call_arguments.done",
            json!({"output_index": 3, "arguments": "{\"a\":1}"}),
        ),
        ev(
            "response.output_item.done",
            json!({"output_index": 3, "item": {"type": "function_call", "call_id": "call_10",
                "name": "x", "arguments": "{\"a\":1}"}}),
        ),
        completed(),
    ]
    .concat();
    let events = ok(decode(&[body.as_bytes()]));
    assert_eq!(events[0], ModelEvent::Start { response_id: None });
    assert_eq!(
        events[1],
        ModelEvent::ThinkingDelta {
            delta: "A\n\nB".into(),
            signature: None
        },
        "no encrypted content, no signature"
    );
    assert_eq!(text_of(&events), "Hello");
    assert_eq!(args_of(&events, 2), "{}");
    assert_eq!(args_of(&events, 3), "{\"a\":1}");
    assert!(events.contains(&ModelEvent::ToolCallStart {
        index: 2,
        id: "call_9".into(),
        name: "ls".into()
    }));
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Finish {
            stop_reason: StopReason::ToolUse
        })
    );
}

#[test]
fn argument_deltas_before_the_item_are_held() {
    let body = [
        created(),
        ev(
            "response.function_call_arguments.delta",
            json!({"output_index": 0, "delta": "{\"a\""}),
        ),
        ev(
            "response.output_item.added",
            json!({"output_index": 0, "item": {"type": "function_call", "call_id": "c", "name": "n"}}),
        ),
        ev(
            "response.function_call_arguments.delta",
            json!({"output_index": 0, "delta": ":1}"}),
        ),
        completed(),
    ]
    .concat();
    let events = ok(decode(&[body.as_bytes()]));
    assert!(matches!(events[1], ModelEvent::ToolCallStart { .. }));
    assert_eq!(args_of(&events, 0), "{\"a\":1}");
}
