//! An MCP server's tool as a keel tool.
//!
//! Owns [`McpTool`]: the name the model sees (`mcp__<server>__<tool>`,
//! cut to what providers accept), the server's JSON Schema made acceptable
//! to every provider dialect (an object schema; `$schema` dropped), the
//! hints the approval gate classes it by (annotations, or the configured
//! class), and the result mapped to keel's content (text, images; other
//! blocks as text; `isError` kept). It must not know approvals.

use std::sync::Arc;

use keel_protocol::{ContentBlock, ToolResult};
use keel_tools::{Tool, ToolContext, ToolHints, ToolOutput};
use serde_json::{Value, json};

use crate::client::{CallOutcome, Resources, ServerTool};
use crate::config::McpServerConfig;
use crate::servers::McpServers;

/// Longest tool name providers accept.
pub const MAX_NAME: usize = 64;

/// `mcp__<server>__<tool>`, with characters providers refuse replaced and
/// cut to [`MAX_NAME`].
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    };
    let full = format!("mcp__{}__{}", clean(server), clean(tool));
    if full.len() <= MAX_NAME {
        return full;
    }
    let hash = full.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    });
    format!("{}_{:08x}", &full[..MAX_NAME - 9], hash as u32)
}

/// One tool of one server.
#[derive(Debug)]
pub struct McpTool {
    servers: Arc<McpServers>,
    server: String,
    tool: ServerTool,
    name: String,
    description: String,
    hints: ToolHints,
}

impl McpTool {
    pub fn new(
        servers: Arc<McpServers>,
        server: &str,
        tool: ServerTool,
        config: &McpServerConfig,
    ) -> Self {
        let a = &tool.annotations;
        let flag = |k: &str| a.get(k).and_then(Value::as_bool);
        let hints = ToolHints {
            read_only: flag("readOnlyHint"),
            destructive: flag("destructiveHint"),
            open_world: flag("openWorldHint"),
            class: config.class_of(&tool.name).map(str::to_owned),
            server: Some(server.to_owned()),
        };
        let description = if tool.description.is_empty() {
            format!("{} (from the MCP server {server})", tool.name)
        } else {
            format!("{} (from the MCP server {server})", tool.description)
        };
        Self {
            name: tool_name(server, &tool.name),
            servers,
            server: server.to_owned(),
            tool,
            description,
            hints,
        }
    }

    /// Every tool of the ready servers of `servers`, and for each server
    /// that offers resources, its `read_resource` tool.
    pub fn all(servers: &Arc<McpServers>) -> Vec<Arc<dyn Tool>> {
        let mut tools: Vec<Arc<dyn Tool>> = servers
            .tool_list()
            .into_iter()
            .map(|(server, tool, config)| {
                Arc::new(McpTool::new(servers.clone(), &server, tool, &config)) as Arc<dyn Tool>
            })
            .collect();
        for (server, resources) in servers.resources() {
            tools.push(Arc::new(ResourceTool::new(
                servers.clone(),
                &server,
                &resources,
            )));
        }
        tools
    }
}

/// Calls `apply` with the servers' tools (as [`McpTool::all`] lists them)
/// whenever a server says its tool list changed, for as long as
/// `listening` says so (the session is open).
pub fn follow(
    servers: &Arc<McpServers>,
    listening: impl Fn() -> bool + Send + Sync + 'static,
    apply: impl Fn(Vec<Arc<dyn Tool>>) + Send + Sync + 'static,
) {
    let weak = Arc::downgrade(servers);
    servers.on_tools_changed(
        Box::new(listening),
        Box::new(move || {
            if let Some(servers) = weak.upgrade() {
                apply(McpTool::all(&servers));
            }
        }),
    );
}

/// The server's schema as every dialect accepts it: an object schema with
/// properties, without `$schema`.
pub fn normalize_schema(schema: &Value) -> Value {
    let mut s = match schema {
        Value::Object(m) => Value::Object(m.clone()),
        _ => json!({}),
    };
    if let Some(m) = s.as_object_mut() {
        m.remove("$schema");
        m.insert("type".into(), json!("object"));
        m.entry("properties").or_insert_with(|| json!({}));
    }
    s
}

