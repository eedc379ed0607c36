//! Aborting `keel exec` with a signal leaves a consistent session file.

use std::time::Duration;

use keel_protocol::{ContentBlock, Message, StopReason};
use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use super::Env;

const WAIT: Duration = Duration::from_secs(20);

#[tokio::test]
async fn sigint_mid_stream_keeps_the_partial_answer_marked_aborted() {
    let env = Env::new().await;
    // Role chunk and two deltas, then the server stalls.
    env.mock
        .push(MockResponse::text("Counting slowly one two three").stall_after(3));
    let mut child = env.exec().args(["--json", "count"]).spawn().await.unwrap();
    child
        .wait_for_stdout(WAIT, |l| l.contains("\"text_delta\""))
        .await
        .unwrap();
    child.signal("INT").await.unwrap();
    let out = child.wait().await.unwrap();
    assert_eq!(out.code(), Some(130), "stderr: {}", out.stderr);
    let last: serde_json::Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "agent_end");

    let session = env.only_session().await;
    assert!(
        !session.recovered_tail,
        "the file must end with a complete line"
    );
    let msgs = session.messages();
    assert_eq!(msgs.len(), 2);
    let Message::Assistant(a) = &msgs[1] else {
        panic!("not assistant")
    };
    assert_eq!(a.stop_reason, StopReason::Aborted);
    assert!(!a.text().is_empty(), "the partial text is kept");
}

#[tokio::test]
async fn sigint_during_a_command_kills_it_and_answers_the_call() {
    let env = Env::new().await;
    env.mock.push(MockResponse::tool_calls(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "echo $$ > shell.pid; sleep 30; echo never > after.txt"}),
    )]));
    let mut child = env.exec().args(["--json", "wait"]).spawn().await.unwrap();
    child
        .wait_for_stdout(WAIT, |l| l.contains("\"tool_execution_start\""))
        .await
        .unwrap();
    let pid_file = env.ws().join("shell.pid");
    keel_test_support::wait_until(WAIT, || pid_file.exists())
        .await
        .unwrap();
    // Let the shell write its pid completely.
    keel_test_support::wait_until(WAIT, || {
        std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    })
    .await
    .unwrap();
    let shell_pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    child.signal("INT").await.unwrap();
    let out = child.wait().await.unwrap();
    assert_eq!(out.code(), Some(130), "stderr: {}", out.stderr);
    // The shell is gone (the whole process group was killed).
    let proc_path = format!("/proc/{shell_pid}");
    keel_test_support::wait_until(WAIT, || !std::path::Path::new(&proc_path).exists())
        .await
        .unwrap();
    assert!(!env.ws().join("after.txt").exists());

    let session = env.only_session().await;
    let msgs = session.messages();
    let Message::ToolResult(r) = &msgs[2] else {
        panic!("expected a tool result: {msgs:?}")
    };
    assert_eq!(r.tool_call_id, "c1");
    assert!(r.is_error);
    assert_eq!(
        r.content[0],
        ContentBlock::text("Tool execution was aborted")
    );
    // One model call only: nothing ran after the abort.
    assert_eq!(env.mock.request_count(), 1);
}

#[tokio::test]
async fn sigterm_aborts_too() {
    let env = Env::new().await;
    env.mock
        .push(MockResponse::text("never finishes").stall_after(2));
    let mut child = env.exec().args(["--json", "x"]).spawn().await.unwrap();
    child
        .wait_for_stdout(WAIT, |l| l.contains("\"text_delta\""))
        .await
        .unwrap();
    child.signal("TERM").await.unwrap();
    let out = child.wait().await.unwrap();
    assert_eq!(out.code(), Some(130));
    let Message::Assistant(a) = env.only_session().await.messages().pop().unwrap() else {
        panic!()
    };
    assert_eq!(a.stop_reason, StopReason::Aborted);
}
