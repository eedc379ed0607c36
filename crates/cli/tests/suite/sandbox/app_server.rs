//! The app-server enforces `thread/start` `sandbox`, `turn/start`
//! `sandboxPolicy` and `command/exec` `sandboxPolicy`, and reports them.

use keel_test_support::MockResponse;
use serde_json::json;

use super::{Around, bash, kernel_can_confine, ws_path};
use crate::suite::Env;

#[tokio::test]
async fn thread_and_turn_policies_are_enforced_and_reported() {
    if !kernel_can_confine() {
        return;
    }
    let env = Env::new().await;
    let ws = ws_path(&env);
    env.mock.push_all([
        bash("c1", "echo x > a.txt"),
        MockResponse::text("blocked"),
        bash("c2", "echo y > b.txt"),
        MockResponse::text("written"),
    ]);
    let mut s = env.initialized(false).await;
    let cfg = s.ok("config/read", json!({})).await;
    assert_eq!(cfg["config"]["sandbox_mode"], "workspace-write", "{cfg}");
    let r = s
        .ok(
            "thread/start",
            json!({"cwd": ws.display().to_string(), "approvalPolicy": "never", "sandbox": "read-only"}),
        )
        .await;
    assert_eq!(
        r["sandbox"],
        json!({"type": "readOnly", "networkAccess": false})
    );
    let thread = r["thread"]["id"].as_str().unwrap().to_owned();
    let turn = s.start_turn(&thread, "write").await;
    let done = s.finish_turn(&turn, "decline").await;
    assert_eq!(done["status"], "completed", "{done}");
    assert!(!ws.join("a.txt").exists(), "read-only let a write through");
    let item = s
        .seen("item/completed")
        .into_iter()
        .find(|n| n["params"]["item"]["type"] == "commandExecution")
        .expect("a command item");
    let output = item["params"]["item"]["aggregatedOutput"].to_string();
    assert!(
        output.contains("Blocked by the sandbox (read-only"),
        "{item}"
    );

    // turn/start's sandboxPolicy replaces it for this and later turns.
    let r = s
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "again"}],
                   "sandboxPolicy": {"type": "workspaceWrite", "networkAccess": true}}),
        )
        .await;
    let turn = r["turn"]["id"].as_str().unwrap().to_owned();
    s.finish_turn(&turn, "decline").await;
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "y\n");
    // What is in force is reported back (thread/read carries only the
    // thread in Codex's schema; resume reports the settings).
    let resumed = s.ok("thread/resume", json!({"threadId": thread})).await;
    assert_eq!(resumed["sandbox"]["type"], "workspaceWrite", "{resumed}");
    assert_eq!(resumed["sandbox"]["networkAccess"], true, "{resumed}");
    s.close().await;
}

#[tokio::test]
async fn command_exec_runs_behind_its_sandbox_policy() {
    if !kernel_can_confine() {
        return;
    }
    let env = Env::new().await;
    let around = Around::new();
    let ws = ws_path(&env).display().to_string();
    let out = around.outside.display().to_string();
    let mut s = crate::suite::app_server::AppServer::start(
        env.app_server_cmd()
            .env("TMPDIR", around.tmp.display().to_string()),
    )
    .await;
    s.initialize(false).await;
    let exec = |policy: serde_json::Value, script: String| json!({"command": ["bash", "-c", script], "cwd": ws, "sandboxPolicy": policy});
    let r = s
        .ok(
            "command/exec",
            exec(json!({"type": "readOnly"}), "echo x > r.txt".into()),
        )
        .await;
    assert_ne!(r["exitCode"], 0, "{r}");
    let r = s
        .ok(
            "command/exec",
            exec(
                json!({"type": "workspaceWrite"}),
                format!("echo in > w.txt && (echo x > {out}/o || true) && sh -c 'echo y > {out}/p' ; true"),
            ),
        )
        .await;
    assert_eq!(r["exitCode"], 0, "{r}");
    assert!(ws_path(&env).join("w.txt").exists());
    assert!(
        around.outside_entries().is_empty(),
        "{:?}",
        around.outside_entries()
    );
    // With no policy named, the server's (workspace-write) applies.
    let r = s
        .ok(
            "command/exec",
            json!({"command": ["bash", "-c", format!("echo x > {out}/d")], "cwd": ws}),
        )
        .await;
    assert_ne!(r["exitCode"], 0, "{r}");
    let r = s
        .ok(
            "command/exec",
            exec(
                json!({"type": "dangerFullAccess"}),
                format!("echo x > {out}/full"),
            ),
        )
        .await;
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(around.outside_entries(), vec!["full".to_owned()]);
    let e = s
        .err("command/exec", exec(json!({"type": "nope"}), "true".into()))
        .await;
    assert_eq!(e["code"], -32600, "{e}");
    s.close().await;
}
