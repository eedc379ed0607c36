//! Thread management: items paging, Git metadata that persists, archive
//! and unarchive, delete (refused while a turn runs); the plan from
//! `update_plan`, `warning`s, per-turn overrides that stick, `model/list`.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::super::Env;
use super::AppServer;

async fn one_turn(s: &mut AppServer, thread: &str, text: &str) {
    let turn = s.start_turn(thread, text).await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "completed");
}

#[tokio::test]
async fn items_metadata_archive_and_delete() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("First answer."),
        MockResponse::text("one two three four five").stall_after(2),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    one_turn(&mut s, &thread, "hello").await;

    // Items, flat, with their turn; paged; anchored in a turn.
    let all = s.ok("thread/items/list", json!({"threadId": thread})).await;
    let data = all["data"].as_array().unwrap();
    let kinds: Vec<&str> = data
        .iter()
        .map(|e| e["item"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["userMessage", "agentMessage"]);
    let turn_id = data[0]["turnId"].as_str().unwrap().to_owned();
    let page = s
        .ok("thread/items/list", json!({"threadId": thread, "limit": 1}))
        .await;
    assert_eq!(page["data"].as_array().unwrap().len(), 1);
    let next = page["nextCursor"].as_str().unwrap().to_owned();
    let rest = s
        .ok(
            "thread/items/list",
            json!({"threadId": thread, "cursor": next}),
        )
        .await;
    assert_eq!(rest["data"][0]["item"]["type"], "agentMessage");
    assert_eq!(rest["nextCursor"], Value::Null);
    let anchored = s
        .ok(
            "thread/items/list",
            json!({"threadId": thread, "turnId": turn_id,
                   "cursor": {"type": "item", "itemId": data[0]["item"]["id"]}}),
        )
        .await;
    assert_eq!(anchored["data"][0]["item"]["type"], "agentMessage");
    let e = s
        .err(
            "thread/items/list",
            json!({"threadId": thread, "turnId": "nope"}),
        )
        .await;
    assert_eq!(e["code"], -32600);

    // Git metadata: patched, returned by later reads, also by a new process.
    let r = s
        .ok(
            "thread/metadata/update",
            json!({"threadId": thread, "gitInfo": {"branch": "main", "sha": "abc123"}}),
        )
        .await;
    assert_eq!(r["thread"]["gitInfo"]["branch"], "main");
    let r = s
        .ok(
            "thread/metadata/update",
            json!({"threadId": thread, "gitInfo": {"sha": null}}),
        )
        .await;
    assert_eq!(
        r["thread"]["gitInfo"],
        json!({"sha": null, "branch": "main", "originUrl": null})
    );
    s.close().await;
    let mut s = env.initialized(false).await;
    let read = s.ok("thread/read", json!({"threadId": thread})).await;
    assert_eq!(read["thread"]["gitInfo"]["branch"], "main");
    let list = s.ok("thread/list", json!({})).await;
    assert_eq!(list["data"][0]["gitInfo"]["branch"], "main");

    // Archive: unloaded, hidden from the default list, not resumable.
    s.ok("thread/resume", json!({"threadId": thread})).await;
    assert_eq!(
        s.ok("thread/archive", json!({"threadId": thread})).await,
        json!({})
    );
    let status = s.notification("thread/status/changed").await;
    assert_eq!(status["params"]["status"], json!({"type": "notLoaded"}));
    s.notification("thread/archived").await;
    let list = s.ok("thread/list", json!({})).await;
    assert_eq!(list["data"], json!([]));
    let list = s.ok("thread/list", json!({"archived": true})).await;
    assert_eq!(list["data"][0]["id"], thread.as_str());
    let e = s
        .err(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(e["message"], format!("thread not found: {thread}"));
    let e = s.err("thread/resume", json!({"threadId": thread})).await;
    assert!(e["message"].as_str().unwrap().contains("archived"), "{e}");
    let r = s.ok("thread/unarchive", json!({"threadId": thread})).await;
    assert_eq!(r["thread"]["id"], thread.as_str());
    s.notification("thread/unarchived").await;
    let list = s.ok("thread/list", json!({})).await;
    assert_eq!(list["data"][0]["id"], thread.as_str());

    // Delete: refused while a turn runs, then the thread is gone.
    s.ok("thread/resume", json!({"threadId": thread})).await;
    let turn = s.start_turn(&thread, "talk").await;
    s.notification("item/agentMessage/delta").await;
    let e = s.err("thread/delete", json!({"threadId": thread})).await;
    assert!(
        e["message"].as_str().unwrap().contains("turn in progress"),
        "{e}"
    );
    s.ok(
        "turn/interrupt",
        json!({"threadId": thread, "turnId": turn}),
    )
    .await;
    s.finish_turn(&turn, "accept").await;
    assert_eq!(
        s.ok("thread/delete", json!({"threadId": thread})).await,
        json!({})
    );
    let deleted = s.notification("thread/deleted").await;
    assert_eq!(deleted["params"]["threadId"], thread.as_str());
    assert!(env.session_files().await.is_empty());
    let e = s.err("thread/read", json!({"threadId": thread})).await;
    assert_eq!(e["message"], format!("thread not found: {thread}"));
    s.close().await;
}

#[tokio::test]
async fn plans_warnings_and_overrides_that_stick() {
    let env = Env::new().await;
    let sub = env.ws().join("sub");
    std::fs::create_dir(&sub).unwrap();
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "p1",
            "update_plan",
            json!({"explanation": "two steps",
                   "plan": [{"step": "look", "status": "in_progress"},
                            {"step": "answer", "status": "pending"}]}),
        )]),
        MockResponse::tool_calls(vec![tool_call("c1", "bash", json!({"command": "pwd"}))]),
        MockResponse::text("Planned."),
        MockResponse::tool_calls(vec![tool_call("c2", "bash", json!({"command": "pwd"}))]),
        MockResponse::text("Still there."),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "on-request").await;
    let r = s
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "plan"}],
                   "cwd": sub.display().to_string(), "effort": "xhigh"}),
        )
        .await;
    let turn = r["turn"]["id"].as_str().unwrap().to_owned();
    s.finish_turn(&turn, "accept").await;

    // Warnings: the model is unknown to the catalogue; the effort clamped.
    let warnings: Vec<String> = s
        .seen("warning")
        .iter()
        .map(|w| w["params"]["message"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("unknown model mock-model")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("reasoning effort xhigh")),
        "{warnings:?}"
    );
    let methods = s.methods();
    let warn_at = methods.iter().position(|m| m == "warning").unwrap();
    let started_at = methods.iter().position(|m| m == "turn/started").unwrap();
    assert!(warn_at < started_at);

    // The plan, as a notification, not an item.
    let plan = s.notification("turn/plan/updated").await;
    assert_eq!(plan["params"]["turnId"], turn.as_str());
    assert_eq!(plan["params"]["explanation"], "two steps");
    assert_eq!(
        plan["params"]["plan"],
        json!([{"step": "look", "status": "inProgress"},
               {"step": "answer", "status": "pending"}])
    );
    assert!(
        s.seen("item/started")
            .iter()
            .all(|f| f["params"]["item"]["type"] != "dynamicToolCall")
    );

    // The cwd override applies and sticks for the next turn.
    let outputs = |s: &AppServer| -> Vec<String> {
        s.seen("item/completed")
            .iter()
            .filter(|f| f["params"]["item"]["type"] == "commandExecution")
            .map(|f| {
                f["params"]["item"]["aggregatedOutput"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    };
    assert!(outputs(&s)[0].contains("/sub"), "{:?}", outputs(&s));
    one_turn(&mut s, &thread, "again").await;
    assert!(outputs(&s)[1].contains("/sub"), "{:?}", outputs(&s));
    let read = s.ok("thread/read", json!({"threadId": thread})).await;
    assert_eq!(read["thread"]["cwd"], sub.display().to_string());

    // model/list: the configured model first, the default.
    let models = s.ok("model/list", json!({})).await;
    assert_eq!(models["data"][0]["id"], "mock-model");
    assert_eq!(models["data"][0]["isDefault"], true);
    let config = s.ok("config/read", json!({})).await;
    assert_eq!(config["config"]["approval_policy"], "on-request");
    s.close().await;
}
