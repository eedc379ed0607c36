//! RPC mode behind the sandbox: a `send` approval opens the network for
//! that call; a call the sandbox stopped is asked about again and, once
//! approved, re-run with just the missing permission; `get_state` and the
//! RPC `bash` command follow the policy.

use std::io::Read;
use std::net::TcpListener;

use keel_test_support::MockResponse;
use serde_json::json;

use super::{Around, bash, connect, kernel_can_confine, read, ws_path};
use crate::suite::Env;
use crate::suite::approvals::result_text;

fn listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

fn received(l: &TcpListener) -> String {
    l.set_nonblocking(true).unwrap();
    let (mut conn, _) = l.accept().expect("no connection reached the listener");
    conn.set_nonblocking(false).unwrap();
    let mut got = String::new();
    conn.read_to_string(&mut got).unwrap();
    got
}

#[tokio::test]
async fn a_send_approval_opens_the_network_for_that_call_only() {
    if !kernel_can_confine() {
        return;
    }
    let env = Env::new().await;
    let (l, port) = listener();
    // Approved as send: network on. Then the same command, run with no
    // one's yes (money_only does not ask for send), is refused.
    env.mock
        .push_all([bash("c1", &connect(port)), MockResponse::text("sent")]);
    let mut rpc = env.rpc(&[]).await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(
        state["sandbox"],
        json!({"mode": "workspace-write", "networkAccess": false})
    );
    rpc.send(json!({"type": "prompt", "message": "send"})).await;
    let req = rpc.approval_request().await;
    assert_eq!(req["class"], "send", "{req}");
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "approve", json!({})).await;
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], false, "{end}");
    rpc.event("agent_end").await;
    assert_eq!(received(&l), "hi");

    // The same command run with no one's yes (money_only asks only for
    // money) stays behind the walls, and nobody is asked to widen them.
    env.mock
        .push_all([bash("c2", &connect(port)), MockResponse::text("done")]);
    rpc.ok(json!({"type": "set_approval_mode", "mode": "money_only"}))
        .await;
    rpc.send(json!({"type": "prompt", "message": "again"}))
        .await;
    let end = rpc.tool_end("c2").await;
    assert_eq!(end["isError"], true);
    let text = result_text(&end);
    assert!(
        text.contains("Blocked by the sandbox (workspace-write, network off): network access"),
        "{text}"
    );
    assert!(text.contains("nobody was asked"), "{text}");
    rpc.event("agent_end").await;
    assert!(
        !rpc.frames
            .iter()
            .any(|f| f["type"] == "approval_request" && f["toolCallId"] == "c2#sandbox"),
        "money_only asked about network"
    );
    l.set_nonblocking(true).unwrap();
    assert!(l.accept().is_err(), "the refused call connected");
}

#[tokio::test]
async fn a_stopped_call_approved_again_runs_with_the_missing_permission() {
    if !kernel_can_confine() {
        return;
    }
    let env = Env::new().await;
    let around = Around::new();
    let ws = ws_path(&env);
    env.mock.push_all([
        bash("c1", "echo x > a.txt"),
        bash("c2", "echo y > b.txt"),
        MockResponse::text("done"),
    ]);
    let mut rpc = crate::suite::rpc::Rpc::start(
        env.rpc_cmd()
            .env("TMPDIR", around.tmp.display().to_string())
            .args(["--sandbox", "read-only"]),
    )
    .await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["sandbox"]["mode"], "read-only");
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    // A write runs without asking (outside mode), the sandbox stops it,
    // and keel asks whether it may write that file.
    let ask = rpc.approval_request().await;
    assert_eq!(ask["toolCallId"], "c1#sandbox", "{ask}");
    let card = ask.to_string();
    assert!(
        card.contains(&format!("writing {}", ws.join("a.txt").display())),
        "{card}"
    );
    let id = ask["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "approve", json!({})).await;
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], false, "{end}");
    assert_eq!(read(&ws.join("a.txt")), "x\n");
    // The grant was for that call: the next write is stopped and asked again.
    let ask = rpc.approval_request().await;
    assert_eq!(ask["toolCallId"], "c2#sandbox", "{ask}");
    let id = ask["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "decline", json!({"note": "no"})).await;
    let end = rpc.tool_end("c2").await;
    assert_eq!(end["isError"], true);
    assert!(
        result_text(&end).contains("Blocked by the sandbox (read-only"),
        "{end}"
    );
    rpc.event("agent_end").await;
    assert!(!ws.join("b.txt").exists());

    // The RPC `bash` command runs behind the same walls.
    let out = around.outside.display().to_string();
    let r = rpc
        .call(json!({"type": "bash", "command": format!("echo x > {out}/f; echo in > g")}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    assert!(around.outside_entries().is_empty());
    assert!(
        !ws.join("g").exists(),
        "read-only let the bash command write"
    );
}
