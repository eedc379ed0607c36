//! Workflow gates opened by `ask_host`, answered over
//! `workflow_gate_response` or the legacy extension UI, durable across a
//! restart; and the fire-and-forget extension UI requests.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::{Rpc, event};
use crate::suite::Env;

fn ask(options: bool) -> MockResponse {
    let mut args = json!({"question": "Approve plan?", "details": "Three steps."});
    if options {
        args["options"] = json!([
            {"value": "approve", "label": "Approve execution"},
            {"value": "reject", "label": "Reject"}
        ]);
    }
    MockResponse::tool_calls(vec![tool_call("g1", "ask_host", args)])
}

async fn gate_frame(rpc: &mut Rpc) -> Value {
    rpc.wait_for("workflow_gate", |f| f["type"] == "workflow_gate")
        .await
}

fn code(r: &Value) -> &str {
    r["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn gate_round_trip_validation_idempotency_and_restart() {
    let env = Env::new().await;
    env.mock
        .push_all([ask(true), MockResponse::text("Proceeding.")]);
    let mut rpc = env.rpc(&["--rpc-gate-tool"]).await;
    let s = rpc
        .ok(json!({"type": "get_state", "include": ["tools"]}))
        .await;
    assert!(s["dumpTools"].to_string().contains("ask_host"));
    rpc.send(json!({"type": "prompt", "message": "plan it"}))
        .await;
    let gate = gate_frame(&mut rpc).await;
    let id = gate["gate_id"].as_str().unwrap().to_owned();
    let parts: Vec<&str> = id.splitn(3, '_').collect();
    assert_eq!(parts[0], "wg");
    assert!(parts[1].parse::<u64>().is_ok(), "{id}");
    assert!(id.ends_with("_deep-interview_000001"), "{id}");
    assert_eq!(gate["stage"], "deep-interview");
    assert_eq!(gate["kind"], "question");
    assert_eq!(gate["required"], true);
    assert_eq!(
        gate["schema"],
        json!({"type": "string", "enum": ["approve", "reject"]})
    );
    assert_eq!(gate["schema_hash"].as_str().unwrap().len(), 64);
    assert_eq!(gate["options"][0]["label"], "Approve execution");
    assert_eq!(gate["context"]["title"], "Approve plan?");
    assert!(gate["created_at"].as_str().unwrap().ends_with('Z'));
    // The legacy UI request follows the gate.
    let ui = rpc
        .wait_for("select", |f| {
            f["type"] == "extension_ui_request" && f["method"] == "select"
        })
        .await;
    assert_eq!(ui["options"], json!(["Approve execution", "Reject"]));

    // A schema mismatch is a success with status rejected; the gate stays open.
    let r = rpc
        .call(json!({"type": "workflow_gate_response", "gate_id": id, "answer": true}))
        .await;
    assert_eq!(r["success"], true);
    let d = &r["data"];
    assert_eq!(d["status"], "rejected");
    assert_eq!(d["error"]["code"], "invalid_workflow_gate_answer");
    assert_eq!(d["error"]["schema_hash"], gate["schema_hash"]);
    assert_eq!(
        d["error"]["errors"][0],
        json!({"path": "/answer", "keyword": "type", "message": "must be string", "expected": "string"})
    );
    let accept = json!({"type": "workflow_gate_response", "gate_id": id, "answer": "approve",
        "idempotency_key": "k1"});
    let r = rpc.call(accept.clone()).await;
    assert_eq!(r["data"]["status"], "accepted", "{r}");
    assert_eq!(r["data"]["answer_hash"].as_str().unwrap().len(), 64);
    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["isError"], false);
    assert_eq!(
        end["result"]["content"][0]["text"],
        "The host answered: \"approve\""
    );
    rpc.event("agent_end").await;
    // The withdrawn dialog was cancelled.
    assert!(
        rpc.frames
            .iter()
            .any(|f| f["method"] == "cancel" && f["targetId"] == ui["id"])
    );

    let replay = rpc.call(accept).await;
    assert_eq!(replay["data"], r["data"]);
    let r2 = rpc
        .call(
            json!({"type": "workflow_gate_response", "gate_id": id, "answer": "reject",
            "idempotency_key": "k1"}),
        )
        .await;
    assert_eq!(
        (r2["success"].as_bool(), code(&r2)),
        (Some(false), "idempotency_conflict")
    );
    let r3 = rpc
        .call(json!({"type": "workflow_gate_response", "gate_id": id, "answer": "reject"}))
        .await;
    assert_eq!(code(&r3), "already_resolved");
    let r4 = rpc
        .call(json!({"type": "workflow_gate_response", "gate_id": "wg_1_ralplan_999999", "answer": 1}))
        .await;
    assert_eq!(code(&r4), "unknown_gate");
    let r5 = rpc
        .call(json!({"type": "workflow_gate_response", "gate_id": "wg_1_team_000001", "answer": 1}))
        .await;
    assert_eq!(code(&r5), "invalid_workflow_stage");
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));

    // After a restart the resolution is still there.
    let mut rpc = env.rpc(&[]).await;
    let r = rpc
        .call(json!({"type": "workflow_gate_response", "gate_id": id, "answer": "approve"}))
        .await;
    assert_eq!(code(&r), "already_resolved");
}

