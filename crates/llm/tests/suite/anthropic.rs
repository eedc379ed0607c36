//! The Anthropic Messages provider against the scripted mock server.

use keel_llm::{Dialect, ErrorKind, ModelEvent};
use keel_protocol::{
    ContentBlock, Message, StopReason, ThinkingLevel, ToolResultMessage, ToolSpec, Usage,
};
use keel_test_support::anthropic::*;
use keel_test_support::{MockModelServer, MockResponse, SseEvent, sse_from_text};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{
    SECRET_KEY, args_of, assemble, collect, provider_for, request, start_with, text_of, usage_of,
};

const FIXTURE: &str = include_str!("../fixtures/anthropic_thinking_tool_use.sse");

#[tokio::test]
async fn fixture_round_trip_replays_signed_thinking_and_merges_results() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(sse_from_text(FIXTURE)));
    server.push(text("Done."));
    let p = provider_for(&server, Dialect::AnthropicMessages);
    let mut req = request("list and read");
    req.model = "claude-sonnet-4-5".into();
    req.thinking_level = ThinkingLevel::Low;
    req.max_output_tokens = Some(64_000);
    let items = collect(
        start_with(&*p, req.clone(), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        items[0],
        Ok(ModelEvent::Start {
            response_id: Some("msg_fx1".into())
        })
    );
    assert_eq!(text_of(&items), "I'll list the files and read the README.");
    assert_eq!(
        args_of(&items, 2),
        r#"{"command": "ls -la", "timeout": 30}"#
    );
    assert_eq!(
        usage_of(&items),
        Some(Usage {
            input: 12,
            output: 96,
            cache_read: 1500,
            cache_write: 300,
            total_tokens: 1908,
            ..Usage::default()
        })
    );

    let assistant = assemble(&items, "anthropic-messages", "claude-sonnet-4-5");
    assert_eq!(assistant.stop_reason, StopReason::ToolUse);
    req.messages.push(Message::Assistant(assistant));
    for (id, output, is_error) in [
        ("toolu_fx1", "README.md\nsrc", false),
        ("toolu_fx2", "no such file", true),
    ] {
        req.messages.push(Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "x".into(),
            content: vec![ContentBlock::text(output)],
            details: None,
            is_error,
            timestamp: 0,
        }));
    }
    let items = collect(
        start_with(&*p, req, CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text_of(&items), "Done.");
    let body = server.requests()[1].body.clone();
    assert_eq!(
        body["messages"][1],
        json!({"role": "assistant", "content": [
            {"type": "thinking", "thinking": "The user wants the files listed, then the README.",
                "signature": "EqQBCkYIBxgCKkDfixtureSignature=="},
            {"type": "text", "text": "I'll list the files and read the README."},
            {"type": "tool_use", "id": "toolu_fx1", "name": "bash",
                "input": {"command": "ls -la", "timeout": 30}},
            {"type": "tool_use", "id": "toolu_fx2", "name": "read", "input": {"path": "README.md"}},
        ]})
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_fx1",
                "content": [{"type": "text", "text": "README.md\nsrc"}]},
            {"type": "tool_result", "tool_use_id": "toolu_fx2",
                "content": [{"type": "text", "text": "no such file"}], "is_error": true,
                "cache_control": {"type": "ephemeral"}},
        ]})
    );
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 4096})
    );
    assert_eq!(body["max_tokens"], 64_000);
}

