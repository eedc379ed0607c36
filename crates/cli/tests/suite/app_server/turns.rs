//! Threads and turns: a text turn, tool turns with each approval
//! decision, interrupt, steer, model failures, reading threads back.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::super::Env;
use super::AppServer;

fn item_types(s: &AppServer, method: &str) -> Vec<String> {
    s.seen(method)
        .iter()
        .map(|f| {
            f["params"]["item"]["type"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

fn completed_item(s: &AppServer, kind: &str) -> Value {
    s.seen("item/completed")
        .into_iter()
        .map(|f| f["params"]["item"].clone())
        .find(|i| i["type"] == kind)
        .unwrap_or_else(|| panic!("no completed {kind} item in {:#?}", s.frames))
}

#[tokio::test]
async fn a_text_turn_streams_an_agent_message() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("Hello from the mock!"));
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    let started = s.notification("thread/started").await;
    assert_eq!(started["params"]["thread"]["id"], thread.as_str());
    let turn = s.start_turn(&thread, "Say hello").await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["itemsView"], "summary");
    assert_eq!(done["items"][0]["text"], "Hello from the mock!");
    let deltas: String = s
        .seen("item/agentMessage/delta")
        .iter()
        .map(|f| f["params"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deltas, "Hello from the mock!");
    assert_eq!(
        item_types(&s, "item/started"),
        ["userMessage", "agentMessage"]
    );
    let methods = s.methods();
    let order: Vec<&str> = methods
        .iter()
        .map(String::as_str)
        .filter(|m| {
            [
                "turn/started",
                "thread/tokenUsage/updated",
                "turn/completed",
            ]
            .contains(m)
        })
        .collect();
    assert_eq!(
        order,
        [
            "turn/started",
            "thread/tokenUsage/updated",
            "turn/completed"
        ]
    );
    let statuses: Vec<Value> = s
        .seen("thread/status/changed")
        .iter()
        .map(|f| f["params"]["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        [
            json!({"type": "active", "activeFlags": []}),
            json!({"type": "idle"})
        ]
    );

    // The thread is a keel session: listed and readable with its turns.
    let list = s.ok("thread/list", json!({})).await;
    assert_eq!(list["data"][0]["id"], thread.as_str());
    assert_eq!(list["data"][0]["preview"], "Say hello");
    let read = s
        .ok(
            "thread/read",
            json!({"threadId": thread, "includeTurns": true}),
        )
        .await;
    let items = &read["thread"]["turns"][0]["items"];
    assert_eq!(items[0]["type"], "userMessage");
    assert_eq!(items[1]["text"], "Hello from the mock!");
    s.close().await;
    assert_eq!(env.session_files().await.len(), 1);
}

#[tokio::test]
async fn an_accepted_command_runs_and_is_reported_as_an_item() {
    let env = Env::new().await;
    env.mock.push_all([
        // `rm -rf` is money for the approvals engine: it always asks.
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "rm -rf gone && echo hi"}),
        )]),
        MockResponse::text("It said hi."),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "untrusted").await;
    let turn = s.start_turn(&thread, "run echo").await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "completed");
    let request = s
        .seen("item/commandExecution/requestApproval")
        .pop()
        .expect("an approval request");
    assert_eq!(request["params"]["itemId"], "c1");
    assert_eq!(request["params"]["command"], "rm -rf gone && echo hi");
    let item = completed_item(&s, "commandExecution");
    assert_eq!(item["status"], "completed");
    assert_eq!(item["exitCode"], 0);
    assert!(item["aggregatedOutput"].as_str().unwrap().contains("hi"));
    let methods = s.methods();
    let pos = |m: &str| methods.iter().position(|x| x == m).unwrap();
    assert!(pos("item/started") < pos("item/commandExecution/requestApproval"));
    assert!(pos("item/commandExecution/requestApproval") < pos("serverRequest/resolved"));
    assert!(
        s.seen("thread/status/changed")
            .iter()
            .any(|f| { f["params"]["status"]["activeFlags"] == json!(["waitingOnApproval"]) })
    );
    s.close().await;
}

