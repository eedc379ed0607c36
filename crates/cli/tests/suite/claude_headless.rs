//! Claude Code's headless protocol spoken to the real binary frame by
//! frame, for what a published SDK never sends: frames that cannot be
//! read (each gets an error frame and nothing else changes), and an SDK
//! that goes away mid-turn (SIGTERM, or both pipes closed) leaving a
//! session another process resumes.

use std::process::Stdio;
use std::time::Duration;

use keel_test_support::{anthropic, tool_call};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::suite::Env;

const WAIT: Duration = Duration::from_secs(30);

/// `keel` as the Claude Agent SDK spawns it, on the mock's Messages API.
fn headless(env: &Env, extra: &[&str]) -> keel_test_support::KeelCommand {
    env.keel()
        .args([
            "--output-format",
            "stream-json",
            "--verbose",
            "--input-format",
            "stream-json",
            "--model",
            "claude-sonnet-4-5",
        ])
        .args(extra.iter().copied())
        .env("ANTHROPIC_BASE_URL", env.mock.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .timeout(WAIT)
}

fn user(text: &str) -> String {
    json!({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": null, "session_id": ""})
        .to_string()
}

#[tokio::test]
async fn unreadable_frames_get_an_error_each_and_the_session_goes_on() {
    let env = Env::new().await;
    env.mock.push(anthropic::text("Still here."));
    let mut keel = headless(&env, &[]).spawn().await.unwrap();
    for line in [
        "this is not json",
        r#"{"type":"control_request","request":{"subtype":"interrupt"}}"#,
        r#"{"type":"control_request","request_id":"r1","request":{}}"#,
        r#"{"type":"control_request","request_id":"r2","request":{"subtype":"frobnicate"}}"#,
        r#"{"type":"control_request","request_id":"r3","request":{"subtype":"set_permission_mode","mode":"yolo"}}"#,
        r#"{"type":"user","type":"user","message":{"content":"twice"}}"#,
        r#"{"type":"user","message":{"role":"user","content":[]}}"#,
        r#"{"type":"what"}"#,
    ] {
        keel.send_line(line).await.unwrap();
    }
    keel.send_line(&user("hello")).await.unwrap();
    keel.close_stdin();
    let out = keel.wait().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let frames = out.json_lines().unwrap();
    let errors: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "system" && f["subtype"] == "error")
        .collect();
    // Not JSON, no request_id, a duplicate key, an empty message, an
    // unknown type.
    assert_eq!(errors.len(), 5, "{frames:#?}");
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .contains("keel could not read")
    );
    let refused: Vec<(&str, &str)> = frames
        .iter()
        .filter(|f| f["type"] == "control_response")
        .map(|f| {
            (
                f["response"]["request_id"].as_str().unwrap(),
                f["response"]["subtype"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(refused, [("r1", "error"), ("r2", "error"), ("r3", "error")]);
    let r2 = frames
        .iter()
        .find(|f| f["response"]["request_id"] == "r2")
        .unwrap();
    assert!(
        r2["response"]["error"]
            .as_str()
            .unwrap()
            .contains("frobnicate"),
        "{r2}"
    );
    let result = frames.iter().find(|f| f["type"] == "result").unwrap();
    assert_eq!(result["subtype"], "success");
    assert_eq!(result["result"], "Still here.");
}

#[tokio::test]
async fn an_unknown_flag_is_a_warning_and_a_bad_value_an_error() {
    let env = Env::new().await;
    env.mock.push(anthropic::text("Fine."));
    let out = headless(&env, &["--brand-new-flag", "--betas=x"])
        .stdin(format!("{}\n", user("hi")))
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(
        out.stderr.contains("unknown flag --brand-new-flag"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("--betas"), "{}", out.stderr);
    let bad = headless(&env, &["--max-turns=many"]).run().await.unwrap();
    assert_eq!(bad.code(), Some(2));
    assert!(bad.stderr.contains("--max-turns"), "{}", bad.stderr);
}

/// Starts a run whose command takes a while; returns once it runs.
async fn mid_command(env: &Env) -> (tokio::process::Child, Vec<Value>) {
    env.mock.push(anthropic::tool_calls(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "sleep 2; echo slept"}),
    )]));
    // Whether the model is asked again after the command depends on which
    // comes first, that call or the failed write that tells keel its SDK
    // is gone; either leaves a consistent session. Answered by what was
    // said last, so that the resumed run below gets its own answer either way.
    env.mock
        .answer_when_last_says("slept", anthropic::text("Slept."));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_keel"))
        .args([
            "--output-format=stream-json",
            "--input-format=stream-json",
            "--verbose",
            "--model=claude-sonnet-4-5",
        ])
        .current_dir(env.ws())
        .env("KEEL_HOME", env.home.path())
        .env("ANTHROPIC_BASE_URL", env.mock.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .envs(
            env.db
                .iter()
                .map(|db| ("KEEL_DATABASE_URL", db.url.clone())),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(format!("{}\n", user("nap")).as_bytes())
        .await
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    loop {
        let line = tokio::time::timeout(WAIT, lines.next_line())
            .await
            .expect("no tool call in time")
            .unwrap()
            .expect("stdout closed before the tool call");
        let frame: Value = serde_json::from_str(&line).unwrap();
        let calls =
            frame["type"] == "assistant" && frame["message"]["content"][0]["type"] == "tool_use";
        seen.push(frame);
        if calls {
            break;
        }
    }
    // The SDK is gone: both pipes close.
    drop(stdin);
    drop(lines);
    (child, seen)
}

#[tokio::test]
async fn an_sdk_gone_mid_turn_leaves_a_session_another_process_resumes() {
    let env = Env::new().await;
    let (mut child, seen) = mid_command(&env).await;
    let status = tokio::time::timeout(WAIT, child.wait())
        .await
        .expect("keel did not exit after its SDK went away")
        .unwrap();
    assert!(status.code().is_some(), "{status:?}");
    let session_id = seen[0]["session_id"].as_str().unwrap().to_owned();
    // The session holds the call and its result, and goes on elsewhere.
    env.mock
        .answer_when_last_says("are you there", anthropic::text("Back again."));
    let out = headless(&env, &["--resume", &session_id])
        .stdin(format!("{}\n", user("are you there")))
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let frames = out.json_lines().unwrap();
    let result = frames.iter().find(|f| f["type"] == "result").unwrap();
    assert_eq!(result["result"], "Back again.", "{frames:#?}");
    assert_eq!(result["session_id"], session_id.as_str());
    let last = env.mock.requests().last().unwrap().body.to_string();
    assert!(last.contains("nap") && last.contains("c1"), "{last}");
}

#[tokio::test]
async fn sigterm_mid_turn_ends_the_run_with_a_result_and_exits() {
    let env = Env::new().await;
    env.mock.push(anthropic::tool_calls(vec![tool_call(
        "c1",
        "bash",
        json!({"command": "sleep 30"}),
    )]));
    let mut keel = headless(&env, &[]).spawn().await.unwrap();
    keel.send_line(&user("nap long")).await.unwrap();
    keel.wait_for_stdout(WAIT, |l| l.contains("\"tool_use\""))
        .await
        .unwrap();
    keel.signal("TERM").await.unwrap();
    let out = keel.wait().await.unwrap();
    let frames = out.json_lines().unwrap();
    let result = frames
        .iter()
        .find(|f| f["type"] == "result")
        .unwrap_or_else(|| panic!("no result: {frames:#?}\n{}", out.stderr));
    assert_eq!(result["subtype"], "error_during_execution");
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}

/// The text of the tool result keel wrote for call `id`.
fn tool_result(frames: &[Value], id: &str) -> (String, bool) {
    frames
        .iter()
        .filter(|f| f["type"] == "user")
        .map(|f| &f["message"]["content"][0])
        .find(|b| b["tool_use_id"] == id)
        .map(|b| {
            (
                b["content"].as_str().unwrap_or_default().to_owned(),
                b["is_error"] == true,
            )
        })
        .unwrap_or_else(|| panic!("no result for {id}: {frames:#?}"))
}

#[tokio::test]
async fn plan_mode_disallowed_and_allowed_tools_hold_against_compound_commands() {
    let env = Env::new().await;
    std::fs::write(env.ws().join("keep.txt"), "kept\n").unwrap();
    // Plan mode: the write is refused, the read runs.
    env.mock.push_all([
        anthropic::tool_calls(vec![
            tool_call("p1", "write", json!({"path": "plan.txt", "content": "x"})),
            tool_call("p2", "read", json!({"path": "keep.txt"})),
        ]),
        anthropic::text("Planned."),
    ]);
    let out = headless(&env, &["--permission-mode=plan"])
        .stdin(format!("{}\n", user("plan it")))
        .run()
        .await
        .unwrap();
    let frames = out.json_lines().unwrap();
    let (text, is_error) = tool_result(&frames, "p1");
    assert!(is_error && text.contains("Plan mode"), "{text}");
    assert!(!env.ws().join("plan.txt").exists());
    let (text, is_error) = tool_result(&frames, "p2");
    assert!(!is_error && text.contains("kept"), "{text}");
    let init = frames.iter().find(|f| f["subtype"] == "init").unwrap();
    assert_eq!(init["permissionMode"], "plan");

    // disallowedTools: `rm` is refused inside a compound line and a
    // substitution; allowedTools: `Write` runs unasked (without a prompt
    // tool a held write would be a draft).
    env.mock.push_all([
        anthropic::tool_calls(vec![
            tool_call("d1", "bash", json!({"command": "ls && rm -f keep.txt"})),
            tool_call("d2", "bash", json!({"command": "echo $(rm -f keep.txt)"})),
            tool_call("d3", "write", json!({"path": "ok.txt", "content": "ok\n"})),
            tool_call(
                "d4",
                "edit",
                json!({"path": "keep.txt", "oldText": "kept", "newText": "gone"}),
            ),
        ]),
        anthropic::text("Tried."),
    ]);
    let out = headless(
        &env,
        &["--disallowedTools=Bash(rm:*)", "--allowedTools=Write"],
    )
    .stdin(format!("{}\n", user("tidy")))
    .run()
    .await
    .unwrap();
    let frames = out.json_lines().unwrap();
    for id in ["d1", "d2"] {
        let (text, is_error) = tool_result(&frames, id);
        assert!(
            is_error && text.contains("does not allow Bash"),
            "{id}: {text}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(env.ws().join("keep.txt")).unwrap(),
        "kept\n"
    );
    assert!(!tool_result(&frames, "d3").1);
    assert_eq!(
        std::fs::read_to_string(env.ws().join("ok.txt")).unwrap(),
        "ok\n"
    );
    // The edit is not allowed in advance: a draft, not run.
    let (text, _) = tool_result(&frames, "d4");
    assert!(text.contains("draft"), "{text}");
    let result = frames.iter().find(|f| f["type"] == "result").unwrap();
    let denied: Vec<&str> = result["permission_denials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["tool_use_id"].as_str().unwrap())
        .collect();
    // The draft did not run either: it is a denial too.
    assert_eq!(denied, ["d1", "d2", "d4"], "{result}");
}

#[tokio::test]
async fn an_mcp_config_server_is_started_and_reported() {
    let Some(server) = crate::suite::clients::npm_client("@modelcontextprotocol/server-everything")
        .then(|| {
            crate::suite::clients::clients_dir().join("node_modules/.bin/mcp-server-everything")
        })
    else {
        return;
    };
    let env = Env::new().await;
    let config =
        json!({"mcpServers": {"everything": {"type": "stdio", "command": server, "args": []}}});
    let mut keel = headless(&env, &["--mcp-config", &config.to_string()])
        .spawn()
        .await
        .unwrap();
    keel.send_line(
        r#"{"type":"control_request","request_id":"i1","request":{"subtype":"initialize"}}"#,
    )
    .await
    .unwrap();
    keel.wait_for_stdout(WAIT, |l| l.contains("\"i1\""))
        .await
        .unwrap();
    let mut status = Value::Null;
    for _ in 0..50 {
        keel.send_line(
            r#"{"type":"control_request","request_id":"m1","request":{"subtype":"mcp_status"}}"#,
        )
        .await
        .unwrap();
        let line = keel
            .wait_for_stdout(WAIT, |l| l.contains("\"m1\""))
            .await
            .unwrap();
        status = serde_json::from_str(&line).unwrap();
        if status["response"]["response"]["mcpServers"][0]["status"] == "connected" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        status["response"]["response"]["mcpServers"][0]["name"], "everything",
        "{status}"
    );
    assert_eq!(
        status["response"]["response"]["mcpServers"][0]["status"], "connected",
        "{status}"
    );
    keel.close_stdin();
    let out = keel.wait().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}

/// Waits for keel's next control request of `subtype`; its request id.
async fn next_request(keel: &mut keel_test_support::KeelChild, subtype: &str) -> (String, Value) {
    let needle = format!("\"subtype\":\"{subtype}\"");
    let line = keel
        .wait_for_stdout(WAIT, |l| {
            l.contains("\"control_request\"") && l.contains(&needle)
        })
        .await
        .unwrap();
    let frame: Value = serde_json::from_str(&line).unwrap();
    (frame["request_id"].as_str().unwrap().to_owned(), frame)
}

async fn answer(keel: &mut keel_test_support::KeelChild, id: &str, reply: Result<Value, &str>) {
    let response = match reply {
        Ok(r) => json!({"subtype": "success", "request_id": id, "response": r}),
        Err(e) => json!({"subtype": "error", "request_id": id, "error": e}),
    };
    keel.send_line(&json!({"type": "control_response", "response": response}).to_string())
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failed_hook_or_permission_answer_refuses_and_a_closed_sdk_declines_what_waits() {
    let env = Env::new().await;
    env.mock.push_all([
        anthropic::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "echo one"}),
        )]),
        anthropic::text("m1"),
        anthropic::tool_calls(vec![tool_call(
            "c2",
            "bash",
            json!({"command": "echo three"}),
        )]),
        anthropic::text("m2"),
        anthropic::tool_calls(vec![tool_call(
            "c3",
            "write",
            json!({"path": "x.txt", "content": "x"}),
        )]),
        anthropic::text("m3"),
        anthropic::tool_calls(vec![tool_call(
            "c4",
            "write",
            json!({"path": "y.txt", "content": "y"}),
        )]),
        anthropic::text("m4"),
    ]);
    let mut keel = headless(&env, &["--permission-prompt-tool=stdio"])
        .spawn()
        .await
        .unwrap();
    let hooks = json!({"PreToolUse": [{"matcher": "Bash", "hookCallbackIds": ["h1"]}]});
    keel.send_line(
        &json!({"type": "control_request", "request_id": "i1", "request": {"subtype": "initialize", "hooks": hooks}})
            .to_string(),
    )
    .await
    .unwrap();

    // A hook's updated input is what runs.
    keel.send_line(&user("one")).await.unwrap();
    let (id, hook) = next_request(&mut keel, "hook_callback").await;
    assert_eq!(hook["request"]["callback_id"], "h1");
    assert_eq!(
        hook["request"]["input"]["tool_input"]["command"],
        "echo one"
    );
    let allow = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow", "updatedInput": {"command": "echo two"}}});
    answer(&mut keel, &id, Ok(allow)).await;
    keel.wait_for_stdout(WAIT, |l| l.contains("\"result\":\"m1\""))
        .await
        .unwrap();

    // A hook that fails refuses the call.
    keel.send_line(&user("two")).await.unwrap();
    let (id, _) = next_request(&mut keel, "hook_callback").await;
    answer(&mut keel, &id, Err("the hook crashed")).await;
    keel.wait_for_stdout(WAIT, |l| l.contains("\"result\":\"m2\""))
        .await
        .unwrap();

    // A permission answer that is an error declines the call.
    keel.send_line(&user("three")).await.unwrap();
    let (id, asked) = next_request(&mut keel, "can_use_tool").await;
    assert_eq!(asked["request"]["tool_name"], "Write");
    answer(&mut keel, &id, Err("the callback threw")).await;
    keel.wait_for_stdout(WAIT, |l| l.contains("\"result\":\"m3\""))
        .await
        .unwrap();

    // The SDK closes its input while keel asks: declined, the run ends,
    // keel exits.
    keel.send_line(&user("four")).await.unwrap();
    next_request(&mut keel, "can_use_tool").await;
    keel.close_stdin();
    let out = keel.wait().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(!env.ws().join("x.txt").exists());
    assert!(!env.ws().join("y.txt").exists());
    // What the model was told of each call.
    let told = |id: &str| {
        let requests = env.mock.requests();
        requests
            .iter()
            .map(|r| r.body.to_string())
            .find(|b| b.contains(&format!("\"tool_use_id\":\"{id}\"")))
            .unwrap_or_else(|| panic!("the model never heard of {id}"))
    };
    assert!(told("c1").contains("two") && !told("c1").contains("three"));
    assert!(
        told("c2").contains("PreToolUse hook failed"),
        "{}",
        told("c2")
    );
    assert!(told("c3").contains("the callback threw"), "{}", told("c3"));
    assert!(told("c4").contains("closed its input"), "{}", told("c4"));
    assert_eq!(env.mock.pending_responses(), 0);
}

/// `--session-id` (the SDK's `sessionId`): the session has the host's id,
/// another process resumes it by that id, and an id a session has, or one
/// that is not a UUID, is refused.
#[tokio::test]
async fn a_session_id_the_host_chose_is_the_sessions() {
    let env = Env::new().await;
    env.mock
        .push_all([anthropic::text("First."), anthropic::text("Second.")]);
    let id = "0f6b7c9e-2d4a-4b8e-9c1f-3a5d7e9b1c2d";
    let first = headless(&env, &["--session-id", id])
        .stdin(format!("{}\n", user("remember this")))
        .run()
        .await
        .unwrap();
    assert_eq!(first.code(), Some(0), "{}", first.stderr);
    let frames = first.json_lines().unwrap();
    let ids: Vec<&Value> = frames
        .iter()
        .filter(|f| f["type"] == "system" || f["type"] == "result")
        .map(|f| &f["session_id"])
        .collect();
    assert_eq!(ids, [id, id], "{frames:#?}");

    let resumed = headless(&env, &["--resume", id])
        .stdin(format!("{}\n", user("and now")))
        .run()
        .await
        .unwrap();
    assert_eq!(resumed.code(), Some(0), "{}", resumed.stderr);
    let result = resumed.json_lines().unwrap().pop().unwrap();
    assert_eq!(result["session_id"], id);
    assert_eq!(result["result"], "Second.");
    let second = env.mock.requests()[1].body.to_string();
    assert!(second.contains("remember this"), "{second}");

    for (args, why) in [
        (vec!["--session-id", id], "has it already"),
        (vec!["--session-id", "nope"], "not a UUID"),
        (
            vec!["--session-id", id, "--resume", id],
            "needs --fork-session",
        ),
    ] {
        let out = headless(&env, &args)
            .stdin(format!("{}\n", user("again")))
            .run()
            .await
            .unwrap();
        let all = format!("{}{}", out.stdout, out.stderr);
        assert!(all.contains(why), "{args:?}: {all}");
        assert_ne!(out.code(), Some(0), "{args:?}: {all}");
    }
    assert_eq!(
        env.mock.requests().len(),
        2,
        "a refused run called the model"
    );
}
