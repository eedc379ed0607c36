//! Event frames: the canonical envelope, `seq`, deltas only, one terminal
//! `agent_end` per prompt, and the flat variant.

use std::collections::HashSet;

use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use super::{event, event_type};
use crate::suite::Env;

#[tokio::test]
async fn canonical_frames_carry_session_and_monotonic_seq() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "echo from-tool"}),
        )]),
        MockResponse::text("All done."),
    ]);
    let mut rpc = env.rpc(&[]).await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    let session_id = state["sessionId"].as_str().unwrap().to_owned();
    let ack = rpc
        .call(json!({"type": "prompt", "message": "run it"}))
        .await;
    assert_eq!(ack["success"], true);
    assert!(ack.get("data").is_none());
    rpc.event("agent_end").await;

    let frames: Vec<_> = rpc.frames.iter().filter(|f| f["type"] == "event").collect();
    let mut frame_ids = HashSet::new();
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f["protocol_version"], 2);
        assert_eq!(f["session_id"], session_id.as_str());
        assert_eq!(f["seq"], (i + 1) as u64, "seq counts from 1 without gaps");
        assert_eq!(f["payload"]["event_type"], f["payload"]["event"]["type"]);
        assert!(frame_ids.insert(f["frame_id"].as_str().unwrap().to_owned()));
    }
    let types = rpc.event_types();
    assert_eq!(types.first(), Some(&"agent_start"));
    assert_eq!(types.iter().filter(|t| **t == "agent_end").count(), 1);
    for t in [
        "turn_start",
        "message_start",
        "message_update",
        "message_end",
        "tool_execution_start",
        "tool_execution_end",
        "turn_end",
    ] {
        assert!(types.contains(&t), "missing {t}: {types:?}");
    }
    let end = rpc.events().into_iter().last().unwrap().clone();
    assert_eq!(end["type"], "agent_end");
    assert_eq!(end["isTerminal"], true);
    assert_eq!(end["messages"].as_array().unwrap().len(), 4);

    // Deltas only: no message_update repeats the message.
    for e in rpc.events() {
        if e["type"] == "message_update" {
            assert!(e.get("message").is_none(), "{e}");
            assert!(e["assistantMessageEvent"]["type"].is_string());
        }
    }
    let deltas: String = rpc
        .events()
        .iter()
        .filter(|e| e["assistantMessageEvent"]["type"] == "text_delta")
        .map(|e| e["assistantMessageEvent"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "All done.");
    let end_tool = rpc
        .events()
        .into_iter()
        .find(|e| e["type"] == "tool_execution_end")
        .unwrap()
        .clone();
    assert_eq!(end_tool["toolCallId"], "c1");
    assert_eq!(end_tool["isError"], false);
    assert!(
        end_tool["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("from-tool")
    );
}

#[tokio::test]
async fn flat_events_are_written_bare() {
    let env = Env::new().await;
    env.mock.push(MockResponse::thinking_and_text("hmm", "Hi."));
    let mut rpc = env.rpc(&["--rpc-flat-events"]).await;
    assert_eq!(rpc.frames[0]["protocolVersion"], 1);
    rpc.prompt_and_wait("hello").await;
    assert!(rpc.frames.iter().all(|f| f["type"] != "event"));
    let types = rpc.event_types();
    assert_eq!(types.first(), Some(&"agent_start"));
    assert_eq!(types.last(), Some(&"agent_end"));
    let kinds: Vec<&str> = rpc
        .events()
        .iter()
        .filter(|e| e["type"] == "message_update")
        .map(|e| e["assistantMessageEvent"]["type"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"thinking_delta"), "{kinds:?}");
    assert!(kinds.contains(&"text_end"), "{kinds:?}");
    let end = rpc.frames.last().unwrap();
    assert_eq!(end["isTerminal"], true);
    assert!(event(end).is_some());
    assert_eq!(event_type(end), Some("agent_end"));
}

#[tokio::test]
async fn model_errors_end_the_run_once() {
    let env = Env::new().await;
    env.mock.push(MockResponse::error(
        500,
        json!({"error": {"message": "mock internal error"}}),
    ));
    let mut rpc = env.rpc(&[]).await;
    // A 500 is retried by default; here it must end the run at once.
    rpc.ok(json!({"type": "set_auto_retry", "enabled": false}))
        .await;
    let end = rpc.prompt_and_wait("fail please").await;
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["stopReason"], "error");
    assert!(last["errorMessage"].is_string());
    assert_eq!(
        rpc.event_types()
            .iter()
            .filter(|t| **t == "agent_end")
            .count(),
        1
    );
    // The process keeps serving.
    rpc.ok(json!({"type": "get_state"})).await;
}
