//! Transcript replay: the client side of Codex's recorded sessions
//! (`tests/fixtures/transcripts/codex-*.jsonl`, copied from the reference
//! recordings) is sent to keel, with the mock model scripted to behave as
//! the reference mock did, and the sequence of methods keel sends must be
//! the one Codex sent, after removing the documented differences
//! ([`normalise`]). Ids, times and payloads are not compared (payloads are
//! validated against the schema like every frame).

use std::path::PathBuf;

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::super::Env;
use super::AppServer;

/// Methods keel never sends (documented in docs/app-server.md).
const NOT_SENT: &[&str] = &["remoteControl/status/changed", "account/rateLimits/updated"];
/// Sent by both, at places that differ (documented): keel reports token
/// usage after each model response, before a tool's item.
const PLACED_DIFFERENTLY: &[&str] = &["thread/tokenUsage/updated"];
/// keel streams a command's output as it comes; Codex sent none for these
/// sub-second commands (documented).
const ONLY_KEEL: &[&str] = &["item/commandExecution/outputDelta"];

fn transcript(name: &str) -> Vec<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// What the server sent, as a list of names: a notification or server
/// request by its method, a response as `response:<method>`.
fn names(
    frames: &[Value],
    methods_by_id: &std::collections::HashMap<String, String>,
) -> Vec<String> {
    frames
        .iter()
        .map(|f| match f["method"].as_str() {
            Some(m) => m.to_owned(),
            None => format!(
                "response:{}",
                methods_by_id
                    .get(&f["id"].to_string())
                    .cloned()
                    .unwrap_or_default()
            ),
        })
        .collect()
}

/// Drops what is documented as different, collapses repeats (delta counts
/// depend on chunking) and keeps only the first `turn/diff/updated` of a
/// turn (Codex repeats it after every model response).
fn normalise(names: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut diff_sent = false;
    for n in names {
        if NOT_SENT.contains(&n.as_str())
            || PLACED_DIFFERENTLY.contains(&n.as_str())
            || ONLY_KEEL.contains(&n.as_str())
        {
            continue;
        }
        if n == "turn/diff/updated" {
            if diff_sent {
                continue;
            }
            diff_sent = true;
        }
        if n == "turn/completed" {
            diff_sent = false;
        }
        if out.last() != Some(&n) {
            out.push(n);
        }
    }
    out
}

/// Replays the client frames of `name` against keel; returns (Codex's
/// normalised sequence, keel's).
async fn replay(env: &Env, name: &str) -> (Vec<String>, Vec<String>) {
    let records = transcript(name);
    // Codex's side.
    let mut codex_methods = std::collections::HashMap::new();
    let mut codex_frames = Vec::new();
    for r in &records {
        let f = &r["frame"];
        match r["dir"].as_str() {
            Some("c2s") if f.get("method").is_some() && f.get("id").is_some() => {
                codex_methods.insert(
                    f["id"].to_string(),
                    f["method"].as_str().unwrap().to_owned(),
                );
            }
            Some("s2c") => {
                // A server request's id lives in another space than the
                // client's: only responses are looked up.
                codex_frames.push(f.clone());
            }
            _ => {}
        }
    }
    let expected = normalise(names(&codex_frames, &codex_methods));

    // keel's side: the same client frames.
    let mut s: AppServer = env.app_server(&[]).await;
    let mut keel_methods = std::collections::HashMap::new();
    let mut thread = String::new();
    let mut last_turn = String::new();
    for r in &records {
        if r["dir"] != "c2s" {
            continue;
        }
        let f = r["frame"].clone();
        match (f.get("id"), f["method"].as_str()) {
            (Some(id), Some(method)) => {
                let mut params = f["params"].clone();
                if params.get("threadId").is_some() {
                    params["threadId"] = json!(thread);
                }
                if params.get("cwd").is_some() {
                    params["cwd"] = json!(env.ws().display().to_string());
                }
                keel_methods.insert(id.to_string(), method.to_owned());
                s.request_with_id(id.clone(), method, Some(params)).await;
                let resp = s.response(id).await;
                assert!(resp.get("error").is_none(), "{method}: {resp}");
                if method == "thread/start" {
                    thread = resp["result"]["thread"]["id"].as_str().unwrap().to_owned();
                }
                if method == "turn/start" {
                    last_turn = resp["result"]["turn"]["id"].as_str().unwrap().to_owned();
                }
            }
            (None, Some(method)) => s.notify(method, f.get("params").cloned()).await,
            (Some(_), None) => {
                // The client's answer to a server request.
                let req = s.server_request().await;
                s.send(json!({"id": req["id"], "result": f["result"]}))
                    .await;
            }
            (None, None) => {}
        }
    }
    s.wait_for("turn/completed", |f| {
        f["method"] == "turn/completed" && f["params"]["turn"]["id"] == last_turn.as_str()
    })
    .await;
    let frames = s.frames.clone();
    s.close().await;
    (expected, normalise(names(&frames, &keel_methods)))
}

#[tokio::test]
async fn a_text_turn_sends_what_codex_sends() {
    let env = Env::new().await;
    env.mock
        .push(MockResponse::text("Hello! How can I help you today?"));
    let (codex, keel) = replay(&env, "codex-text.jsonl").await;
    assert_eq!(keel, codex);
}

#[tokio::test]
async fn a_command_approval_sends_what_codex_sends() {
    let env = Env::new().await;
    // Codex's mock ran `echo hi`, which asks under `untrusted` in Codex;
    // keel's engine reads `echo` as read-only, so the same scenario uses a
    // command that writes (documented difference).
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "call_1",
            "bash",
            json!({"command": "echo hi | tee hi.txt"}),
        )]),
        MockResponse::text("The command printed hi."),
    ]);
    let (codex, keel) = replay(&env, "codex-approval-command.jsonl").await;
    assert_eq!(keel, codex);
    assert!(keel.contains(&"item/commandExecution/requestApproval".to_owned()));
}

#[tokio::test]
async fn a_file_change_approval_sends_what_codex_sends() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "call_1",
            "write",
            json!({"path": "hello.txt", "content": "hello\n"}),
        )]),
        MockResponse::text("Created hello.txt."),
    ]);
    let (codex, keel) = replay(&env, "codex-approval-filechange.jsonl").await;
    assert_eq!(keel, codex);
    assert!(env.ws().join("hello.txt").exists());
}
