//! `keel exec` without a terminal: a held call waits, one stderr line says
//! how to decide, and `keel approvals …` from a second process wakes it.

use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use crate::suite::Env;
use crate::suite::rpc::WAIT;

/// The request id in the hint line.
fn id_in(line: &str) -> String {
    let start = line.find("keel approvals approve apr_").unwrap() + "keel approvals approve ".len();
    line[start..].split_whitespace().next().unwrap().to_owned()
}

#[tokio::test]
async fn another_process_approves_a_waiting_exec() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("victim"), "x").unwrap();
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "rm -rf victim && echo removed-it"}),
        )]),
        MockResponse::text("All clean."),
    ]);
    let mut child = env.exec().arg("clean up").spawn().await.unwrap();
    let hint = child
        .wait_for_stderr(WAIT, |l| l.contains("keel approvals approve apr_"))
        .await
        .unwrap();
    assert!(
        hint.starts_with("keel: waiting for approval apr_"),
        "{hint}"
    );
    assert!(hint.contains("rm -rf victim"), "{hint}");
    let hints = child
        .stderr_seen
        .iter()
        .filter(|l| l.contains("keel approvals approve"))
        .count();
    assert_eq!(hints, 1, "one line");
    assert!(env.ws().join("victim").exists());

    let id = id_in(&hint);
    let out = env.approvals_cmd(&["approve", &id], false).await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("approved"), "{}", out.stdout);

    let done = child.wait().await.unwrap();
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert!(done.stdout.contains("All clean."));
    assert!(!env.ws().join("victim").exists());
    let audit = env.approvals_json(&["explain", "c1"]).await;
    let outcomes: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["outcome"].as_str())
        .collect();
    assert_eq!(outcomes, ["held", "approved", "claimed", "finished"]);
}

#[tokio::test]
async fn a_decline_from_the_cli_reaches_the_exec_model() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "keel-test-unknown-program --release"}),
        )]),
        MockResponse::text("Understood."),
    ]);
    let mut child = env
        .exec()
        .args(["--approval-mode", "everything", "release it"])
        .spawn()
        .await
        .unwrap();
    let hint = child
        .wait_for_stderr(WAIT, |l| l.contains("keel approvals approve apr_"))
        .await
        .unwrap();
    let id = id_in(&hint);
    let listed = env.approvals_json(&["list"]).await;
    assert_eq!(listed[0]["id"], id.as_str());
    let out = env
        .approvals_cmd(&["decline", &id, "--note", "release on Monday"], false)
        .await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let done = child.wait().await.unwrap();
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    let input = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(input.contains("release on Monday"), "{input}");
    // Deciding twice is refused with who decided.
    let again = env.approvals_cmd(&["approve", &id], false).await;
    assert_ne!(again.code(), Some(0));
    assert!(
        again.stderr.contains("already declined by cli"),
        "{}",
        again.stderr
    );
}