#[tokio::test]
async fn a_declined_file_change_is_not_written_and_the_turn_goes_on() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "w1",
            "write",
            json!({"path": "hello.txt", "content": "hi\n"}),
        )]),
        MockResponse::text("Understood."),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "untrusted").await;
    let turn = s.start_turn(&thread, "write a file").await;
    let done = s.finish_turn(&turn, "decline").await;
    assert_eq!(done["status"], "completed");
    assert!(!env.ws().join("hello.txt").exists());
    let started = s
        .seen("item/started")
        .into_iter()
        .find(|f| f["params"]["item"]["type"] == "fileChange")
        .unwrap();
    let change = &started["params"]["item"]["changes"][0];
    assert_eq!(change["kind"], json!({"type": "add"}));
    assert!(change["diff"].as_str().unwrap().contains("+hi"));
    assert_eq!(completed_item(&s, "fileChange")["status"], "declined");
    assert_eq!(s.seen("item/fileChange/requestApproval").len(), 1);
    s.close().await;
}

#[tokio::test]
async fn accept_for_session_grants_the_same_write_again() {
    let env = Env::new().await;
    let write = |id: &str, text: &str| {
        MockResponse::tool_calls(vec![tool_call(
            id,
            "write",
            json!({"path": "a.txt", "content": text}),
        )])
    };
    env.mock.push_all([
        write("w1", "one\n"),
        write("w2", "two\n"),
        MockResponse::text("Wrote it twice."),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "untrusted").await;
    let turn = s.start_turn(&thread, "write twice").await;
    let done = s.finish_turn(&turn, "acceptForSession").await;
    assert_eq!(done["status"], "completed");
    assert_eq!(s.seen("item/fileChange/requestApproval").len(), 1);
    assert_eq!(
        std::fs::read_to_string(env.ws().join("a.txt")).unwrap(),
        "two\n"
    );
    assert!(!s.seen("turn/diff/updated").is_empty());
    s.close().await;
}

#[tokio::test]
async fn cancel_declines_and_interrupts_the_turn() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "rm -rf keep"}),
        )]),
        MockResponse::text("never asked"),
    ]);
    std::fs::create_dir(env.ws().join("keep")).unwrap();
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "on-request").await;
    let turn = s.start_turn(&thread, "remove it").await;
    let done = s.finish_turn(&turn, "cancel").await;
    assert_eq!(done["status"], "interrupted");
    assert!(env.ws().join("keep").exists(), "the command did not run");
    assert_eq!(completed_item(&s, "commandExecution")["status"], "declined");
    assert_eq!(env.mock.request_count(), 1, "the model is not called again");
    s.close().await;
}

