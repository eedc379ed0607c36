//! Waits that survive a crash: `kill -9` keel while a call waits (or
//! runs), decide from the CLI while it is down, start it again on that
//! session, and the cut-off turn goes on — the call runs at most once, the
//! model hears the outcome and answers, and the session file holds every
//! entry exactly once.

use keel_protocol::Message;
use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::result_text;
use crate::suite::Env;
use crate::suite::rpc::{Rpc, event};

/// Starts RPC mode in mode `everything` (writes are held) and returns the
/// session id.
async fn start(env: &Env, extra: &[&str]) -> (Rpc, String) {
    let mut args = vec!["--approval-mode", "everything"];
    args.extend_from_slice(extra);
    let mut rpc = env.rpc(&args).await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    let session_id = state["sessionId"].as_str().unwrap().to_owned();
    (rpc, session_id)
}

/// Kills keel with SIGKILL and waits until it is gone.
async fn kill_9(rpc: Rpc) {
    rpc.child.signal("KILL").await.unwrap();
    let out = rpc.child.wait().await.unwrap();
    assert_eq!(out.code(), None, "killed by a signal");
}

/// Lines of the `marker` file (each run of the tool appends one).
fn marker_lines(env: &Env) -> usize {
    std::fs::read_to_string(env.ws().join("marker"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// How many assistant messages carry the call `call_id`, and how many
/// results answer it, in the saved session.
async fn call_entries(env: &Env, call_id: &str) -> (usize, usize) {
    let session = env.only_session().await;
    let messages = session.all_messages();
    let calls = messages
        .iter()
        .filter(|m| match m {
            Message::Assistant(a) => a.tool_calls().iter().any(|(id, _, _)| *id == call_id),
            _ => false,
        })
        .count();
    let results = messages
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(r) if r.tool_call_id == call_id))
        .count();
    (calls, results)
}

/// The user messages of the saved session.
async fn user_messages(env: &Env) -> usize {
    let session = env.only_session().await;
    session
        .all_messages()
        .iter()
        .filter(|m| matches!(m, Message::User(_)))
        .count()
}

/// The end of the call `call_id`, seen already or still to come (a resumed
/// turn starts right after `ready`, so its frames may come before the
/// response to the first command).
async fn seen_tool_end(rpc: &mut Rpc, call_id: &str) -> Value {
    let f = rpc
        .seen_or_wait(&format!("tool_execution_end {call_id}"), |f| {
            event(f)
                .is_some_and(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == call_id)
        })
        .await;
    event(&f).cloned().unwrap_or(Value::Null)
}

/// The first event of type `ty`, seen already or still to come.
async fn seen_event(rpc: &mut Rpc, ty: &str) -> Value {
    let f = rpc
        .seen_or_wait(ty, |f| event(f).is_some_and(|e| e["type"] == ty))
        .await;
    event(&f).cloned().unwrap_or(Value::Null)
}

/// What the model was sent last.
fn last_input(env: &Env) -> String {
    env.mock.last_request().unwrap().body["messages"].to_string()
}

/// The model asks to append to `marker`; keel holds it and announces it.
async fn held_call(env: &Env, command: &str) -> (Rpc, String, String) {
    env.mock.push(MockResponse::tool_calls(vec![tool_call(
        "c1",
        "bash",
        json!({ "command": command }),
    )]));
    let (mut rpc, session_id) = start(env, &[]).await;
    rpc.send(json!({"type": "prompt", "message": "mark it"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["toolCallId"], "c1", "{req}");
    let id = req["id"].as_str().unwrap().to_owned();
    (rpc, session_id, id)
}

#[tokio::test]
async fn kill_9_while_a_call_waits_then_restart_announces_it_again() {
    let env = Env::new().await;
    let (rpc, session_id, id) = held_call(&env, "echo ran >> marker").await;
    kill_9(rpc).await;

    // While keel is down the request is on disk, pending.
    let listed = env.approvals_json(&["list"]).await;
    assert_eq!(listed[0]["id"], id.as_str());
    assert_eq!(listed[0]["status"], "pending");

    env.mock.push(MockResponse::text("Left it alone."));
    let (mut rpc, _) = start(&env, &["--session", &session_id]).await;
    // The cut-off turn resumes: the same request is announced again.
    let again = rpc
        .seen_or_wait("approval_request", |f| f["type"] == "approval_request")
        .await;
    assert_eq!(again["id"], id.as_str(), "{again}");
    assert_eq!(again["toolCallId"], "c1");
    let pending = rpc.ok(json!({"type": "get_pending_approvals"})).await;
    let list = pending["approvals"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{pending}");
    assert_eq!(list[0]["requestId"], id.as_str());
    assert_eq!(list[0]["sessionId"], session_id.as_str());

    let d = rpc
        .decide(&id, "decline", json!({"note": "not today"}))
        .await;
    assert_eq!(d["status"], "declined");
    let end = seen_tool_end(&mut rpc, "c1").await;
    assert!(result_text(&end).contains("not today"), "{end}");
    let agent_end = seen_event(&mut rpc, "agent_end").await;
    assert!(
        agent_end.to_string().contains("Left it alone."),
        "{agent_end}"
    );
    assert!(last_input(&env).contains("not today"));
    rpc.finish().await;
    assert_eq!(marker_lines(&env), 0, "a declined call never runs");
    assert_eq!(call_entries(&env, "c1").await, (1, 1));
    assert_eq!(user_messages(&env).await, 1, "no new user message");
}

#[tokio::test]
async fn an_approval_from_the_cli_while_keel_is_down_runs_the_call_once_after_restart() {
    let env = Env::new().await;
    let (rpc, session_id, id) = held_call(&env, "echo ran >> marker").await;
    kill_9(rpc).await;

    let out = env.approvals_cmd(&["approve", &id], false).await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(marker_lines(&env), 0, "nothing runs while keel is down");

    env.mock.push(MockResponse::text("Marked."));
    let (mut rpc, _) = start(&env, &["--session", &session_id]).await;
    let end = seen_tool_end(&mut rpc, "c1").await;
    assert_eq!(end["isError"], false, "{end}");
    let agent_end = seen_event(&mut rpc, "agent_end").await;
    assert!(agent_end.to_string().contains("Marked."), "{agent_end}");
    assert!(
        !rpc.frames.iter().any(|f| f["type"] == "approval_request"),
        "a decided request is not announced again"
    );
    // The model heard the call's result, without a new user message.
    let input = last_input(&env);
    assert!(
        input.contains("c1") && input.contains("(no output)"),
        "{input}"
    );
    assert_eq!(env.mock.request_count(), 2);
    rpc.finish().await;

    assert_eq!(marker_lines(&env), 1, "the approved call ran exactly once");
    assert_eq!(call_entries(&env, "c1").await, (1, 1));
    assert_eq!(user_messages(&env).await, 1);
    let all = env.approvals_json(&["list", "--all"]).await;
    assert_eq!(all[0]["status"], "approved");
    env.wait_for_audit("c1", "finished").await;

    // Opening the finished session again resumes nothing.
    let (mut rpc, _) = start(&env, &["--session", &session_id]).await;
    let _ = rpc.ok(json!({"type": "get_state"})).await;
    let (_, frames) = rpc.finish().await;
    assert!(
        !frames
            .iter()
            .any(|f| crate::suite::rpc::event_type(f) == Some("agent_start")),
        "{frames:#?}"
    );
    assert_eq!(marker_lines(&env), 1);
    assert_eq!(call_entries(&env, "c1").await, (1, 1));
}

#[tokio::test]
async fn a_decline_from_the_cli_while_keel_is_down_reaches_the_model_after_switch_session() {
    let env = Env::new().await;
    let (rpc, session_id, id) = held_call(&env, "echo ran >> marker").await;
    kill_9(rpc).await;
    let out = env
        .approvals_cmd(&["decline", &id, "--note", "use the other file"], false)
        .await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);

    // A new process on a new session, then `switch_session` to the cut-off one.
    env.mock.push(MockResponse::text("Understood."));
    let (mut rpc, other) = start(&env, &[]).await;
    assert_ne!(other, session_id);
    let r = rpc
        .call(json!({"type": "switch_session", "sessionPath": session_id}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let end = seen_tool_end(&mut rpc, "c1").await;
    assert_eq!(end["isError"], true);
    assert!(result_text(&end).contains("use the other file"), "{end}");
    let agent_end = seen_event(&mut rpc, "agent_end").await;
    assert!(agent_end.to_string().contains("Understood."), "{agent_end}");
    // The response came before the resumed run's first event.
    let response_at = rpc
        .frames
        .iter()
        .position(|f| f["type"] == "response" && f["command"] == "switch_session")
        .unwrap();
    let start_at = rpc
        .frames
        .iter()
        .position(|f| crate::suite::rpc::event_type(f) == Some("agent_start"))
        .unwrap();
    assert!(response_at < start_at);
    assert!(last_input(&env).contains("use the other file"));
    rpc.finish().await;
    assert_eq!(marker_lines(&env), 0);
    let file = env
        .session_files()
        .await
        .into_iter()
        .find(|f| f.to_string_lossy().contains(&session_id))
        .unwrap();
    let session = env.load_session(&file).await;
    let messages = session.all_messages();
    let results = messages
        .iter()
        .filter(|m| matches!(m, Message::ToolResult(r) if r.tool_call_id == "c1"))
        .count();
    assert_eq!(results, 1, "{messages:#?}");
}

#[tokio::test]
async fn an_approved_call_cut_off_while_it_ran_is_not_run_again() {
    let env = Env::new().await;
    let (mut rpc, session_id, id) = held_call(
        &env,
        "echo ran >> marker && sleep 30 && echo late >> marker",
    )
    .await;
    rpc.decide(&id, "approve", Value::Null).await;
    // It runs: the first line is there, the second is 30 s away.
    let started = rpc
        .seen_or_wait("tool_execution_start c1", |f| {
            crate::suite::rpc::event(f)
                .is_some_and(|e| e["type"] == "tool_execution_start" && e["toolCallId"] == "c1")
        })
        .await;
    assert!(started.to_string().contains("marker"));
    let deadline = tokio::time::Instant::now() + crate::suite::rpc::WAIT;
    while marker_lines(&env) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "the call never ran");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    kill_9(rpc).await;

    env.mock
        .push(MockResponse::text("I will check the marker first."));
    let (mut rpc, _) = start(&env, &["--session", &session_id]).await;
    let end = seen_tool_end(&mut rpc, "c1").await;
    assert_eq!(end["isError"], true);
    assert!(
        result_text(&end).contains("may or may not have happened"),
        "{end}"
    );
    let agent_end = seen_event(&mut rpc, "agent_end").await;
    assert!(agent_end.to_string().contains("check the marker"));
    assert!(last_input(&env).contains("may or may not have happened"));
    rpc.finish().await;
    let marker = std::fs::read_to_string(env.ws().join("marker")).unwrap();
    assert_eq!(marker.matches("ran").count(), 1, "started once: {marker}");
    assert_eq!(call_entries(&env, "c1").await, (1, 1));
    env.wait_for_audit("c1", "maybe_ran").await;
}

/// `set_host_tools` with one host tool, `echo_host`, whose calls are held.
fn echo_host_tools() -> Value {
    json!({"type": "set_host_tools", "tools": [{
        "name": "echo_host", "approvalClass": "write",
        "description": "Echo a value from the embedding host",
        "parameters": {"type": "object", "properties": {"message": {"type": "string"}}}}]})
}

/// The model calls the host's `echo_host`; keel holds the call, then dies
/// (`kill -9`). Returns the session id and the request's id.
async fn host_call_cut_off(env: &Env) -> (String, String) {
    env.mock.push(MockResponse::tool_calls(vec![tool_call(
        "c1",
        "echo_host",
        json!({"message": "hi"}),
    )]));
    let (mut rpc, session_id) = start(env, &[]).await;
    rpc.ok(echo_host_tools()).await;
    rpc.send(json!({"type": "prompt", "message": "echo hi"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["toolCallId"], "c1", "{req}");
    let request_id = req["id"].as_str().unwrap().to_owned();
    kill_9(rpc).await;
    (session_id, request_id)
}

#[tokio::test]
async fn a_cut_off_host_tool_call_waits_for_set_host_tools_then_goes_on() {
    let env = Env::new().await;
    let host_tools = echo_host_tools();
    let (session_id, request_id) = host_call_cut_off(&env).await;

    // Started again: the host's tool is not there yet, so nothing runs
    // until the host registers it.
    env.mock.push(MockResponse::text("The host echoed hi."));
    let (mut rpc, _) = start(&env, &["--session", &session_id]).await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["isStreaming"], false, "{state}");
    rpc.send(json!({"id": "tools", "type": "set_host_tools", "tools": host_tools["tools"]}))
        .await;
    let again = rpc.approval_request().await;
    assert_eq!(
        again["id"],
        request_id.as_str(),
        "the same request: {again}"
    );
    let position = |pred: &dyn Fn(&Value) -> bool| rpc.frames.iter().position(pred).unwrap();
    let answered = position(&|f| f["type"] == "response" && f["id"] == "tools");
    let started = position(&|f| event(f).is_some_and(|e| e["type"] == "agent_start"));
    assert!(answered < started, "the turn goes on after the response");
    rpc.decide(&request_id, "approve", Value::Null).await;
    let call = rpc
        .wait_for("host_tool_call", |f| f["type"] == "host_tool_call")
        .await;
    assert_eq!(call["toolCallId"], "c1");
    rpc.send(json!({"type": "host_tool_result", "id": call["id"],
        "result": {"content": [{"type": "text", "text": "echo: hi"}]}}))
        .await;
    let end = seen_tool_end(&mut rpc, "c1").await;
    assert_eq!(end["isError"], false, "{end}");
    let agent_end = seen_event(&mut rpc, "agent_end").await;
    assert!(agent_end.to_string().contains("The host echoed hi."));
    assert!(last_input(&env).contains("echo: hi"));
    rpc.finish().await;
    assert_eq!(call_entries(&env, "c1").await, (1, 1));
    assert_eq!(user_messages(&env).await, 1);
}

#[tokio::test]
async fn a_prompt_before_set_host_tools_starts_a_new_turn_and_the_cut_off_call_never_runs() {
    let env = Env::new().await;
    let (session_id, _) = host_call_cut_off(&env).await;

    env.mock.push(MockResponse::text("Something else, then."));
    let (mut rpc, _) = start(&env, &["--session", &session_id]).await;
    rpc.prompt_and_wait("never mind").await;
    assert!(last_input(&env).contains("never mind"));
    // Registering the tool now resumes nothing: the conversation went on.
    rpc.ok(echo_host_tools()).await;
    rpc.ok(json!({"type": "get_state"})).await;
    let (_, frames) = rpc.finish().await;
    let runs = frames
        .iter()
        .filter(|f| event(f).is_some_and(|e| e["type"] == "agent_start"))
        .count();
    assert_eq!(runs, 1, "{frames:#?}");
    assert!(!frames.iter().any(|f| f["type"] == "host_tool_call"));
    assert_eq!(env.mock.request_count(), 2);
    assert_eq!(user_messages(&env).await, 2);
}
