//! Manual compaction through the real binary in RPC mode: a failed summary
//! changes nothing, an aborted one changes nothing, and a second compaction
//! hands the first summary to the model so nothing it said is lost.

use std::time::Duration;

use keel_test_support::MockResponse;
use serde_json::json;

use super::Env;

/// The entry types of the only session file, in file order.
async fn entry_kinds(env: &Env) -> Vec<&'static str> {
    env.only_session()
        .await
        .entries
        .iter()
        .map(|e| e.body.kind())
        .collect()
}

#[tokio::test]
async fn failed_and_aborted_compactions_change_nothing_and_a_second_builds_on_the_first() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::text("second answer"),
        // The first `compact`: the summarisation call is refused.
        MockResponse::error(400, json!({"error": {"message": "bad summary request"}})),
        // The second: stalls until aborted.
        MockResponse::text("## Goal\nnever finished").stall_after(1),
        // The third succeeds.
        MockResponse::text("## Goal\nS1: answer questions one and two."),
        MockResponse::text("third answer"),
        // The fourth, after another turn.
        MockResponse::text("## Goal\nS2: three questions answered."),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("question one").await;
    rpc.prompt_and_wait("question two").await;
    let before = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(before["messageCount"], 4);

    let failed = rpc.call(json!({"type": "compact"})).await;
    assert_eq!(failed["success"], false, "{failed}");
    let error = failed["error"].as_str().unwrap();
    assert!(error.starts_with("Compaction failed"), "{error}");
    assert!(error.contains("bad summary request"), "{error}");
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["messageCount"], 4);
    assert_eq!(state["isCompacting"], false);

    // Abort while the summary streams: the `compact` answers "aborted".
    rpc.send(json!({"id": "c2", "type": "compact"})).await;
    keel_test_support::wait_until(Duration::from_secs(20), || env.mock.request_count() == 4)
        .await
        .expect("the summarisation call was made");
    rpc.ok(json!({"type": "abort"})).await;
    let aborted = rpc.response("c2").await;
    assert_eq!(aborted["success"], false, "{aborted}");
    assert_eq!(aborted["error"], "Compaction was aborted");
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["messageCount"], 4);
    let end = rpc
        .events()
        .into_iter()
        .filter(|e| e["type"] == "auto_compaction_end")
        .nth(1)
        .cloned()
        .unwrap();
    assert_eq!(end["aborted"], true, "{end}");

    let first = rpc.ok(json!({"type": "compact"})).await;
    assert!(
        first["summary"]
            .as_str()
            .unwrap()
            .starts_with("## Goal\nS1")
    );
    rpc.prompt_and_wait("question three").await;
    let second = rpc
        .ok(json!({"type": "compact", "customInstructions": "the numbers"}))
        .await;
    assert!(second["summary"].as_str().unwrap().contains("S2"));
    let prompt = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(
        prompt.contains("<previous-summary>")
            && prompt.contains("S1: answer questions one and two."),
        "the second summary request lacks the first: {prompt}"
    );
    assert!(prompt.contains("Additional focus: the numbers"), "{prompt}");
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));

    // Only the two that finished were written; the model now reads S2 first.
    let kinds = entry_kinds(&env).await;
    assert_eq!(
        kinds.iter().filter(|k| **k == "compaction").count(),
        2,
        "{kinds:?}"
    );
    let session = env.only_session().await;
    let context = session.messages();
    let first_text = serde_json::to_string(&context[0]).unwrap();
    assert!(
        first_text.contains("S2: three questions answered."),
        "{first_text}"
    );
    assert!(!first_text.contains("S1:"), "{first_text}");
}
