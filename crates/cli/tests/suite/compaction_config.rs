//! `[compaction]` of config.toml reaches the sessions of every mode: the
//! reserve moves the automatic threshold, `keep_recent_tokens` the cut,
//! `enabled = false` turns it off, and `keel config show` prints them.

use keel_test_support::{MockResponse, ev_done, ev_finish, ev_role, ev_usage, text_events};
use serde_json::json;

use super::Env;

/// A text answer whose usage says the context holds `prompt` tokens.
fn answer_at(text: &str, prompt: u64) -> MockResponse {
    let mut events = vec![ev_role()];
    events.extend(text_events(text));
    events.extend([ev_finish("stop"), ev_usage(prompt, 10), ev_done()]);
    MockResponse::sse(events)
}

/// A 4000-token window (through `[providers.custom]`, the provider of
/// `--base-url`) and the given `[compaction]` lines.
fn write_config(env: &Env, compaction: &str) {
    std::fs::write(
        env.home.path().join("config.toml"),
        format!("[providers.custom]\ncontext_window = 4000\n\n[compaction]\n{compaction}\n"),
    )
    .unwrap();
}

fn compaction_starts(rpc: &super::rpc::Rpc) -> usize {
    rpc.events()
        .iter()
        .filter(|e| e["type"] == "auto_compaction_start")
        .count()
}

/// `reserve_tokens = 200` (threshold 3800 of the mock's 4000) and a model
/// whose two answers bring the context to about 3300 and 3700 tokens, then
/// a summary and a third answer.
fn reserve_200_with_two_long_answers(env: &Env) {
    write_config(env, "reserve_tokens = 200\nkeep_recent_tokens = 100");
    env.mock.push_all([
        answer_at("first answer", 3300),
        answer_at("second answer", 3700),
        MockResponse::text("## Goal\nKeep answering."),
        MockResponse::text("third answer"),
    ]);
}

#[tokio::test]
async fn the_configured_reserve_sets_the_threshold_in_rpc_mode() {
    let env = Env::new().await;
    // Threshold 4000 - 200 = 3800 (the default reserve would make it 3000).
    reserve_200_with_two_long_answers(&env);
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("question one").await;
    // ~3311 tokens: past the default threshold, under the configured one.
    rpc.prompt_and_wait("question two").await;
    assert_eq!(compaction_starts(&rpc), 0, "compacted below the threshold");
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["contextUsage"]["contextWindow"], 4000);
    assert_eq!(state["contextUsage"]["tokens"], 3710);

    // ~3710 + 200 tokens: past 3800, compacted before the call.
    let third = format!("question three {}", "z".repeat(800));
    rpc.prompt_and_wait(&third).await;
    let start = rpc
        .events()
        .into_iter()
        .find(|e| e["type"] == "auto_compaction_start")
        .cloned()
        .expect("an automatic compaction");
    assert_eq!(start["reason"], "threshold");
    let end = rpc
        .events()
        .into_iter()
        .find(|e| e["type"] == "auto_compaction_end")
        .cloned()
        .expect("the compaction's end");
    let result = &end["result"];
    assert!(result["tokensBefore"].as_u64().unwrap() > 3800, "{end}");
    // keep_recent_tokens = 100: only the newest turn is kept.
    let points = rpc.ok(json!({"type": "get_branch_messages"})).await;
    assert_eq!(result["firstKeptEntryId"], points["messages"][2]["entryId"]);

    let requests = env.mock.requests();
    let summarise = &requests[2].body;
    let prompt = summarise["messages"].to_string();
    assert!(prompt.contains("question one") && prompt.contains("second answer"));
    // The summary is bounded by the reserve (4/5 of it, at least 256).
    assert_eq!(summarise["max_tokens"], 256);
    let last = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(last.contains("Keep answering.") && last.contains("question three"));
    assert!(!last.contains("question one"), "{last}");
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
}

#[tokio::test]
async fn disabled_in_config_exec_never_compacts_and_config_show_says_so() {
    let env = Env::new().await;
    write_config(&env, "enabled = false\nreserve_tokens = 200");
    env.mock.push_all([
        answer_at("first answer", 3900),
        MockResponse::text("second answer"),
    ]);
    let out = env.exec().arg("question one").run().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let out = env
        .exec()
        .args(["--continue", "question two"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    // No summarisation call: two calls, the second with the whole history.
    assert_eq!(env.mock.requests().len(), 2);
    let session = env.only_session().await;
    assert!(
        session
            .entries
            .iter()
            .all(|e| e.body.kind() != "compaction")
    );

    let show = env
        .keel()
        .args([
            "config",
            "show",
            "--base-url",
            &env.mock.base_url(),
            "--model",
            "mock-model",
        ])
        .run()
        .await
        .unwrap();
    assert_eq!(show.code(), Some(0), "{}", show.stderr);
    for line in [
        "[compaction]",
        "enabled = false",
        "reserve_tokens = 200",
        "keep_recent_tokens = 20000",
        "# compacts above 3800 of the model's 4000 tokens",
    ] {
        assert!(
            show.stdout.contains(line),
            "no {line:?} in\n{}",
            show.stdout
        );
    }

    // A misspelt key is a clear error, not ignored.
    write_config(&env, "reserve = 5");
    let out = env.exec().arg("x").run().await.unwrap();
    assert_ne!(out.code(), Some(0));
    assert!(out.stderr.contains("unknown field"), "{}", out.stderr);
}

#[tokio::test]
async fn the_app_server_uses_the_configured_reserve() {
    let env = Env::new().await;
    reserve_200_with_two_long_answers(&env);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    for q in ["question one", "question two"] {
        let turn = s.start_turn(&thread, q).await;
        s.finish_turn(&turn, "accept").await;
    }
    // ~3311 tokens: past the default threshold (3000), under 3800.
    assert_eq!(env.mock.request_count(), 2, "no summarisation call");
    let third = format!("question three {}", "z".repeat(800));
    let turn = s.start_turn(&thread, &third).await;
    s.finish_turn(&turn, "accept").await;
    assert_eq!(env.mock.request_count(), 4, "summarised, then answered");
    let summarise = env.mock.requests()[2].body["messages"].to_string();
    assert!(summarise.contains("question one"), "{summarise}");
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
