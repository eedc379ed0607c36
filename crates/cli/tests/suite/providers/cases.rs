//! The agent cases every dialect runs (instantiated per dialect in
//! `mod.rs`). Each await on the child is bounded by the harness's timeouts;
//! nothing asserts on timing.

use keel_protocol::{Message, StopReason};
use keel_test_support::tool_call;
use serde_json::{Value, json};

use super::{Dialect, KEY, events, prompt};
use crate::suite::Env;
use crate::suite::rpc::event_type;

fn assistant(m: &Message) -> Option<&keel_protocol::AssistantMessage> {
    match m {
        Message::Assistant(a) => Some(a),
        _ => None,
    }
}

/// Lines of stderr that are not `keel: warning:` lines.
fn errors(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| !l.starts_with("keel: warning:"))
        .collect()
}

pub async fn text_answer(d: Dialect) {
    let env = Env::for_dialect(d).await;
    env.mock.push(d.text("Hello from the mock!"));
    let out = env.exec_configured().arg("Say hello").run().await.unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "Hello from the mock!\n");
    // The model is in the catalogue: no warning.
    assert_eq!(out.stderr, "", "{}", out.stderr);

    let req = env.mock.last_request().unwrap();
    assert_eq!(req.path, d.path());
    assert_eq!(req.body["model"], "mock-model");
    assert_eq!(d.sent_key(&req).as_deref(), Some(KEY));
    assert!(req.body.to_string().contains("Say hello"));
    // The catalogue's output limit is sent, under each dialect's name.
    let limit = match d {
        Dialect::Completions | Dialect::Anthropic => &req.body["max_tokens"],
        Dialect::Responses => &req.body["max_output_tokens"],
    };
    assert_eq!(limit, 2000, "{}", req.body);

    let session = env.only_session().await;
    let msgs = session.messages();
    assert_eq!(msgs.len(), 2);
    let a = assistant(&msgs[1]).unwrap();
    assert_eq!(a.text(), "Hello from the mock!");
    assert_eq!(a.api, d.name());
    assert_eq!(a.provider, "mock");
    // Priced from the catalogue entry: 10 input and 5 output tokens at
    // $3 and $15 per million.
    assert_eq!((a.usage.input, a.usage.output), (10, 5));
    let expected = 10.0 * 3.0 / 1e6 + 5.0 * 15.0 / 1e6;
    assert!(
        (a.usage.cost.total - expected).abs() < 1e-12,
        "{:?}",
        a.usage.cost
    );
    let raw = env.session_text(&session.path).await;
    assert!(!raw.contains(KEY), "the key must never be stored");
}

pub async fn several_tool_calls(d: Dialect) {
    let env = Env::for_dialect(d).await;
    std::fs::write(env.ws().join("notes.txt"), "first line\n").unwrap();
    env.mock.push_all([
        d.tool_calls(vec![
            tool_call("call_read", "read", json!({"path": "notes.txt"})),
            tool_call(
                "call_write",
                "write",
                json!({"path": "out.txt", "content": "written by the agent\n"}),
            ),
            tool_call(
                "call_bash",
                "bash",
                json!({"command": "echo ran-$((40+2))"}),
            ),
        ]),
        d.text("All three done."),
    ]);
    let out = env
        .exec_configured()
        .args(["--json", "do three things"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(env.ws().join("out.txt")).unwrap(),
        "written by the agent\n"
    );
    let lines = out.json_lines().unwrap();
    let ends: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "tool_execution_end")
        .collect();
    assert_eq!(ends.len(), 3);
    assert!(ends.iter().all(|e| e["isError"] == false), "{ends:?}");
    let ids: Vec<&str> = ends
        .iter()
        .map(|e| e["toolCallId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["call_read", "call_write", "call_bash"]);

    // The second request answers every call, with its id and output.
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.path == d.path()));
    let body = requests[1].body.to_string();
    for needle in [
        "call_read",
        "call_write",
        "call_bash",
        "first line",
        "ran-42",
    ] {
        assert!(body.contains(needle), "{needle} missing from {body}");
    }
    let session = env.only_session().await;
    let msgs = session.messages();
    // user, assistant (3 calls), 3 results, assistant.
    assert_eq!(msgs.len(), 6);
    assert_eq!(assistant(&msgs[1]).unwrap().tool_calls().len(), 3);
    assert_eq!(assistant(&msgs[5]).unwrap().text(), "All three done.");
}

