//! Approval decisions in the session file: each held call's outcome and
//! each call a rule let through become `approval` entries next to the
//! call, which `keel sessions show` lists, the HTML export shows with the
//! call, and the model never sees.

use keel_protocol::Message;
use keel_session_store::{ApprovalDecision, ApprovalEntry, EntryBody};
use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use super::Env;

fn bash(id: &str, command: &str) -> MockResponse {
    MockResponse::tool_calls(vec![tool_call(id, "bash", json!({ "command": command }))])
}

#[tokio::test]
async fn decisions_are_recorded_next_to_their_calls_and_exported() {
    let env = Env::new().await;
    env.mock.push_all([
        bash("c1", "cargo test"),
        bash("c2", "cargo test --quiet"),
        bash("c3", "keel-test-unknown-program --deploy"),
        bash("c4", "ls"),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "test and deploy"}))
        .await;
    let req = rpc.approval_request().await;
    let always = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&always, "approve_always", json!({})).await;
    rpc.tool_end("c1").await;
    rpc.tool_end("c2").await;
    let req = rpc.approval_request().await;
    assert_eq!(req["toolCallId"], "c3");
    let declined = req["id"].as_str().unwrap().to_owned();
    rpc.decide(
        &declined,
        "decline",
        json!({"note": "deploy from CI <b>instead</b>"}),
    )
    .await;
    rpc.tool_end("c4").await;
    rpc.event("agent_end").await;
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));

    let session = env.only_session().await;
    let branch = session.branch();
    let approvals: Vec<&ApprovalEntry> = branch
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Approval(a) => Some(a),
            _ => None,
        })
        .collect();
    let summary: Vec<(&str, ApprovalDecision)> = approvals
        .iter()
        .map(|a| (a.tool_call_id.as_str(), a.decision))
        .collect();
    // `ls` only reads: nothing decided it, nothing is recorded.
    assert_eq!(
        summary,
        [
            ("c1", ApprovalDecision::Always),
            ("c2", ApprovalDecision::Rule),
            ("c3", ApprovalDecision::Declined),
        ]
    );
    assert_eq!(approvals[0].approval_id.as_deref(), Some(always.as_str()));
    assert_eq!(approvals[0].decided_by.as_deref(), Some("rpc"));
    assert_eq!(approvals[0].rule_ids, approvals[1].rule_ids);
    assert_eq!(approvals[1].rule_ids.len(), 1);
    assert_eq!(approvals[2].approval_id.as_deref(), Some(declined.as_str()));
    assert_eq!(
        approvals[2].note.as_deref(),
        Some("deploy from CI <b>instead</b>")
    );
    assert_eq!(approvals[2].class.as_deref(), Some("send"));
    assert!(approvals[2].title.as_deref().unwrap().contains("--deploy"));

    // Each sits between the call and its result.
    for (i, e) in branch.iter().enumerate() {
        if let EntryBody::Approval(a) = &e.body {
            let made_it = matches!(&branch[i - 1].body,
                EntryBody::Message { message: Message::Assistant(m) }
                    if m.tool_calls().iter().any(|(id, _, _)| *id == a.tool_call_id));
            assert!(made_it, "{} does not follow its call", a.tool_call_id);
            let answered = matches!(&branch[i + 1].body,
                EntryBody::Message { message: Message::ToolResult(r) }
                    if r.tool_call_id == a.tool_call_id);
            assert!(answered, "{} is not followed by its result", a.tool_call_id);
        }
    }
    // The model's context holds messages only, and the last request had
    // nothing of the entries.
    assert_eq!(session.messages().len(), 10);
    let sent = env.mock.last_request().unwrap().body.to_string();
    assert!(!sent.contains("\"approval\"") && !sent.contains("decidedBy"));

    let show = env
        .keel()
        .args(["sessions", "show", &session.header.id])
        .run()
        .await
        .unwrap();
    assert_eq!(show.code(), Some(0), "{}", show.stderr);
    assert!(
        show.stdout.contains("approval   bash c3: declined by rpc"),
        "{}",
        show.stdout
    );
    let rule = &approvals[1].rule_ids[0];
    assert!(
        show.stdout
            .contains(&format!("approval   bash c2: rule ({rule})\n")),
        "{}",
        show.stdout
    );

    let export = env
        .keel()
        .args(["sessions", "export", "--html", "-o", "page.html"])
        .run()
        .await
        .unwrap();
    assert_eq!(export.code(), Some(0), "{}", export.stderr);
    let page = std::fs::read_to_string(env.ws().join("page.html")).unwrap();
    for needle in [
        "Approval: approved by rpc and always allowed from now on",
        "Approval: allowed by rule",
        "Approval: declined: “deploy from CI &lt;b&gt;instead&lt;/b&gt;”",
    ] {
        assert!(page.contains(needle), "the page lacks {needle:?}");
    }
    assert!(!page.contains("<b>instead"));
    // Shown once, with its call, not also guessed from the result text.
    assert_eq!(page.matches("data-decision=\"declined\"").count(), 1);
    assert_eq!(page.matches("⚖").count(), 3);
}

#[tokio::test]
async fn the_app_server_records_a_declined_call_in_the_thread_file() {
    let env = Env::new().await;
    std::fs::create_dir(env.ws().join("keep")).unwrap();
    env.mock
        .push_all([bash("c1", "rm -rf keep"), MockResponse::text("kept it")]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "on-request").await;
    let turn = s.start_turn(&thread, "clean up").await;
    s.finish_turn(&turn, "decline").await;
    let out = s.close().await;
    assert_eq!(out.code(), Some(0));
    assert!(env.ws().join("keep").exists());

    let session = env.only_session().await;
    let approvals: Vec<&ApprovalEntry> = session
        .entries
        .iter()
        .filter_map(|e| match &e.body {
            EntryBody::Approval(a) => Some(a),
            _ => None,
        })
        .collect();
    assert_eq!(approvals.len(), 1, "{:?}", session.entries);
    assert_eq!(approvals[0].tool_call_id, "c1");
    assert_eq!(approvals[0].decision, ApprovalDecision::Declined);
    assert_eq!(approvals[0].class.as_deref(), Some("money"));
}
