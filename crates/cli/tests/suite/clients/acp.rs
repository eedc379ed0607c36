//! The ACP bridges editors (Zed and others) use, as published on npm,
//! unmodified, with keel in place of the agent they were written for:
//! `codex-acp` runs `keel app-server` as its Codex (`CODEX_PATH`), `pi-acp`
//! runs `keel --mode rpc` as its pi (`PI_ACP_PI_COMMAND`). The editor side
//! is `tests/clients/acp_editor.mjs`: prompts, permission answers, cancel,
//! the session list.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::{keel_env, npm_client, run_node};
use crate::suite::Env;

fn fetch(id: &str) -> MockResponse {
    MockResponse::tool_calls(vec![tool_call(
        id,
        "bash",
        json!({"command": "curl -s http://127.0.0.1:9/nothing"}),
    )])
}

/// What both bridges must show: a session, a text turn, a cancelled
/// prompt, the session listed (`listed`: whether the bridge can list it).
fn assert_opening_and_closing(out: &Value, listed: bool) {
    assert_eq!(out["errors"], json!({}), "{out:#}");
    assert_eq!(out["newSession"], true);
    assert_eq!(out["text"]["stopReason"], "end_turn");
    assert!(ends_with(&out["text"], "Hello there."), "{out:#}");
    assert_eq!(out["cancelled"], "cancelled");
    assert_eq!(out["listed"], listed);
}

/// Whether a prompt's agent text ends with `text`.
fn ends_with(prompt: &Value, text: &str) -> bool {
    prompt["text"].as_str().is_some_and(|t| t.ends_with(text))
}

#[tokio::test]
async fn codex_acp_drives_keel_app_server_unchanged() {
    if !npm_client("@agentclientprotocol/codex-acp") {
        return;
    }
    let env = Env::new().await;
    // codex-acp asks for a conversation title on its own.
    env.mock
        .answer_whenever("generate a very short title", MockResponse::text("A title"));
    env.mock.push_all([
        MockResponse::text("Hello there."),
        fetch("c1"),
        MockResponse::text("Fetched."),
        fetch("c2"),
        MockResponse::text("Not fetched."),
        MockResponse::text("stalling").stall_after(3),
    ]);
    let out = run_node(
        "codex_acp.mjs",
        &keel_env(&env, &[("HOME", &env.home.path().display().to_string())]),
    )
    .await;
    assert_opening_and_closing(&out, true);
    assert_eq!(out["allowed"]["asked"], 1, "{out:#}");
    assert!(ends_with(&out["allowed"], "Fetched."), "{out:#}");
    assert_eq!(out["rejected"]["asked"], 2, "{out:#}");
    assert!(ends_with(&out["rejected"], "Not fetched."), "{out:#}");
    // The declined call never ran: the model heard the decline.
    let heard = env
        .mock
        .requests()
        .iter()
        .filter_map(|r| r.body["messages"].as_array().cloned())
        .flatten()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "c2")
        .map(|m| m["content"].to_string())
        .unwrap_or_default();
    assert!(heard.to_lowercase().contains("declined"), "{heard}");
}

#[tokio::test]
async fn pi_acp_drives_keel_rpc_unchanged() {
    if !npm_client("pi-acp") {
        return;
    }
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("Hello there."),
        MockResponse::tool_calls(vec![tool_call("c1", "bash", json!({"command": "echo hi"}))]),
        MockResponse::text("Ran it."),
        MockResponse::text("stalling").stall_after(3),
    ]);
    let out = run_node(
        "pi_acp.mjs",
        &keel_env(&env, &[("HOME", &env.home.path().display().to_string())]),
    )
    .await;
    // pi-acp lists sessions by reading the sessions folder itself; with
    // the sessions in a database there is nothing there (docs/deploy.md).
    assert_opening_and_closing(&out, env.db.is_none());
    assert_eq!(out["tool"]["calls"], 1, "{out:#}");
    assert!(ends_with(&out["tool"], "Ran it."), "{out:#}");
}