pub async fn abort_mid_stream(d: Dialect) {
    let env = Env::for_dialect(d).await;
    env.mock.push(
        d.text("Counting slowly: one two three four five")
            .stall_after(d.events_before_text() + 2),
    );
    let mut rpc = env.rpc_configured(&[]).await;
    let ack = rpc.call(prompt("count")).await;
    assert_eq!(ack["success"], true, "{ack}");
    rpc.wait_for("a text delta", |f| {
        super::super::rpc::event(f)
            .is_some_and(|e| e["assistantMessageEvent"]["type"] == "text_delta")
    })
    .await;
    let r = rpc.call(json!({"type": "abort"})).await;
    assert_eq!(r["success"], true, "{r}");
    let end = rpc
        .frames
        .iter()
        .filter_map(super::super::rpc::event)
        .find(|e| e["type"] == "agent_end")
        .cloned()
        .expect("abort answers after agent_end");
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "assistant");
    assert_eq!(last["stopReason"], "aborted");
    assert!(
        !last["content"].as_array().unwrap().is_empty(),
        "the partial text is kept"
    );
    let types = rpc.event_types();
    assert_eq!(types.iter().filter(|t| **t == "agent_end").count(), 1);
    assert!(!types.contains(&"auto_retry_start"));
    // The session goes on: a new prompt gets a full answer.
    env.mock.push(d.text("Back again."));
    rpc.ok(prompt("again")).await;
    rpc.event("agent_end").await;
    let text = rpc.ok(json!({"type": "get_last_assistant_text"})).await;
    assert_eq!(text["text"], "Back again.");
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
}

