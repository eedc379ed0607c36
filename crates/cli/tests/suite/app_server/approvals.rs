//! Approvals through the approvals engine (`$KEEL_HOME/keel.db`): rows are
//! stored before the request goes out, survive `kill -9`, are sent again
//! (once) to a client that resumes the thread in a new process, whose cut
//! off turn then goes on; the answer is recorded on the row; decisions are
//! visible to `keel approvals`, and one made there while keel was down is
//! honoured on resume.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::super::Env;
use super::AppServer;

impl AppServer {
    /// The next server request (an approval).
    pub async fn server_request(&mut self) -> Value {
        self.wait_for("a server request", |f| {
            f.get("id").is_some() && f.get("method").is_some()
        })
        .await
    }

    /// The `item/completed` already read for item `id`.
    fn item_completed(&self, id: &str) -> Value {
        self.frames
            .iter()
            .find(|f| f["method"] == "item/completed" && f["params"]["item"]["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no item/completed for {id}: {:#?}", self.frames))
    }
}

#[tokio::test]
async fn a_pending_request_survives_kill_9_and_is_sent_again_on_resume() {
    let env = Env::new().await;
    std::fs::create_dir(env.ws().join("keep")).unwrap();
    env.mock.push(MockResponse::tool_calls(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "rm -rf keep"}),
    )]));
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "on-request").await;
    s.start_turn(&thread, "clean up").await;
    let req = s.server_request().await;
    assert_eq!(req["method"], "item/commandExecution/requestApproval");
    assert_eq!(req["params"]["itemId"], "c1");
    assert!(
        s.seen("thread/status/changed")
            .iter()
            .any(|f| f["params"]["status"]["activeFlags"] == json!(["waitingOnApproval"]))
    );

    // The row was stored before the request went out.
    let listed = env.approvals_json(&["list"]).await;
    assert_eq!(listed[0]["status"], "pending", "{listed}");
    assert_eq!(listed[0]["call_id"], "c1", "{listed}");
    let approval_id = listed[0]["id"].as_str().unwrap().to_owned();

    s.child.signal("KILL").await.unwrap();
    let out = s.child.wait().await.unwrap();
    assert_eq!(out.code(), None, "killed by a signal");

    // A new process: resuming the thread sends the request again, and the
    // cut-off turn goes on under the id the response lists it with.
    env.mock.push(MockResponse::text("Left it alone."));
    let mut s = env.initialized(false).await;
    let resumed = s.ok("thread/resume", json!({"threadId": thread})).await;
    let turn_id = format!("{thread}-turn-0");
    assert_eq!(resumed["thread"]["turns"][0]["id"], turn_id.as_str());
    assert_eq!(resumed["thread"]["turns"][0]["status"], "inProgress");
    let again = s.server_request().await;
    assert_eq!(again["method"], "item/commandExecution/requestApproval");
    assert_eq!(again["params"]["itemId"], "c1");
    assert_eq!(again["params"]["threadId"], thread.as_str());
    assert_eq!(again["params"]["command"], "rm -rf keep");
    assert_eq!(again["params"]["turnId"], format!("{thread}-turn-0"));
    s.send(json!({"id": again["id"], "result": {"decision": "decline", "note": "keep it"}}))
        .await;
    let resolved = s.notification("serverRequest/resolved").await;
    assert_eq!(resolved["params"]["requestId"], again["id"]);
    let completed = s.notification("turn/completed").await;
    assert_eq!(completed["params"]["turn"]["id"], turn_id.as_str());
    assert_eq!(completed["params"]["turn"]["status"], "completed");
    let started = s.notification("turn/started").await;
    assert_eq!(started["params"]["turn"]["id"], turn_id.as_str());
    assert_eq!(
        s.frames
            .iter()
            .filter(|f| f.get("method").is_some() && f["id"] == again["id"])
            .count(),
        1,
        "the request is sent once: {:#?}",
        s.frames
    );
    let declined = s.item_completed("c1");
    assert_eq!(declined["params"]["turnId"], turn_id.as_str());
    assert_eq!(
        declined["params"]["item"]["status"], "declined",
        "{declined}"
    );
    // The model heard the note and answered, without a new user message.
    let input = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(input.contains("keep it"), "{input}");
    assert_eq!(input.matches("clean up").count(), 1, "{input}");

    // The decision is recorded on the row.
    let all = env.approvals_json(&["list", "--all"]).await;
    let row = all
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == approval_id.as_str())
        .unwrap_or_else(|| panic!("{all}"))
        .clone();
    assert_eq!(row["status"], "declined", "{row}");
    let audit = env.approvals_json(&["explain", "c1"]).await;
    assert!(
        audit
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["outcome"] == "declined"
                && l["decider"] == "app-server"
                && l["detail"].as_str().unwrap_or_default().contains("keep it")),
        "{audit}"
    );
    assert!(env.ws().join("keep").exists());
    // Nothing is pending any more: a second resume sends nothing.
    assert_eq!(env.approvals_json(&["list"]).await, json!([]));
    s.close().await;
}

