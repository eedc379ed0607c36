//! Host tools and host URIs.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::{Rpc, event};
use crate::suite::Env;

pub(crate) fn echo_tool() -> Value {
    // Declared read, so its calls run without asking (an undeclared host
    // tool is `send` and waits for approval; see tests/suite/approvals).
    json!({"type": "set_host_tools", "tools": [{
        "name": "echo_host", "label": "Echo Host", "approvalClass": "read",
        "description": "Echo a value from the embedding host",
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}},
            "required": ["message"], "additionalProperties": false}}]})
}

async fn host_call(rpc: &mut Rpc) -> Value {
    rpc.wait_for("host_tool_call", |f| f["type"] == "host_tool_call")
        .await
}

/// The host's side of an `echo_host` call `call_id` (`{"message":
/// "hello"}`): a progress update, then the result; the host sees both.
/// Returns the call's id.
pub(crate) async fn answer_echo(rpc: &mut Rpc, call_id: &str) -> String {
    let call = host_call(rpc).await;
    assert_eq!(call["toolCallId"], call_id);
    assert_eq!(call["toolName"], "echo_host");
    assert_eq!(call["arguments"], json!({"message": "hello"}));
    let id = call["id"].as_str().unwrap().to_owned();
    rpc.send(json!({"type": "host_tool_update", "id": id,
        "partialResult": {"content": [{"type": "text", "text": "working"}]}}))
        .await;
    let upd = rpc.event("tool_execution_update").await;
    assert_eq!(upd["partialResult"]["content"][0]["text"], "working");
    rpc.send(json!({"type": "host_tool_result", "id": id,
        "result": {"content": [{"type": "text", "text": "host says: hello"}]}}))
        .await;
    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(end["result"]["content"][0]["text"], "host says: hello");
    id
}

#[tokio::test]
async fn host_tool_round_trip_with_progress() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "call_1",
            "echo_host",
            json!({"message": "hello"}),
        )]),
        MockResponse::text("The host said hello."),
    ]);
    let mut rpc = env.rpc(&[]).await;
    let d = rpc.ok(echo_tool()).await;
    assert_eq!(d, json!({"toolNames": ["echo_host"]}));
    let s = rpc
        .ok(json!({"type": "get_state", "include": ["tools"]}))
        .await;
    assert!(s["dumpTools"].to_string().contains("echo_host"));

    rpc.send(json!({"type": "prompt", "message": "echo hello"}))
        .await;
    let id = answer_echo(&mut rpc, "call_1").await;
    rpc.event("agent_end").await;
    // The tool's spec reached the model; its result did too.
    let reqs = env.mock.requests();
    assert!(reqs[0].body["tools"].to_string().contains("echo_host"));
    assert!(
        reqs[1].body["messages"]
            .to_string()
            .contains("host says: hello")
    );
    // A late reply for a finished call is ignored.
    rpc.send(json!({"type": "host_tool_result", "id": id, "result": {"content": []}}))
        .await;
    rpc.ok(json!({"type": "get_state"})).await;
}

#[tokio::test]
async fn host_tool_errors_timeouts_and_validation() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call("c1", "echo_host", json!({"message": "x"}))]),
        MockResponse::tool_calls(vec![tool_call("c2", "echo_host", json!({"message": "y"}))]),
        MockResponse::text("done"),
    ]);
    let mut rpc = Rpc::start(env.rpc_cmd().env("KEEL_RPC_HOST_TOOL_TIMEOUT_MS", "300")).await;
    for bad in [
        json!({"type": "set_host_tools", "tools": [{"name": "bash"}]}),
        json!({"type": "set_host_tools", "tools": [{"name": "has space"}]}),
        json!({"type": "set_host_tools", "tools": [{"name": "a"}, {"name": "a"}]}),
        json!({"type": "set_host_tools", "tools": "nope"}),
    ] {
        let r = rpc.call(bad.clone()).await;
        assert_eq!(r["success"], false, "{bad}");
    }
    rpc.ok(echo_tool()).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    // First call: the host rejects it.
    let call = host_call(&mut rpc).await;
    rpc.send(
        json!({"type": "host_tool_result", "id": call["id"], "isError": true,
        "result": {"content": [{"type": "text", "text": "no such row"}]}}),
    )
    .await;
    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["isError"], true);
    assert_eq!(end["result"]["content"][0]["text"], "no such row");
    // Second call: the host never answers.
    let call = host_call(&mut rpc).await;
    let cancel = rpc
        .wait_for("host_tool_cancel", |f| f["type"] == "host_tool_cancel")
        .await;
    assert_eq!(cancel["targetId"], call["id"]);
    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["isError"], true);
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("did not answer"),
        "{end}"
    );
    rpc.event("agent_end").await;
}