pub async fn retry_after_429(d: Dialect) {
    let env = Env::for_dialect(d).await;
    env.mock.push_all([
        d.rate_limited().header("retry-after", "1"),
        d.text("Answer after the rate limit."),
    ]);
    let mut rpc = env.rpc_configured(&[]).await;
    rpc.ok(prompt("hi")).await;
    rpc.event("agent_end").await;
    let evs = events(&rpc);
    let start = evs
        .iter()
        .find(|e| e["type"] == "auto_retry_start")
        .unwrap_or_else(|| panic!("no auto_retry_start: {:?}", rpc.event_types()));
    assert_eq!(start["attempt"], 1);
    assert_eq!(start["maxAttempts"], 3);
    // `retry-after: 1` is honoured exactly (no backoff, no jitter).
    assert_eq!(start["delayMs"], 1000);
    assert_eq!(start["errorKind"], "rateLimitExceeded");
    assert!(
        start["errorMessage"].as_str().unwrap().contains("429"),
        "{start}"
    );
    let end = evs.iter().find(|e| e["type"] == "auto_retry_end").unwrap();
    assert_eq!(
        end,
        &json!({"type": "auto_retry_end", "success": true, "attempt": 1})
    );

    let types = rpc.event_types();
    assert_eq!(types.iter().filter(|t| **t == "agent_end").count(), 1);
    // The failed attempt's message never ends: one assistant message_end.
    let assistant_ends = evs
        .iter()
        .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .count();
    assert_eq!(assistant_ends, 1);
    let retry_at = types.iter().position(|t| *t == "auto_retry_start").unwrap();
    let end_at = types.iter().position(|t| *t == "auto_retry_end").unwrap();
    assert_eq!(types[retry_at - 1], "message_start");
    assert_eq!(types[retry_at + 1], "message_start");
    assert_eq!(types[end_at + 1], "message_end");

    let messages = rpc.ok(json!({"type": "get_messages"})).await;
    let messages = messages["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2);
    assert_eq!(
        messages[1]["content"][0]["text"],
        "Answer after the rate limit."
    );
    assert_eq!(env.mock.request_count(), 2);
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
}

pub async fn retry_after_cut_stream(d: Dialect) {
    let env = Env::for_dialect(d).await;
    env.mock.push_all([
        d.text("This first answer will be cut short")
            .cut_after(d.events_before_text() + 2),
        d.text("The whole answer."),
    ]);
    let out = env
        .exec_configured()
        .args(["--json", "hi"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    let lines = out.json_lines().unwrap();
    let types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    let start = lines
        .iter()
        .find(|l| l["type"] == "auto_retry_start")
        .unwrap_or_else(|| panic!("no retry: {types:?}"));
    assert_eq!(start["attempt"], 1);
    assert!(start["delayMs"].as_u64().unwrap() <= 50, "{start}");
    // Some of the first answer streamed before the cut; it never ended.
    let retry_at = types.iter().position(|t| *t == "auto_retry_start").unwrap();
    let before: Vec<&Value> = lines[..retry_at]
        .iter()
        .filter(|l| l["assistantMessageEvent"]["type"] == "text_delta")
        .collect();
    assert!(!before.is_empty(), "{types:?}");
    let text_ends: Vec<&Value> = lines
        .iter()
        .filter(|l| l["assistantMessageEvent"]["type"] == "text_end")
        .collect();
    assert_eq!(text_ends.len(), 1);
    assert_eq!(
        text_ends[0]["assistantMessageEvent"]["content"],
        "The whole answer."
    );
    assert_eq!(types.iter().filter(|t| **t == "agent_end").count(), 1);
    let end = lines.last().unwrap();
    assert_eq!(end["type"], "agent_end");

    let session = env.only_session().await;
    let msgs = session.messages();
    assert_eq!(msgs.len(), 2, "the cut attempt is not saved");
    assert_eq!(assistant(&msgs[1]).unwrap().text(), "The whole answer.");
    assert_eq!(env.mock.request_count(), 2);
}

pub async fn unauthorized(d: Dialect) {
    // exec: exit 1 with one line, the typed error saved.
    let env = Env::for_dialect(d).await;
    env.mock.push(d.unauthorized());
    let out = env.exec_configured().arg("hi").run().await.unwrap();
    assert_eq!(out.code(), Some(1), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "");
    let lines = errors(&out.stderr);
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(lines[0].starts_with("keel: HTTP 401"), "{}", lines[0]);
    assert!(!out.stderr.contains(KEY));
    assert_eq!(env.mock.request_count(), 1, "401 is not retried");
    let session = env.only_session().await;
    let a = session
        .messages()
        .iter()
        .rev()
        .find_map(|m| assistant(m).cloned())
        .unwrap();
    assert_eq!(a.stop_reason, StopReason::Error);
    assert_eq!(a.error_kind.as_deref(), Some("unauthorized"));

    // RPC: the typed error on message_end and in agent_end.
    env.mock.push(d.unauthorized());
    let mut rpc = env.rpc_configured(&[]).await;
    rpc.ok(prompt("hi")).await;
    let end = rpc.event("agent_end").await;
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["stopReason"], "error");
    assert_eq!(last["errorKind"], "unauthorized");
    assert!(last["errorMessage"].as_str().unwrap().contains("401"));
    let message_end = rpc
        .frames
        .iter()
        .filter_map(super::super::rpc::event)
        .find(|e| e["type"] == "message_end" && e["message"]["role"] == "assistant")
        .cloned()
        .unwrap();
    assert_eq!(message_end["message"]["errorKind"], "unauthorized");
    assert!(
        !rpc.frames
            .iter()
            .any(|f| event_type(f) == Some("auto_retry_start"))
    );
    assert_eq!(env.mock.request_count(), 2);
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
}
