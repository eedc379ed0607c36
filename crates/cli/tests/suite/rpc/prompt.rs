//! `prompt` (images, streamingBehavior, the busy failure), `abort`,
//! `abort_and_prompt`.

use keel_test_support::MockResponse;
use serde_json::{Value, json};

use crate::suite::Env;

/// A 1×1 PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

#[tokio::test]
async fn prompt_with_images_reaches_the_model() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("A pixel."));
    let mut rpc = env.rpc(&[]).await;
    let r = rpc
        .call(json!({"type": "prompt", "message": "what is this?",
            "images": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}))
        .await;
    assert_eq!(r["success"], true);
    let end = rpc.event("agent_end").await;
    let user = &end["messages"][0];
    assert_eq!(user["content"][1]["type"], "image");
    let req = env.mock.last_request().unwrap();
    let body = req.body.to_string();
    assert!(body.contains(PNG), "the image is sent to the model");
}

#[tokio::test]
async fn prompt_while_streaming_needs_streaming_behavior() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first answer takes a while").stall_after(2),
        MockResponse::text("answer to the follow-up"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "one"}))
        .await;
    rpc.wait_for("streaming", |f| {
        super::event(f).is_some_and(|e| e["assistantMessageEvent"]["type"] == "text_delta")
    })
    .await;
    // Without streamingBehavior: acknowledged, then refused with the same id.
    rpc.send(json!({"id": "p2", "type": "prompt", "message": "two"}))
        .await;
    let ack = rpc.response("p2").await;
    assert_eq!(ack["success"], true);
    let err = rpc.response("p2").await;
    assert_eq!(err["success"], false);
    assert_eq!(
        err["error"],
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue \
         the message."
    );
    // With it: queued.
    let r = rpc
        .call(json!({"type": "prompt", "message": "queued", "streamingBehavior": "followUp"}))
        .await;
    assert_eq!(r["success"], true);
    let q = rpc.event("queue_update").await;
    assert_eq!(q["followUp"], json!(["queued"]));
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["isStreaming"], true);
    assert_eq!(state["queuedMessageCount"], 1);
    // Abort: the response comes after the run's end.
    let abort_id = rpc.id();
    rpc.send(json!({"id": abort_id, "type": "abort"})).await;
    let end = rpc.event("agent_end").await;
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["stopReason"], "aborted");
    let r = rpc.response(&abort_id).await;
    assert_eq!(r["success"], true);
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["isStreaming"], false);
    // The queued follow-up waits for the next prompt (an abort drops nothing).
    assert_eq!(state["queuedMessageCount"], 1);
}

#[tokio::test]
async fn abort_and_prompt_replaces_the_run() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("slow answer that never ends").stall_after(2),
        MockResponse::text("fresh answer"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "slow"})).await;
    rpc.event("message_update").await;
    let r = rpc
        .call(json!({"type": "abort_and_prompt", "message": "instead"}))
        .await;
    assert_eq!(r["success"], true);
    let first_end = rpc.event("agent_end").await;
    assert_eq!(
        first_end["messages"].as_array().unwrap().last().unwrap()["stopReason"],
        "aborted"
    );
    let second_end = rpc.event("agent_end").await;
    let msgs = second_end["messages"].as_array().unwrap();
    assert_eq!(msgs[0]["content"][0]["text"], "instead");
    assert_eq!(msgs[1]["content"][0]["text"], "fresh answer");
    let types = rpc.event_types();
    let starts = types.iter().filter(|t| **t == "agent_start").count();
    let ends = types.iter().filter(|t| **t == "agent_end").count();
    assert_eq!(
        (starts, ends),
        (2, 2),
        "one agent_end per prompt: {types:?}"
    );
    // Runs never interleave: each start is followed by its end before the next.
    let mut open = false;
    for t in types {
        match t {
            "agent_start" => {
                assert!(!open);
                open = true
            }
            "agent_end" => {
                assert!(open);
                open = false
            }
            _ => {}
        }
    }
}

#[tokio::test]
async fn abort_when_idle_just_succeeds() {
    let env = Env::new().await;
    let mut rpc = env.rpc(&[]).await;
    let data = rpc.ok(json!({"type": "abort"})).await;
    assert_eq!(data, Value::Null);
}
