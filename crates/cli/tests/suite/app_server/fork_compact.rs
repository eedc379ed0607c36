//! `thread/fork` and `thread/compact/start` (every frame is checked
//! against the Codex schema when the server closes).

use keel_test_support::MockResponse;
use serde_json::json;

use super::super::Env;

#[tokio::test]
async fn fork_copies_the_history_into_a_new_thread_that_records_its_parent() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::text("second answer"),
        MockResponse::text("in the fork"),
    ]);
    let mut s = env.initialized(false).await;
    let source = s.start_thread(env.ws(), "never").await;
    for q in ["one", "two"] {
        let turn = s.start_turn(&source, q).await;
        s.finish_turn(&turn, "accept").await;
    }
    // Fork through the first turn only.
    let forked = s
        .ok(
            "thread/fork",
            json!({"threadId": source, "lastTurnId": format!("{source}-turn-0")}),
        )
        .await;
    let fork_id = forked["thread"]["id"].as_str().unwrap().to_owned();
    assert_ne!(fork_id, source);
    assert_eq!(forked["thread"]["forkedFromId"], source.as_str());
    let turns = forked["thread"]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 1);
    let id = fork_id.clone();
    s.wait_for("thread/started of the fork", move |f| {
        f["method"] == "thread/started" && f["params"]["thread"]["id"] == id.as_str()
    })
    .await;

    // The fork continues from the copied history.
    let turn = s.start_turn(&fork_id, "three").await;
    s.finish_turn(&turn, "accept").await;
    let sent = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("one") && sent.contains("first answer"),
        "{sent}"
    );
    assert!(!sent.contains("second answer"), "{sent}");

    let err = s
        .err(
            "thread/fork",
            json!({"threadId": source, "lastTurnId": "nope"}),
        )
        .await;
    assert!(
        err["message"].as_str().unwrap().contains("unknown turn"),
        "{err}"
    );
    let out = s.close().await;
    assert_eq!(out.code(), Some(0));
    // The fork's file records the source as its parent.
    let files = env.session_files().await;
    assert_eq!(files.len(), 2);
    let mut headers: Vec<serde_json::Value> = Vec::new();
    for f in &files {
        let text = env.session_text(f).await;
        headers.push(serde_json::from_str(text.lines().next().unwrap()).unwrap());
    }
    assert!(headers.iter().any(|h| h["parentSession"].is_string()));
}

#[tokio::test]
async fn compact_start_runs_a_compaction_turn() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::text("second answer"),
        MockResponse::text("## Goal\nthe summary"),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    for q in ["one", "two"] {
        let turn = s.start_turn(&thread, q).await;
        s.finish_turn(&turn, "accept").await;
    }
    let r = s
        .ok("thread/compact/start", json!({"threadId": thread}))
        .await;
    assert_eq!(r, json!({}));
    let done = s
        .wait_for("the compaction turn", |f| f["method"] == "turn/completed")
        .await;
    assert_eq!(done["params"]["turn"]["status"], "completed");
    let items: Vec<String> = s
        .seen("item/completed")
        .iter()
        .map(|f| f["params"]["item"]["type"].as_str().unwrap().to_owned())
        .collect();
    assert!(items.contains(&"contextCompaction".to_owned()), "{items:?}");
    let err = s
        .err("thread/compact/start", json!({"threadId": "missing"}))
        .await;
    assert!(err["message"].as_str().is_some());
    let out = s.close().await;
    assert_eq!(out.code(), Some(0));
    let session = env.only_session().await;
    assert!(
        session
            .entries
            .iter()
            .any(|e| e.body.kind() == "compaction")
    );
}
