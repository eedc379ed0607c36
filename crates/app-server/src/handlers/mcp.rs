//! `mcpServerStatus/list`: the MCP servers every thread gets tools from,
//! their state and their tools; `mcpServer/tool/call`: a client calls a
//! server's tool itself (the client is the one deciding, so no approval is
//! asked; the thread must be loaded).
//!
//! Owns mapping keel's server states onto the wire's (`connected`,
//! `starting`, `failed`, `disabled`), and the tools and resources onto
//! MCP's own shape. It must not start or stop
//! servers.

use std::collections::BTreeMap;

use keel_app_server_protocol::v2::{
    EmptyResponse, ListMcpServerStatusParams, ListMcpServerStatusResponse, McpResourceReadParams,
    McpResourceReadResponse, McpServerStatus, McpServerStatusUpdatedNotification,
    McpServerToolCallParams, McpServerToolCallResponse, ServerNotification,
};
use keel_mcp::{ServerState, Transport};
use serde_json::json;

use crate::handlers::{Reply, RequestCtx, ok};
use crate::rpc_error::RpcError;

/// `config/mcpServer/reload`: reads `[mcp_servers]` of `config.toml`
/// again, stops the running servers, starts the configured ones (each
/// within its startup timeout), gives every loaded thread their tools, and
/// reports each server's outcome with `mcpServer/startupStatus/updated`.
pub async fn reload(ctx: &mut RequestCtx) -> Result<Reply, RpcError> {
    let cwd = ctx.runtime.config.default_cwd.clone();
    // What a server start reads: keel's own servers and the workspace's
    // trusted ones.
    let configs = keel_mcp::workspace::configured(&ctx.runtime.config.home, &cwd)
        .map_err(|e| RpcError::invalid(e.to_string()))?;
    for name in configs.keys() {
        let starting = McpServerStatusUpdatedNotification {
            name: name.clone(),
            status: "starting".to_owned(),
            error: None,
            thread_id: None,
        };
        ctx.conn
            .notify(&ServerNotification::McpServerStartupStatusUpdated(starting))
            .await;
    }
    let started = if configs.is_empty() {
        None
    } else {
        Some(keel_mcp::McpServers::start_in(&configs, &cwd).await)
    };
    if let Some(old) = ctx.runtime.set_mcp(started.clone()) {
        old.stop().await;
    }
    let tools = started
        .as_ref()
        .map(keel_mcp::McpTool::all)
        .unwrap_or_default();
    for id in ctx.runtime.loaded_thread_ids() {
        if let Some(thread) = ctx.runtime.thread(&id) {
            thread
                .handle
                .swap_tools(keel_mcp::TOOL_PREFIX, tools.clone());
            if let Some(servers) = &started {
                crate::sessions::follow_mcp(servers, thread.handle.clone());
            }
        }
    }
    for s in started.map(|m| m.status()).unwrap_or_default() {
        let status = match s.state {
            ServerState::Ready => "ready",
            ServerState::Disabled | ServerState::Stopped => "cancelled",
            ServerState::Starting | ServerState::Failed => "failed",
        };
        let n = McpServerStatusUpdatedNotification {
            name: s.name,
            status: status.to_owned(),
            error: s.error,
            thread_id: None,
        };
        ctx.conn
            .notify(&ServerNotification::McpServerStartupStatusUpdated(n))
            .await;
    }
    ok(&EmptyResponse {})
}

/// `mcpServer/resource/read`: a server's resource, for the client.
pub async fn resource_read(
    ctx: &mut RequestCtx,
    p: McpResourceReadParams,
) -> Result<Reply, RpcError> {
    let Some(servers) = ctx.runtime.mcp() else {
        return Err(RpcError::invalid(format!(
            "no MCP server named {}",
            p.server
        )));
    };
    let contents = servers
        .read_resource(&p.server, &p.uri)
        .await
        .map_err(|e| RpcError::internal(format!("MCP server {}: {e}", p.server)))?;
    ok(&McpResourceReadResponse { contents })
}

pub async fn tool_call(
    ctx: &mut RequestCtx,
    p: McpServerToolCallParams,
) -> Result<Reply, RpcError> {
    if ctx.runtime.thread(&p.thread_id).is_none() {
        return Err(RpcError::thread_not_found(&p.thread_id));
    }
    let Some(servers) = ctx.runtime.mcp() else {
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
            None,
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
    let Some(servers) = ctx.runtime.mcp() else {
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
            let resources = servers
                .resources()
                .into_iter()
                .find(|(name, _)| *name == s.name)
                .map(|(_, r)| r)
                .unwrap_or_default();
            McpServerStatus {
                name: s.name.clone(),
                auth_status: auth_status.to_owned(),
                tools: listed,
                resources: resources.listed,
                resource_templates: resources.templates,
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
