//! The Claude Agent SDK's `Query` methods beyond a turn, on keel
//! (`claude_agent_sdk_controls.mjs`): file checkpoints and `rewindFiles()`
//! with replayed user messages, `getContextUsage()`, `readFile()` kept to
//! the workspace, an `--mcp-config` server toggled, reconnected and read
//! from, and the methods keel answers with nothing to list.

use keel_test_support::{anthropic, tool_call};
use serde_json::{Value, json};

use super::claude_agent_sdk::sdk_env;
use super::{clients_dir, npm_client, run_node};
use crate::suite::Env;

fn write(id: &str, path: &str, content: &str) -> keel_test_support::MockResponse {
    anthropic::tool_calls(vec![tool_call(
        id,
        "write",
        json!({"path": path, "content": content}),
    )])
}

#[tokio::test]
async fn the_sdks_other_query_methods_work_on_keel() {
    if !npm_client("@anthropic-ai/claude-agent-sdk")
        || !npm_client("@modelcontextprotocol/server-everything")
    {
        return;
    }
    let env = Env::new().await;
    env.mock.push_all([
        write("w1", "a.txt", "one\n"),
        anthropic::text("Wrote."),
        write("w2", "a.txt", "two\nlines\n"),
        write("w3", "b.txt", "new\n"),
        anthropic::text("Changed."),
    ]);
    let server = clients_dir().join("node_modules/.bin/mcp-server-everything");
    let mut vars = sdk_env(&env);
    vars.push(("MCP_EVERYTHING", server.display().to_string()));
    let out = run_node("claude_agent_sdk_controls.mjs", &vars).await;
    assert_eq!(out["errors"], json!({}), "a step threw: {}", out["errors"]);
    assert_eq!(out["results"], json!(["Wrote.", "Changed."]), "{out}");
    assert_eq!(
        out["states"],
        json!([{"a": "one\n", "b": null}, {"a": "two\nlines\n", "b": "new\n"}])
    );

    // Each user message came back with its uuid.
    let replayed = out["replayed"].as_array().unwrap();
    assert_eq!(replayed.len(), 2, "{out}");
    assert_eq!(replayed[1]["content"], "change them");
    assert!(replayed[1]["uuid"].as_str().is_some_and(|u| !u.is_empty()));

    // A dry run says what a rewind changes and changes nothing; the
    // rewind puts both files back as the second message found them.
    let dry = &out["rewindDry"];
    assert_eq!(dry["canRewind"], true, "{dry}");
    assert_eq!(dry["filesChanged"].as_array().unwrap().len(), 2, "{dry}");
    assert_eq!(out["afterDry"], json!({"a": "two\nlines\n", "b": "new\n"}));
    assert_eq!(out["rewind"]["canRewind"], true);
    assert_eq!(out["rewind"]["insertions"], 1, "{}", out["rewind"]);
    assert_eq!(out["rewind"]["deletions"], 3, "{}", out["rewind"]);
    assert_eq!(out["afterRewind"], json!({"a": "one\n", "b": null}));
    assert_eq!(out["rewindUnknown"]["canRewind"], false);
    assert!(out["rewindUnknown"]["error"].is_string());

    // The context: what the mock reported, in the model's window.
    let context = &out["context"];
    assert!(context["totalTokens"].as_u64().unwrap() > 0, "{context}");
    assert!(context["maxTokens"].as_u64().unwrap() > 0, "{context}");
    assert_eq!(context["model"], "claude-sonnet-4-5");
    assert!(
        context["mcpTools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["serverName"] == "everything"),
        "{context}"
    );

    // readFile: the workspace's files only (the SDK gives null for a refusal).
    assert_eq!(out["readFile"]["contents"], "one\n");
    assert_eq!(out["readOutside"], Value::Null);

    // The MCP server: off (its resource refused), on, reconnected, read.
    let mcp = &out["mcp"];
    assert_eq!(mcp["first"], json!(["everything:connected"]), "{mcp}");
    assert_eq!(mcp["off"], json!(["everything:disabled"]), "{mcp}");
    assert!(
        mcp["offRead"].as_str().unwrap().contains("disabled"),
        "{mcp}"
    );
    assert_eq!(mcp["on"], json!(["everything:connected"]), "{mcp}");
    assert_eq!(mcp["again"], json!(["everything:connected"]), "{mcp}");
    assert!(mcp["resource"]["text"].is_string(), "{mcp}");
    assert!(
        mcp["unknown"].as_str().unwrap().contains("nowhere"),
        "{mcp}"
    );

    // What keel has nothing of is answered empty; a task it never ran is
    // an error.
    let others = &out["others"];
    assert_eq!(others["skills"], json!({"skills": []}), "{others}");
    assert_eq!(others["agents"], json!([]));
    assert_eq!(others["plugins"]["plugins"], json!([]));
    assert!(others["stop"].as_str().unwrap().contains("t1"), "{others}");
    // A repeated initialize answers afresh; the servers it names are the
    // ones taken at launch.
    assert_eq!(
        others["reinitialized"],
        json!({"models": ["claude-sonnet-4-5"], "mcpApplied": true}),
        "{others}"
    );
}
