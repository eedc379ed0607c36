//! OpenAI's Python SDK for the app-server (`openai-codex`), as published on
//! PyPI, against `keel app-server` as its `codex_bin`: text turns, a held
//! command accepted by the SDK's handler and declined by a client's own,
//! version-gated options, interrupt, steer, compaction, fork, list, and the
//! thread read back in a new process with every turn.

use std::time::Duration;

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::{pip_client, run_python};
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
    let out = run_python(
        &python,
        "codex_python_sdk.py",
        &[
            ("KEEL_BIN", env!("CARGO_BIN_EXE_keel").to_owned()),
            ("KEEL_TEST_WS", env.ws().display().to_string()),
            ("KEEL_HOME", env.home.path().display().to_string()),
            ("KEEL_BASE_URL", env.mock.base_url()),
            ("KEEL_MODEL", "mock-model".to_owned()),
        ],
    )
    .await;
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
