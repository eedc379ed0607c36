//! The scenarios every dialect runs against the mock, through the provider
//! factory: text, several tool calls, auth failure, rate limit with
//! `retry-after`, overload, a cut stream, cancellation, idle timeout.

use std::time::Duration;

use futures::StreamExt;
use keel_llm::{Dialect, ErrorKind, ModelEvent};
use keel_protocol::{StopReason, Usage};
use keel_test_support::{
    MockModelServer, MockResponse, MockToolCall, anthropic, responses, tool_call,
};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{
    SECRET_KEY, T, args_of, collect, provider_for, request, start_with, starts_of, text_of,
    usage_of,
};

/// One dialect's scripted answers.
struct Case {
    dialect: Dialect,
    path: &'static str,
    text: fn(&str) -> MockResponse,
    tool_calls: fn(Vec<MockToolCall>) -> MockResponse,
    /// An HTTP error body in this dialect's shape.
    error: fn(status: u16, message: &str) -> MockResponse,
}

fn openai_error(status: u16, message: &str) -> MockResponse {
    let kind = match status {
        401 => "invalid_request_error",
        429 => "rate_limit_exceeded",
        _ => "server_error",
    };
    MockResponse::error(status, responses::error_body(message, kind, None))
}

fn anthropic_error(status: u16, message: &str) -> MockResponse {
    let kind = match status {
        401 => "authentication_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    MockResponse::error(status, anthropic::error_body(kind, message))
}

fn cases() -> [Case; 3] {
    [
        Case {
            dialect: Dialect::OpenAiCompletions,
            path: "/v1/chat/completions",
            text: MockResponse::text,
            tool_calls: MockResponse::tool_calls,
            error: openai_error,
        },
        Case {
            dialect: Dialect::OpenAiResponses,
            path: "/v1/responses",
            text: responses::text,
            tool_calls: responses::tool_calls,
            error: openai_error,
        },
        Case {
            dialect: Dialect::AnthropicMessages,
            path: "/v1/messages",
            text: anthropic::text,
            tool_calls: anthropic::tool_calls,
            error: anthropic_error,
        },
    ]
}

#[tokio::test]
async fn text_answer_with_usage() {
    for case in cases() {
        let server = MockModelServer::start().await;
        server.push((case.text)("Hello, world!"));
        let p = provider_for(&server, case.dialect);
        assert_eq!(p.api(), case.dialect.as_str());
        let items = collect(
            start_with(&*p, request("hi"), CancellationToken::new())
                .await
                .unwrap(),
        )
        .await;
        let d = case.dialect;
        assert!(
            matches!(
                items[0],
                Ok(ModelEvent::Start {
                    response_id: Some(_)
                })
            ),
            "{d}: {items:?}"
        );
        assert_eq!(text_of(&items), "Hello, world!", "{d}");
        assert_eq!(
            usage_of(&items),
            Some(Usage {
                input: 10,
                output: 5,
                total_tokens: 15,
                ..Usage::default()
            }),
            "{d}"
        );
        assert_eq!(
            items.last(),
            Some(&Ok(ModelEvent::Finish {
                stop_reason: StopReason::Stop
            })),
            "{d}"
        );
        let r = server.last_request().unwrap();
        assert_eq!(r.path, case.path, "{d}");
        assert_eq!(r.body["model"], "mock-model", "{d}");
        assert_eq!(r.body["stream"], true, "{d}");
    }
}

#[tokio::test]
async fn several_tool_calls_with_split_arguments() {
    for case in cases() {
        let server = MockModelServer::start().await;
        let calls = vec![
            tool_call(
                "call_1",
                "bash",
                json!({"command": "echo hi && ls -la", "timeout": 30}),
            ),
            tool_call(
                "call_2",
                "read",
                json!({"path": "src/main.rs", "offset": 10}),
            ),
        ];
        server.push((case.tool_calls)(calls.clone()));
        let p = provider_for(&server, case.dialect);
        let items = collect(
            start_with(&*p, request("run"), CancellationToken::new())
                .await
                .unwrap(),
        )
        .await;
        let d = case.dialect;
        let starts = starts_of(&items);
        assert_eq!(starts.len(), 2, "{d}: {items:?}");
        for (start, call) in starts.iter().zip(&calls) {
            let ModelEvent::ToolCallStart { index, id, name } = start else {
                unreachable!()
            };
            assert_eq!((id, name), (&call.id, &call.name), "{d}");
            let deltas = items
                .iter()
                .filter(
                    |i| matches!(i, Ok(ModelEvent::ToolCallDelta { index: j, .. }) if j == index),
                )
                .count();
            assert!(deltas > 1, "{d}: arguments should come in pieces");
            let args: Value = serde_json::from_str(&args_of(&items, *index)).unwrap();
            assert_eq!(args, call.arguments, "{d}");
        }
        assert_eq!(
            items.last(),
            Some(&Ok(ModelEvent::Finish {
                stop_reason: StopReason::ToolUse
            })),
            "{d}"
        );
    }
}

#[tokio::test]
async fn unauthorized_is_final_and_never_shows_the_key() {
    for case in cases() {
        let server = MockModelServer::start().await;
        server.push((case.error)(401, "invalid x-api-key"));
        let p = provider_for(&server, case.dialect);
        let err = start_with(&*p, request("x"), CancellationToken::new())
            .await
            .err()
            .unwrap();
        let d = case.dialect;
        assert_eq!(
            (err.kind, err.status),
            (ErrorKind::Unauthorized, Some(401)),
            "{d}"
        );
        assert!(!err.is_retryable());
        assert_eq!(
            err.to_string(),
            format!(
                "HTTP 401 Unauthorized from {}{}: invalid x-api-key",
                server.url(),
                case.path
            ),
            "{d}"
        );
        assert!(!format!("{err:?}").contains(SECRET_KEY), "{d}");
    }
}

#[tokio::test]
async fn rate_limit_carries_retry_after() {
    for case in cases() {
        let server = MockModelServer::start().await;
        server.push((case.error)(429, "Rate limit reached").header("retry-after", "2"));
        let p = provider_for(&server, case.dialect);
        let err = start_with(&*p, request("x"), CancellationToken::new())
            .await
            .err()
            .unwrap();
        let d = case.dialect;
        assert_eq!(err.kind, ErrorKind::RateLimitExceeded, "{d}");
        assert_eq!(err.retry_after, Some(Duration::from_secs(2)), "{d}");
        assert!(err.is_retryable(), "{d}");
        assert!(err.message.contains("Rate limit reached"), "{d}: {err}");
    }
}

#[tokio::test]
async fn overloaded_is_retryable() {
    for case in cases() {
        let server = MockModelServer::start().await;
        server.push((case.error)(529, "Overloaded"));
        server.push((case.error)(503, "Service unavailable"));
        let p = provider_for(&server, case.dialect);
        for status in [529, 503] {
            let err = start_with(&*p, request("x"), CancellationToken::new())
                .await
                .err()
                .unwrap();
            let d = case.dialect;
            assert_eq!(
                (err.kind, err.status),
                (ErrorKind::ServerOverloaded, Some(status)),
                "{d}"
            );
            assert!(err.is_retryable(), "{d}");
        }
    }
}

#[tokio::test]
async fn cut_stream_is_a_retryable_stream_cut() {
    for case in cases() {
        let server = MockModelServer::start().await;
        server.push((case.text)("Hello there, friend").cut_after(4));
        let p = provider_for(&server, case.dialect);
        let items = collect(
            start_with(&*p, request("x"), CancellationToken::new())
                .await
                .unwrap(),
        )
        .await;
        let d = case.dialect;
        assert!(!text_of(&items).is_empty(), "{d}: {items:?}");
        let err = items.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind, ErrorKind::StreamCut, "{d}: {err}");
        assert!(err.is_retryable());
        assert!(
            !items
                .iter()
                .any(|i| matches!(i, Ok(ModelEvent::Finish { .. }))),
            "{d}"
        );
    }
}

