//! `new_session` and `switch_session`.

use keel_test_support::MockResponse;
use serde_json::json;

use crate::suite::Env;

#[tokio::test]
async fn new_session_with_parent_then_switch_back() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first session answer"),
        MockResponse::text("second session answer"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("one").await;
    let first = rpc.ok(json!({"type": "get_state"})).await;
    let first_file = first["sessionFile"].as_str().unwrap().to_owned();

    let d = rpc
        .ok(json!({"type": "new_session", "parentSession": first_file}))
        .await;
    assert_eq!(d, json!({"cancelled": false}));
    let second = rpc.ok(json!({"type": "get_state"})).await;
    assert_ne!(second["sessionId"], first["sessionId"]);
    assert_eq!(second["messageCount"], 0);
    let second_file = second["sessionFile"].as_str().unwrap().to_owned();
    let text = env.session_text(std::path::Path::new(&second_file)).await;
    let header: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(header["parentSession"], first_file.as_str());

    // Events of the new session count from 1 again.
    let seq_before = rpc.frames.len();
    rpc.prompt_and_wait("two").await;
    let seqs: Vec<u64> = rpc.frames[seq_before..]
        .iter()
        .filter(|f| f["type"] == "event")
        .map(|f| f["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs[0], 1);
    assert!(
        rpc.frames[seq_before..]
            .iter()
            .filter(|f| f["type"] == "event")
            .all(|f| f["session_id"] == second["sessionId"])
    );

    let d = rpc
        .ok(json!({"type": "switch_session", "sessionPath": first_file}))
        .await;
    assert_eq!(d, json!({"cancelled": false}));
    let back = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(back["sessionId"], first["sessionId"]);
    let t = rpc.ok(json!({"type": "get_last_assistant_text"})).await;
    assert_eq!(t["text"], "first session answer");

    let r = rpc
        .call(json!({"type": "switch_session", "sessionPath": "/nowhere/missing.jsonl"}))
        .await;
    assert_eq!(r["success"], false);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Cannot open session /nowhere/missing.jsonl"),
        "{r}"
    );
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
    assert_eq!(env.session_files().await.len(), 2);
}

#[tokio::test]
async fn no_session_keeps_everything_in_memory() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("ok"));
    let mut rpc = env.rpc(&["--no-session"]).await;
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert!(s.get("sessionFile").is_none());
    rpc.prompt_and_wait("hi").await;
    rpc.ok(json!({"type": "new_session"})).await;
    let r = rpc
        .call(json!({"type": "switch_session", "sessionPath": "x"}))
        .await;
    assert_eq!(r["success"], false);
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
    assert!(env.session_files().await.is_empty());
}
