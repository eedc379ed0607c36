//! `keel exec`: answers, tool runs, errors, JSON output.

use keel_protocol::{Message, StopReason};
use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use super::Env;

#[tokio::test]
async fn text_answer_streams_to_stdout_and_is_saved() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("Hello from the mock!"));
    let out = env.exec().arg("Say hello").run().await.unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    assert_eq!(out.stdout, "Hello from the mock!\n");

    let req = env.mock.last_request().unwrap();
    let messages = req.body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    let system = messages[0]["content"].as_str().unwrap();
    assert!(system.contains(&env.ws().display().to_string()));
    assert!(system.contains("Current date:"));
    assert_eq!(messages[1]["content"], "Say hello");
    let tools: Vec<_> = req.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        tools,
        ["read", "bash", "edit", "write", "grep", "find", "ls"]
    );

    let session = env.only_session().await;
    let msgs = session.messages();
    assert_eq!(msgs.len(), 2);
    let Message::Assistant(a) = &msgs[1] else {
        panic!("not assistant")
    };
    assert_eq!(a.text(), "Hello from the mock!");
    assert!(!session.recovered_tail);
}

#[tokio::test]
async fn multi_step_tool_run_edits_a_file_and_runs_a_command() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("greeting.txt"), "hello world\n").unwrap();
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "read",
            json!({"path": "greeting.txt"}),
        )]),
        MockResponse::tool_calls(vec![tool_call(
            "c2",
            "edit",
            json!({"path": "greeting.txt", "edits": [{"oldText": "world", "newText": "keel"}]}),
        )]),
        MockResponse::tool_calls(vec![tool_call(
            "c3",
            "bash",
            json!({"command": "cat greeting.txt && echo ran-ok"}),
        )]),
        MockResponse::text("All done."),
    ]);
    let out = env
        .exec()
        .arg("Change world to keel and show the file")
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(env.ws().join("greeting.txt")).unwrap(),
        "hello keel\n"
    );
    assert_eq!(out.stdout, "All done.\n");
    assert!(out.stderr.contains("→ read greeting.txt"), "{}", out.stderr);
    assert!(out.stderr.contains("→ edit greeting.txt"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("→ bash cat greeting.txt && echo ran-ok"),
        "{}",
        out.stderr
    );

    let reqs = env.mock.requests();
    assert_eq!(reqs.len(), 4);
    // The read result reached the second call, numbered.
    let read_result = reqs[1].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(read_result["role"], "tool");
    assert_eq!(read_result["tool_call_id"], "c1");
    assert!(
        read_result["content"]
            .as_str()
            .unwrap()
            .contains("hello world")
    );
    // The edit's diff reached the third call.
    let edit_result = reqs[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        edit_result["content"]
            .as_str()
            .unwrap()
            .contains("+hello keel")
    );
    // The command's output reached the last call.
    let bash_result = reqs[3].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        bash_result["content"].as_str().unwrap(),
        "hello keel\nran-ok"
    );

    let session = env.only_session().await;
    let roles: Vec<_> = session.messages().iter().map(|m| m.role()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant",
            "toolResult",
            "assistant"
        ]
    );
}

#[tokio::test]
async fn failing_command_is_reported_to_the_model_not_fatal() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call("c1", "bash", json!({"command": "exit 3"}))]),
        MockResponse::text("It failed."),
    ]);
    let out = env.exec().arg("run it").run().await.unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    assert!(out.stderr.contains("✗ bash"), "{}", out.stderr);
    let last = env.mock.last_request().unwrap();
    let result = last.body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("Command exited with code 3")
    );
}

#[tokio::test]
async fn provider_error_exits_1_with_a_one_line_reason() {
    let env = Env::new().await;
    env.mock.push(MockResponse::error(
        401,
        json!({"error": {"message": "Incorrect API key provided", "type": "invalid_request_error"}}),
    ));
    let out = env
        .exec()
        .args(["--api-key-env", "TEST_KEY"])
        .env("TEST_KEY", "sk-test-secret-value-1234")
        .arg("hi")
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(1));
    assert_eq!(out.stdout, "");
    // Besides the warning that `mock-model` is not in the catalogue.
    let lines: Vec<_> = out
        .stderr
        .lines()
        .filter(|l| !l.starts_with("keel: warning: unknown model"))
        .collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {}", out.stderr);
    assert!(lines[0].starts_with("keel: HTTP 401"), "{}", lines[0]);
    assert!(lines[0].contains("Incorrect API key provided"));
    assert!(
        !out.stderr.contains("sk-test-secret"),
        "the key must never be printed"
    );
    // The key was sent, and the failure was saved.
    assert_eq!(
        env.mock.last_request().unwrap().header("authorization"),
        Some("Bearer sk-test-secret-value-1234")
    );
    let session = env.only_session().await;
    let Message::Assistant(a) = session.messages().pop().unwrap() else {
        panic!()
    };
    assert_eq!(a.stop_reason, StopReason::Error);
    assert_eq!(a.error_kind.as_deref(), Some("unauthorized"));
    let raw = env.session_text(&session.path).await;
    assert!(
        !raw.contains("sk-test-secret"),
        "the key must never be stored"
    );
}

#[tokio::test]
async fn stream_cut_mid_event_fails_cleanly() {
    let env = Env::new().await;
    // Without retries (they have their own tests in `providers`).
    std::fs::write(
        env.home.path().join("config.toml"),
        "[retry]\nenabled = false\n",
    )
    .unwrap();
    env.mock
        .push(MockResponse::text("This answer will be cut short").cut_after(3));
    let out = env.exec().arg("hi").run().await.unwrap();
    assert_eq!(out.code(), Some(1));
    assert!(out.stderr.starts_with("keel: "), "{}", out.stderr);
    let session = env.only_session().await;
    let Message::Assistant(a) = session.messages().pop().unwrap() else {
        panic!()
    };
    assert_eq!(a.stop_reason, StopReason::Error);
}

