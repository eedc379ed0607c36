//! Approvals in RPC mode: held calls, decisions, offers, rules, modes,
//! host tool classes, a new message while a call waits, abort, drafts.

use keel_test_support::{MockResponse, tool_call, wait_until};
use serde_json::{Value, json};

use super::result_text;
use crate::suite::Env;
use crate::suite::rpc::WAIT;

fn bash(id: &str, command: &str) -> MockResponse {
    MockResponse::tool_calls(vec![tool_call(id, "bash", json!({ "command": command }))])
}

/// The text of every message the model was sent in its last request.
fn last_model_input(env: &Env) -> String {
    env.mock.last_request().unwrap().body["messages"].to_string()
}

#[tokio::test]
async fn a_money_call_waits_for_approval_then_runs() {
    let env = Env::new().await;
    std::fs::create_dir(env.ws().join("x")).unwrap();
    env.mock
        .push_all([bash("c1", "rm -rf x"), MockResponse::text("removed")]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "remove x"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["id"], req["requestId"]);
    assert_eq!(req["toolCallId"], "c1");
    assert_eq!(req["toolName"], "bash");
    assert_eq!(req["class"], "money");
    assert_eq!(req["delivery"], "wait");
    assert_eq!(
        req["always"],
        Value::Null,
        "money is never offered always-allow"
    );
    assert_eq!(req["argLines"], json!(["command: rm -rf x"]));
    assert!(req["expiresAt"].as_str().unwrap().ends_with('Z'));
    // Nothing started while it waits (a round trip proves the loop is parked).
    rpc.ok(json!({"type": "get_state"})).await;
    assert!(!rpc.started("c1"));
    assert!(env.ws().join("x").exists());
    let pending = rpc.ok(json!({"type": "get_pending_approvals"})).await;
    assert_eq!(pending["approvals"][0]["requestId"], req["id"]);

    let id = req["id"].as_str().unwrap().to_owned();
    let d = rpc.decide(&id, "approve", json!({})).await;
    assert_eq!(
        (d["status"].as_str(), d["decidedBy"].as_str()),
        (Some("approved"), Some("rpc"))
    );
    let resolved = rpc
        .seen_or_wait("approval_resolved", |f| f["type"] == "approval_resolved")
        .await;
    assert_eq!(resolved["status"], "approved");
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], false, "{end}");
    rpc.event("agent_end").await;
    assert!(!env.ws().join("x").exists());
    // A second, different decision is refused.
    let r = rpc
        .call(json!({"type": "approval_response", "requestId": id, "decision": "decline"}))
        .await;
    assert_eq!(r["success"], false);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("already approved by rpc"),
        "{r}"
    );
    let pending = rpc.ok(json!({"type": "get_pending_approvals"})).await;
    assert_eq!(pending["approvals"], json!([]));
}

#[tokio::test]
async fn a_decline_note_reaches_the_model_and_nothing_runs() {
    let env = Env::new().await;
    env.mock.push_all([
        bash("c1", "keel-test-unknown-program --deploy"),
        MockResponse::text("ok, not deploying"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "deploy"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["class"], "send");
    assert!(!rpc.started("c1"), "a held call was announced as started");
    let id = req["id"].as_str().unwrap().to_owned();
    let d = rpc
        .decide(&id, "decline", json!({"note": "deploy from CI instead"}))
        .await;
    assert_eq!(d["status"], "declined");
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], true);
    assert_eq!(
        result_text(&end),
        "The user declined this; nothing happened. Their note: deploy from CI instead"
    );
    // As pi closes a call it blocked: once decided, the declined call gets
    // its start and its end, so a host's view of it closes (docs/rpc.md).
    let position = |what: &str, pred: &dyn Fn(&Value) -> bool| {
        rpc.frames
            .iter()
            .position(pred)
            .unwrap_or_else(|| panic!("no {what}"))
    };
    let resolved = position("approval_resolved", &|f| {
        f["type"] == "approval_resolved" && f["status"] == "declined"
    });
    let call_event = |ty: &'static str| {
        move |f: &Value| {
            crate::suite::rpc::event(f).is_some_and(|e| e["type"] == ty && e["toolCallId"] == "c1")
        }
    };
    let started = position("tool_execution_start", &call_event("tool_execution_start"));
    let ended = position("tool_execution_end", &call_event("tool_execution_end"));
    assert!(resolved < started && started < ended, "{:#?}", rpc.frames);
    rpc.event("agent_end").await;
    assert!(last_model_input(&env).contains("deploy from CI instead"));
}