#[tokio::test]
async fn clean_end_before_completion_is_a_stream_cut() {
    for case in cases() {
        let server = MockModelServer::start().await;
        let mut events = (case.text)("Hello").events().to_vec();
        // Drop the completion (and, for Chat Completions, the finish reason).
        events.truncate(events.len() - 3);
        server.push(MockResponse::sse(events));
        let p = provider_for(&server, case.dialect);
        let items = collect(
            start_with(&*p, request("x"), CancellationToken::new())
                .await
                .unwrap(),
        )
        .await;
        let err = items.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind, ErrorKind::StreamCut, "{}: {err}", case.dialect);
    }
}

#[tokio::test]
async fn cancelling_a_hanging_stream_ends_it() {
    for case in cases() {
        let server = MockModelServer::start().await;
        server.push((case.text)("Hello there").stall_after(4));
        let p = provider_for(&server, case.dialect);
        let cancel = CancellationToken::new();
        let mut stream = start_with(&*p, request("x"), cancel.clone()).await.unwrap();
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
        // Events that arrived before the stall may still come first.
        let err = loop {
            match tokio::time::timeout(T, stream.next())
                .await
                .unwrap()
                .unwrap()
            {
                Ok(ModelEvent::TextDelta(_)) => continue,
                other => break other.unwrap_err(),
            }
        };
        assert_eq!(err.kind, ErrorKind::Cancelled, "{}", case.dialect);
        assert!(
            tokio::time::timeout(T, stream.next())
                .await
                .unwrap()
                .is_none()
        );
    }
}

#[tokio::test]
async fn cancelling_while_waiting_for_headers() {
    for case in cases() {
        let server = MockModelServer::start().await;
        server.push((case.text)("late").delay_headers(Duration::from_secs(600)));
        let p = provider_for(&server, case.dialect);
        let cancel = CancellationToken::new();
        let pending = tokio::spawn({
            let cancel = cancel.clone();
            async move { p.stream(request("x"), cancel).await.map(|_| ()) }
        });
        server.wait_for_requests(1, T).await.unwrap();
        cancel.cancel();
        let result = tokio::time::timeout(T, pending).await.unwrap().unwrap();
        assert_eq!(
            result.unwrap_err().kind,
            ErrorKind::Cancelled,
            "{}",
            case.dialect
        );
    }
}

#[tokio::test]
async fn idle_timeout() {
    for case in cases() {
        let server = MockModelServer::start().await;
        server.push((case.text)("Hello there").stall_after(3));
        let mut spec = super::spec_for(&server, case.dialect);
        spec.idle_timeout = Duration::from_millis(200);
        let p = keel_llm::build_provider(&spec).unwrap();
        let items = collect(
            start_with(&*p, request("x"), CancellationToken::new())
                .await
                .unwrap(),
        )
        .await;
        let err = items.last().unwrap().as_ref().unwrap_err();
        assert_eq!(err.kind, ErrorKind::Timeout, "{}: {err}", case.dialect);
        assert!(err.is_retryable());
    }
}