#[tokio::test]
async fn an_approval_from_the_cli_while_the_app_server_is_down_runs_the_call_once_on_resume() {
    let env = Env::new().await;
    env.mock.push(MockResponse::tool_calls(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "echo ran >> marker"}),
    )]));
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "untrusted").await;
    s.start_turn(&thread, "mark it").await;
    let req = s.server_request().await;
    assert_eq!(req["params"]["itemId"], "c1");
    let listed = env.approvals_json(&["list"]).await;
    let approval_id = listed[0]["id"].as_str().unwrap().to_owned();
    s.child.signal("KILL").await.unwrap();
    let _ = s.child.wait().await.unwrap();

    let out = env.approvals_cmd(&["approve", &approval_id], false).await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        !env.ws().join("marker").exists(),
        "nothing runs while keel is down"
    );

    env.mock.push(MockResponse::text("Marked."));
    let mut s = env.initialized(false).await;
    s.ok("thread/resume", json!({"threadId": thread})).await;
    let completed = s.notification("turn/completed").await;
    assert_eq!(
        completed["params"]["turn"]["status"], "completed",
        "{completed}"
    );
    assert!(
        !s.frames
            .iter()
            .any(|f| f.get("method").is_some() && f.get("id").is_some()),
        "a decided request is not sent again: {:#?}",
        s.frames
    );
    let ran = s.item_completed("c1");
    assert_eq!(ran["params"]["item"]["status"], "completed", "{ran}");
    let agent = s
        .frames
        .iter()
        .any(|f| f["method"] == "item/completed" && f["params"]["item"]["text"] == "Marked.");
    assert!(agent, "{:#?}", s.frames);
    assert_eq!(env.mock.request_count(), 2);
    s.close().await;
    let marker = std::fs::read_to_string(env.ws().join("marker")).unwrap();
    assert_eq!(marker, "ran\n", "the approved call ran exactly once");

    // Resuming the finished thread again starts nothing.
    let mut s = env.initialized(false).await;
    let resumed = s.ok("thread/resume", json!({"threadId": thread})).await;
    assert_eq!(resumed["thread"]["turns"][0]["status"], "completed");
    s.ok("thread/loaded/list", json!({})).await;
    assert!(
        !s.frames.iter().any(|f| f["method"] == "turn/started"),
        "{:#?}",
        s.frames
    );
    s.close().await;
    assert_eq!(env.mock.request_count(), 2);
}

#[tokio::test]
async fn read_only_commands_run_unasked_and_money_asks_even_under_never() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call("c1", "bash", json!({"command": "echo hi"}))]),
        MockResponse::tool_calls(vec![tool_call(
            "c2",
            "bash",
            json!({"command": "rm -rf nothing-here"}),
        )]),
        MockResponse::text("done"),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    let turn = s.start_turn(&thread, "go").await;
    let done = s.finish_turn(&turn, "acceptForSession").await;
    assert_eq!(done["status"], "completed");
    let requests: Vec<Value> = s.seen("item/commandExecution/requestApproval");
    assert_eq!(requests.len(), 1, "only the delete asks");
    assert_eq!(requests[0]["params"]["itemId"], "c2");
    // Money gets no always-allow rule: it was approved once.
    let rules = env.approvals_json(&["rules"]).await;
    assert_eq!(rules, json!([]), "{rules}");
    s.close().await;
}

/// `permissionProfile/list` names keel's approval modes, and `permissions`
/// on `thread/start` and `turn/start` selects one (what an ACP editor's
/// mode menu does through `codex-acp`).
#[tokio::test]
async fn permission_profiles_are_the_approval_modes_and_select_one() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "w1",
            "write",
            json!({"path": "a.txt", "content": "x"}),
        )]),
        MockResponse::text("Asked."),
        MockResponse::tool_calls(vec![tool_call(
            "w2",
            "write",
            json!({"path": "b.txt", "content": "y"}),
        )]),
        MockResponse::text("Wrote."),
    ]);
    let mut s = env.initialized(false).await;
    let list = s.ok("permissionProfile/list", json!({})).await;
    let ids: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["outside", "everything", "money_only"]);
    assert_eq!(list["nextCursor"], Value::Null);
    let e = s
        .err(
            "thread/start",
            json!({"cwd": env.ws(), "permissions": "nope"}),
        )
        .await;
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    // `everything`: a write inside the workspace asks.
    let started = s
        .ok(
            "thread/start",
            json!({"cwd": env.ws(), "permissions": "everything"}),
        )
        .await;
    assert_eq!(started["approvalPolicy"], "untrusted");
    let thread = started["thread"]["id"].as_str().unwrap().to_owned();
    let turn = s.start_turn(&thread, "write a").await;
    let done = s.finish_turn(&turn, "decline").await;
    assert_eq!(done["status"], "completed");
    assert_eq!(s.seen("item/fileChange/requestApproval").len(), 1);
    assert!(!env.ws().join("a.txt").exists());
    // `outside` for this turn on: the same write runs unasked.
    let t2 = s
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "write b"}],
                   "permissions": "outside"}),
        )
        .await["turn"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = s.finish_turn(&t2, "decline").await;
    assert_eq!(done["status"], "completed");
    assert_eq!(s.seen("item/fileChange/requestApproval").len(), 1);
    assert!(env.ws().join("b.txt").exists());
    s.close().await;
}
