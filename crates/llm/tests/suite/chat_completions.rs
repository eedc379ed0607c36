//! The Chat Completions provider against the scripted mock server.

use std::time::Duration;

use futures::StreamExt;
use keel_llm::chat_completions::{ChatCompletionsConfig, ChatCompletionsProvider};
use keel_llm::{ErrorKind, ModelEvent, Provider};
use keel_protocol::{StopReason, ThinkingLevel, ToolSpec, Usage};
use keel_test_support::*;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{T, collect, request, text_of};

fn config(server: &MockModelServer) -> ChatCompletionsConfig {
    ChatCompletionsConfig::new("mock", server.base_url()).with_api_key("sk-test-secret")
}

fn provider(server: &MockModelServer) -> ChatCompletionsProvider {
    ChatCompletionsProvider::new(config(server)).unwrap()
}

async fn start(
    provider: &ChatCompletionsProvider,
    prompt: &str,
) -> keel_llm::Result<keel_llm::ModelStream> {
    tokio::time::timeout(
        T,
        provider.stream(request(prompt), CancellationToken::new()),
    )
    .await
    .expect("stream() hung")
}

#[tokio::test]
async fn text_answer() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::text("Hello, world!"));
    let p = provider(&server);
    assert_eq!(p.name(), "mock");
    assert_eq!(p.api(), "openai-completions");
    let items = collect(start(&p, "hi").await.unwrap()).await;
    assert_eq!(
        items[0],
        Ok(ModelEvent::Start {
            response_id: Some(MOCK_RESPONSE_ID.into())
        })
    );
    assert_eq!(text_of(&items), "Hello, world!");
    let n = items.len();
    assert_eq!(
        items[n - 2],
        Ok(ModelEvent::Usage(Usage {
            input: MOCK_PROMPT_TOKENS,
            output: MOCK_COMPLETION_TOKENS,
            total_tokens: MOCK_PROMPT_TOKENS + MOCK_COMPLETION_TOKENS,
            ..Usage::default()
        }))
    );
    assert_eq!(
        items[n - 1],
        Ok(ModelEvent::Finish {
            stop_reason: StopReason::Stop
        })
    );
}

#[tokio::test]
async fn tool_call_arguments_in_many_pieces() {
    let server = MockModelServer::start().await;
    let args = r#"{"command":"echo hi && ls -la","timeout":30}"#;
    let mut events = vec![ev_role(), ev_tool_call_start(0, "call_1", "bash")];
    events.extend(args.chars().map(|c| ev_tool_call_args(0, &c.to_string())));
    events.extend([ev_finish("tool_calls"), ev_usage(3, 4), ev_done()]);
    server.push(MockResponse::sse(events));
    server.push(MockResponse::tool_calls(vec![
        tool_call("call_1", "bash", json!({"command": "echo hi"})),
        tool_call("call_2", "read", json!({"path": "a.txt"})),
    ]));
    let p = provider(&server);

    let items = collect(start(&p, "run").await.unwrap()).await;
    let starts: Vec<_> = items
        .iter()
        .filter(|i| matches!(i, Ok(ModelEvent::ToolCallStart { .. })))
        .collect();
    assert_eq!(
        starts,
        [&Ok(ModelEvent::ToolCallStart {
            index: 0,
            id: "call_1".into(),
            name: "bash".into()
        })]
    );
    let joined: String = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ToolCallDelta { index: 0, delta }) => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(joined, args);
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finish {
            stop_reason: StopReason::ToolUse
        }))
    );

    // The whole-answer shortcut with two calls.
    let items = collect(start(&p, "run").await.unwrap()).await;
    for (index, expected) in [
        (0, json!({"command": "echo hi"})),
        (1, json!({"path": "a.txt"})),
    ] {
        let joined: String = items
            .iter()
            .filter_map(|i| match i {
                Ok(ModelEvent::ToolCallDelta { index: i, delta }) if *i == index => {
                    Some(delta.as_str())
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&joined).unwrap(),
            expected
        );
    }
}

#[tokio::test]
async fn reasoning_deltas_and_cached_usage() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(vec![
        ev_role(),
        ev_reasoning_delta("Let me "),
        ev_reasoning_field_delta("think."),
        ev_keep_alive(),
        ev_text_delta("42"),
        ev_finish("stop"),
        ev_usage_cached(100, 20, 60),
        ev_done(),
    ]));
    let items = collect(start(&provider(&server), "q").await.unwrap()).await;
    let thinking: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ThinkingDelta { delta, signature }) => {
                assert_eq!(signature, &None);
                Some(delta.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(thinking, ["Let me ", "think."]);
    assert_eq!(text_of(&items), "42");
    assert!(items.contains(&Ok(ModelEvent::Usage(Usage {
        input: 40,
        output: 20,
        cache_read: 60,
        cache_write: 0,
        total_tokens: 120,
        ..Usage::default()
    }))));
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finish {
            stop_reason: StopReason::Stop
        }))
    );
}

