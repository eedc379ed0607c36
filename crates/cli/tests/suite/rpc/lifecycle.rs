//! Framing and lifecycle: the ready frame, id echo, the error model,
//! oversize lines, CRLF, stdin close, starting without a model.

use keel_protocol::Message;
use keel_test_support::{KeelCommand, MockResponse};
use serde_json::{Value, json};

use super::Rpc;
use crate::suite::Env;

#[tokio::test]
async fn ready_first_then_ids_are_echoed_verbatim() {
    let env = Env::new().await;
    let mut rpc = env.rpc(&[]).await;
    let ready = &rpc.frames[0];
    assert_eq!(ready["protocolVersion"], 2);
    assert_eq!(ready["supportedProtocolVersions"], json!([1, 2]));
    assert_eq!(ready["maxFrameBytes"], 8 * 1024 * 1024);

    rpc.send(json!({"id": 42, "type": "get_last_assistant_text"}))
        .await;
    let r = rpc.next().await;
    assert_eq!(r["id"], 42);
    assert_eq!(r["data"], json!({"text": null}));
    rpc.send(json!({"type": "get_messages"})).await;
    let r = rpc.next().await;
    assert!(r.get("id").is_none(), "no id in, no id out: {r}");
    assert_eq!(r["command"], "get_messages");
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
}

#[tokio::test]
async fn error_model_unknown_parse_and_bad_arguments() {
    let env = Env::new().await;
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"id": "u1", "type": "frobnicate"})).await;
    let r = rpc.next().await;
    assert_eq!(
        r,
        json!({"id":"u1","type":"response","command":"frobnicate","success":false,
               "error":"Unknown command: frobnicate"})
    );
    rpc.send_raw("{not json").await;
    let r = rpc.next().await;
    assert_eq!(r["command"], "parse");
    assert_eq!(r["success"], false);
    assert!(r.get("id").is_none());
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Failed to parse command:")
    );
    rpc.send(json!({"id": "b1", "type": "set_steering_mode", "mode": 3}))
        .await;
    let r = rpc.next().await;
    assert_eq!(r["id"], "b1");
    assert_eq!(r["command"], "set_steering_mode");
    assert_eq!(r["success"], false);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid set_steering_mode command: field `mode`"),
        "{r}"
    );
    // The loop goes on.
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["isStreaming"], false);
}

#[tokio::test]
async fn oversize_line_is_refused_and_the_stream_goes_on() {
    let env = Env::new().await;
    let mut rpc = Rpc::start(env.rpc_cmd().env("KEEL_RPC_MAX_FRAME_BYTES", "1000")).await;
    assert_eq!(rpc.frames[0]["maxFrameBytes"], 1000);
    let big = json!({"id": "big", "type": "prompt", "message": "x".repeat(5000)});
    rpc.send(big).await;
    let r = rpc.next().await;
    assert_eq!(r["command"], "parse");
    assert!(r.get("id").is_none());
    assert!(
        r["error"].as_str().unwrap().contains("exceeds the maximum"),
        "{r}"
    );
    // CRLF line endings and blank lines are fine.
    rpc.child
        .send_raw(b"\r\n   \n{\"id\":\"c\",\"type\":\"get_state\"}\r\n")
        .await
        .unwrap();
    let r = rpc.next().await;
    assert_eq!(r["id"], "c");
    assert_eq!(r["success"], true);
}

#[tokio::test]
async fn stdin_close_flushes_the_session_and_exits_zero() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("Hello from the mock!"));
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("Say hello").await;
    rpc.ok(json!({"type": "set_session_name", "name": "probe"}))
        .await;
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    let session = env.only_session().await;
    assert!(!session.recovered_tail);
    let msgs = session.messages();
    assert_eq!(msgs.len(), 2);
    let Message::Assistant(a) = &msgs[1] else {
        panic!("not assistant: {msgs:?}")
    };
    assert_eq!(a.text(), "Hello from the mock!");
    assert_eq!(session.name().as_deref(), Some("probe"));
}

#[tokio::test]
async fn stdin_close_mid_run_aborts_it_and_still_exits_zero() {
    let env = Env::new().await;
    env.mock
        .push(MockResponse::text("never finishes this answer").stall_after(2));
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    rpc.wait_for("a text delta", |f| {
        super::event(f).is_some_and(|e| e["assistantMessageEvent"]["type"] == "text_delta")
    })
    .await;
    let (out, frames) = rpc.finish().await;
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    let ends: Vec<&Value> = frames
        .iter()
        .filter(|f| super::event_type(f) == Some("agent_end"))
        .collect();
    assert_eq!(ends.len(), 1, "{frames:#?}");
    let msgs = env.only_session().await.messages();
    let Message::Assistant(a) = &msgs[1] else {
        panic!()
    };
    assert_eq!(a.stop_reason, keel_protocol::StopReason::Aborted);
}

#[tokio::test]
async fn without_a_model_rpc_starts_answers_and_refuses_prompts() {
    let env = Env::new().await;
    let cmd = KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
        .home(env.home.path())
        .cwd(env.ws())
        .args(["--mode", "rpc"]);
    let mut rpc = Rpc::start(cmd).await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["model"], Value::Null);
    assert_eq!(state["contextUsage"], Value::Null);
    let models = rpc.ok(json!({"type": "get_available_models"})).await;
    assert_eq!(models["models"], json!([]));
    // Acknowledged, then refused with the same id.
    rpc.send(json!({"id": "p1", "type": "prompt", "message": "hi"}))
        .await;
    let ack = rpc.next().await;
    assert_eq!(ack["success"], true);
    let err = rpc.next().await;
    assert_eq!(err["id"], "p1");
    assert_eq!(err["success"], false);
    let text = err["error"].as_str().unwrap();
    assert!(text.contains("no model configured"), "{text}");
    let r = rpc.call(json!({"type": "steer", "message": "x"})).await;
    assert_eq!(r["success"], false);
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
    assert_eq!(env.mock.request_count(), 0);
}

#[tokio::test]
async fn sigterm_shuts_down_like_stdin_close() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("saved before the signal"));
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("hi").await;
    rpc.child.signal("TERM").await.unwrap();
    let out = rpc.child.wait().await.unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    let msgs = env.only_session().await.messages();
    assert_eq!(msgs.len(), 2);
}

/// A session file that cannot be created (a file where the sessions
/// directory should be) ends the start with one clear line and exit code
/// 2, before `ready`; the gate file read beside it changes nothing.
#[tokio::test]
async fn a_session_that_cannot_be_created_fails_the_start_clearly() {
    let env = Env::new().await;
    if env.db.is_some() {
        return; // the sessions live in the database there
    }
    std::fs::write(env.home.path().join("sessions"), "not a directory").unwrap();
    let out = env
        .rpc_cmd()
        .stdin("{\"id\":\"s\",\"type\":\"get_state\"}\n")
        .timeout(super::super::app_server::WAIT)
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert_eq!(out.stdout, "", "nothing is served");
    let line = out.stderr.lines().last().unwrap_or_default();
    assert!(line.starts_with("keel: "), "{}", out.stderr);
    assert!(line.contains("sessions"), "{}", out.stderr);
}
