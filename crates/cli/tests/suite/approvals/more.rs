//! Approvals in RPC mode, the remaining decisions and shapes: decline and
//! stop the turn, a request that nobody answers before its configured
//! expiry, and several held calls in one assistant message.

use keel_test_support::{MockResponse, MockToolCall, tool_call};
use serde_json::{Value, json};

use super::result_text;
use crate::suite::Env;
use crate::suite::rpc::Rpc;

/// A `bash` call the default mode (`outside`) holds: it may run an
/// unknown program, so it is send. It leaves `marker` behind when it runs
/// (and exits 0).
fn held_call(id: &str, marker: &str) -> MockToolCall {
    tool_call(
        id,
        "bash",
        json!({ "command": format!("echo ran > {marker} || keel-test-unknown-program") }),
    )
}

impl Env {
    /// Writes `text` as `$KEEL_HOME/config.toml`.
    fn write_config(&self, text: &str) {
        std::fs::write(self.home.path().join("config.toml"), text).unwrap();
    }

    /// The row of request `id` in `keel approvals list --all`.
    async fn approval_row(&self, id: &str) -> Value {
        let list = self.approvals_json(&["list", "--all"]).await;
        list.as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no row {id} in {list}"))
            .clone()
    }
}

impl Rpc {
    /// Every frame of `type` seen so far.
    fn frames_of(&self, ty: &str) -> Vec<&Value> {
        self.frames.iter().filter(|f| f["type"] == ty).collect()
    }

    /// How many inner events of `type` were seen so far.
    fn count_events(&self, ty: &str) -> usize {
        self.event_types().iter().filter(|t| **t == ty).count()
    }
}

#[tokio::test]
async fn decline_and_stop_ends_the_turn_without_asking_the_model_again() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![held_call("c1", "one.txt")]),
        MockResponse::text("the model must not be asked again"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "write one.txt"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["toolCallId"], "c1");
    let id = req["id"].as_str().unwrap().to_owned();
    let d = rpc.decide(&id, "decline", json!({"stopTurn": true})).await;
    assert_eq!(d["status"], "declined");
    let resolved = rpc
        .seen_or_wait("approval_resolved", |f| f["type"] == "approval_resolved")
        .await;
    assert_eq!(
        (resolved["status"].as_str(), resolved["stopTurn"].as_bool()),
        (Some("declined"), Some(true))
    );
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(
        result_text(&end).starts_with("The user declined this; nothing happened."),
        "{end}"
    );
    let agent_end = rpc.event("agent_end").await;
    assert_eq!(agent_end["isTerminal"], true, "{agent_end}");
    // A round trip: nothing more comes of that turn.
    rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(rpc.count_events("agent_end"), 1);
    assert!(!env.ws().join("one.txt").exists());
    assert_eq!(env.mock.request_count(), 1, "the model was asked again");
    assert_eq!(env.mock.pending_responses(), 1);
    assert_eq!(env.approval_row(&id).await["status"], "declined");
}

