//! `compact`, `set_auto_compaction`, `branch`, `get_branch_messages`,
//! `get_session_stats` and `export_html` end to end, and the overflow
//! recovery (`auto_compaction_*` events, one retry).

use keel_test_support::MockResponse;
use serde_json::json;

use crate::suite::Env;

#[tokio::test]
async fn compact_branch_stats_and_export() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::text("second answer"),
        MockResponse::text("## Goal\nAnswer two questions."),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("question one").await;
    rpc.prompt_and_wait("question two").await;

    let points = rpc.ok(json!({"type": "get_branch_messages"})).await;
    let points = points["messages"].as_array().unwrap().clone();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1]["text"], "question two");

    let result = rpc
        .ok(json!({"type": "compact", "customInstructions": "keep the numbers"}))
        .await;
    assert_eq!(result["summary"], "## Goal\nAnswer two questions.");
    assert_eq!(result["firstKeptEntryId"], points[1]["entryId"]);
    assert!(result["tokensBefore"].as_u64().unwrap() > 0);
    assert!(result["details"]["readFiles"].is_array());
    let start = rpc
        .events()
        .into_iter()
        .find(|e| e["type"] == "auto_compaction_start")
        .cloned();
    assert_eq!(start.unwrap()["reason"], "manual");
    let end = rpc.event("auto_compaction_end").await;
    assert_eq!(end["aborted"], false);
    assert_eq!(end["willRetry"], false);
    assert_eq!(end["result"]["summary"], result["summary"]);
    let summarise = env.mock.last_request().unwrap().body;
    let prompt = summarise["messages"].to_string();
    assert!(
        prompt.contains("question one") && prompt.contains("keep the numbers"),
        "{prompt}"
    );
    assert!(summarise.get("tools").is_none() || summarise["tools"].as_array().unwrap().is_empty());

    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["autoCompactionEnabled"], true);
    assert_eq!(state["isCompacting"], false);
    assert_eq!(state["messageCount"], 3, "summary + the kept turn");
    assert!(state["contextUsage"]["contextWindow"].as_u64().unwrap() > 0);

    let stats = rpc.ok(json!({"type": "get_session_stats"})).await;
    assert_eq!(stats["userMessages"], 2);
    assert_eq!(stats["assistantMessages"], 2);
    assert_eq!(stats["totalMessages"], 4);
    assert_eq!(stats["compactions"], 1);
    assert_eq!(stats["tokens"]["input"], 20);
    assert_eq!(stats["tokens"]["output"], 10);
    assert_eq!(stats["tokens"]["total"], 30);
    assert!(stats["sessionFile"].as_str().unwrap().ends_with(".jsonl"));
    assert!(stats["contextUsage"]["tokens"].as_u64().unwrap() > 0);

    // Branch from the second question: the host gets its text back, and
    // the context is the first turn again.
    let b = rpc
        .ok(json!({"type": "branch", "entryId": points[1]["entryId"]}))
        .await;
    assert_eq!(b, json!({"text": "question two", "cancelled": false}));
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["messageCount"], 2);
    let bad = rpc.call(json!({"type": "branch", "entryId": "nope"})).await;
    assert_eq!(bad["success"], false);
    assert_eq!(bad["error"], "Invalid entry ID for branching");

    let out = rpc
        .ok(json!({"type": "export_html", "outputPath": "export.html"}))
        .await;
    let path = out["path"].as_str().unwrap();
    assert_eq!(std::path::Path::new(path), env.ws().join("export.html"));
    let html = std::fs::read_to_string(path).unwrap();
    assert!(html.contains("Content-Security-Policy"));
    assert!(html.contains("question one"));
    assert!(
        html.contains("Another branch from here"),
        "the abandoned branch is folded in"
    );

    rpc.ok(json!({"type": "set_auto_compaction", "enabled": false}))
        .await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["autoCompactionEnabled"], false);
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));

    // The file keeps everything; loading follows the leaf (the first turn).
    let session = env.only_session().await;
    assert!(
        session
            .entries
            .iter()
            .any(|e| e.body.kind() == "compaction")
    );
    assert_eq!(session.messages().len(), 2);
}

#[tokio::test]
async fn an_overflowing_call_is_compacted_and_retried() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::error(
            400,
            json!({"error": {"message": "This model's maximum context length is 8192 tokens",
                             "code": "context_length_exceeded"}}),
        ),
        MockResponse::text("## Goal\nsummary"),
        MockResponse::text("retried answer"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("question one").await;
    let end = rpc.prompt_and_wait("question two").await;
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["content"][0]["text"], "retried answer");
    let events = rpc.events();
    let start = events
        .iter()
        .find(|e| e["type"] == "auto_compaction_start")
        .unwrap();
    assert_eq!(start["reason"], "overflow");
    let done = events
        .iter()
        .find(|e| e["type"] == "auto_compaction_end")
        .unwrap();
    assert_eq!(done["willRetry"], true);
    assert_eq!(done["reason"], "overflow");
    // The retried call sends the summary, then the question.
    let body = env.mock.last_request().unwrap().body;
    let sent = body["messages"].to_string();
    assert!(
        sent.contains("compacted into the following summary"),
        "{sent}"
    );
    assert!(
        sent.contains("question two") && !sent.contains("first answer"),
        "{sent}"
    );
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
    // Resuming loads [summary] + kept messages.
    let session = env.only_session().await;
    let msgs = session.messages();
    assert_eq!(msgs.len(), 3);
}
