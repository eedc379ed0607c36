//! pi's own `RpcClient`, as published on npm, against `keel --mode rpc`:
//! it spawns keel with its own arguments (flat events come from
//! `KEEL_RPC_FLAT_EVENTS`), prompts and waits, runs a tool, lists fork
//! points, forks and clones into new session files, and calls every other
//! method it has that needs no model answer; nothing may hang.

use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use super::{keel_env, node_launcher, npm_client, run_node};
use crate::suite::Env;

#[tokio::test]
async fn pi_rpc_client_drives_keel_unchanged() {
    if !npm_client("@mariozechner/pi-coding-agent") {
        return;
    }
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("Hello there."),
        MockResponse::tool_calls(vec![tool_call("c1", "bash", json!({"command": "echo hi"}))]),
        MockResponse::text("Ran it."),
        MockResponse::text("slowly and surely").delay_each(std::time::Duration::from_millis(60)),
        MockResponse::text("Steered."),
        MockResponse::text("slowly again").delay_each(std::time::Duration::from_millis(60)),
        MockResponse::text("Followed up."),
        MockResponse::text("stalling").stall_after(3),
        MockResponse::text("## Summary\nThe user said hello."),
    ]);
    let out = run_node(
        "pi_rpc_client.mjs",
        &keel_env(
            &env,
            &[
                ("KEEL_NODE_LAUNCHER", &node_launcher().display().to_string()),
                ("KEEL_RPC_FLAT_EVENTS", "1"),
            ],
        ),
    )
    .await;
    assert!(out.get("error").is_none(), "{out:#}");
    assert_eq!(out["startState"]["hasSessionId"], true, "{out:#}");
    let first: Vec<&str> = out["firstTurn"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(first.first(), Some(&"agent_start"), "{out:#}");
    assert!(first.contains(&"agent_end"), "{out:#}");
    assert_eq!(
        out["toolResult"],
        json!([{"name": "bash", "isError": false}])
    );
    assert_eq!(out["lastAssistantText"], "Ran it.");
    assert_eq!(out["forkMessages"], json!(["hello", "run it"]));
    assert_eq!(out["fork"], json!({"text": "run it", "cancelled": false}));
    assert_eq!(out["forkNewFile"], true);
    assert_eq!(out["forkMessagesAfter"], json!(["hello", "Hello there."]));
    assert_eq!(out["clone"], json!({"cancelled": false}));
    assert_eq!(out["cloneNewFile"], true);
    assert_eq!(out["cloneMessages"], out["forkMessagesAfter"]);
    assert_eq!(out["steered"], 1, "{out:#}");
    assert_eq!(out["followedUp"], 1, "{out:#}");
    assert_eq!(out["abortedStop"], "aborted", "{out:#}");
    assert_eq!(out["setModel"], "mock-model", "{out:#}");
    assert_eq!(out["bash"], "from-bash", "{out:#}");
    assert_eq!(out["exported"], true, "{out:#}");
    assert!(
        out["compactSummary"].as_str().unwrap().contains("Summary"),
        "{out:#}"
    );
    assert_eq!(out["commands"], json!([]));
    assert_eq!(out["models"][0], "mock-model");
    // hello, slow, the steer, slow again, the follow-up, stall.
    assert_eq!(out["stats"], 6);
    assert_eq!(out["newSession"], json!({"cancelled": false}));
    assert_eq!(out["afterNewSession"], 0);
    assert_eq!(out["switched"], json!({"cancelled": false}));
    assert!(out["afterSwitch"].as_u64().unwrap() > 2, "{out:#}");
    assert_eq!(out["resumedFile"], true, "{out:#}");
    assert_eq!(out["resumedMessages"], out["afterSwitch"], "{out:#}");
    // Three session files: the first, the fork, the clone (and the new one).
    assert_eq!(env.session_files().await.len(), 4);
    assert_eq!(env.mock.request_count(), 9);
}

/// The same script against pi itself (the CLI that ships in the package),
/// on the same scripted answers: what both report must agree, so a
/// difference between keel and pi shows up here as a difference.
#[tokio::test]
async fn pi_rpc_client_sees_the_same_from_pi_and_keel() {
    if !npm_client("@mariozechner/pi-coding-agent") {
        return;
    }
    let script = || {
        [
            MockResponse::text("Hello there."),
            MockResponse::tool_calls(vec![tool_call("c1", "bash", json!({"command": "echo hi"}))]),
            MockResponse::text("Ran it."),
            MockResponse::text("slowly and surely")
                .delay_each(std::time::Duration::from_millis(60)),
            MockResponse::text("Steered."),
            MockResponse::text("slowly again").delay_each(std::time::Duration::from_millis(60)),
            MockResponse::text("Followed up."),
            MockResponse::text("stalling").stall_after(3),
            MockResponse::text("## Summary\nThe user said hello."),
        ]
    };
    let keel_side = Env::new().await;
    keel_side.mock.push_all(script());
    let keel = run_node(
        "pi_rpc_client.mjs",
        &keel_env(
            &keel_side,
            &[
                ("KEEL_NODE_LAUNCHER", &node_launcher().display().to_string()),
                ("KEEL_RPC_FLAT_EVENTS", "1"),
            ],
        ),
    )
    .await;
    let pi_env = Env::new().await;
    pi_env.mock.push_all(script());
    let agent = pi_env.home.path().join(".pi/agent");
    std::fs::create_dir_all(&agent).unwrap();
    let models = json!({"providers": {"mock": {
        "baseUrl": pi_env.mock.base_url(), "api": "openai-completions", "apiKey": "mock-key",
        "compat": {"supportsDeveloperRole": false, "supportsReasoningEffort": false},
        "models": [{"id": "mock-model", "name": "Mock Model", "reasoning": false,
                    "input": ["text"], "contextWindow": 128000, "maxTokens": 4096}]}}});
    std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
    let pi_cli =
        super::clients_dir().join("node_modules/@mariozechner/pi-coding-agent/dist/cli.js");
    let pi = run_node(
        "pi_rpc_client.mjs",
        &[
            ("PI_CLI", pi_cli.display().to_string()),
            ("PI_PROVIDER", "mock".to_owned()),
            ("PI_MODEL", "mock-model".to_owned()),
            ("PI_OFFLINE", "1".to_owned()),
            ("HOME", pi_env.home.path().display().to_string()),
            ("KEEL_TEST_WS", pi_env.ws().display().to_string()),
        ],
    )
    .await;
    assert!(pi.get("error").is_none(), "pi itself failed: {pi:#}");
    for field in [
        "toolResult",
        "lastAssistantText",
        "forkMessages",
        "fork",
        "forkNewFile",
        "forkMessagesAfter",
        "clone",
        "cloneNewFile",
        "cloneMessages",
        "steered",
        "followedUp",
        "abortedStop",
        "setModel",
        "cycleModel",
        "cycleThinkingLevel",
        "bash",
        "exported",
        "commands",
        "stats",
        "newSession",
        "afterNewSession",
        "switched",
        "resumedFile",
    ] {
        assert_eq!(keel[field], pi[field], "{field}: keel {keel:#} pi {pi:#}");
    }
    // The one known difference: a manual compaction of a history that
    // fits the kept budget. pi keeps every message after its summary;
    // keel summarises all but the last turn (docs/rpc.md, `compact`).
    assert!(
        keel["afterSwitch"].as_u64().unwrap() < pi["afterSwitch"].as_u64().unwrap(),
        "keel {keel:#} pi {pi:#}"
    );
}
