//! [`McpServers`] against real stdio servers: a few lines of Python that
//! speak MCP's JSON-RPC and offer one tool, named on their command line.

use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::json;

use super::*;

/// Answers `initialize`, `tools/list` (one tool, named by argv[1]) and
/// `tools/call` (echoes the tool's name); other requests are unknown.
const SERVER: &str = r#"
import json, sys
tool = sys.argv[1]
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "t", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": tool, "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "ran " + msg["params"]["name"]}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"],
                          "error": {"code": -32601, "message": "unknown"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

fn server(dir: &tempfile::TempDir, tool: &str) -> McpServerConfig {
    let script = dir.path().join("server.py");
    if !script.exists() {
        std::fs::write(&script, SERVER).unwrap();
    }
    McpServerConfig {
        command: Some("python3".to_owned()),
        args: vec![script.display().to_string(), tool.to_owned()],
        enabled: true,
        ..McpServerConfig::default()
    }
}

/// The environment the servers start from: enough to find `python3`.
fn path() -> Vec<(String, String)> {
    vec![("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())]
}

fn tools(servers: &McpServers) -> Vec<(String, String)> {
    servers
        .tool_list()
        .into_iter()
        .map(|(server, tool, _)| (server, tool.name))
        .collect()
}

#[tokio::test]
async fn servers_are_added_replaced_and_removed_while_the_set_runs() {
    let dir = tempfile::tempdir().unwrap();
    let configs = BTreeMap::from([("a".to_owned(), server(&dir, "alpha"))]);
    let servers = McpServers::start(&configs, path()).await;
    let heard = Arc::new(AtomicUsize::new(0));
    {
        let heard = heard.clone();
        servers.on_tools_changed(
            Box::new(|| true),
            Box::new(move || {
                heard.fetch_add(1, Ordering::SeqCst);
            }),
        );
    }
    assert_eq!(tools(&servers), [("a".to_owned(), "alpha".to_owned())]);

    servers.put("b", server(&dir, "beta")).await.unwrap();
    assert_eq!(servers.names(), ["a", "b"]);
    assert_eq!(tools(&servers).len(), 2);
    let out = servers
        .call("b", "beta", json!({}), Default::default())
        .await
        .unwrap();
    assert_eq!(out.content[0]["text"], "ran beta");
    assert_eq!(heard.load(Ordering::SeqCst), 1, "an added server is told");

    // Replacing keeps the place and serves the new configuration.
    servers.put("a", server(&dir, "gamma")).await.unwrap();
    assert_eq!(servers.names(), ["a", "b"]);
    assert_eq!(servers.config("a"), Some(server(&dir, "gamma")));
    assert!(tools(&servers).contains(&("a".to_owned(), "gamma".to_owned())));
    assert!(!tools(&servers).iter().any(|(_, t)| t == "alpha"));

    assert!(servers.remove("a").await);
    assert!(!servers.remove("a").await, "a server is removed once");
    assert_eq!(servers.names(), ["b"]);
    assert_eq!(tools(&servers), [("b".to_owned(), "beta".to_owned())]);
    let gone = servers
        .call("a", "gamma", json!({}), Default::default())
        .await
        .unwrap_err();
    assert!(gone.to_string().contains("no MCP server named a"), "{gone}");
    assert_eq!(heard.load(Ordering::SeqCst), 3);
    servers.stop().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_is_added_failed_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let servers = McpServers::start(&BTreeMap::new(), path()).await;
    let broken = McpServerConfig {
        command: Some(dir.path().join("no-such-program").display().to_string()),
        enabled: true,
        ..McpServerConfig::default()
    };
    let err = servers.put("broken", broken).await.unwrap_err();
    assert!(!err.to_string().is_empty());
    let status = servers.status();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].state, ServerState::Failed);
    assert!(status[0].error.is_some());
    // A disabled one is listed and not started.
    let off = McpServerConfig {
        enabled: false,
        ..server(&dir, "off")
    };
    servers.put("off", off).await.unwrap();
    assert_eq!(servers.status()[1].state, ServerState::Disabled);
}
