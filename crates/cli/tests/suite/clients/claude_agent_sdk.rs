//! Anthropic's Claude Agent SDK (`@anthropic-ai/claude-agent-sdk`), as
//! published on npm, with `keel` as its `pathToClaudeCodeExecutable` and
//! the SDK's own model settings (`ANTHROPIC_BASE_URL` at the mock, which
//! speaks the Messages API): one query, partial messages, `canUseTool`
//! allow with an updated input, deny, deny with interrupt, a PreToolUse
//! hook, streaming input, `interrupt()`, the control methods, structured
//! output and resume in a new process.

use keel_test_support::{anthropic, tool_call};
use serde_json::{Value, json};

use super::{npm_client, run_node};
use crate::suite::Env;

/// The script's environment: the SDK's own names for the model server.
pub(crate) fn sdk_env(env: &Env) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        ("KEEL_BIN", env!("CARGO_BIN_EXE_keel").to_owned()),
        ("KEEL_TEST_WS", env.ws().display().to_string()),
        ("KEEL_HOME", env.home.path().display().to_string()),
        ("HOME", env.home.path().display().to_string()),
        ("ANTHROPIC_BASE_URL", env.mock.url()),
        ("ANTHROPIC_API_KEY", "sk-ant-test-claude-sdk".to_owned()),
    ];
    // The database the test's other keel processes use, when it has one.
    if let Some(db) = &env.db {
        vars.push(("KEEL_DATABASE_URL", db.url.clone()));
    }
    vars
}

fn write(id: &str, path: &str, content: &str) -> keel_test_support::MockResponse {
    anthropic::tool_calls(vec![tool_call(
        id,
        "write",
        json!({"path": path, "content": content}),
    )])
}

fn bash(id: &str, command: &str) -> keel_test_support::MockResponse {
    anthropic::tool_calls(vec![tool_call(id, "bash", json!({"command": command}))])
}

