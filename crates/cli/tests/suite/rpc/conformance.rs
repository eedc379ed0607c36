//! Conformance with a real client: pi's `RpcClient` drives
//! `keel --mode rpc --rpc-flat-events` through state, a text prompt, a tool
//! run and an abort (`scripts/rpc-conformance/drive.mjs`).
//!
//! Needs Node and pi (`../shared/peers/install.sh pi`); found through
//! `PI_RPC_CLIENT` (the path of pi's `dist/modes/rpc/rpc-client.js`) or
//! `$PEERS_DIR/pi`. Without them the test passes after saying it skipped.

use std::path::PathBuf;
use std::time::Duration;

use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use crate::suite::Env;

fn pi_client() -> Option<PathBuf> {
    if let Ok(p) = std::env::var("PI_RPC_CLIENT") {
        return Some(PathBuf::from(p)).filter(|p| p.exists());
    }
    let peers = std::env::var("PEERS_DIR").ok()?;
    let p = PathBuf::from(peers)
        .join("pi/node_modules/@mariozechner/pi-coding-agent/dist/modes/rpc/rpc-client.js");
    p.exists().then_some(p)
}

fn node_available() -> bool {
    std::process::Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[tokio::test]
async fn pi_rpc_client_drives_keel() {
    let Some(client) = pi_client() else {
        eprintln!(
            "skipping pi RpcClient conformance: pi is not installed (set PI_RPC_CLIENT or \
             PEERS_DIR; see ../shared/peers/install.sh pi)"
        );
        return;
    };
    if !node_available() {
        eprintln!("skipping pi RpcClient conformance: node is not on PATH");
        return;
    }
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("Hello from keel!"),
        MockResponse::tool_calls(vec![tool_call(
            "call_1",
            "bash",
            json!({"command": "echo hello-from-tool"}),
        )]),
        MockResponse::text("The tool said hello."),
        MockResponse::text("this answer is never finished").stall_after(2),
    ]);
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/rpc-conformance/drive.mjs");
    let args = json!(["--base-url", env.mock.base_url(), "--model", "mock-model"]);
    let run = tokio::process::Command::new("node")
        .arg(&script)
        .current_dir(env.ws())
        .env("PI_RPC_CLIENT", &client)
        .env("KEEL_BIN", env!("CARGO_BIN_EXE_keel"))
        .env("KEEL_ARGS", args.to_string())
        .env("KEEL_HOME", env.home.path())
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_PROVIDER")
        .env_remove("KEEL_BASE_URL")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the conformance driver hung")
        .expect("cannot run node");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "conformance failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("conformance: all steps passed"), "{stdout}");
    eprintln!("{stdout}");
}
