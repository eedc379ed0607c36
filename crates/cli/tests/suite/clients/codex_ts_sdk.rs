//! OpenAI's TypeScript SDK for `codex exec` (`@openai/codex-sdk`), as
//! published on npm, with `keel` as its `codexPathOverride`: `run`,
//! `runStreamed`, a command and a file change as items, structured output,
//! an image, `resumeThread` in a new process, an abort, a failed turn, and
//! the sandbox, approval and effort options of a thread, all on the SDK's own `baseUrl` and `apiKey` (the Responses API).

use keel_test_support::{MockResponse, responses, tool_call};
use serde_json::{Value, json};

use super::{keel_env, npm_client, run_node};
use crate::suite::Env;

#[tokio::test]
async fn codex_ts_sdk_drives_keel_exec_unchanged() {
    if !npm_client("@openai/codex-sdk") {
        return;
    }
    let env = Env::new().await;
    env.mock.push_all([
        responses::text("Hello there."),
        responses::tool_calls(vec![tool_call("c1", "bash", json!({"command": "echo hi"}))]),
        responses::text("Ran it."),
        responses::tool_calls(vec![tool_call(
            "c2",
            "write",
            json!({"path": "made.txt", "content": "made\n"}),
        )]),
        responses::text("Wrote it."),
        responses::text("{\"ok\":true}"),
        responses::text("A dot."),
        responses::text("Again."),
        responses::tool_calls(vec![tool_call(
            "c3",
            "bash",
            json!({"command": "sleep 30"}),
        )]),
        responses::text("Still here."),
        MockResponse::error(
            400,
            responses::error_body("the request is bad", "invalid_request_error", None),
        ),
    ]);
    let home = env.home.path().display().to_string();
    let out = run_node("codex_ts_sdk.mjs", &keel_env(&env, &[("HOME", &home)])).await;
    assert_eq!(out["errors"], json!({}), "a step threw: {}", out["errors"]);

    // run(): the answer, its one item and the tokens; the thread id is
    // the session's.
    let run = &out["run"];
    assert_eq!(run["finalResponse"], "Hello there.", "{out}");
    assert_eq!(run["items"][0]["type"], "agent_message");
    assert_eq!(run["usage"]["input_tokens"], 10);
    assert_eq!(run["usage"]["output_tokens"], 5);
    assert_eq!(run["usage"]["cache_write_input_tokens"], 0);
    let thread_id = run["id"].as_str().unwrap();
    // An ordinary keel session: listed, with every turn's messages.
    let listed = env
        .keel()
        .args(["sessions", "list", "--json"])
        .run()
        .await
        .unwrap();
    assert_eq!(listed.code(), Some(0), "{}", listed.stderr);
    assert!(listed.stdout.contains(thread_id), "{}", listed.stdout);

    // runStreamed(): Codex's event order, and the command as an item.
    // A command's output so far comes as `item.updated` (Codex sends none
    // for commands; the SDK passes them on).
    let all = out["streamed"].as_array().unwrap();
    let updates: Vec<&Value> = all.iter().filter(|e| e["type"] == "item.updated").collect();
    assert!(
        updates
            .iter()
            .all(|u| u["item"]["status"] == "in_progress"
                && u["item"]["type"] == "command_execution"),
        "{updates:#?}"
    );
    let streamed: Vec<&Value> = all.iter().filter(|e| e["type"] != "item.updated").collect();
    let types: Vec<&str> = streamed.iter().filter_map(|e| e["type"].as_str()).collect();
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
        "{streamed:#?}"
    );
    assert_eq!(streamed[0]["thread_id"], thread_id);
    let command = &streamed[3]["item"];
    assert_eq!(command["type"], "command_execution", "{command}");
    assert_eq!(command["command"], "echo hi");
    assert_eq!(command["aggregated_output"].as_str().unwrap().trim(), "hi");
    assert_eq!(command["exit_code"], 0);
    assert_eq!(command["status"], "completed");
    assert_eq!(streamed[2]["item"]["id"], command["id"]);
    assert_eq!(streamed[2]["item"]["status"], "in_progress");
    assert_eq!(streamed[4]["item"]["text"], "Ran it.");

    // A write is a file change, announced once made.
    let changed = out["fileChange"].as_array().unwrap();
    assert_eq!(changed[0]["type"], "file_change", "{changed:#?}");
    assert_eq!(changed[0]["status"], "completed");
    assert_eq!(changed[0]["changes"][0]["kind"], "add");
    assert!(
        changed[0]["changes"][0]["path"]
            .as_str()
            .unwrap()
            .ends_with("made.txt")
    );
    assert_eq!(
        std::fs::read_to_string(env.ws().join("made.txt")).unwrap(),
        "made\n"
    );

    // Structured output: the schema went to the model as the text format.
    assert_eq!(out["structured"], json!({"ok": true}));
    let requests = env.mock.requests();
    // The first request that held `needle`: that turn's own.
    let asked = |needle: &str| -> Value {
        requests
            .iter()
            .find(|r| r.body["input"].to_string().contains(needle))
            .map(|r| r.body.clone())
            .unwrap_or_else(|| panic!("no request held {needle}"))
    };
    let structured = asked("answer in JSON");
    assert_eq!(structured["text"]["format"]["type"], "json_schema");
    assert_eq!(
        structured["text"]["format"]["schema"]["required"],
        json!(["ok"])
    );
    // Only that turn had a schema.
    assert!(asked("say hi").get("text").is_none());

    // The image reached the model.
    assert_eq!(out["image"], "A dot.");
    assert!(
        asked("what is in the image")["input"]
            .to_string()
            .contains("data:image/png;base64,"),
    );

    // Resumed in a new process: the same thread, its history sent again.
    assert_eq!(out["resumed"]["id"], thread_id);
    assert_eq!(out["resumed"]["finalResponse"], "Again.");
    assert!(asked("and again")["input"].to_string().contains("say hi"));

    // The SDK's abort kills the process mid-turn; the session goes on.
    assert_eq!(out["aborted"]["error"], "AbortError", "{out}");
    assert_eq!(out["afterAbort"], "Still here.");

    // A turn that fails: turn.failed, which the SDK throws.
    assert!(
        out["failed"]
            .as_str()
            .unwrap()
            .contains("the request is bad"),
        "{out}"
    );

    // Every call carried the SDK's key.
    assert!(requests.iter().all(|r| {
        r.path == "/v1/responses" && r.header("authorization") == Some("Bearer sk-test-codex-sdk")
    }));
}