#[tokio::test]
async fn always_allow_is_offered_for_cargo_test_and_its_rule_lets_the_next_call_run() {
    let env = Env::new().await;
    env.mock.push_all([
        bash("c1", "cargo test"),
        bash("c2", "cargo test --quiet"),
        bash("c3", "ls && rm -rf /"),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "test"})).await;
    let req = rpc.approval_request().await;
    assert_eq!(req["class"], "send");
    assert_eq!(
        req["always"]["scope"],
        json!({"kind": "command", "prefix": ["cargo", "test"]}),
        "{req}"
    );
    let id = req["id"].as_str().unwrap().to_owned();
    let d = rpc.decide(&id, "approve_always", json!({})).await;
    assert_eq!(d["status"], "approved");
    let rule_id = d["ruleId"].as_str().unwrap().to_owned();
    rpc.tool_end("c1").await;

    // The rule covers `cargo test --quiet`: it runs without asking.
    rpc.tool_end("c2").await;
    // `ls && rm -rf /` is money: it asks, with no always-allow offer.
    let req = rpc.approval_request().await;
    assert_eq!(req["toolCallId"], "c3");
    assert_eq!(req["class"], "money");
    assert_eq!(req["always"], Value::Null);
    let id3 = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id3, "decline", json!({})).await;
    rpc.event("agent_end").await;
    let asked: Vec<&Value> = rpc
        .frames
        .iter()
        .filter(|f| f["type"] == "approval_request")
        .collect();
    assert_eq!(asked.len(), 2, "c2 did not ask");

    let rules = rpc.ok(json!({"type": "list_approval_rules"})).await;
    assert_eq!(rules["rules"][0]["ruleId"], rule_id.as_str());
    assert_eq!(rules["rules"][0]["matchCount"], 1);
    assert_eq!(rules["rules"][0]["createdFrom"], id.as_str());
    // The audit says why c2 ran.
    let audit = env.approvals_json(&["explain", "c2"]).await;
    let allowed = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["outcome"] == "allowed")
        .expect("an evaluation line");
    assert_eq!(allowed["approved_by"], "rule");
    assert_eq!(allowed["rule_ids"], json!([rule_id]));
    // Removed rules stop applying.
    let removed = rpc
        .ok(json!({"type": "remove_approval_rule", "ruleId": rule_id}))
        .await;
    assert_eq!(removed["ruleId"], rule_id.as_str());
    let rules = rpc.ok(json!({"type": "list_approval_rules"})).await;
    assert_eq!(rules["rules"], json!([]));
    // Money cannot get a rule.
    let r = rpc
        .call(json!({"type": "add_approval_rule", "tool": "bash",
            "scope": {"kind": "command", "prefix": ["rm", "-rf"]}}))
        .await;
    assert_eq!(r["success"], false, "{r}");
}