#[tokio::test]
async fn interrupt_ends_a_streaming_turn() {
    let env = Env::new().await;
    env.mock
        .push(MockResponse::text("one two three four five six").stall_after(3));
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    let turn = s.start_turn(&thread, "talk slowly").await;
    s.notification("item/agentMessage/delta").await;
    let e = s
        .err(
            "turn/interrupt",
            json!({"threadId": thread, "turnId": "wrong-turn"}),
        )
        .await;
    assert_eq!(
        e["message"],
        format!("expected active turn id wrong-turn but found {turn}")
    );
    let r = s
        .ok(
            "turn/interrupt",
            json!({"threadId": thread, "turnId": turn}),
        )
        .await;
    assert_eq!(r, json!({}));
    assert!(
        s.seen("turn/completed").is_empty(),
        "the interrupt is answered before the turn is announced as ended, as in Codex"
    );
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "interrupted");
    let e = s
        .err(
            "turn/steer",
            json!({"threadId": thread, "expectedTurnId": turn, "input": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(e["message"], "no active turn to steer");
    s.close().await;
}

#[tokio::test]
async fn a_turn_of_one_thread_ends_while_another_threads_turn_streams() {
    // On stdio the app server runs on one thread: the turns of its threads
    // still run at once, interleaved.
    let env = Env::new().await;
    env.mock
        .push(MockResponse::text("one two three four five six").stall_after(3));
    env.mock.push(MockResponse::text("the quick answer"));
    let mut s = env.initialized(false).await;
    let slow_thread = s.start_thread(env.ws(), "never").await;
    let quick_thread = s.start_thread(env.ws(), "never").await;
    let slow = s.start_turn(&slow_thread, "talk slowly").await;
    s.wait_for("a delta of the slow turn", |f| {
        f["method"] == "item/agentMessage/delta" && f["params"]["turnId"] == slow.as_str()
    })
    .await;
    let quick = s.start_turn(&quick_thread, "answer quickly").await;
    let done = s.finish_turn(&quick, "accept").await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["items"][0]["text"], "the quick answer");
    assert!(
        !s.seen("turn/completed")
            .iter()
            .any(|f| f["params"]["turn"]["id"] == slow.as_str()),
        "the stalled turn is still running"
    );
    s.ok(
        "turn/interrupt",
        json!({"threadId": slow_thread, "turnId": slow}),
    )
    .await;
    let done = s.finish_turn(&slow, "accept").await;
    assert_eq!(done["status"], "interrupted");
    s.close().await;
}

/// A shell command that runs until the test creates `name` in the
/// workspace (at most about 20 s): the turn stays busy exactly as long as
/// the test needs it to.
fn wait_for_file(name: &str) -> Value {
    json!({"command": format!(
        "for i in $(seq 400); do [ -e {name} ] && exit 0; sleep 0.05; done; exit 1"
    )})
}

#[tokio::test]
async fn a_turn_start_during_a_turn_steers_it() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call("c1", "bash", wait_for_file("steered"))]),
        MockResponse::text("Steered answer."),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    let turn = s.start_turn(&thread, "first").await;
    s.wait_for("the tool item", |f| {
        f["method"] == "item/started" && f["params"]["item"]["type"] == "commandExecution"
    })
    .await;
    let again = s
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "also this"}]}),
        )
        .await;
    assert_eq!(
        again["turn"]["id"],
        turn.as_str(),
        "the active turn is returned"
    );
    // The steer is queued: let the tool end, the model reads it next.
    std::fs::write(env.ws().join("steered"), "").unwrap();
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "completed");
    let users: Vec<Value> = s
        .seen("item/completed")
        .into_iter()
        .filter(|f| f["params"]["item"]["type"] == "userMessage")
        .collect();
    assert_eq!(
        users.len(),
        2,
        "the steering message is an item of the same turn"
    );
    assert!(users.iter().all(|f| f["params"]["turnId"] == turn.as_str()));
    s.close().await;
}

#[tokio::test]
async fn model_failures_end_the_turn_failed_with_error_info() {
    let env = Env::new().await;
    // Without retries (see `retries_are_reported_with_will_retry`).
    std::fs::write(
        env.home.path().join("config.toml"),
        "[retry]\nenabled = false\n",
    )
    .unwrap();
    env.mock.push_all([
        MockResponse::error(500, json!({"error": {"message": "boom"}})),
        MockResponse::error(429, json!({"error": {"message": "slow down"}})),
        MockResponse::text("This answer will be cut short").cut_after(3),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;

    let turn = s.start_turn(&thread, "FAIL500").await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["codexErrorInfo"], "internalServerError");
    let error = s.seen("error").pop().unwrap();
    assert_eq!(error["params"]["willRetry"], false);
    assert_eq!(error["params"]["turnId"], turn.as_str());
    let status = s.seen("thread/status/changed").pop().unwrap();
    assert_eq!(status["params"]["status"], json!({"type": "systemError"}));

    let turn = s.start_turn(&thread, "FAIL429").await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(
        done["error"]["codexErrorInfo"],
        json!({"responseTooManyFailedAttempts": {"httpStatusCode": 429}})
    );

    let turn = s.start_turn(&thread, "DROP").await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["error"]["codexErrorInfo"], "other");
    // The agent message that had started is closed.
    let started = s
        .seen("item/started")
        .iter()
        .filter(|f| f["params"]["item"]["type"] == "agentMessage")
        .count();
    let completed = s
        .seen("item/completed")
        .iter()
        .filter(|f| f["params"]["item"]["type"] == "agentMessage")
        .count();
    assert_eq!(started, completed);
    s.close().await;
}