#[tokio::test]
async fn request_headers_and_body() {
    let server = MockModelServer::start().await;
    server.push(text("ok"));
    server.push(text("ok"));
    let p = provider_for(&server, Dialect::AnthropicMessages);
    let mut req = request("hello");
    req.tools = vec![ToolSpec {
        name: "bash".into(),
        description: "Run a shell command".into(),
        parameters: json!({"type": "object"}),
    }];
    collect(
        start_with(&*p, req, CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    let r = server.last_request().unwrap();
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(SECRET_KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    assert_eq!(
        r.body,
        json!({
            "model": "mock-model",
            "max_tokens": 8192,
            "stream": true,
            "system": [{"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral"}}],
            "messages": [{"role": "user", "content": [
                {"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}],
            "tools": [{"name": "bash", "description": "Run a shell command",
                "input_schema": {"type": "object"}}],
        })
    );

    // Extra headers replace the version and add betas.
    let mut spec = super::spec_for(&server, Dialect::AnthropicMessages);
    spec.extra_headers = vec![
        ("anthropic-version".into(), "2099-01-01".into()),
        (
            "anthropic-beta".into(),
            "interleaved-thinking-2025-05-14".into(),
        ),
    ];
    let p = keel_llm::build_provider(&spec).unwrap();
    collect(
        start_with(&*p, request("x"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    let r = server.last_request().unwrap();
    assert_eq!(r.header("anthropic-version"), Some("2099-01-01"));
    assert_eq!(
        r.header("anthropic-beta"),
        Some("interleaved-thinking-2025-05-14")
    );
}

#[tokio::test]
async fn input_json_one_character_per_delta() {
    let server = MockModelServer::start().await;
    let args = r#"{"command": "echo hi && ls -la", "timeout": 30}"#;
    let mut events = vec![
        ev_message_start(5),
        ev_tool_use_start(0, "toolu_a", "bash"),
        ev_input_json_delta(0, ""),
    ];
    events.extend(args.chars().map(|c| ev_input_json_delta(0, &c.to_string())));
    events.push(ev_block_stop(0));
    events.extend([
        ev_tool_use_start(1, "toolu_b", "read"),
        ev_ping(),
        ev_input_json_delta(1, "{\"path\":"),
        ev_input_json_delta(1, "\"a\"}"),
        ev_block_stop(1),
    ]);
    events.extend([ev_message_delta("tool_use", 40), ev_message_stop()]);
    server.push(MockResponse::sse(events));
    let p = provider_for(&server, Dialect::AnthropicMessages);
    let items = collect(
        start_with(&*p, request("x"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(args_of(&items, 0), args);
    assert_eq!(args_of(&items, 1), r#"{"path":"a"}"#);
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finish {
            stop_reason: StopReason::ToolUse
        }))
    );
}

#[tokio::test]
async fn thinking_shortcut_and_redacted_thinking() {
    let server = MockModelServer::start().await;
    server.push(thinking_and_text("Let me think.", "SIG-1", "42"));
    let mut events = vec![ev_message_start(1), ev_redacted_thinking(0, "opaque")];
    events.extend([ev_block_stop(0)]);
    events.extend(text_block(1, "ok"));
    events.extend([ev_message_delta("end_turn", 2), ev_message_stop()]);
    server.push(MockResponse::sse(events));
    let p = provider_for(&server, Dialect::AnthropicMessages);
    let items = collect(
        start_with(&*p, request("q"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    let message = assemble(&items, "anthropic-messages", "mock-model");
    assert_eq!(
        message.content,
        [
            ContentBlock::Thinking {
                thinking: "Let me think.".into(),
                thinking_signature: Some("SIG-1".into())
            },
            ContentBlock::text("42"),
        ]
    );
    let items = collect(
        start_with(&*p, request("q"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    let message = assemble(&items, "anthropic-messages", "mock-model");
    let Some(ContentBlock::Thinking {
        thinking_signature: Some(signature),
        ..
    }) = message.content.first()
    else {
        panic!("{message:?}")
    };
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(signature).unwrap(),
        json!([{"type": "redacted_thinking", "data": "opaque"}])
    );
}

#[tokio::test]
async fn overloaded_error_mid_stream() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(vec![
        ev_message_start(5),
        ev_text_start(0),
        ev_text_delta(0, "par"),
        SseEvent::Comment("keep-alive".into()),
        ev_error("overloaded_error", "Overloaded"),
        ev_text_delta(0, "never"),
    ]));
    let p = provider_for(&server, Dialect::AnthropicMessages);
    let items = collect(
        start_with(&*p, request("x"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text_of(&items), "par");
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::ServerOverloaded, "{err}");
    assert!(err.is_retryable());
    assert!(err.message.contains("Overloaded"), "{err}");
}

#[tokio::test]
async fn context_overflow_is_not_retryable() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::error(
        400,
        error_body(
            "invalid_request_error",
            "prompt is too long: 210000 tokens > 200000 maximum",
        ),
    ));
    let p = provider_for(&server, Dialect::AnthropicMessages);
    let err = start_with(&*p, request("x"), CancellationToken::new())
        .await
        .err()
        .unwrap();
    assert_eq!(err.kind, ErrorKind::ContextWindowExceeded);
    assert!(!err.is_retryable());
}