#[tokio::test]
async fn modes_decide_which_classes_ask_and_reads_never_ask() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("notes.txt"), "hello\n").unwrap();
    env.mock.push_all([
        MockResponse::tool_calls(vec![
            tool_call("c1", "read", json!({"path": "notes.txt"})),
            tool_call("c2", "bash", json!({"command": "ls"})),
            tool_call("c3", "write", json!({"path": "out.txt", "content": "x"})),
        ]),
        MockResponse::text("first done"),
        bash("c4", "keel-test-unknown-program"),
        MockResponse::text("second done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    let m = rpc.ok(json!({"type": "get_approval_mode"})).await;
    assert_eq!(
        (m["mode"].as_str(), m["source"].as_str()),
        (Some("outside"), Some("default"))
    );
    let m = rpc
        .ok(json!({"type": "set_approval_mode", "mode": "everything"}))
        .await;
    assert_eq!(m["mode"], "everything");
    rpc.send(json!({"type": "prompt", "message": "work"})).await;
    // Reads run; the write asks under "everything".
    let req = rpc.approval_request().await;
    assert_eq!(req["toolCallId"], "c3");
    assert_eq!(req["class"], "write");
    assert!(rpc.started("c1") && rpc.started("c2"));
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "approve", json!({})).await;
    rpc.event("agent_end").await;
    assert_eq!(
        std::fs::read_to_string(env.ws().join("out.txt")).unwrap(),
        "x"
    );

    // Stored per workspace: the CLI sees it, and sets money_only.
    let m = env.approvals_json(&["mode"]).await;
    assert_eq!(m["mode"], "everything");
    env.approvals_json(&["mode", "money_only"]).await;
    let m = rpc.ok(json!({"type": "get_approval_mode"})).await;
    assert_eq!(
        (m["mode"].as_str(), m["source"].as_str()),
        (Some("money_only"), Some("stored"))
    );
    // Under money_only a send runs unasked.
    rpc.prompt_and_wait("more").await;
    assert!(rpc.started("c4"));
    assert_eq!(
        rpc.frames
            .iter()
            .filter(|f| f["type"] == "approval_request")
            .count(),
        1
    );
    let r = rpc
        .call(json!({"type": "set_approval_mode", "mode": "never"}))
        .await;
    assert_eq!(r["success"], false);
}

#[tokio::test]
async fn the_approval_mode_flag_applies_to_the_process_only() {
    let env = Env::new().await;
    env.mock.push_all([
        bash("c1", "keel-test-unknown-program"),
        MockResponse::text("ran"),
    ]);
    let mut rpc = env.rpc(&["--approval-mode", "money_only"]).await;
    let m = rpc.ok(json!({"type": "get_approval_mode"})).await;
    assert_eq!(
        (m["mode"].as_str(), m["source"].as_str()),
        (Some("money_only"), Some("flag"))
    );
    rpc.prompt_and_wait("go").await;
    assert!(rpc.started("c1"));
    assert!(!rpc.frames.iter().any(|f| f["type"] == "approval_request"));
    // Nothing was stored.
    assert_eq!(env.approvals_json(&["mode"]).await["mode"], "outside");
}

#[tokio::test]
async fn host_tools_are_classed_by_their_declaration() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![
            tool_call("c1", "lookup_order", json!({"order": "42"})),
            tool_call(
                "c2",
                "refund_order",
                json!({"order": "42", "api_key": "sk-secret"}),
            ),
        ]),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "set_host_tools", "tools": [
        {"name": "lookup_order", "approvalClass": "read"},
        {"name": "refund_order", "approvalClass": "money"}]}))
        .await;
    let r = rpc
        .call(json!({"type": "set_host_tools", "tools": [{"name": "t", "approvalClass": "cheap"}]}))
        .await;
    assert_eq!(r["success"], false);
    rpc.send(json!({"type": "prompt", "message": "refund"}))
        .await;
    // The read runs through the host at once.
    let call = rpc
        .wait_for("host_tool_call", |f| f["type"] == "host_tool_call")
        .await;
    assert_eq!(call["toolName"], "lookup_order");
    rpc.send(json!({"type": "host_tool_result", "id": call["id"],
        "result": {"content": [{"type": "text", "text": "order 42: paid"}]}}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["toolName"], "refund_order");
    assert_eq!(req["class"], "money");
    assert!(!req["argLines"].to_string().contains("sk-secret"), "{req}");
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "decline", json!({"note": "no refunds today"}))
        .await;
    let end = rpc.tool_end("c2").await;
    assert!(result_text(&end).contains("no refunds today"));
    rpc.event("agent_end").await;
    assert_eq!(
        rpc.frames
            .iter()
            .filter(|f| f["type"] == "host_tool_call")
            .count(),
        1
    );
}

