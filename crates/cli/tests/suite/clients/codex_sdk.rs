//! OpenAI's Python SDK for the app-server (`openai-codex`), as published on
//! PyPI, against `keel app-server` as its `codex_bin`: text turns, a held
//! command accepted by the SDK's handler and declined by a client's own,
//! version-gated options, interrupt, steer, compaction, fork, list, and the
//! thread read back in a new process with every turn.

use std::time::Duration;

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::{keel_env, pip_client, run_python};
use crate::suite::Env;

fn fetch(id: &str) -> MockResponse {
    MockResponse::tool_calls(vec![tool_call(
        id,
        "bash",
        json!({"command": "curl -s http://127.0.0.1:9/nothing"}),
    )])
}

#[tokio::test]
async fn codex_python_sdk_drives_keel_unchanged() {
    let Some(python) = pip_client("openai_codex") else {
        return;
    };
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("Hello there."),
        fetch("c1"),
        MockResponse::text("Fetched."),
        MockResponse::text("Again."),
        MockResponse::text("stalling").stall_after(3),
        MockResponse::text("slowly and surely").delay_each(Duration::from_millis(50)),
        MockResponse::text("Steered."),
        MockResponse::text("## Summary\nThe user said hello."),
        fetch("c2"),
        MockResponse::text("Not fetched."),
    ]);
    let out = run_python(&python, "codex_python_sdk.py", &keel_env(&env, &[])).await;
    assert_eq!(out["errors"], json!({}), "{out:#}");
    assert!(
        out["userAgent"].as_str().unwrap().contains("keel/"),
        "{out:#}"
    );
    assert_eq!(out["text"], "Hello there.");
    assert_eq!(out["accepted"], "Fetched.");
    assert_eq!(out["gated"], "Again.");
    assert_eq!(out["interrupted"], "interrupted");
    assert_eq!(out["steer"]["steered"], true, "{out:#}");
    assert_eq!(out["steer"]["status"], "completed", "{out:#}");
    assert_eq!(out["forked"], true);
    assert_eq!(out["listed"], true);
    let read: &Value = &out["readBack"];
    assert!(
        read["items"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t.as_array().unwrap().contains(&json!("contextCompaction"))),
        "{out:#}"
    );
    assert_eq!(out["declinedRun"]["status"], "completed", "{out:#}");
    assert_eq!(
        out["declinedRun"]["commands"],
        json!(["declined"]),
        "{out:#}"
    );
    assert_eq!(
        out["declinedMethods"],
        json!(["item/commandExecution/requestApproval"])
    );
}

/// The turns of `scenario` in the dialect a runtime speaks: keel's mock
/// provider uses Chat Completions, Codex's the Responses API.
fn toolless(responses: bool) -> Vec<MockResponse> {
    let text = |t: &str| {
        if responses {
            keel_test_support::responses::text(t)
        } else {
            MockResponse::text(t)
        }
    };
    vec![
        text("Hello there."),
        text("Again."),
        // Stalled after the first text delta (the Responses API sends three
        // events before it).
        text("stalling").stall_after(if responses { 4 } else { 3 }),
        text("slowly and surely").delay_each(Duration::from_millis(50)),
        text("Steered."),
        text("## Summary\nThe user said hello."),
    ]
}

/// The same script (its steps without tool calls: the mock's tool names
/// are keel's) against the Codex CLI that ships with the SDK: what both
/// report must agree.
#[tokio::test]
async fn codex_python_sdk_sees_the_same_from_codex_and_keel() {
    let Some(python) = pip_client("openai_codex") else {
        return;
    };
    let keel_side = Env::new().await;
    keel_side.mock.push_all(toolless(false));
    let keel = run_python(
        &python,
        "codex_python_sdk.py",
        &keel_env(&keel_side, &[("CODEX_TOOLLESS", "1")]),
    )
    .await;
    let codex_env = Env::new().await;
    codex_env.mock.push_all(toolless(true));
    let config = format!(
        "model = \"mock-model\"\nmodel_provider = \"mock\"\n\n[model_providers.mock]\n\
         name = \"mock\"\nbase_url = \"{}\"\nwire_api = \"responses\"\n\
         request_max_retries = 0\nstream_max_retries = 0\n",
        codex_env.mock.base_url()
    );
    std::fs::write(codex_env.home.path().join("config.toml"), config).unwrap();
    let codex = run_python(
        &python,
        "codex_python_sdk.py",
        &[
            ("CODEX_TOOLLESS", "1".to_owned()),
            ("CODEX_HOME", codex_env.home.path().display().to_string()),
            ("HOME", codex_env.home.path().display().to_string()),
            ("KEEL_TEST_WS", codex_env.ws().display().to_string()),
        ],
    )
    .await;
    assert_eq!(codex["errors"], json!({}), "Codex itself failed: {codex:#}");
    assert_eq!(keel["errors"], json!({}), "{keel:#}");
    for field in [
        "text",
        "gated",
        "interrupted",
        "steer",
        "compact",
        "forked",
        "listed",
        "resumedWithoutTurns",
    ] {
        assert_eq!(
            keel[field], codex[field],
            "{field}: keel {keel:#} codex {codex:#}"
        );
    }
    // Every turn read back, the compaction a turn of its own at the end, as
    // Codex shows it. Two known differences in the turns' items
    // (docs/app-server.md, "Compared with Codex"): keel keeps the partial
    // answer of an interrupted turn, and a steer sent after the model's
    // first answer starts a turn of its own in keel's history.
    let items = |out: &Value| out["readBack"]["items"].as_array().unwrap().clone();
    let (k, c) = (items(&keel), items(&codex));
    assert_eq!(k.first(), c.first(), "keel {keel:#} codex {codex:#}");
    assert_eq!(k.last(), c.last(), "keel {keel:#} codex {codex:#}");
    assert_eq!(c.last(), Some(&json!(["contextCompaction"])));
    assert_eq!(k.len(), c.len() + 1, "keel {keel:#} codex {codex:#}");
}

/// `codex-app-server-sdk` (PyPI; it declares Python 3.12, and runs here on
/// the machine's 3.11): a text turn, a held command its client declines on
/// its own, compaction, list, fork, and every turn read back after a
/// resume in a new process.
#[tokio::test]
async fn codex_app_server_sdk_drives_keel_unchanged() {
    let Some(python) = pip_client("codex_app_server_sdk") else {
        return;
    };
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("Hello there."),
        fetch("c1"),
        MockResponse::text("Not fetched."),
        MockResponse::text("stalling").stall_after(3),
        MockResponse::text("## Summary\nThe user said hello."),
    ]);
    let out = run_python(&python, "codex_async_sdk.py", &keel_env(&env, &[])).await;
    assert_eq!(out["errors"], json!({}), "{out:#}");
    assert!(
        out["userAgent"].as_str().unwrap().contains("/0.169.0 "),
        "{out:#}"
    );
    assert_eq!(out["text"], "Hello there.");
    assert_eq!(out["declined"], "Not fetched.");
    assert_eq!(out["interrupted"], true, "{out:#}");
    assert_eq!(out["compact"], true);
    assert_eq!(out["listed"], true);
    assert_eq!(out["forked"], true);
    assert_eq!(
        out["resumed"],
        json!([
            ["userMessage", "agentMessage"],
            ["userMessage", "commandExecution", "agentMessage"],
            ["userMessage", "agentMessage"],
            ["contextCompaction"]
        ]),
        "{out:#}"
    );
}
