//! The OpenAI Responses provider against the scripted mock server.

use keel_llm::{Dialect, ErrorKind, ModelEvent};
use keel_protocol::{
    ContentBlock, Message, StopReason, ThinkingLevel, ToolResultMessage, ToolSpec, Usage,
    UserMessage,
};
use keel_test_support::responses::*;
use keel_test_support::{MockModelServer, MockResponse, SseEvent, sse_from_text};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    SECRET_KEY, args_of, assemble, collect, provider_for, request, start_with, text_of, usage_of,
};

const FIXTURE: &str = include_str!("../fixtures/responses_reasoning_tool_calls.sse");

fn thinking_of(items: &[keel_llm::Result<ModelEvent>]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ThinkingDelta { delta, .. }) => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn fixture_round_trip_replays_encrypted_reasoning() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(sse_from_text(FIXTURE)));
    server.push(text("Done."));
    let p = provider_for(&server, Dialect::OpenAiResponses);
    let mut req = request("list and read");
    req.model = "gpt-5".into();
    req.thinking_level = ThinkingLevel::Medium;
    let items = collect(
        start_with(&*p, req.clone(), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        items[0],
        Ok(ModelEvent::Start {
            response_id: Some("resp_fx1".into())
        })
    );
    assert!(thinking_of(&items).starts_with("**Listing files**"));
    assert_eq!(text_of(&items), "I'll list the files and read the README.");
    assert_eq!(args_of(&items, 2), r#"{"command":"ls -la","timeout":30}"#);
    assert_eq!(
        usage_of(&items),
        Some(Usage {
            input: 176,
            output: 180,
            cache_read: 1024,
            total_tokens: 1380,
            ..Usage::default()
        })
    );

    // The next turn sends the reasoning item back, then text, calls, results.
    let assistant = assemble(&items, "openai-responses", "gpt-5");
    assert_eq!(assistant.stop_reason, StopReason::ToolUse);
    req.messages.push(Message::Assistant(assistant));
    for (id, output) in [("call_fx1", "README.md\nsrc"), ("call_fx2", "# keel")] {
        req.messages.push(Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "x".into(),
            content: vec![ContentBlock::text(output)],
            details: None,
            is_error: false,
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
    let input = body["input"].as_array().unwrap();
    let types: Vec<&str> = input.iter().map(|i| i["type"].as_str().unwrap()).collect();
    assert_eq!(
        types,
        [
            "message",
            "reasoning",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output"
        ]
    );
    assert_eq!(
        input[1],
        json!({"type": "reasoning", "encrypted_content": "gAAAAABo_fixture_encrypted_reasoning==",
            "summary": [
                {"type": "summary_text", "text": "**Listing files**\n\nThe user wants to see the files."},
                {"type": "summary_text", "text": "**Reading**\n\nThen read the README."}]})
    );
    assert_eq!(
        input[3]["arguments"],
        r#"{"command":"ls -la","timeout":30}"#
    );
    assert_eq!(
        input[6],
        json!({"type": "function_call_output", "call_id": "call_fx2", "output": "# keel"})
    );
    assert_eq!(
        body["reasoning"],
        json!({"effort": "medium", "summary": "auto"})
    );
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
}

#[tokio::test]
async fn request_headers_and_body() {
    let server = MockModelServer::start().await;
    server.push(text("ok"));
    let mut spec = super::spec_for(&server, Dialect::OpenAiResponses);
    spec.extra_headers = vec![("OpenAI-Organization".into(), "org-1".into())];
    let p = keel_llm::build_provider(&spec).unwrap();
    let mut req = request("hello");
    req.tools = vec![ToolSpec {
        name: "bash".into(),
        description: "Run a shell command".into(),
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }];
    req.max_output_tokens = Some(256);
    collect(
        start_with(&*p, req, CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    let r = server.last_request().unwrap();
    assert_eq!(r.path, "/v1/responses");
    assert_eq!(
        r.header("authorization"),
        Some(format!("Bearer {SECRET_KEY}").as_str())
    );
    assert_eq!(r.header("accept"), Some("text/event-stream"));
    assert_eq!(r.header("openai-organization"), Some("org-1"));
    assert_eq!(
        r.body,
        json!({
            "model": "mock-model",
            "instructions": "You are a test.",
            "input": [{"type": "message", "role": "user",
                "content": [{"type": "input_text", "text": "hello"}]}],
            "tools": [{"type": "function", "name": "bash", "description": "Run a shell command",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
                "strict": false}],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
            "max_output_tokens": 256,
            "store": false,
            "stream": true,
        })
    );
}

#[tokio::test]
async fn arguments_one_character_per_delta() {
    let server = MockModelServer::start().await;
    let args = r#"{"command":"echo hi && ls -la","timeout":30}"#;
    let mut events = vec![ev_created(), ev_function_call_added(0, "call_a", "bash")];
    events.extend(
        args.chars()
            .map(|c| ev_function_call_arguments_delta(0, &c.to_string())),
    );
    events.push(ev_function_call_arguments_done(0, args));
    events.push(ev_function_call_done(0, "call_a", "bash", args));
    events.push(ev_function_call_added(1, "call_b", "read"));
    events.push(ev_function_call_done(
        1,
        "call_b",
        "read",
        r#"{"path":"a"}"#,
    ));
    events.push(ev_completed(3, 4));
    server.push(MockResponse::sse(events));
    let p = provider_for(&server, Dialect::OpenAiResponses);
    let items = collect(
        start_with(&*p, request("x"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(args_of(&items, 0), args);
    assert_eq!(
        args_of(&items, 1),
        r#"{"path":"a"}"#,
        "arguments only in the done item"
    );
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finish {
            stop_reason: StopReason::ToolUse
        }))
    );
}

#[tokio::test]
async fn reasoning_shortcut_gives_thinking_with_a_signature() {
    let server = MockModelServer::start().await;
    server.push(reasoning_and_text(
        "Thinking hard",
        "gAAAA-secret-ish",
        "42",
    ));
    let p = provider_for(&server, Dialect::OpenAiResponses);
    let items = collect(
        start_with(&*p, request("q"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(thinking_of(&items), "Thinking hard");
    assert_eq!(text_of(&items), "42");
    let message = assemble(&items, "openai-responses", "mock-model");
    let Some(ContentBlock::Thinking {
        thinking_signature: Some(signature),
        ..
    }) = message.content.first()
    else {
        panic!("{message:?}")
    };
    let item: Value = serde_json::from_str(signature).unwrap();
    assert_eq!(item["encrypted_content"], "gAAAA-secret-ish");
}

#[tokio::test]
async fn keep_alives_and_unknown_events_are_ignored() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(vec![
        ev_keep_alive(),
        ev_created(),
        ev("response.brand_new_event", json!({"x": 1})),
        ev_message_added(0),
        ev_output_text_delta(0, "Hi"),
        SseEvent::Comment("ping".into()),
        ev("response.content_part.added", json!({"output_index": 0})),
        ev_output_text_delta(0, "!"),
        ev_message_done(0, "Hi!"),
        ev_completed(1, 1),
    ]));
    let p = provider_for(&server, Dialect::OpenAiResponses);
    let items = collect(
        start_with(&*p, request("x"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text_of(&items), "Hi!");
    assert!(items.iter().all(Result::is_ok), "{items:?}");
}

#[tokio::test]
async fn in_stream_failures() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(vec![
        ev_created(),
        ev_message_added(0),
        ev_output_text_delta(0, "par"),
        ev_failed(
            "server_error",
            "The server had an error processing your request",
        ),
        ev_output_text_delta(0, "never"),
    ]));
    server.push(MockResponse::sse(vec![
        ev_created(),
        ev_error("rate_limit_exceeded", "Rate limit reached for gpt-5"),
    ]));
    server.push(MockResponse::sse(vec![
        ev_created(),
        ev_incomplete("max_output_tokens"),
    ]));
    let p = provider_for(&server, Dialect::OpenAiResponses);
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
    let items = collect(
        start_with(&*p, request("x"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::RateLimitExceeded, "{err}");
    let items = collect(
        start_with(&*p, request("x"), CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finish {
            stop_reason: StopReason::Length
        }))
    );
}

#[tokio::test]
async fn user_images_are_input_images() {
    let server = MockModelServer::start().await;
    server.push(text("a cat"));
    let p = provider_for(&server, Dialect::OpenAiResponses);
    let mut req = request("ignored");
    req.messages = vec![Message::User(UserMessage {
        content: vec![
            ContentBlock::text("what is this?"),
            ContentBlock::Image {
                data: "AAAA".into(),
                mime_type: "image/jpeg".into(),
            },
        ],
        timestamp: 0,
    })];
    collect(
        start_with(&*p, req, CancellationToken::new())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        server.last_request().unwrap().body["input"][0]["content"][1],
        json!({"type": "input_image", "image_url": "data:image/jpeg;base64,AAAA", "detail": "auto"})
    );
}