#[tokio::test]
async fn a_steering_message_declines_the_waiting_call_and_abort_cancels_one() {
    let env = Env::new().await;
    env.mock.push_all([
        bash("c1", "keel-test-unknown-program --publish"),
        MockResponse::text("ok, I will bump the version first"),
        bash("c2", "keel-test-unknown-program --publish"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "publish"}))
        .await;
    rpc.approval_request().await;
    rpc.ok(json!({"type": "steer", "message": "bump the version first"}))
        .await;
    let resolved = rpc
        .wait_for("approval_resolved", |f| f["type"] == "approval_resolved")
        .await;
    assert_eq!(
        (resolved["status"].as_str(), resolved["byMessage"].as_bool()),
        (Some("declined"), Some(true))
    );
    rpc.event("agent_end").await;
    let input = last_model_input(&env);
    assert!(input.contains("instead of answering"), "{input}");
    assert!(input.contains("bump the version first"));
    assert!(!rpc.frames.iter().any(|f| {
        super::event(f).is_some_and(|e| e["type"] == "queue_update" && e["steering"] != json!([]))
    }));

    // Abort while a call waits: the request is cancelled.
    rpc.send(json!({"type": "prompt", "message": "publish again"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["toolCallId"], "c2");
    rpc.ok(json!({"type": "abort"})).await;
    let resolved = rpc
        .seen_or_wait("approval_resolved", |f| {
            f["type"] == "approval_resolved" && f["toolCallId"] == "c2"
        })
        .await;
    assert_eq!(resolved["status"], "cancelled");
    let pending = rpc.ok(json!({"type": "get_pending_approvals"})).await;
    assert_eq!(pending["approvals"], json!([]));
}

#[tokio::test]
async fn unattended_runs_park_drafts_that_a_person_sends_later() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("victim"), "x").unwrap();
    env.mock.push_all([
        bash("c1", "rm -rf victim"),
        MockResponse::text("parked it"),
        MockResponse::text("noted"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "negotiate_unattended", "declaration": {
        "actor": "ci/nightly",
        "budget": {"max_tokens": 1_000_000, "max_tool_calls": 10,
            "max_wall_time_ms": 600_000, "max_cost_usd": 5},
        "scopes": ["prompt", "control"],
        "action_allowlist": ["bash"]}}))
        .await;
    rpc.send(json!({"type": "prompt", "message": "clean up"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["delivery"], "draft");
    let end = rpc.tool_end("c1").await;
    assert!(
        result_text(&end).starts_with("Held for approval as draft"),
        "{end}"
    );
    rpc.event("agent_end").await;
    assert!(env.ws().join("victim").exists());

    // A person sends it: it runs now, and the agent hears it next turn.
    let id = req["id"].as_str().unwrap().to_owned();
    let d = rpc.decide(&id, "approve", json!({})).await;
    assert_eq!(d["sending"], true);
    let victim = env.ws().join("victim");
    wait_until(WAIT, || !victim.exists()).await.unwrap();
    let list = env.approvals_json(&["list", "--all"]).await;
    let row = list
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap()
        .clone();
    assert_eq!(row["status"], "approved");
    // Once its outcome is recorded, the next run is told about it.
    env.wait_for_audit("c1", "finished").await;
    rpc.prompt_and_wait("anything new?").await;
    let input = last_model_input(&env);
    assert!(input.contains("[approvals update]"), "{input}");
    assert!(input.contains("was sent by the user and ran"), "{input}");
}
