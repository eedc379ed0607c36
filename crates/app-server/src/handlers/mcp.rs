//! `mcpServerStatus/list`: the MCP servers every thread gets tools from,
//! their state and their tools; `mcpServer/tool/call`: a client calls a
//! server's tool itself (the client is the one deciding, so no approval is
//! asked; the thread must be loaded).
//!
//! Owns mapping keel's server states onto the wire's (`connected`,
//! `starting`, `failed`, `disabled`), and the tools and resources onto
//! MCP's own shape (resource templates: none yet). It must not start or stop
//! servers.

use std::collections::BTreeMap;

use keel_app_server_protocol::v2::{
    ListMcpServerStatusParams, ListMcpServerStatusResponse, McpServerStatus,
    McpServerToolCallParams, McpServerToolCallResponse,
};
use keel_mcp::{ServerState, Transport};
use serde_json::json;

use crate::handlers::{Reply, RequestCtx, ok};
use crate::rpc_error::RpcError;

pub async fn tool_call(
    ctx: &mut RequestCtx,
    p: McpServerToolCallParams,
) -> Result<Reply, RpcError> {
    if ctx.runtime.thread(&p.thread_id).is_none() {
        return Err(RpcError::thread_not_found(&p.thread_id));
    }
    let Some(servers) = ctx.runtime.mcp.get() else {
        return Err(RpcError::invalid(format!(
            "no MCP server named {}",
            p.server
        )));
    };
    let outcome = servers
        .call(
            &p.server,
            &p.tool,
            p.arguments.unwrap_or(serde_json::Value::Null),
        )
        .await
        .map_err(|e| RpcError::internal(format!("MCP server {}: {e}", p.server)))?;
    ok(&McpServerToolCallResponse {
        content: outcome.content,
        structured_content: outcome.structured,
        is_error: Some(outcome.is_error),
    })
}

pub fn status_list(ctx: &mut RequestCtx, p: ListMcpServerStatusParams) -> Result<Reply, RpcError> {
    let Some(servers) = ctx.runtime.mcp.get() else {
        return ok(&ListMcpServerStatusResponse {
            data: Vec::new(),
            next_cursor: None,
        });
    };
    let tools = servers.tool_list();
    let data = servers
        .status()
        .into_iter()
        .filter(|s| p.server_name.as_deref().is_none_or(|n| n == s.name))
        .map(|s| {
            let config = tools
                .iter()
                .find(|(name, _, _)| *name == s.name)
                .map(|(_, _, c)| c.clone());
            let auth_status = match config.as_ref().and_then(|c| c.transport().ok()) {
                Some(Transport::Http {
                    bearer_token_env_var: Some(_),
                    ..
                }) => "bearerToken",
                _ => "unsupported",
            };
            let listed: BTreeMap<String, serde_json::Value> = tools
                .iter()
                .filter(|(name, _, _)| *name == s.name)
                .map(|(_, t, _)| {
                    (
                        t.name.clone(),
                        json!({
                            "name": t.name,
                            "description": t.description,
                            "inputSchema": t.input_schema,
                            "annotations": t.annotations,
                        }),
                    )
                })
                .collect();
            McpServerStatus {
                name: s.name.clone(),
                auth_status: auth_status.to_owned(),
                tools: listed,
                resources: servers
                    .resources()
                    .into_iter()
                    .find(|(name, _)| *name == s.name)
                    .map(|(_, r)| r)
                    .unwrap_or_default(),
                resource_templates: Vec::new(),
                runtime_status: Some(
                    match s.state {
                        ServerState::Ready => "connected",
                        ServerState::Starting => "starting",
                        ServerState::Failed | ServerState::Stopped => "failed",
                        ServerState::Disabled => "disabled",
                    }
                    .to_owned(),
                ),
                tools_error: s.error.clone(),
            }
        })
        .collect();
    ok(&ListMcpServerStatusResponse {
        data,
        next_cursor: None,
    })
}