#[tokio::test]
async fn a_gate_left_open_survives_a_restart() {
    let env = Env::new().await;
    env.mock.push(ask(false));
    let mut rpc = env.rpc(&["--rpc-gate-tool"]).await;
    rpc.send(json!({"type": "prompt", "message": "ask me"}))
        .await;
    let gate = gate_frame(&mut rpc).await;
    assert_eq!(gate["schema"], json!({"type": "string", "minLength": 1}));
    let input = rpc
        .wait_for("input", |f| {
            f["type"] == "extension_ui_request" && f["method"] == "input"
        })
        .await;
    assert_eq!(input["title"], "Approve plan?");
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));

    let mut rpc = env.rpc(&[]).await;
    let r = rpc
        .call(json!({"type": "workflow_gate_response", "gate_id": gate["gate_id"], "answer": ""}))
        .await;
    assert_eq!(r["data"]["error"]["errors"][0]["keyword"], "minLength");
    let r = rpc
        .call(
            json!({"type": "workflow_gate_response", "gate_id": gate["gate_id"], "answer": "yes"}),
        )
        .await;
    assert_eq!(r["data"]["status"], "accepted");
}

#[tokio::test]
async fn the_legacy_dialog_answers_the_gate_and_unknown_ids_are_ignored() {
    let env = Env::new().await;
    env.mock
        .push_all([ask(true), MockResponse::text("Stopping.")]);
    let mut rpc = env.rpc(&["--rpc-gate-tool"]).await;
    rpc.send(json!({"type": "prompt", "message": "plan it"}))
        .await;
    let ui = rpc
        .wait_for("select", |f| {
            f["type"] == "extension_ui_request" && f["method"] == "select"
        })
        .await;
    rpc.send(json!({"type": "extension_ui_response", "id": "nobody", "value": "Reject"}))
        .await;
    rpc.send(json!({"type": "extension_ui_response", "id": ui["id"], "value": "Reject"}))
        .await;
    let end = rpc.event("tool_execution_end").await;
    assert_eq!(
        end["result"]["content"][0]["text"],
        "The host answered: \"reject\""
    );
    rpc.event("agent_end").await;
    let statuses: Vec<&Value> = rpc
        .frames
        .iter()
        .filter(|f| f["method"] == "setStatus")
        .collect();
    assert_eq!(statuses.len(), 2);
    assert_eq!(statuses[1]["statusText"], Value::Null);
}

#[tokio::test]
async fn an_unanswered_gate_times_out_and_the_dialog_is_cancelled() {
    let env = Env::new().await;
    env.mock
        .push_all([ask(false), MockResponse::text("No answer, moving on.")]);
    let mut rpc = Rpc::start(
        env.rpc_cmd()
            .arg("--rpc-gate-tool")
            .env("KEEL_RPC_GATE_TIMEOUT_MS", "300"),
    )
    .await;
    rpc.send(json!({"type": "prompt", "message": "ask"})).await;
    let input = rpc.wait_for("input", |f| f["method"] == "input").await;
    assert_eq!(input["timeout"], 300);
    let cancel = rpc.wait_for("cancel", |f| f["method"] == "cancel").await;
    assert_eq!(cancel["targetId"], input["id"]);
    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["isError"], true);
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("did not answer")
    );
    rpc.event("agent_end").await;
}

#[tokio::test]
async fn title_is_suppressed_unless_enabled_and_todos_show_as_a_widget() {
    let env = Env::new().await;
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "set_session_name", "name": "one"}))
        .await;
    rpc.ok(
        json!({"type": "set_todos", "phases": [{"name": "P", "tasks": [
        {"content": "a", "status": "completed"}, {"content": "b", "status": "in_progress"}]}]}),
    )
    .await;
    assert!(!rpc.frames.iter().any(|f| f["method"] == "setTitle"));
    let widget = rpc
        .frames
        .iter()
        .find(|f| f["method"] == "setWidget")
        .unwrap();
    assert_eq!(widget["widgetKey"], "todos");
    assert_eq!(widget["widgetLines"], json!(["P", "[x] a", "[~] b"]));
    let (_, _) = rpc.finish().await;

    let mut rpc = Rpc::start(env.rpc_cmd().env("KEEL_RPC_EMIT_TITLE", "1")).await;
    rpc.ok(json!({"type": "set_session_name", "name": "two"}))
        .await;
    let t = rpc
        .frames
        .iter()
        .find(|f| f["method"] == "setTitle")
        .unwrap();
    assert_eq!(t["title"], "two");
    assert!(event(t).is_none());
}