/// The same script with the Codex binary the SDK ships (offline, on the
/// mock): the lines keel writes have Codex's shape, field by field.
/// The thread options a host confines a run with: `sandboxMode:
/// "read-only"` stops a write in the kernel, `approvalPolicy: "never"`
/// asks nobody, `modelReasoningEffort` reaches the model.
#[tokio::test]
async fn the_sdks_sandbox_approval_and_effort_options_are_keels() {
    if !npm_client("@openai/codex-sdk") || !crate::suite::sandbox::kernel_can_confine() {
        return;
    }
    let env = Env::new().await;
    env.mock.push_all([
        responses::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "touch blocked.txt"}),
        )]),
        responses::text("Blocked."),
    ]);
    let home = env.home.path().display().to_string();
    let vars = [("HOME", home.as_str()), ("CODEX_SDK_STEPS", "options")];
    let out = run_node("codex_ts_sdk.mjs", &keel_env(&env, &vars)).await;
    assert_eq!(out["errors"], json!({}), "a step threw: {}", out["errors"]);
    let options = &out["options"];
    assert_eq!(options["finalResponse"], "Blocked.", "{options}");
    let command = options["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["type"] == "command_execution")
        .unwrap_or_else(|| panic!("no command item: {options}"));
    assert_eq!(command["status"], "failed", "{command}");
    // A read-only mount or Landlock: the kernel said no.
    let output = command["aggregated_output"]
        .as_str()
        .unwrap()
        .to_lowercase();
    assert!(
        output.contains("read-only") || output.contains("permission denied"),
        "{command}"
    );
    assert!(!env.ws().join("blocked.txt").exists());
    let first = &env.mock.requests()[0].body;
    assert_eq!(first["reasoning"]["effort"], "high", "{first}");
}