/// keel's content for what the server returned.
pub fn to_output(outcome: CallOutcome) -> ToolOutput {
    let mut content = Vec::new();
    for block in &outcome.content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => content.push(ContentBlock::text(
                block
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
            )),
            Some("image") => match (
                block.get("data").and_then(Value::as_str),
                block.get("mimeType").and_then(Value::as_str),
            ) {
                (Some(data), Some(mime)) => content.push(ContentBlock::Image {
                    data: data.to_owned(),
                    mime_type: mime.to_owned(),
                }),
                _ => content.push(ContentBlock::text(
                    "[an image the server sent without data]",
                )),
            },
            Some("resource") => {
                let r = block.get("resource").cloned().unwrap_or(Value::Null);
                let text = r
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| {
                        format!(
                            "[resource {}]",
                            r.get("uri").and_then(Value::as_str).unwrap_or("?")
                        )
                    });
                content.push(ContentBlock::text(text));
            }
            Some("resource_link") => content.push(ContentBlock::text(format!(
                "[resource link {}]",
                block.get("uri").and_then(Value::as_str).unwrap_or("?")
            ))),
            Some(other) => content.push(ContentBlock::text(format!("[{other} content]"))),
            None => {}
        }
    }
    if content.is_empty()
        && let Some(s) = &outcome.structured
    {
        content.push(ContentBlock::text(s.to_string()));
    }
    ToolOutput {
        result: ToolResult {
            content,
            details: outcome
                .structured
                .map(|s| json!({ "structuredContent": s })),
        },
        is_error: outcome.is_error,
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        normalize_schema(&self.tool.input_schema)
    }

    fn hints(&self) -> Option<ToolHints> {
        Some(self.hints.clone())
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        // The server's progress messages become partial results.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let hooks = crate::client::CallHooks {
            progress: Some(tx),
            attended: ctx.asker.clone().map(|asker| crate::client::Attended {
                call_id: ctx.call_id.clone(),
                asker,
                cancel: ctx.cancel.clone(),
            }),
        };
        let call = self
            .servers
            .call(&self.server, &self.tool.name, args, hooks);
        tokio::pin!(call);
        loop {
            tokio::select! {
                r = &mut call => {
                    return match r {
                        Ok(outcome) => Ok(to_output(outcome)),
                        Err(e) => Err(keel_tools::Error::Failed(format!(
                            "MCP server {}: {e}", self.server
                        ))),
                    };
                }
                Some(message) = rx.recv() => (ctx.updates)(ToolResult::text(message)),
                _ = ctx.cancel.cancelled() => return Err(keel_tools::Error::Aborted),
            }
        }
    }
}

/// Most resources a `read_resource` tool's description names.
const LISTED_RESOURCES: usize = 20;

/// A server's resources, offered to the model as one read tool.
#[derive(Debug)]
pub struct ResourceTool {
    servers: Arc<McpServers>,
    server: String,
    name: String,
    description: String,
}

impl ResourceTool {
    pub fn new(servers: Arc<McpServers>, server: &str, resources: &Resources) -> Self {
        let mut description = format!("Read a resource of the MCP server {server} by its URI.");
        let listed = &resources.listed;
        if !listed.is_empty() {
            description.push_str(" Resources it lists:");
        }
        for r in listed.iter().take(LISTED_RESOURCES) {
            let uri = r.get("uri").and_then(Value::as_str).unwrap_or_default();
            let name = r.get("name").and_then(Value::as_str).unwrap_or_default();
            description.push_str(&format!("\n- {uri} ({name})"));
        }
        if listed.len() > LISTED_RESOURCES {
            description.push_str(&format!("\n… and {} more", listed.len() - LISTED_RESOURCES));
        }
        let templates = &resources.templates;
        if !templates.is_empty() {
            description.push_str("\nURI templates (fill in each {placeholder}):");
        }
        for t in templates.iter().take(LISTED_RESOURCES) {
            let uri = t
                .get("uriTemplate")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let name = t.get("name").and_then(Value::as_str).unwrap_or_default();
            description.push_str(&format!("\n- {uri} ({name})"));
        }
        Self {
            name: tool_name(server, "read_resource"),
            servers,
            server: server.to_owned(),
            description,
        }
    }
}