#[tokio::test]
async fn claude_agent_sdk_drives_keel_unchanged() {
    if !npm_client("@anthropic-ai/claude-agent-sdk") {
        return;
    }
    let env = Env::new().await;
    std::fs::write(env.ws().join("keep.txt"), "kept\n").unwrap();
    env.mock.push_all([
        anthropic::text("Hello there."),
        anthropic::text("Streamed."),
        write("c1", "a.txt", "one\n"),
        anthropic::text("Wrote it."),
        write("c2", "b.txt", "b\n"),
        anthropic::text("Understood."),
        write("c3", "c.txt", "c\n"),
        bash("c4", "rm -f keep.txt"),
        anthropic::text("Skipped."),
        anthropic::text("First."),
        anthropic::text("Second."),
        bash("c5", "sleep 30"),
        write("c6", "d.txt", "d\n"),
        anthropic::text("Done."),
        anthropic::text("{\"ok\":true}"),
        anthropic::text("Again."),
        write("e1", "e1.txt", "1\n"),
        anthropic::text("One."),
        write("e2", "e2.txt", "2\n"),
        anthropic::text("Two."),
        anthropic::tool_calls(vec![tool_call(
            "c7",
            "mcp__calc__add",
            json!({"a": 2, "b": 3}),
        )]),
        anthropic::text("Five."),
    ]);
    let out = run_node("claude_agent_sdk.mjs", &sdk_env(&env)).await;
    assert_eq!(out["errors"], json!({}), "a step threw: {}", out["errors"]);

    // One query: init, the answer, the result with usage and the session.
    let q = &out["query"];
    assert_eq!(
        q["kinds"],
        json!(["system/init", "assistant", "result/success"]),
        "{out}"
    );
    assert_eq!(q["texts"], json!(["Hello there."]));
    let result = &q["result"];
    assert_eq!(result["result"], "Hello there.");
    assert_eq!(result["usage"]["input_tokens"], 10, "{result}");
    assert_eq!(result["usage"]["output_tokens"], 5);
    assert_eq!(result["num_turns"], 1);
    let session_id = result["session_id"].as_str().unwrap();
    assert_eq!(q["init"]["session_id"], session_id);
    assert_eq!(q["init"]["model"], "claude-sonnet-4-5");
    assert!(
        q["init"]["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("Bash")),
        "{}",
        q["init"]
    );
    // The SDK's model, key and server reached the model.
    let first = &env.mock.requests()[0];
    assert_eq!(first.path, "/v1/messages");
    assert_eq!(first.body["model"], "claude-sonnet-4-5");
    assert_eq!(first.headers["x-api-key"], "sk-ant-test-claude-sdk");
    // An ordinary keel session.
    let listed = env
        .keel()
        .args(["sessions", "list", "--json"])
        .run()
        .await
        .unwrap();
    assert!(listed.stdout.contains(session_id), "{}", listed.stdout);

    // Partial messages: Anthropic's stream events, in order.
    let mut partial: Vec<Value> = out["partial"].as_array().unwrap().clone();
    partial.dedup();
    assert_eq!(
        json!(partial),
        json!([
            "message_start",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]),
        "{out}"
    );

    // canUseTool: asked with Claude Code's names; the updated input ran.
    let allow = &out["allowUpdated"];
    assert_eq!(allow["asked"][0]["toolName"], "Write", "{allow}");
    assert_eq!(allow["asked"][0]["input"]["file_path"], "a.txt");
    assert_eq!(allow["asked"][0]["signal"], true);
    assert_eq!(allow["file"], "two\n");
    assert_eq!(allow["results"][0]["is_error"], false, "{allow}");
    assert_eq!(allow["result"]["result"], "Wrote it.");

    // Deny: the model reads the message; nothing was written.
    let deny = &out["deny"];
    assert_eq!(deny["exists"], false);
    assert_eq!(deny["results"][0]["is_error"], true);
    let denied = deny["results"][0]["content"].as_str().unwrap();
    assert!(denied.contains("not that file"), "{deny}");
    assert_eq!(
        deny["result"]["permission_denials"][0]["tool_name"], "Write",
        "{deny}"
    );

    // Deny with interrupt: the turn ends there.
    let stop = &out["denyInterrupt"];
    assert_eq!(stop["exists"], false);
    assert_eq!(stop["result"]["type"], "result", "{stop}");

    // The hook saw the command and kept the file.
    let hook = &out["hook"];
    assert_eq!(
        hook["inputs"],
        json!([{"event": "PreToolUse", "tool": "Bash", "command": "rm -f keep.txt"}])
    );
    assert_eq!(hook["kept"], true);
    let text = hook["results"][0]["content"].as_str().unwrap();
    assert!(text.contains("no deleting here"), "{hook}");

    // Streaming input: one result per message.
    assert_eq!(
        out["streaming"],
        json!([
            {"subtype": "success", "result": "First."},
            {"subtype": "success", "result": "Second."}
        ])
    );

    // interrupt(): the command stops and the run ends with an error result.
    let int = &out["interrupt"];
    assert_eq!(int["result"]["subtype"], "error_during_execution", "{int}");

    // The control methods.
    let c = &out["controls"];
    assert_eq!(c["mode"], json!({"mode": "acceptEdits"}), "{c}");
    assert!(c["bad"].as_str().unwrap().contains("nonsense"), "{c}");
    assert!(c["models"].as_array().is_some_and(|m| !m.is_empty()));
    assert_eq!(c["mcp"], json!([]));
    // acceptEdits: a write in the workspace runs unasked.
    assert_eq!(c["asked"], json!([]), "{c}");
    assert_eq!(c["file"], true);
    let models: Vec<Value> = env
        .mock
        .requests()
        .iter()
        .map(|r| r.body["model"].clone())
        .collect();
    assert!(models.contains(&json!("claude-opus-4-1")), "{models:?}");

    // Structured output.
    assert_eq!(
        out["structured"],
        json!({"subtype": "success", "structured": {"ok": true}})
    );

    // Resume in a new process: the same session, with its history.
    let resumed = &out["resumed"];
    assert_eq!(resumed["session_id"], session_id);
    assert_eq!(resumed["result"], "Again.");
    let requests = env.mock.requests();
    let resumed_request = requests
        .iter()
        .map(|r| r.body.to_string())
        .find(|b| b.contains("and again"))
        .expect("no request asked `and again`");
    assert!(resumed_request.contains("say hi"), "{resumed_request}");

    // updatedPermissions: the rule the first answer added lets the second
    // write run unasked.
    let always = &out["alwaysAllow"];
    assert_eq!(always["asked"].as_array().unwrap().len(), 1, "{always}");
    assert_eq!(always["asked"][0]["toolName"], "Write");
    assert_eq!(always["written"], json!([true, true]));
    assert_eq!(always["results"], json!(["One.", "Two."]));

    // An MCP server in the SDK's process: its tool, through the gate.
    let sdk = &out["sdkMcp"];
    assert_eq!(sdk["calls"], json!([[2, 3]]), "{sdk}");
    assert_eq!(sdk["asked"], json!(["mcp__calc__add"]));
    assert_eq!(sdk["results"][0]["content"], "5");
    assert_eq!(
        sdk["servers"],
        json!([{"name": "calc", "status": "connected"}])
    );
    assert!(
        sdk["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__calc__add"))
    );
    assert_eq!(sdk["result"], "Five.");
    assert_eq!(env.mock.pending_responses(), 0);
}

