//! A pending request survives `kill -9`: after a restart it is listed,
//! and a decision is recorded.

use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use crate::suite::Env;

#[tokio::test]
async fn kill_9_while_a_call_waits_then_restart_lists_and_decides_it() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("victim"), "x").unwrap();
    env.mock.push(MockResponse::tool_calls(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "rm -rf victim"}),
    )]));
    let mut rpc = env.rpc(&[]).await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    let session_id = state["sessionId"].as_str().unwrap().to_owned();
    rpc.send(json!({"type": "prompt", "message": "clean up"}))
        .await;
    let req = rpc.approval_request().await;
    let id = req["id"].as_str().unwrap().to_owned();

    rpc.child.signal("KILL").await.unwrap();
    let out = rpc.child.wait().await.unwrap();
    assert_eq!(out.code(), None, "killed by a signal");

    // While keel is down the request is on disk, pending.
    let listed = env.approvals_json(&["list"]).await;
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["status"], "pending");

    let mut rpc = env.rpc(&["--session", &session_id]).await;
    let pending = rpc.ok(json!({"type": "get_pending_approvals"})).await;
    let list = pending["approvals"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{pending}");
    assert_eq!(list[0]["requestId"], id.as_str());
    assert_eq!(list[0]["toolCallId"], "c1");
    assert_eq!(list[0]["sessionId"], session_id.as_str());
    // The call that made the request was on disk before it was announced.
    let messages = rpc.ok(json!({"type": "get_messages"})).await;
    assert!(messages.to_string().contains("rm -rf victim"), "{messages}");

    let d = rpc
        .decide(&id, "decline", json!({"note": "keep the victim"}))
        .await;
    assert_eq!(d["status"], "declined");
    assert_eq!(d["note"], "keep the victim");
    let pending = rpc.ok(json!({"type": "get_pending_approvals"})).await;
    assert_eq!(pending["approvals"], json!([]));
    let all = env.approvals_json(&["list", "--all"]).await;
    assert_eq!(all[0]["status"], "declined");
    assert!(env.ws().join("victim").exists());
    rpc.finish().await;
}