#[tokio::test]
async fn missing_api_key_is_a_clear_usage_error() {
    let env = Env::new().await;
    let out = env
        .keel()
        .args(["exec", "--provider", "openai", "--model", "gpt-4.1", "hi"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2));
    assert_eq!(
        out.stderr.trim(),
        "keel: provider \"openai\" needs an API key: set OPENAI_API_KEY"
    );
    assert_eq!(env.mock.request_count(), 0);
}

#[tokio::test]
async fn attach_without_a_cluster_says_what_it_needs() {
    let env = Env::new().await;
    let attach = async |args: &[&str]| env.exec().args(args.iter().copied()).run().await.unwrap();
    let out = attach(&["--attach"]).await;
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr.contains("--session ID or --continue"),
        "{}",
        out.stderr
    );
    let out = attach(&["--attach", "--continue"]).await;
    assert_ne!(out.code(), Some(0));
    assert!(
        out.stderr.contains("--attach follows a turn"),
        "{}",
        out.stderr
    );
    // With a prompt it is a usage error.
    let out = attach(&["--attach", "--continue", "hi"]).await;
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert_eq!(env.mock.request_count(), 0);
}

#[tokio::test]
async fn json_mode_prints_every_event_as_a_line() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call("c1", "ls", json!({}))]),
        MockResponse::text("Listed."),
    ]);
    let out = env
        .exec()
        .args(["--json", "list files"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    let events = out.json_lines().unwrap();
    let types: Vec<_> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types.first(), Some(&"agent_start"));
    assert_eq!(types.last(), Some(&"agent_end"));
    assert_eq!(types.iter().filter(|t| **t == "agent_end").count(), 1);
    for t in [
        "tool_execution_start",
        "tool_execution_end",
        "turn_end",
        "message_update",
    ] {
        assert!(types.contains(&t), "missing {t}");
    }
    // Deltas carry only the delta, not the whole message.
    let delta = events
        .iter()
        .find(|e| e["assistantMessageEvent"]["type"] == "text_delta")
        .unwrap();
    assert!(delta.get("message").is_none());
    // Nothing but the warning that `mock-model` is not in the catalogue.
    assert!(
        out.stderr
            .lines()
            .all(|l| l.starts_with("keel: warning: unknown model mock-model")),
        "nothing but warnings on stderr: {}",
        out.stderr
    );
}

/// `--json-format codex` (or `KEEL_EXEC_JSON_FORMAT=codex`): `--json`
/// writes `codex exec --json`'s lines, for hosts that spawn `exec --json`
/// as they would Codex; `keel` keeps keel's own.
#[tokio::test]
async fn json_in_codex_shape_when_asked() {
    let env = Env::new().await;
    let codex_run = |out: &keel_test_support::KeelOutput| {
        assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
        let lines = out.json_lines().unwrap();
        let types: Vec<&str> = lines
            .iter()
            .filter(|l| l["type"] != "item.updated")
            .map(|l| l["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            types,
            [
                "thread.started",
                "turn.started",
                "item.started",
                "item.completed",
                "item.completed",
                "turn.completed"
            ],
            "{lines:#?}"
        );
        let command = lines
            .iter()
            .find(|l| l["type"] == "item.completed")
            .unwrap();
        assert_eq!(command["item"]["type"], "command_execution");
        assert_eq!(command["item"]["exit_code"], 0);
        assert!(lines.last().unwrap()["usage"]["output_tokens"].is_u64());
    };
    for how in ["flag", "env"] {
        env.mock.push_all([
            MockResponse::tool_calls(vec![tool_call("c1", "bash", json!({"command": "true"}))]),
            MockResponse::text("Ran."),
        ]);
        let cmd = env.exec().args(["--json", "run true"]);
        let cmd = if how == "flag" {
            cmd.args(["--json-format", "codex"])
        } else {
            cmd.env("KEEL_EXEC_JSON_FORMAT", "codex")
        };
        codex_run(&cmd.run().await.unwrap());
    }
    // `keel` is keel's own events, and the shape alone writes no JSON.
    env.mock.push(MockResponse::text("Mine."));
    let out = env
        .exec()
        .args(["--json", "--json-format=keel", "say mine"])
        .run()
        .await
        .unwrap();
    let lines = out.json_lines().unwrap();
    assert_eq!(lines[0]["type"], "agent_start", "{lines:#?}");
    env.mock.push(MockResponse::text("Plain."));
    let out = env
        .exec()
        .args(["--json-format=codex", "say plain"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.stdout, "Plain.\n", "{}", out.stderr);
}

#[tokio::test]
async fn prompt_from_stdin_and_empty_prompt() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("ok"));
    let out = env
        .exec()
        .arg("-")
        .stdin("from stdin\n")
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    let req = env.mock.last_request().unwrap();
    assert_eq!(req.body["messages"][1]["content"], "from stdin\n");

    let out = env.exec().arg("-").stdin("  \n").run().await.unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(
        out.stderr.starts_with("keel: no prompt given"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn agents_md_becomes_project_instructions() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("AGENTS.md"), "Always answer in French.\n").unwrap();
    env.mock.push(MockResponse::text("Bonjour"));
    let out = env.exec().arg("hi").run().await.unwrap();
    assert_eq!(out.code(), Some(0));
    let req = env.mock.last_request().unwrap();
    let system = req.body["messages"][0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(system.contains("# Project instructions\n\nAlways answer in French."));
}
