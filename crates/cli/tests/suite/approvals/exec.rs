//! `keel exec` without a terminal: a held call becomes a draft and the run
//! goes on; `keel approvals send` runs it later and the next `keel exec
//! --continue` tells the model. With `--wait-approvals` a held call waits,
//! one stderr line says how to decide, and `keel approvals …` from a second
//! process wakes it; killed while it waits, `keel exec --continue` finishes
//! the cut-off turn before the new prompt.

use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use super::id_in;
use crate::suite::Env;

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
    let (child, hint) = env.exec_held(&["clean up"]).await;
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
    let (child, hint) = env
        .exec_held(&["--approval-mode", "everything", "release it"])
        .await;
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

#[tokio::test]
async fn without_a_terminal_a_held_call_becomes_a_draft_sent_later() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("victim"), "x").unwrap();
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "rm -rf victim && echo removed-it"}),
        )]),
        MockResponse::text("Parked the cleanup."),
    ]);
    // The run does not wait: it ends on its own, the call parked.
    let done = env.exec().arg("clean up").run().await.unwrap();
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert!(
        done.stdout.contains("Parked the cleanup."),
        "{}",
        done.stdout
    );
    let line = done
        .stderr
        .lines()
        .find(|l| l.starts_with("keel: held as draft apr_"))
        .unwrap_or_else(|| panic!("no draft line: {}", done.stderr));
    assert!(line.contains("rm -rf victim"), "{line}");
    let id = line["keel: held as draft ".len()..]
        .split(':')
        .next()
        .unwrap()
        .to_owned();
    assert!(env.ws().join("victim").exists(), "nothing ran");
    let input = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(
        input.contains(&format!("Held for approval as draft {id}")),
        "{input}"
    );
    let listed = env.approvals_json(&["list"]).await;
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["delivery"], "draft");

    // Sent later from the CLI: it runs there, once.
    let sent = env.approvals_cmd(&["send", &id], false).await;
    assert_eq!(sent.code(), Some(0), "{}", sent.stderr);
    assert!(!env.ws().join("victim").exists());

    // The next run in that session hears the outcome, once.
    env.mock.push_all([
        MockResponse::text("Good."),
        MockResponse::text("Still good."),
    ]);
    let next = env
        .exec()
        .args(["--continue", "anything new?"])
        .run()
        .await
        .unwrap();
    assert_eq!(next.code(), Some(0), "stderr: {}", next.stderr);
    let input = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(input.contains("was sent by the user and ran"), "{input}");
    assert!(input.contains("removed-it"), "{input}");
    let again = env
        .exec()
        .args(["--continue", "and now?"])
        .run()
        .await
        .unwrap();
    assert_eq!(again.code(), Some(0), "stderr: {}", again.stderr);
    let input = env.mock.last_request().unwrap().body["messages"].to_string();
    assert_eq!(
        input.matches("was sent by the user and ran").count(),
        1,
        "told once: {input}"
    );
}

#[tokio::test]
async fn exec_continue_resumes_a_turn_killed_while_it_waited() {
    let env = Env::new().await;
    env.mock.push(MockResponse::tool_calls(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "echo ran >> marker"}),
    )]));
    let (child, hint) = env
        .exec_held(&["--approval-mode", "everything", "mark it"])
        .await;
    child.signal("KILL").await.unwrap();
    let killed = child.wait().await.unwrap();
    assert_eq!(killed.code(), None, "killed by a signal");
    let id = id_in(&hint);
    let out = env.approvals_cmd(&["approve", &id], false).await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);

    // The cut-off turn finishes first (the call runs once, the model
    // answers), then the new prompt runs.
    env.mock.push_all([
        MockResponse::text("Marked it."),
        MockResponse::text("Nothing else to do."),
    ]);
    let done = env
        .exec()
        .args(["--continue", "anything else?"])
        .run()
        .await
        .unwrap();
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert!(done.stdout.contains("Marked it."), "{}", done.stdout);
    assert!(
        done.stdout.contains("Nothing else to do."),
        "{}",
        done.stdout
    );
    let marker = std::fs::read_to_string(env.ws().join("marker")).unwrap();
    assert_eq!(marker, "ran\n", "ran exactly once");
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 3);
    let resumed = requests[1].body["messages"].to_string();
    assert!(!resumed.contains("anything else?"), "{resumed}");
    assert!(
        requests[2].body["messages"]
            .to_string()
            .contains("anything else?")
    );
    let session = env.only_session().await;
    let results = session
        .all_messages()
        .iter()
        .filter(|m| matches!(m, keel_protocol::Message::ToolResult(r) if r.tool_call_id == "c1"))
        .count();
    assert_eq!(results, 1);
}