#[tokio::test]
async fn request_capture_shows_body_and_headers() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::text("ok"));
    let mut cfg = config(&server);
    cfg.extra_headers = vec![("X-Title".into(), "keel-test".into())];
    cfg.supports_reasoning_effort = true;
    let p = ChatCompletionsProvider::new(cfg).unwrap();
    let mut req = request("hello");
    req.tools = vec![ToolSpec {
        name: "bash".into(),
        description: "Run a shell command".into(),
        parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
    }];
    req.max_output_tokens = Some(256);
    req.thinking_level = ThinkingLevel::Minimal;
    let stream = tokio::time::timeout(T, p.stream(req, CancellationToken::new()))
        .await
        .unwrap()
        .unwrap();
    collect(stream).await;

    let captured = server.requests();
    assert_eq!(captured.len(), 1);
    let r = &captured[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer sk-test-secret"));
    assert_eq!(r.header("x-title"), Some("keel-test"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(
        r.body,
        json!({
            "model": "mock-model",
            "messages": [
                {"role": "system", "content": "You are a test."},
                {"role": "user", "content": "hello"},
            ],
            "tools": [{"type": "function", "function": {
                "name": "bash",
                "description": "Run a shell command",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            }}],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_tokens": 256,
            "reasoning_effort": "low",
        })
    );
}

#[tokio::test]
async fn no_key_means_no_authorization_header() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::text("ok"));
    let mut cfg = config(&server);
    cfg.api_key = None;
    cfg.base_url.push('/');
    let p = ChatCompletionsProvider::new(cfg).unwrap();
    collect(start(&p, "x").await.unwrap()).await;
    let r = server.last_request().unwrap();
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), None);
}

#[tokio::test]
async fn unauthorized_has_a_clear_message_without_the_key() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::error(
        401,
        json!({"error": {"message": "invalid api key", "type": "invalid_request_error"}}),
    ));
    let err = start(&provider(&server), "x").await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Unauthorized);
    assert_eq!(err.status, Some(401));
    assert_eq!(
        err.to_string(),
        format!(
            "HTTP 401 Unauthorized from {}/chat/completions: invalid api key",
            server.base_url()
        )
    );
    assert!(!err.to_string().contains("sk-test-secret"));
    assert!(!format!("{err:?}").contains("sk-test-secret"));
    assert!(!format!("{:?}", provider(&server)).contains("sk-test-secret"));
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn rate_limit_carries_retry_after() {
    let server = MockModelServer::start().await;
    server.push(
        MockResponse::error(429, json!({"error": {"message": "Rate limit reached"}}))
            .header("retry-after", "2"),
    );
    let err = start(&provider(&server), "x").await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::RateLimitExceeded);
    assert_eq!(err.retry_after, Some(Duration::from_secs(2)));
    assert!(err.is_retryable());
    assert!(
        err.message.contains("Rate limit reached"),
        "{}",
        err.message
    );
}

#[tokio::test]
async fn server_errors_are_retryable() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::error(
        500,
        json!({"error": {"message": "boom"}}),
    ));
    server.push(MockResponse::error(
        503,
        json!({"error": {"message": "busy"}}),
    ));
    server.push(MockResponse::error(
        400,
        json!({"error": {"message": "This model's maximum context length is 8192 tokens",
            "code": "context_length_exceeded"}}),
    ));
    let p = provider(&server);
    let err = start(&p, "x").await.err().unwrap();
    assert_eq!((err.kind, err.status), (ErrorKind::Other, Some(500)));
    assert!(err.is_retryable());
    assert!(err.message.contains("HTTP 500"), "{}", err.message);
    let err = start(&p, "x").await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::ServerOverloaded);
    assert!(err.is_retryable());
    let err = start(&p, "x").await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::ContextWindowExceeded);
    assert!(!err.is_retryable());
    // Nothing scripted: the mock answers 500.
    let err = start(&p, "x").await.err().unwrap();
    assert_eq!(err.status, Some(500));
    assert!(err.message.contains("mock: no scripted response"));
}

