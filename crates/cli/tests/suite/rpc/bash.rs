//! `bash` (in the background) and `abort_bash`.

use keel_test_support::MockResponse;
use serde_json::json;

use crate::suite::Env;

#[tokio::test]
async fn bash_runs_in_the_background_and_its_output_reaches_the_model() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("I saw it."));
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"id": "b1", "type": "bash",
        "command": "while [ ! -f go ]; do sleep 0.02; done; echo out; echo err >&2; exit 3"}))
        .await;
    // Later commands are answered while it runs.
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["isStreaming"], false);
    std::fs::write(env.ws().join("go"), "").unwrap();
    let r = rpc.response("b1").await;
    assert_eq!(r["success"], true);
    let d = &r["data"];
    assert_eq!(d["exitCode"], 3);
    assert_eq!(d["cancelled"], false);
    assert_eq!(d["truncated"], false);
    let output = d["output"].as_str().unwrap();
    assert!(output.contains("out") && output.contains("err"), "{output}");

    rpc.prompt_and_wait("what did it print?").await;
    let req = env.mock.last_request().unwrap();
    let body = req.body["messages"].to_string();
    assert!(body.contains("Ran `while"), "{body}");
    let r = rpc.call(json!({"type": "bash", "command": " "})).await;
    assert_eq!(r["success"], false);
}

#[tokio::test]
async fn abort_bash_answers_first_then_cancels() {
    let env = Env::new().await;
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"id": "b1", "type": "bash", "command": "echo started; sleep 30"}))
        .await;
    // Give the command a moment to start (not required for correctness).
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    rpc.send(json!({"id": "a1", "type": "abort_bash"})).await;
    let first = rpc.next().await;
    assert_eq!(first["id"], "a1");
    assert_eq!(first["success"], true);
    let r = rpc.response("b1").await;
    assert_eq!(r["data"]["cancelled"], true);
    assert!(r["data"].get("exitCode").is_none());
}