#[tokio::test]
async fn abort_cancels_a_pending_host_tool_and_stdin_close_rejects() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call("c1", "echo_host", json!({"message": "x"}))]),
        MockResponse::tool_calls(vec![tool_call("c2", "echo_host", json!({"message": "y"}))]),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(echo_tool()).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    let call = host_call(&mut rpc).await;
    let id = rpc.id();
    rpc.send(json!({"id": id, "type": "abort"})).await;
    let cancel = rpc
        .wait_for("host_tool_cancel", |f| f["type"] == "host_tool_cancel")
        .await;
    assert_eq!(cancel["targetId"], call["id"]);
    let end = rpc.event("agent_end").await;
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "toolResult");
    assert_eq!(last["isError"], true);
    rpc.response(&id).await;

    // A call pending when stdin closes is rejected; the process exits 0.
    rpc.send(json!({"type": "prompt", "message": "again"}))
        .await;
    host_call(&mut rpc).await;
    let (out, frames) = rpc.finish().await;
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    assert!(
        frames
            .iter()
            .filter_map(event)
            .any(|e| e["type"] == "agent_end")
    );
}

/// The model reads `db://users/42`, then writes `DB://users/43`.
pub(crate) fn db_read_then_write() -> [MockResponse; 2] {
    [
        MockResponse::tool_calls(vec![tool_call(
            "r1",
            "read",
            json!({"path": "db://users/42"}),
        )]),
        MockResponse::tool_calls(vec![tool_call(
            "w1",
            "write",
            json!({"path": "DB://users/43", "content": "id=43\n"}),
        )]),
    ]
}

/// The host's side of [`db_read_then_write`]: it serves the row (with a
/// note), then takes the write; the host sees both calls end well.
pub(crate) async fn serve_db_read_then_write(rpc: &mut Rpc) {
    let req = rpc
        .wait_for("host_uri_request", |f| f["type"] == "host_uri_request")
        .await;
    assert_eq!(req["operation"], "read");
    assert_eq!(req["url"], "db://users/42");
    rpc.send(json!({"type": "host_uri_result", "id": req["id"],
        "content": "id=42\nname=Alice\n", "contentType": "text/plain",
        "notes": ["fresh from cache"], "immutable": false}))
        .await;
    let end = rpc.event("tool_execution_end").await;
    let text = end["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("name=Alice") && text.contains("fresh from cache"),
        "{text}"
    );

    let req = rpc
        .wait_for("host_uri_request", |f| f["type"] == "host_uri_request")
        .await;
    assert_eq!(req["operation"], "write");
    assert_eq!(req["content"], "id=43\n");
    rpc.send(json!({"type": "host_uri_result", "id": req["id"]}))
        .await;
    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["isError"], false);
}

#[tokio::test]
async fn host_uris_read_write_errors_and_edit_refusal() {
    let env = Env::new().await;
    let [read, write] = db_read_then_write();
    env.mock.push_all([
        read,
        write,
        MockResponse::tool_calls(vec![tool_call(
            "r2",
            "read",
            json!({"path": "db://users/0"}),
        )]),
        MockResponse::tool_calls(vec![tool_call(
            "e1",
            "edit",
            json!({"path": "db://users/42", "edits": [{"oldText": "a", "newText": "b"}]}),
        )]),
        MockResponse::tool_calls(vec![tool_call(
            "w2",
            "write",
            json!({"path": "ro://x", "content": "nope"}),
        )]),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    let d = rpc
        .ok(json!({"type": "set_host_uri_schemes", "schemes": [
            {"scheme": "DB", "description": "Virtual db rows", "writable": true},
            {"scheme": "ro", "immutable": true}]}))
        .await;
    assert_eq!(d, json!({"schemes": ["db", "ro"]}));
    let r = rpc
        .call(json!({"type": "set_host_uri_schemes", "schemes": [{"scheme": "not a scheme"}]}))
        .await;
    assert_eq!(r["success"], false);

    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    serve_db_read_then_write(&mut rpc).await;

    let req = rpc
        .wait_for("host_uri_request", |f| f["type"] == "host_uri_request")
        .await;
    rpc.send(
        json!({"type": "host_uri_result", "id": req["id"], "isError": true,
        "error": "row 0 not found"}),
    )
    .await;
    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["isError"], true);
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("row 0 not found")
    );

    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["toolName"], "edit");
    assert_eq!(end["isError"], true);
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("use write")
    );

    let end = rpc.event("tool_execution_end").await;
    assert_eq!(end["toolName"], "write");
    assert_eq!(end["isError"], true);
    assert!(
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("read-only")
    );
    rpc.event("agent_end").await;
    // No file named like the URL was created.
    assert!(!env.ws().join("DB:").exists() && !env.ws().join("db:").exists());
}

#[tokio::test]
async fn stdin_close_rejects_a_pending_host_uri_request_and_exits_zero() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "r1",
            "read",
            json!({"path": "db://users/42"}),
        )]),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "set_host_uri_schemes", "schemes": [{"scheme": "db"}]}))
        .await;
    rpc.send(json!({"type": "prompt", "message": "read it"}))
        .await;
    let req = rpc
        .wait_for("host_uri_request", |f| f["type"] == "host_uri_request")
        .await;
    assert_eq!(req["url"], "db://users/42");
    // The host goes away without answering.
    let (out, frames) = rpc.finish().await;
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    let end = frames
        .iter()
        .filter_map(event)
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == "r1")
        .cloned()
        .expect("the pending read ends");
    assert_eq!(end["isError"], true, "{end}");
    // The session was flushed with the refused call answered.
    let session = env.only_session().await;
    let answered = serde_json::to_value(session.messages()).unwrap();
    assert!(
        answered
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["role"] == "toolResult" && m["toolCallId"] == "r1" && m["isError"] == true),
        "{answered}"
    );
}