/// The Claude Code binary the SDK installs for this platform, when it is
/// there (an optional dependency of the SDK's package).
fn claude_code_binary() -> Option<std::path::PathBuf> {
    let dir = super::clients_dir().join("node_modules/@anthropic-ai");
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join("claude"))
        .find(|p| p.is_file())
}

/// The text-only steps, run by the SDK against keel or against Claude Code.
async fn text_steps(real: bool) -> Value {
    let env = Env::new().await;
    for (prompt, answer) in [
        ("say hi", "Hello there."),
        ("stream it", "Streamed."),
        ("first", "First."),
        ("second", "Second."),
        ("and again", "Again."),
    ] {
        env.mock
            .answer_when_last_says(prompt, anthropic::text(answer));
    }
    let mut vars = sdk_env(&env);
    vars.push(("CLAUDE_SDK_STEPS", "query,partial,streaming,resumed".into()));
    if real {
        vars.extend([
            ("CLAUDE_SDK_REAL", "1".to_owned()),
            // Nothing but the mock: no updates, telemetry or other hosts.
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".to_owned()),
            ("DISABLE_TELEMETRY", "1".to_owned()),
            ("DISABLE_AUTOUPDATER", "1".to_owned()),
            ("HTTPS_PROXY", "http://127.0.0.1:9".to_owned()),
            ("HTTP_PROXY", "http://127.0.0.1:9".to_owned()),
            ("NO_PROXY", "127.0.0.1".to_owned()),
        ]);
    }
    let out = run_node("claude_agent_sdk.mjs", &vars).await;
    assert_eq!(out["errors"], json!({}), "real={real}: {out}");
    out
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Every field keel writes in `ours` is one Claude Code writes in
/// `theirs`, with a value of the same kind (`null` where it may be
/// either); objects are compared the same way, one level down.
fn same_fields(what: &str, ours: &Value, theirs: &Value, depth: usize) {
    let (Some(ours), Some(theirs)) = (ours.as_object(), theirs.as_object()) else {
        panic!("{what}: not objects: {ours} / {theirs}");
    };
    for (key, value) in ours {
        let Some(other) = theirs.get(key) else {
            panic!("{what}.{key}: keel writes it, Claude Code does not: {theirs:#?}");
        };
        if !value.is_null() && !other.is_null() {
            assert_eq!(kind(value), kind(other), "{what}.{key}: {value} / {other}");
        }
        if depth > 0 && value.is_object() && other.is_object() {
            same_fields(&format!("{what}.{key}"), value, other, depth - 1);
        }
    }
}

#[tokio::test]
async fn keel_answers_in_the_shape_claude_code_itself_writes() {
    if !npm_client("@anthropic-ai/claude-agent-sdk") {
        return;
    }
    if claude_code_binary().is_none() {
        assert!(
            !keel_test_support::in_ci(),
            "the SDK's Claude Code binary is not installed: CI must compare against it"
        );
        return;
    }
    let ours = text_steps(false).await;
    let theirs = text_steps(true).await;
    // The same messages, in the same order, with the same text.
    for step in ["kinds", "texts"] {
        assert_eq!(ours["query"][step], theirs["query"][step], "{step}");
    }
    assert_eq!(ours["streaming"], theirs["streaming"]);
    let events = |out: &Value| {
        let mut e: Vec<Value> = out["partial"].as_array().unwrap().clone();
        e.dedup();
        e
    };
    assert_eq!(events(&ours), events(&theirs));
    // Field by field: every field keel writes, Claude Code writes too.
    let (q, r) = (&ours["query"], &theirs["query"]);
    same_fields("system/init", &q["init"], &r["init"], 0);
    same_fields("assistant", &q["assistant"], &r["assistant"], 2);
    same_fields("result", &q["result"], &r["result"], 2);
    // Resuming keeps the session, in both.
    for out in [&ours, &theirs] {
        assert_eq!(
            out["resumed"]["session_id"],
            out["query"]["result"]["session_id"]
        );
        assert_eq!(out["resumed"]["result"], "Again.");
    }
}

#[tokio::test]
async fn claude_python_sdk_drives_keel_unchanged() {
    let Some(python) = super::pip_client("claude_agent_sdk") else {
        return;
    };
    if !npm_client("@modelcontextprotocol/server-everything") {
        return;
    }
    let env = Env::new().await;
    std::fs::write(env.ws().join("keep.txt"), "kept\n").unwrap();
    env.mock.push_all([
        anthropic::text("Hello there."),
        write("c1", "a.txt", "one\n"),
        anthropic::text("Wrote it."),
        write("c2", "b.txt", "b\n"),
        anthropic::text("Understood."),
        bash("c3", "rm -f keep.txt"),
        anthropic::text("Skipped."),
        bash("c4", "sleep 30"),
        anthropic::text("{\"ok\":true}"),
        anthropic::text("Again."),
        write("c5", "c.txt", "c\n"),
        anthropic::text("Wrote c."),
        write("c6", "c.txt", "changed\n"),
        anthropic::text("Changed c."),
    ]);
    let mut vars = sdk_env(&env);
    let everything = super::clients_dir().join("node_modules/.bin/mcp-server-everything");
    vars.push(("MCP_EVERYTHING", everything.display().to_string()));
    let out = super::run_python(&python, "claude_python_sdk.py", &vars).await;
    assert_eq!(out["errors"], json!({}), "a step threw: {}", out["errors"]);
    let q = &out["query"];
    assert_eq!(
        q["kinds"],
        json!(["SystemMessage", "AssistantMessage", "ResultMessage"])
    );
    assert_eq!(q["result"]["result"], "Hello there.");
    let session_id = q["result"]["session_id"].as_str().unwrap();
    assert_eq!(q["init"]["session_id"], session_id);

    // can_use_tool: allow with an updated input, then deny.
    let c = &out["canUseTool"];
    assert_eq!(c["asked"][0]["tool"], "Write", "{c}");
    assert_eq!(c["file"], "two\n");
    assert_eq!(c["b_exists"], false);
    assert!(
        c["results"][1].as_str().unwrap().contains("not that one"),
        "{c}"
    );
    assert_eq!(c["second"]["result"], "Understood.");

    let hook = &out["hook"];
    assert_eq!(
        hook["inputs"],
        json!([{"tool": "Bash", "command": "rm -f keep.txt"}])
    );
    assert_eq!(hook["kept"], true);
    assert_eq!(hook["result"]["result"], "Skipped.");

    assert_eq!(
        out["interrupt"]["subtype"], "error_during_execution",
        "{out}"
    );
    assert_eq!(out["structured"]["structured"], json!({"ok": true}));
    assert_eq!(out["resumed"]["session_id"], session_id);
    assert_eq!(out["resumed"]["result"], "Again.");

    // The client's other methods: the server toggled and reconnected, a
    // rewind to the second message, the context, the model, no tasks.
    let c = &out["controls"];
    assert_eq!(c["models"], json!(["claude-sonnet-4-5"]), "{c}");
    assert_eq!(
        c["status"],
        json!([
            ["everything:connected"],
            ["everything:disabled"],
            ["everything:connected"]
        ]),
        "{c}"
    );
    assert_eq!(c["before"], "changed\n", "{c}");
    assert_eq!(c["after"], "c\n", "{c}");
    assert!(c["tokens"].as_u64().unwrap() > 0, "{c}");
    assert!(c["stop"].as_str().unwrap().contains("t1"), "{c}");
    assert_eq!(env.mock.pending_responses(), 0);
}
