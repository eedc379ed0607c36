//! Queue and interrupt semantics: steering during a tool run in both
//! interrupt modes, follow-ups one at a time or all at once, steering while
//! idle.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::Rpc;
use crate::suite::Env;

/// Bash that waits for the file `go` in the workspace.
const WAIT_FOR_GO: &str = "while [ ! -f go ]; do sleep 0.02; done; echo first-done";

/// The texts of the user messages in the model request `i`.
fn user_texts(env: &Env, i: usize) -> Vec<String> {
    let req = &env.mock.requests()[i];
    req.body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// Starts a prompt whose first tool call blocks until `go` exists; returns
/// once that call is running.
async fn start_blocked_run(env: &Env, rpc: &mut Rpc) {
    rpc.send(json!({"type": "prompt", "message": "start"}))
        .await;
    rpc.wait_for("the blocking tool", |f| {
        super::event(f)
            .is_some_and(|e| e["type"] == "tool_execution_start" && e["toolCallId"] == "c1")
    })
    .await;
    let _ = env;
}

fn release(env: &Env) {
    std::fs::write(env.ws().join("go"), "").unwrap();
}

fn two_calls() -> MockResponse {
    MockResponse::tool_calls(vec![
        tool_call("c1", "bash", json!({"command": WAIT_FOR_GO})),
        tool_call("c2", "bash", json!({"command": "echo second > second.txt"})),
    ])
}

#[tokio::test]
async fn steer_in_immediate_mode_skips_the_remaining_calls() {
    let env = Env::new().await;
    env.mock
        .push_all([two_calls(), MockResponse::text("changed course")]);
    let mut rpc = env.rpc(&[]).await;
    start_blocked_run(&env, &mut rpc).await;
    rpc.ok(json!({"type": "steer", "message": "stop, do X"}))
        .await;
    rpc.event("queue_update").await;
    release(&env);
    rpc.event("agent_end").await;
    assert!(!env.ws().join("second.txt").exists());
    let ends: Vec<Value> = rpc
        .events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .cloned()
        .collect();
    assert_eq!(ends[1]["toolCallId"], "c2");
    assert_eq!(ends[1]["isError"], true);
    assert_eq!(
        ends[1]["result"]["content"][0]["text"],
        "Skipped due to queued user message."
    );
    assert_eq!(env.mock.request_count(), 2);
    assert_eq!(user_texts(&env, 1), ["start", "stop, do X"]);
}

#[tokio::test]
async fn steer_in_wait_mode_lets_the_calls_finish() {
    let env = Env::new().await;
    env.mock
        .push_all([two_calls(), MockResponse::text("noted")]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "set_interrupt_mode", "mode": "wait"}))
        .await;
    start_blocked_run(&env, &mut rpc).await;
    rpc.ok(json!({"type": "steer", "message": "after the tools"}))
        .await;
    rpc.event("queue_update").await;
    release(&env);
    rpc.event("agent_end").await;
    assert!(env.ws().join("second.txt").exists());
    assert_eq!(env.mock.request_count(), 2);
    assert_eq!(user_texts(&env, 1), ["start", "after the tools"]);
}

async fn follow_ups(mode: &str) -> (Env, Rpc) {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": WAIT_FOR_GO}),
        )]),
        MockResponse::text("done with the task"),
        MockResponse::text("answer 2"),
        MockResponse::text("answer 3"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "set_follow_up_mode", "mode": mode}))
        .await;
    rpc.ok(json!({"type": "set_steering_mode", "mode": mode}))
        .await;
    start_blocked_run(&env, &mut rpc).await;
    rpc.ok(json!({"type": "follow_up", "message": "f1"})).await;
    rpc.ok(json!({"type": "follow_up", "message": "f2"})).await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["queuedMessageCount"], 2);
    assert_eq!(
        state["pendingMessageCount"], 2,
        "pi's name for the same count"
    );
    assert_eq!(state["followUpMode"], mode);
    release(&env);
    rpc.event("agent_end").await;
    (env, rpc)
}

#[tokio::test]
async fn follow_ups_one_at_a_time() {
    let (env, rpc) = follow_ups("one-at-a-time").await;
    assert_eq!(env.mock.request_count(), 4);
    assert_eq!(user_texts(&env, 2), ["start", "f1"]);
    assert_eq!(user_texts(&env, 3), ["start", "f1", "f2"]);
    let ends = rpc
        .event_types()
        .iter()
        .filter(|t| **t == "agent_end")
        .count();
    assert_eq!(ends, 1, "follow-ups continue the same run");
}

#[tokio::test]
async fn follow_ups_all_at_once() {
    let (env, _rpc) = follow_ups("all").await;
    assert_eq!(env.mock.request_count(), 3);
    assert_eq!(user_texts(&env, 2), ["start", "f1", "f2"]);
}

#[tokio::test]
async fn steer_while_idle_starts_a_run() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("on it"));
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "steer", "message": "do it now"}))
        .await;
    let end = rpc.event("agent_end").await;
    assert_eq!(end["messages"][0]["content"][0]["text"], "do it now");
    assert_eq!(end["messages"][1]["content"][0]["text"], "on it");
}