#[tokio::test]
async fn a_thread_resumes_in_a_new_process() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("First answer."),
        MockResponse::text("Second answer."),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    let turn = s.start_turn(&thread, "one").await;
    s.finish_turn(&turn, "accept").await;
    s.ok(
        "thread/name/set",
        json!({"threadId": thread, "name": "my thread"}),
    )
    .await;
    s.notification("thread/name/updated").await;
    s.close().await;

    let mut s = env.initialized(false).await;
    let r = s.ok("thread/resume", json!({"threadId": thread})).await;
    assert_eq!(r["thread"]["name"], "my thread");
    assert_eq!(r["thread"]["turns"].as_array().unwrap().len(), 1);
    let turn = s.start_turn(&thread, "two").await;
    let done = s.finish_turn(&turn, "accept").await;
    assert_eq!(done["items"][0]["text"], "Second answer.");
    let history = &env.mock.requests()[1].body["messages"];
    assert!(history.to_string().contains("First answer."), "{history}");
    let turns = s.ok("thread/turns/list", json!({"threadId": thread})).await;
    assert_eq!(turns["data"].as_array().unwrap().len(), 2);
    let loaded = s.ok("thread/loaded/list", json!({})).await;
    assert_eq!(loaded["data"], json!([thread]));
    let r = s
        .ok("thread/unsubscribe", json!({"threadId": thread}))
        .await;
    assert_eq!(r["status"], "unsubscribed");
    s.close().await;
}

/// The held write is judged on the file `link/w.txt` resolves to when it is
/// asked; a swap of `link` to a folder outside while the request waits
/// does not move the accepted write there.
#[tokio::test]
async fn an_accepted_write_lands_where_it_was_judged_after_a_symlink_swap() {
    let env = Env::new().await;
    let outside = tempfile::tempdir().unwrap();
    let inner = env.ws().join("inner");
    std::fs::create_dir(&inner).unwrap();
    std::os::unix::fs::symlink("inner", env.ws().join("link")).unwrap();
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "w1",
            "write",
            json!({"path": "link/w.txt", "content": "new"}),
        )]),
        MockResponse::text("Done."),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "untrusted").await;
    let turn = s.start_turn(&thread, "write").await;
    let req = s.server_request().await;
    assert_eq!(req["method"], "item/fileChange/requestApproval", "{req}");
    std::fs::remove_file(env.ws().join("link")).unwrap();
    std::os::unix::fs::symlink(outside.path(), env.ws().join("link")).unwrap();
    s.send(json!({"id": req["id"], "result": {"decision": "accept"}}))
        .await;
    let done = s.finish_turn(&turn, "decline").await;
    assert_eq!(done["status"], "completed");
    assert_eq!(std::fs::read_to_string(inner.join("w.txt")).unwrap(), "new");
    assert!(!outside.path().join("w.txt").exists(), "written outside");
    s.close().await;
}

/// A turn has one id: the one `turn/start` answers and its notifications
/// carry is the one `thread/read` lists it under, in this process and in
/// the next one.
#[tokio::test]
async fn a_turn_keeps_its_live_id_in_the_history() {
    let env = Env::new().await;
    env.mock
        .push_all([MockResponse::text("one"), MockResponse::text("two")]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    let mut live = Vec::new();
    for text in ["first", "second"] {
        let turn = s.start_turn(&thread, text).await;
        let completed = s
            .wait_for("turn/completed", |f| {
                f["method"] == "turn/completed" && f["params"]["turn"]["id"] == turn.as_str()
            })
            .await;
        assert_eq!(completed["params"]["turn"]["status"], "completed");
        live.push(turn);
    }
    assert_ne!(live[0], live[1]);
    let started: Vec<Value> = s
        .seen("turn/started")
        .iter()
        .map(|f| f["params"]["turn"]["id"].clone())
        .collect();
    assert_eq!(started, [json!(live[0]), json!(live[1])]);
    let ids = |read: &Value| -> Vec<String> {
        read["thread"]["turns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let read = s
        .ok(
            "thread/read",
            json!({"threadId": thread, "includeTurns": true}),
        )
        .await;
    assert_eq!(ids(&read), live);
    s.close().await;

    let mut again = env.initialized(false).await;
    let resumed = again.ok("thread/resume", json!({"threadId": thread})).await;
    assert_eq!(ids(&resumed), live);
    again.close().await;
}