#[tokio::test]
async fn an_unanswered_request_expires_after_the_configured_time_and_the_turn_goes_on() {
    let env = Env::new().await;
    env.write_config(
        "[approvals]\nexpire_after = \"1h\"\n\n[approvals.expire_after_by_class]\nsend = \"1s\"\n",
    );
    let show = env.keel().args(["config", "show"]).run().await.unwrap();
    assert!(
        show.stdout.contains(
            "approvals_expire_after_by_class = { write = \"1h\", send = \"1s\", money = \"1h\" }"
        ),
        "{}",
        show.stdout
    );
    env.mock.push_all([
        MockResponse::tool_calls(vec![held_call("c1", "one.txt")]),
        MockResponse::text("nobody answered, so I did nothing"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "write one.txt"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["class"], "send", "{req}");
    let id = req["id"].as_str().unwrap().to_owned();
    // Nobody answers.
    let resolved = rpc
        .wait_for("approval_resolved", |f| f["type"] == "approval_resolved")
        .await;
    assert_eq!(resolved["requestId"], id.as_str());
    assert_eq!(resolved["status"], "expired", "{resolved}");
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], true, "{end}");
    assert_eq!(
        result_text(&end),
        "The user did not answer in time; nothing happened."
    );
    let agent_end = rpc.event("agent_end").await;
    assert_eq!(agent_end["isTerminal"], true);
    assert!(
        agent_end
            .to_string()
            .contains("nobody answered, so I did nothing"),
        "{agent_end}"
    );
    // The model read exactly the expiry text as the call's result.
    let input = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(
        input.contains("The user did not answer in time; nothing happened."),
        "{input}"
    );
    assert!(!env.ws().join("one.txt").exists());
    let pending = rpc.ok(json!({"type": "get_pending_approvals"})).await;
    assert_eq!(pending["approvals"], json!([]));
    assert_eq!(env.approval_row(&id).await["status"], "expired");
    // A late answer is refused.
    let r = rpc
        .call(json!({"type": "approval_response", "requestId": id, "decision": "approve"}))
        .await;
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("expired"), "{r}");
}

#[tokio::test]
async fn a_bad_expiry_setting_stops_keel_and_names_the_key() {
    let env = Env::new().await;
    env.write_config("[approvals.expire_after_by_class]\nmoney = \"an hour\"\n");
    let out = env.exec().arg("hello").run().await.unwrap();
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr
            .contains("[approvals.expire_after_by_class] money: \"an hour\" is not a duration"),
        "{}",
        out.stderr
    );
    assert_eq!(env.mock.request_count(), 0);
}

#[tokio::test]
async fn held_calls_of_one_message_each_get_a_row_and_the_turn_goes_on_once_all_are_decided() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![held_call("c1", "one.txt"), held_call("c2", "two.txt")]),
        MockResponse::text("wrote two, skipped one"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "write both"}))
        .await;
    // The calls are gated one after another: the second is asked about
    // once the first is decided.
    let first = rpc.approval_request().await;
    assert_eq!(first["toolCallId"], "c1");
    let first_id = first["id"].as_str().unwrap().to_owned();
    rpc.decide(&first_id, "decline", json!({"note": "not this one"}))
        .await;
    let end1 = rpc.tool_end("c1").await;
    assert_eq!(
        result_text(&end1),
        "The user declined this; nothing happened. Their note: not this one"
    );
    let second = rpc.approval_request().await;
    assert_eq!(second["toolCallId"], "c2");
    let second_id = second["id"].as_str().unwrap().to_owned();
    assert_ne!(first_id, second_id);
    // Still one model request: the turn waits on the second call.
    rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(env.mock.request_count(), 1);
    assert!(!rpc.started("c2"));
    rpc.decide(&second_id, "approve", json!({})).await;
    let end2 = rpc.tool_end("c2").await;
    assert_eq!(end2["isError"], false, "{end2}");
    rpc.event("agent_end").await;

    assert_eq!(rpc.frames_of("approval_request").len(), 2);
    let statuses: Vec<(String, String)> = rpc
        .frames_of("approval_resolved")
        .iter()
        .map(|f| {
            (
                f["toolCallId"].as_str().unwrap_or_default().to_owned(),
                f["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        statuses,
        vec![
            ("c1".to_owned(), "declined".to_owned()),
            ("c2".to_owned(), "approved".to_owned())
        ]
    );
    assert!(!env.ws().join("one.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.ws().join("two.txt")).unwrap(),
        "ran\n"
    );
    assert_eq!(env.approval_row(&first_id).await["status"], "declined");
    assert_eq!(env.approval_row(&second_id).await["status"], "approved");
    // The model read both results, each matching its decision.
    assert_eq!(env.mock.request_count(), 2);
    let input = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(input.contains("Their note: not this one"), "{input}");
}
