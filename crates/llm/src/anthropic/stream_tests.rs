//! Unit tests of the Messages decoder: the recorded fixture and every SSE
//! edge case (split events, multi-line data, pings, cuts, unknown and error
//! events).

use super::*;
use crate::ErrorKind;
use crate::http::decode_chunks;
use crate::stream_test_support::{args_of, assert_any_split_decodes_the_same, ev, ok, text_of};

const FIXTURE: &str = include_str!("../../tests/fixtures/anthropic_thinking_tool_use.sse");
const URL: &str = "http://x/v1/messages";

fn decode(chunks: &[&[u8]]) -> Vec<Result<ModelEvent>> {
    decode_chunks(MessagesDecoder::new(URL), chunks)
}

fn start() -> String {
    ev(
        "message_start",
        json!({"message": {"id": "msg_1", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
    )
}

fn block_start(index: u32, block: Value) -> String {
    ev(
        "content_block_start",
        json!({"index": index, "content_block": block}),
    )
}

fn delta(index: u32, delta: Value) -> String {
    ev(
        "content_block_delta",
        json!({"index": index, "delta": delta}),
    )
}

fn text(index: u32, text: &str) -> String {
    delta(index, json!({"type": "text_delta", "text": text}))
}

fn stop(index: u32) -> String {
    ev("content_block_stop", json!({"index": index}))
}

fn end(reason: &str) -> String {
    [
        ev(
            "message_delta",
            json!({"delta": {"stop_reason": reason}, "usage": {"output_tokens": 5}}),
        ),
        ev("message_stop", json!({})),
    ]
    .concat()
}

fn thinking_of(events: &[ModelEvent]) -> (String, Vec<String>) {
    let mut text = String::new();
    let mut signatures = Vec::new();
    for e in events {
        if let ModelEvent::ThinkingDelta { delta, signature } = e {
            text.push_str(delta);
            signatures.extend(signature.clone());
        }
    }
    (text, signatures)
}

#[test]
fn fixture_maps_thinking_text_tools_and_usage() {
    let events = ok(decode(&[FIXTURE.as_bytes()]));
    assert_eq!(
        events[0],
        ModelEvent::Start {
            response_id: Some("msg_fx1".into())
        }
    );
    let (thinking, signatures) = thinking_of(&events);
    assert_eq!(
        thinking,
        "The user wants the files listed, then the README."
    );
    assert_eq!(signatures, ["EqQBCkYIBxgCKkDfixtureSignature=="]);
    assert_eq!(text_of(&events), "I'll list the files and read the README.");
    assert!(events.contains(&ModelEvent::ToolCallStart {
        index: 2,
        id: "toolu_fx1".into(),
        name: "bash".into()
    }));
    assert!(events.contains(&ModelEvent::ToolCallStart {
        index: 3,
        id: "toolu_fx2".into(),
        name: "read".into()
    }));
    assert_eq!(
        args_of(&events, 2),
        r#"{"command": "ls -la", "timeout": 30}"#
    );
    assert_eq!(args_of(&events, 3), r#"{"path": "README.md"}"#);
    let n = events.len();
    assert_eq!(
        events[n - 2],
        ModelEvent::Usage(Usage {
            input: 12,
            output: 96,
            cache_read: 1500,
            cache_write: 300,
            total_tokens: 1908,
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
    assert_any_split_decodes_the_same(decode, FIXTURE, &[1, 3, 17, 100, 5000]);
}

#[test]
fn pings_comments_multi_line_data_and_unknown_events() {
    let multi_line = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\ndata: \"index\":0,\"delta\":{\"type\":\"text_delta\",\ndata: \"text\":\" there\"}}\n\n";
    let body = [
        start(),
        ev("ping", json!({})),
        ": keep-alive\n\n".to_owned(),
        block_start(0, json!({"type": "text", "text": ""})),
        text(0, "Hi"),
        multi_line.to_owned(),
        delta(0, json!({"type": "citations_delta", "citation": {}})),
        ev("future_event", json!({"x": 1})),
        block_start(1, json!({"type": "server_tool_use_v9", "id": "x"})),
        delta(
            1,
            json!({"type": "text_delta", "text": "ignored: unknown block"}),
        ),
        stop(1),
        stop(0),
        end("end_turn"),
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
fn cut_mid_event_and_clean_end_without_stop() {
    let body = [
        start(),
        block_start(0, json!({"type": "text"})),
        text(0, "Hel"),
    ]
    .concat();
    let half = "event: content_block_delta\ndata: {\"type\":\"content_bl";
    let items = decode(&[body.as_bytes(), half.as_bytes()]);
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::StreamCut);
    assert!(err.message.contains("mid-event"), "{err}");
    // message_delta arrived but not message_stop: still a cut.
    let body = [
        body,
        ev(
            "message_delta",
            json!({"delta": {"stop_reason": "end_turn"}}),
        ),
    ]
    .concat();
    let items = decode(&[body.as_bytes()]);
    assert_eq!(
        items.last().unwrap().as_ref().unwrap_err().kind,
        ErrorKind::StreamCut
    );
}

#[test]
fn error_events_classify() {
    let cases = [
        (
            "overloaded_error",
            "Overloaded",
            ErrorKind::ServerOverloaded,
        ),
        (
            "rate_limit_error",
            "Number of requests has exceeded your rate limit",
            ErrorKind::RateLimitExceeded,
        ),
        (
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
            ErrorKind::ContextWindowExceeded,
        ),
        ("api_error", "Internal server error", ErrorKind::Other),
    ];
    for (kind, message, expected) in cases {
        let body = [
            start(),
            block_start(0, json!({"type": "text"})),
            text(0, "par"),
            ev(
                "error",
                json!({"error": {"type": kind, "message": message}}),
            ),
            text(0, "never"),
        ]
        .concat();
        let items = decode(&[body.as_bytes()]);
        let err = items.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind, expected, "{err}");
        assert!(err.message.contains(message), "{err}");
        assert_eq!(text_of(&ok(items[..items.len() - 1].to_vec())), "par");
    }
    let items = decode(&[b"event: content_block_delta\ndata: {oops\n\n"]);
    assert_eq!(items[0].as_ref().unwrap_err().kind, ErrorKind::Decode);
}

#[test]
fn stop_reasons_map() {
    for (reason, expected) in [
        ("end_turn", StopReason::Stop),
        ("stop_sequence", StopReason::Stop),
        ("pause_turn", StopReason::Stop),
        ("max_tokens", StopReason::Length),
        ("model_context_window_exceeded", StopReason::Length),
        ("refusal", StopReason::Error),
        ("tool_use", StopReason::ToolUse),
    ] {
        assert_eq!(stop_reason(reason), expected, "{reason}");
    }
    // end_turn with a tool call means the tools must run; no message_delta
    // at all means Stop.
    let body = [
        start(),
        block_start(
            0,
            json!({"type": "tool_use", "id": "t", "name": "n", "input": {"a": 1}}),
        ),
        stop(0),
        end("end_turn"),
    ]
    .concat();
    let events = ok(decode(&[body.as_bytes()]));
    assert_eq!(
        args_of(&events, 0),
        r#"{"a":1}"#,
        "input from the start block"
    );
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Finish {
            stop_reason: StopReason::ToolUse
        })
    );
    let body = [start(), ev("message_stop", json!({}))].concat();
    let events = ok(decode(&[body.as_bytes()]));
    assert_eq!(
        events,
        [
            ModelEvent::Start {
                response_id: Some("msg_1".into())
            },
            ModelEvent::Finish {
                stop_reason: StopReason::Stop
            }
        ]
    );
}

#[test]
fn adjacent_thinking_blocks_carry_the_whole_run() {
    let body = [
        start(),
        block_start(0, json!({"type": "thinking", "thinking": ""})),
        delta(0, json!({"type": "thinking_delta", "thinking": "one"})),
        delta(0, json!({"type": "signature_delta", "signature": "S1"})),
        stop(0),
        block_start(1, json!({"type": "redacted_thinking", "data": "R1"})),
        stop(1),
        block_start(2, json!({"type": "thinking", "thinking": ""})),
        delta(2, json!({"type": "thinking_delta", "thinking": "two"})),
        delta(2, json!({"type": "signature_delta", "signature": "S2"})),
        stop(2),
        block_start(3, json!({"type": "text", "text": "ok"})),
        stop(3),
        // After a text block a new run starts: plain signature again.
        block_start(4, json!({"type": "thinking"})),
        delta(4, json!({"type": "thinking_delta", "thinking": "three"})),
        delta(4, json!({"type": "signature_delta", "signature": "S3"})),
        stop(4),
        // Unsigned thinking gives text but no signature.
        block_start(5, json!({"type": "text"})),
        stop(5),
        block_start(6, json!({"type": "thinking"})),
        delta(6, json!({"type": "thinking_delta", "thinking": "four"})),
        stop(6),
        end("end_turn"),
    ]
    .concat();
    let events = ok(decode(&[body.as_bytes()]));
    let (thinking, signatures) = thinking_of(&events);
    assert_eq!(thinking, "one\n\ntwothreefour");
    assert_eq!(signatures.len(), 4);
    assert_eq!(signatures[0], "S1");
    assert_eq!(
        serde_json::from_str::<Value>(&signatures[1]).unwrap(),
        json!([{"type": "thinking", "thinking": "one", "signature": "S1"},
            {"type": "redacted_thinking", "data": "R1"}])
    );
    assert_eq!(
        serde_json::from_str::<Value>(&signatures[2]).unwrap(),
        json!([{"type": "thinking", "thinking": "one", "signature": "S1"},
            {"type": "redacted_thinking", "data": "R1"},
            {"type": "thinking", "thinking": "two", "signature": "S2"}])
    );
    assert_eq!(signatures[3], "S3");
    assert_eq!(text_of(&events), "ok");
}

#[test]
fn usage_fields_in_message_delta_replace_the_start() {
    let body = [
        start(),
        ev(
            "message_delta",
            json!({"delta": {"stop_reason": "end_turn"}, "usage": {"input_tokens": 40,
                "cache_read_input_tokens": 7, "output_tokens": 9}}),
        ),
        ev("message_stop", json!({})),
    ]
    .concat();
    let events = ok(decode(&[body.as_bytes()]));
    assert_eq!(
        events[1],
        ModelEvent::Usage(Usage {
            input: 40,
            output: 9,
            cache_read: 7,
            cache_write: 0,
            total_tokens: 56,
            ..Usage::default()
        })
    );
}
