//! The todo list at the end of a run: `todo_reminder` while tasks are
//! unfinished (another turn per reminder, at most three per run, all
//! inside the one run), `todo_auto_clear` once every task is done.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::Rpc;
use crate::suite::Env;

fn plan(first: &str, second: &str) -> Value {
    json!([{"id": "phase-1", "name": "Todos", "tasks": [
        {"id": "task-1", "content": "Map the tool surface", "status": first},
        {"id": "task-2", "content": "Exercise edit operations", "status": second}]}])
}

/// The text of the last user message of a model request.
fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default()
}

fn events_of<'a>(rpc: &'a Rpc, ty: &str) -> Vec<&'a Value> {
    rpc.events()
        .into_iter()
        .filter(|e| e["type"] == ty)
        .collect()
}

#[tokio::test]
async fn unfinished_todos_remind_the_model_three_times_inside_one_run() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("First answer."),
        MockResponse::text("Second answer."),
        MockResponse::text("Third answer."),
        MockResponse::text("Fourth answer."),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "set_todos", "phases": plan("in_progress", "completed")}))
        .await;
    let end = rpc.prompt_and_wait("work on the plan").await;

    let reminders = events_of(&rpc, "todo_reminder");
    assert_eq!(reminders.len(), 3, "{:?}", rpc.event_types());
    for (i, r) in reminders.iter().enumerate() {
        assert_eq!(
            **r,
            json!({"type": "todo_reminder",
                   "todos": [{"id": "task-1", "content": "Map the tool surface",
                              "status": "in_progress"}],
                   "attempt": i + 1, "maxAttempts": 3})
        );
    }
    // One run: one agent_start, one terminal agent_end, four turns; each
    // reminder comes after a turn_end and before the next turn_start.
    let types = rpc.event_types();
    assert_eq!(types.iter().filter(|t| **t == "agent_start").count(), 1);
    assert_eq!(types.iter().filter(|t| **t == "agent_end").count(), 1);
    assert_eq!(types.iter().filter(|t| **t == "turn_start").count(), 4);
    for (i, t) in types.iter().enumerate() {
        if *t == "todo_reminder" {
            assert_eq!(types[i - 1], "turn_end", "{types:?}");
            assert_eq!(types[i + 1], "turn_start", "{types:?}");
        }
    }
    assert_eq!(end["isTerminal"], true);
    // The prompt, four answers and three reminders.
    assert_eq!(end["messages"].as_array().unwrap().len(), 8);

    // The model read each reminder, listing only the unfinished task.
    let requests = env.mock.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(last_user_text(&requests[0].body), "work on the plan");
    for (i, req) in requests[1..].iter().enumerate() {
        let text = last_user_text(&req.body);
        assert!(text.contains(&format!("reminder {} of 3", i + 1)), "{text}");
        assert!(
            text.contains("[in progress] Map the tool surface"),
            "{text}"
        );
        assert!(!text.contains("Exercise edit operations"), "{text}");
    }
    // Unfinished todos stay as they were.
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["todoPhases"], plan("in_progress", "completed"));

    // The next prompt starts a new count.
    rpc.ok(json!({"type": "set_todos", "phases": plan("pending", "completed")}))
        .await;
    let before = events_of(&rpc, "todo_reminder").len();
    env.mock
        .push_all(["a", "b", "c", "d"].map(MockResponse::text));
    rpc.prompt_and_wait("again").await;
    let again: Vec<Value> = events_of(&rpc, "todo_reminder")[before..]
        .iter()
        .map(|r| r["attempt"].clone())
        .collect();
    assert_eq!(again, [json!(1), json!(2), json!(3)]);
    rpc.finish().await;
}

#[tokio::test]
async fn a_finished_list_is_cleared_when_the_run_ends() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("Nothing left."),
        MockResponse::text("Still nothing."),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "set_todos", "phases": plan("completed", "cancelled")}))
        .await;
    rpc.prompt_and_wait("check the plan").await;
    let types = rpc.event_types();
    assert!(!types.contains(&"todo_reminder"), "{types:?}");
    let clears = events_of(&rpc, "todo_auto_clear");
    assert_eq!(clears, [&json!({"type": "todo_auto_clear"})]);
    let at = types.iter().position(|t| *t == "todo_auto_clear").unwrap();
    assert_eq!(types[at + 1], "agent_end", "{types:?}");
    assert_eq!(env.mock.request_count(), 1);
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["todoPhases"], json!([]));

    // An empty list is left alone.
    rpc.prompt_and_wait("and now").await;
    assert_eq!(events_of(&rpc, "todo_auto_clear").len(), 1);
    rpc.finish().await;
}

#[tokio::test]
async fn finishing_the_tasks_after_a_reminder_clears_the_list_flat_too() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("I will stop here."),
        MockResponse::tool_calls(vec![tool_call("c1", "mark_done", json!({}))]),
        MockResponse::text("All tasks are done."),
    ]);
    let mut rpc = env.rpc(&["--rpc-flat-events"]).await;
    // Declared read, so the call does not wait for an approval.
    rpc.ok(json!({"type": "set_host_tools", "tools": [{
        "name": "mark_done", "description": "Marks the plan done", "approvalClass": "read",
        "parameters": {"type": "object", "properties": {}}}]}))
        .await;
    rpc.ok(json!({"type": "set_todos", "phases": plan("in_progress", "pending")}))
        .await;
    rpc.call(json!({"type": "prompt", "message": "finish the plan"}))
        .await;
    let reminder = rpc.event("todo_reminder").await;
    assert_eq!(reminder["attempt"], 1);
    assert_eq!(reminder["todos"].as_array().unwrap().len(), 2);
    // The model answers the reminder with the host tool; the host
    // completes the list before answering the call.
    let call = rpc
        .wait_for("host_tool_call", |f| f["type"] == "host_tool_call")
        .await;
    rpc.ok(json!({"type": "set_todos", "phases": plan("completed", "completed")}))
        .await;
    rpc.send(json!({"type": "host_tool_result", "id": call["id"],
                    "result": {"content": [{"type": "text", "text": "ok"}]}}))
        .await;
    rpc.event("agent_end").await;
    let types = rpc.event_types();
    assert_eq!(types.iter().filter(|t| **t == "todo_reminder").count(), 1);
    let at = types.iter().position(|t| *t == "todo_auto_clear").unwrap();
    assert_eq!(types[at + 1], "agent_end", "{types:?}");
    // Flat: the inner event is the frame.
    assert!(
        rpc.frames
            .iter()
            .any(|f| *f == json!({"type": "todo_auto_clear"}))
    );
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["todoPhases"], json!([]));
    rpc.finish().await;
}
