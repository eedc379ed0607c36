//! MCP servers that live in the SDK's own process (`createSdkMcpServer`,
//! `create_sdk_mcp_server`): keel is their MCP client over the control
//! channel, each JSON-RPC message an `mcp_message` control request whose
//! answer carries the server's reply. Their tools are keel tools named
//! `mcp__server__tool` that pass the approval gate as any MCP tool does
//! (their annotations say their class; none: send). It knows nothing of
//! the session beyond the tools it hands over.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use keel_protocol::ToolResult;
use keel_tools::{Tool, ToolContext, ToolHints, ToolOutput};
use serde_json::{Value, json};

use super::peer::Peer;

/// The MCP version keel asks the SDK's servers for.
const PROTOCOL_VERSION: &str = "2025-06-18";

struct Client {
    peer: Arc<Peer>,
    server: String,
    next: AtomicU64,
}

impl Client {
    /// One JSON-RPC request to the server; its `result`.
    async fn call(&self, method: &str, params: Value) -> Result<Value, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let answer = self
            .peer
            .request(json!({
                "subtype": "mcp_message",
                "server_name": self.server,
                "message": {"jsonrpc": "2.0", "id": id, "method": method, "params": params},
            }))
            .await?;
        let reply = answer.get("mcp_response").unwrap_or(&answer);
        if let Some(error) = reply.get("error") {
            let message = error.get("message").and_then(Value::as_str).unwrap_or("");
            return Err(format!("{method}: {message}"));
        }
        Ok(reply.get("result").cloned().unwrap_or(Value::Null))
    }

    async fn notify(&self, method: &str) {
        let _ = self
            .peer
            .request(json!({
                "subtype": "mcp_message",
                "server_name": self.server,
                "message": {"jsonrpc": "2.0", "method": method},
            }))
            .await;
    }
}

/// One tool of a server in the SDK's process.
struct SdkTool {
    client: Arc<Client>,
    /// `mcp__server__tool`.
    name: String,
    tool: String,
    description: String,
    schema: Value,
    hints: ToolHints,
}

#[async_trait::async_trait]
impl Tool for SdkTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.schema.clone()
    }

    fn hints(&self) -> Option<ToolHints> {
        Some(self.hints.clone())
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        let called = self
            .client
            .call("tools/call", json!({"name": self.tool, "arguments": args}));
        let result = tokio::select! {
            r = called => r,
            () = ctx.cancel.cancelled() => Err("the call was interrupted".to_owned()),
        };
        Ok(match result {
            Ok(r) => {
                let text = r
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n");
                let output = ToolResult::text(text);
                if r.get("isError") == Some(&Value::Bool(true)) {
                    ToolOutput::error(output)
                } else {
                    ToolOutput::success(output)
                }
            }
            Err(e) => ToolOutput::error(ToolResult::text(format!(
                "The SDK's MCP server {} failed: {e}",
                self.client.server
            ))),
        })
    }
}

/// Connects to the SDK's server `server` and lists its tools.
pub async fn connect(peer: Arc<Peer>, server: &str) -> Result<Vec<Arc<dyn Tool>>, String> {
    let client = Arc::new(Client {
        peer,
        server: server.to_owned(),
        next: AtomicU64::new(1),
    });
    client
        .call(
            "initialize",
            json!({
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "keel", "version": env!("CARGO_PKG_VERSION")},
            }),
        )
        .await?;
    client.notify("notifications/initialized").await;
    let listed = client.call("tools/list", json!({})).await?;
    let tools = listed
        .get("tools")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    Ok(tools
        .into_iter()
        .filter_map(|t| {
            let tool = t.get("name")?.as_str()?.to_owned();
            let notes = t.get("annotations");
            let hint = |k: &str| notes.and_then(|a| a.get(k)).and_then(Value::as_bool);
            Some(Arc::new(SdkTool {
                client: client.clone(),
                name: format!("{}{server}__{tool}", keel_mcp::TOOL_PREFIX),
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned(),
                schema: t
                    .get("inputSchema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                hints: ToolHints {
                    read_only: hint("readOnlyHint"),
                    destructive: hint("destructiveHint"),
                    open_world: hint("openWorldHint"),
                    class: None,
                    server: Some(server.to_owned()),
                },
                tool,
            }) as Arc<dyn Tool>)
        })
        .collect())
}