/// keel's content for a resource's `contents`.
fn resource_output(uri: &str, contents: Vec<Value>) -> ToolOutput {
    let mut content = Vec::new();
    for c in &contents {
        let mime = c
            .get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if let Some(text) = c.get("text").and_then(Value::as_str) {
            content.push(ContentBlock::text(text));
        } else if let Some(blob) = c.get("blob").and_then(Value::as_str)
            && mime.starts_with("image/")
        {
            content.push(ContentBlock::Image {
                data: blob.to_owned(),
                mime_type: mime.to_owned(),
            });
        } else {
            content.push(ContentBlock::text(format!(
                "[binary resource {uri}, {mime}]"
            )));
        }
    }
    if content.is_empty() {
        content.push(ContentBlock::text(format!("[resource {uri} is empty]")));
    }
    ToolOutput {
        result: ToolResult {
            content,
            details: None,
        },
        is_error: false,
    }
}

#[async_trait::async_trait]
impl Tool for ResourceTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"uri": {"type": "string", "description": "The resource's URI"}},
            "required": ["uri"]
        })
    }

    fn hints(&self) -> Option<ToolHints> {
        Some(ToolHints {
            read_only: Some(true),
            server: Some(self.server.clone()),
            ..ToolHints::default()
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        let Some(uri) = args.get("uri").and_then(Value::as_str) else {
            return Err(keel_tools::Error::InvalidArguments(
                "read_resource: field `uri` is required".into(),
            ));
        };
        tokio::select! {
            r = self.servers.read_resource(&self.server, uri) => match r {
                Ok(contents) => Ok(resource_output(uri, contents)),
                Err(e) => Err(keel_tools::Error::Failed(format!("MCP server {}: {e}", self.server))),
            },
            _ = ctx.cancel.cancelled() => Err(keel_tools::Error::Aborted),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// A session that is replaced stops listening, and its listener (with
    /// everything it holds) goes when the next one is added.
    #[tokio::test]
    async fn a_closed_session_stops_listening_for_tool_lists() {
        let servers = McpServers::start(&Default::default(), Vec::new()).await;
        let first_open = Arc::new(AtomicBool::new(true));
        let held = Arc::new(());
        {
            let open = first_open.clone();
            let held = held.clone();
            follow(
                &servers,
                move || open.load(Ordering::SeqCst),
                move |_| {
                    let _ = &held;
                },
            );
        }
        assert_eq!(servers.listeners(), 1);
        first_open.store(false, Ordering::SeqCst);
        let second_open = Arc::new(AtomicBool::new(true));
        {
            let open = second_open.clone();
            follow(&servers, move || open.load(Ordering::SeqCst), |_| {});
        }
        assert_eq!(
            servers.listeners(),
            1,
            "the closed session's listener stayed"
        );
        assert_eq!(
            Arc::strong_count(&held),
            1,
            "what the closed session's listener held is still alive"
        );
        second_open.store(false, Ordering::SeqCst);
        assert_eq!(servers.listeners(), 0);
    }

    #[test]
    fn names_are_what_providers_accept() {
        assert_eq!(tool_name("files", "read_file"), "mcp__files__read_file");
        assert_eq!(tool_name("my server", "a.b"), "mcp__my_server__a_b");
        let long = tool_name("s", &"x".repeat(100));
        assert_eq!(long.len(), MAX_NAME);
        assert_ne!(long, tool_name("s", &"x".repeat(99)));
    }

    #[test]
    fn schemas_and_results_map() {
        let s = normalize_schema(&json!({"$schema": "http://json-schema.org/draft-07/schema#"}));
        assert_eq!(s, json!({"type": "object", "properties": {}}));
        let out = to_output(CallOutcome {
            content: vec![
                json!({"type": "text", "text": "hi"}),
                json!({"type": "image", "data": "AAAA", "mimeType": "image/png"}),
            ],
            structured: None,
            is_error: true,
        });
        assert!(out.is_error);
        assert_eq!(out.result.content.len(), 2);
        assert_eq!(out.result.content[0], ContentBlock::text("hi"));
    }
}