#[tokio::test]
async fn in_stream_error_event_ends_the_stream() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(vec![
        ev_role(),
        ev_text_delta("par"),
        ev_error("upstream overloaded"),
        ev_text_delta("never"),
        ev_done(),
    ]));
    let items = collect(start(&provider(&server), "x").await.unwrap()).await;
    assert_eq!(text_of(&items), "par");
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::ServerOverloaded);
    assert!(err.message.contains("upstream overloaded"));
}

#[tokio::test]
async fn stream_cut_mid_event() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::text("Hello there, friend").cut_after(3));
    let items = collect(start(&provider(&server), "x").await.unwrap()).await;
    assert!(!text_of(&items).is_empty());
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::StreamCut, "{err}");
    assert!(err.is_retryable());
    assert!(
        !items
            .iter()
            .any(|i| matches!(i, Ok(ModelEvent::Finish { .. })))
    );
}

#[tokio::test]
async fn clean_end_without_finish_is_a_cut() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(vec![ev_role(), ev_text_delta("Hi")]));
    let items = collect(start(&provider(&server), "x").await.unwrap()).await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::StreamCut);
}

#[tokio::test]
async fn finish_without_done_still_finishes() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::sse(vec![
        ev_text_delta("Hi"),
        ev_finish("length"),
        ev_usage(1, 1),
    ]));
    let items = collect(start(&provider(&server), "x").await.unwrap()).await;
    assert!(matches!(items[items.len() - 2], Ok(ModelEvent::Usage(_))));
    assert_eq!(
        items.last(),
        Some(&Ok(ModelEvent::Finish {
            stop_reason: StopReason::Length
        }))
    );
}

#[tokio::test]
async fn idle_timeout() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::text("Hello there").stall_after(2));
    let mut cfg = config(&server);
    cfg.idle_timeout = Duration::from_millis(200);
    let p = ChatCompletionsProvider::new(cfg).unwrap();
    let items = collect(start(&p, "x").await.unwrap()).await;
    let err = items.last().unwrap().as_ref().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Timeout, "{err}");
    assert!(err.message.contains("idle timeout"), "{err}");
    assert!(err.is_retryable());
}

#[tokio::test]
async fn cancelling_a_hanging_stream_ends_it() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::text("Hello there").stall_after(2));
    let p = provider(&server);
    let cancel = CancellationToken::new();
    let mut stream = tokio::time::timeout(T, p.stream(request("x"), cancel.clone()))
        .await
        .unwrap()
        .unwrap();
    // Read up to the first text delta (the second event), then hang.
    loop {
        let item = tokio::time::timeout(T, stream.next())
            .await
            .unwrap()
            .unwrap();
        if matches!(item, Ok(ModelEvent::TextDelta(_))) {
            break;
        }
    }
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        canceller.cancel();
    });
    let item = tokio::time::timeout(T, stream.next()).await.unwrap();
    let err = item.unwrap().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Cancelled);
    assert!(!err.is_retryable());
    assert!(
        tokio::time::timeout(T, stream.next())
            .await
            .unwrap()
            .is_none()
    );
}

#[tokio::test]
async fn cancelling_while_waiting_for_headers() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::text("late").delay_headers(Duration::from_secs(600)));
    let p = provider(&server);
    let cancel = CancellationToken::new();
    let pending = tokio::spawn({
        let cancel = cancel.clone();
        async move { p.stream(request("x"), cancel).await.map(|_| ()) }
    });
    server.wait_for_requests(1, T).await.unwrap();
    cancel.cancel();
    let result = tokio::time::timeout(T, pending).await.unwrap().unwrap();
    assert_eq!(result.unwrap_err().kind, ErrorKind::Cancelled);
}

#[tokio::test]
async fn header_timeout() {
    let server = MockModelServer::start().await;
    server.push(MockResponse::text("late").delay_headers(Duration::from_secs(600)));
    let mut cfg = config(&server);
    cfg.request_timeout = Duration::from_millis(200);
    let p = ChatCompletionsProvider::new(cfg).unwrap();
    let err = start(&p, "x").await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Timeout);
    assert!(err.is_retryable());
}

#[tokio::test]
async fn connection_refused() {
    // Bind then drop a listener to get a port nobody listens on.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let cfg = ChatCompletionsConfig::new("gone", format!("http://{addr}/v1?key=sk-in-url"));
    let p = ChatCompletionsProvider::new(cfg).unwrap();
    let err = start(&p, "x").await.err().unwrap();
    assert_eq!(err.kind, ErrorKind::Connection, "{err}");
    assert!(err.is_retryable());
    assert!(!err.message.contains("sk-in-url"), "{err}");
}