#[tokio::test]
async fn keel_exec_json_has_the_shape_codex_itself_writes() {
    if !npm_client("@openai/codex-sdk") {
        return;
    }
    let mut both = Vec::new();
    for real in ["0", "1"] {
        let env = Env::new().await;
        env.mock.push_all([
            responses::text("Hello there."),
            // Each runs commands with its own tool.
            if real == "1" {
                responses::tool_calls(vec![tool_call(
                    "c1",
                    "exec_command",
                    json!({"cmd": "echo hi"}),
                )])
            } else {
                responses::tool_calls(vec![tool_call("c1", "bash", json!({"command": "echo hi"}))])
            },
            responses::text("Ran it."),
        ]);
        let home = env.home.path().display().to_string();
        let out = run_node(
            "codex_ts_sdk.mjs",
            &keel_env(
                &env,
                &[
                    ("HOME", &home),
                    ("CODEX_HOME", &home),
                    ("CODEX_SDK_REAL", real),
                    ("CODEX_SDK_STEPS", "run,streamed"),
                    // Nothing but the mock: whatever else Codex would
                    // reach goes to a closed port.
                    ("HTTPS_PROXY", "http://127.0.0.1:9"),
                    ("HTTP_PROXY", "http://127.0.0.1:9"),
                    ("NO_PROXY", "127.0.0.1,localhost"),
                ],
            ),
        )
        .await;
        both.push((out, env.mock.requests()));
    }
    let (keel, codex) = (&both[0].0, &both[1].0);
    assert_eq!(keel["errors"], json!({}), "{keel}");
    assert_eq!(codex["errors"], json!({}), "{codex}");
    // run(): the same answer, items and tokens.
    assert_eq!(
        shapes(&keel["run"]["items"]),
        shapes(&codex["run"]["items"])
    );
    assert_eq!(keel["run"]["finalResponse"], codex["run"]["finalResponse"]);
    assert_eq!(keel["run"]["usage"], codex["run"]["usage"]);
    // runStreamed(): the same lines, with the same fields, in order.
    let (ours, theirs) = (shapes(&keel["streamed"]), shapes(&codex["streamed"]));
    assert_eq!(ours, theirs, "keel: {keel}\ncodex: {codex}");
    // Field by field where the values can agree: a command's output,
    // exit code and status, the answer, the tokens. (`command` differs:
    // Codex shows its `/bin/bash -lc '…'`, keel the command as asked.)
    let (ours, theirs) = (lines(keel), lines(codex));
    for (a, b) in ours.iter().zip(&theirs) {
        for field in ["aggregated_output", "exit_code", "status", "text", "type"] {
            assert_eq!(a["item"][field], b["item"][field], "{field}: {a} / {b}");
        }
        // The same token fields; Codex 0.163 counts the whole thread's
        // tokens in each `turn.completed`, keel the turn's, as the SDK's
        // `Usage` type says (docs/clients.md).
        assert_eq!(shapes(&json!([a["usage"]])), shapes(&json!([b["usage"]])));
    }
    let last = |out: &Value| lines(out).last().cloned().unwrap_or_default();
    assert_eq!(last(keel)["usage"]["input_tokens"], 20);
    assert_eq!(last(codex)["usage"]["input_tokens"], 30);
}

/// The lines of `runStreamed` without Codex's warnings about the mock
/// (`error` lines and items: no model metadata, no WebSocket there).
fn lines(out: &Value) -> Vec<Value> {
    out["streamed"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| {
            l["type"] != "error" && l["item"]["type"] != "error" && l["type"] != "item.updated"
        })
        .cloned()
        .collect()
}

/// Each line's (or item's) type and the names of its fields and its item's.
fn shapes(list: &Value) -> Vec<(String, Vec<String>, Vec<String>)> {
    let keys = |v: &Value| -> Vec<String> {
        v.as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    };
    let wrapped = json!({"streamed": list});
    lines(&wrapped)
        .iter()
        .map(|l| {
            let kind = l["type"].as_str().unwrap_or_default().to_owned();
            (kind, keys(l), keys(&l["item"]))
        })
        .collect()
}
