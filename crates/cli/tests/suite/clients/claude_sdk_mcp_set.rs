//! The Claude Agent SDK's runtime MCP and settings methods on keel
//! (`claude_agent_sdk_mcp_set.mjs`): `setMcpServers()` adds a stdio
//! server, an SDK server and one that cannot start, and an empty call
//! removes them (the model stops seeing their tools);
//! `setMcpPermissionModeOverride()` makes one server's calls ask under
//! `bypassPermissions`; `updateSettings()` keeps an effort and refuses
//! what keel cannot write.

use keel_test_support::{anthropic, tool_call};
use serde_json::{Value, json};

use super::claude_agent_sdk::sdk_env;
use super::{clients_dir, npm_client, run_node};
use crate::suite::Env;

fn mcp_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .filter(|n| n.starts_with("mcp__"))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn servers_set_at_runtime_come_and_go_and_a_server_can_be_made_to_ask() {
    if !npm_client("@anthropic-ai/claude-agent-sdk")
        || !npm_client("@modelcontextprotocol/server-everything")
    {
        return;
    }
    let env = Env::new().await;
    env.mock.push_all([
        anthropic::tool_calls(vec![
            tool_call("e1", "mcp__everything__echo", json!({"message": "hi"})),
            tool_call("c1", "mcp__calc__add", json!({"a": 2, "b": 3})),
        ]),
        anthropic::text("Turn one."),
        anthropic::tool_calls(vec![tool_call(
            "c2",
            "mcp__calc__add",
            json!({"a": 1, "b": 1}),
        )]),
        anthropic::text("Turn two."),
        anthropic::text("Turn three."),
    ]);
    let server = clients_dir().join("node_modules/.bin/mcp-server-everything");
    let mut vars = sdk_env(&env);
    vars.push(("MCP_EVERYTHING", server.display().to_string()));
    let out = run_node("claude_agent_sdk_mcp_set.mjs", &vars).await;
    assert_eq!(out["errors"], json!({}), "a step threw: {}", out["errors"]);
    assert_eq!(
        out["results"],
        json!(["Turn one.", "Turn two.", "Turn three."]),
        "{out}"
    );

    // Added: all three, the one that cannot start with why; the same set
    // again changes nothing.
    let setup = &out["setup"];
    let mut added: Vec<&str> = setup["added"]["added"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    added.sort_unstable();
    assert_eq!(added, ["broken", "calc", "everything"], "{setup}");
    let errors = setup["added"]["errors"].as_object().unwrap();
    assert_eq!(errors.keys().collect::<Vec<_>>(), ["broken"], "{setup}");
    assert_eq!(
        setup["unchanged"],
        json!({"added": [], "removed": [], "errors": {}}),
        "{setup}"
    );
    assert_eq!(
        setup["status"],
        json!(["broken:failed", "calc:connected", "everything:connected"]),
        "{setup}"
    );

    // Turn one, under bypassPermissions: both servers' tools ran unasked.
    assert_eq!(out["asked"][0], json!([]), "{out}");
    assert_eq!(out["calcCalls"], json!([[2, 3], [1, 1]]), "{out}");
    let requests = env.mock.requests();
    let offered = mcp_tools(&requests[0].body);
    assert!(
        offered.contains(&"mcp__everything__echo".to_owned())
            && offered.contains(&"mcp__calc__add".to_owned()),
        "{offered:?}"
    );
    let echoed = requests[1].body.to_string();
    assert!(echoed.contains("Echo: hi"), "{echoed}");

    // The override: calc's calls ask even under bypassPermissions.
    let overrides = &out["override"];
    assert_eq!(overrides["calc"], json!({}), "{overrides}");
    assert!(
        overrides["unknown"]["warning"]
            .as_str()
            .is_some_and(|w| w.contains("nowhere")),
        "{overrides}"
    );
    assert!(
        overrides["auto"]["warning"]
            .as_str()
            .is_some_and(|w| w.contains("classifier")),
        "{overrides}"
    );
    assert_eq!(out["asked"][1], json!(["mcp__calc__add"]), "{out}");

    // Removed: every server the method named; the model sees none of
    // their tools.
    let removed = &out["removed"];
    let mut gone: Vec<&str> = removed["set"]["removed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    gone.sort_unstable();
    assert_eq!(gone, ["broken", "calc", "everything"], "{removed}");
    assert_eq!(removed["status"], json!([]), "{removed}");
    let last = requests.last().unwrap();
    assert_eq!(mcp_tools(&last.body), Vec::<String>::new());

    // Settings: the effort is kept for the model; what keel cannot write
    // is refused, and says why.
    let settings = &out["settings"];
    assert_eq!(settings["effort"], Value::Null, "{settings}");
    assert_eq!(settings["style"], Value::Null, "{settings}");
    assert!(
        settings["badStyle"].as_str().unwrap().contains("fancy"),
        "{settings}"
    );
    assert!(
        settings["badKey"].as_str().unwrap().contains("theme"),
        "{settings}"
    );
    assert!(
        settings["badEffort"].as_str().unwrap().contains("loud"),
        "{settings}"
    );
    let saved = std::fs::read_to_string(env.home.path().join("claude/settings.json")).unwrap();
    let saved: Value = serde_json::from_str(&saved).unwrap();
    assert_eq!(
        saved["modelSettings"]["claude-sonnet-4-5"]["effortLevel"],
        "high"
    );
}
