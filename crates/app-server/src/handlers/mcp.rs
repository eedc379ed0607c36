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
use std::sync::Arc;

use keel_app_server_protocol::v2::{
    EmptyResponse, ListMcpServerStatusParams, ListMcpServerStatusResponse, McpResourceReadParams,
    McpResourceReadResponse, McpServerStatus, McpServerStatusUpdatedNotification,
    McpServerToolCallParams, McpServerToolCallResponse, ServerNotification,
};
use keel_mcp::{ServerState, Transport};
use serde_json::json;

use crate::handlers::{After, Reply, RequestCtx, ok};
use crate::outbound::Connection;
use crate::rpc_error::RpcError;
use crate::runtime::Runtime;

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
    if let Some(old) = install(&ctx.runtime, started.clone()) {
        old.stop().await;
    }
    for s in started.map(|m| m.status()).unwrap_or_default() {
        ctx.conn
            .notify(&ServerNotification::McpServerStartupStatusUpdated(
                startup_status(s, None),
            ))
            .await;
    }
    ok(&EmptyResponse {})
}

/// Makes `servers` the process's MCP servers and gives every loaded
/// thread their tools (and their changes from now on); returns the old
/// ones, for the caller to stop.
pub fn install(
    runtime: &Arc<Runtime>,
    servers: Option<Arc<keel_mcp::McpServers>>,
) -> Option<Arc<keel_mcp::McpServers>> {
    let old = runtime.set_mcp(servers.clone());
    for id in runtime.loaded_thread_ids() {
        if let Some(thread) = runtime.thread(&id) {
            crate::thread_mcp::refresh(runtime, &thread);
            if let Some(servers) = &servers {
                crate::thread_mcp::follow(runtime, &thread, servers);
            }
        }
    }
    old
}

/// How a server's start ended, as `mcpServer/startupStatus/updated` says
/// it (`threadId` for a thread's own server).
pub fn startup_status(
    s: keel_mcp::ServerStatus,
    thread_id: Option<String>,
) -> McpServerStatusUpdatedNotification {
    let status = match s.state {
        ServerState::Ready => "ready",
        ServerState::Starting => "starting",
        ServerState::Disabled | ServerState::Stopped => "cancelled",
        ServerState::Failed => "failed",
    };
    McpServerStatusUpdatedNotification {
        name: s.name,
        status: status.to_owned(),
        error: s.error,
        thread_id,
    }
}

/// After a thread opened with servers of its own: how each one's start
/// ended, to the thread's subscribers.
pub fn announce_own(ctx: &mut RequestCtx, thread: &crate::thread_state::LoadedThread) {
    for s in thread.mcp.iter().flat_map(|m| m.status()) {
        let n = startup_status(s, Some(thread.id.clone()));
        ctx.after.push(After::NotifyThread(
            thread.id.clone(),
            Box::new(ServerNotification::McpServerStartupStatusUpdated(n)),
        ));
    }
}

/// To a client that just said `initialized`: where each of the process's
/// servers stands (they started before any client could connect).
pub async fn announce_to(runtime: &Runtime, conn: &Connection) {
    for s in runtime.mcp().iter().flat_map(|m| m.status()) {
        conn.notify(&ServerNotification::McpServerStartupStatusUpdated(
            startup_status(s, None),
        ))
        .await;
    }
}

/// The servers that answer for `server` in the request's thread (its own
/// first), or an error naming it.
fn server_for(
    ctx: &RequestCtx,
    thread_id: Option<&str>,
    server: &str,
) -> Result<Arc<keel_mcp::McpServers>, RpcError> {
    let thread = thread_id.and_then(|id| ctx.runtime.thread(id));
    crate::thread_mcp::server_for(&ctx.runtime, thread.as_deref(), server)
        .ok_or_else(|| RpcError::invalid(format!("no MCP server named {server}")))
}

/// `mcpServer/resource/read`: a server's resource, for the client.
pub async fn resource_read(
    ctx: &mut RequestCtx,
    p: McpResourceReadParams,
) -> Result<Reply, RpcError> {
    let servers = server_for(ctx, p.thread_id.as_deref(), &p.server)?;
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
    let servers = server_for(ctx, Some(&p.thread_id), &p.server)?;
    let outcome = servers
        .call(
            &p.server,
            &p.tool,
            p.arguments.unwrap_or(serde_json::Value::Null),
            Default::default(),
        )
        .await
        .map_err(|e| RpcError::internal(format!("MCP server {}: {e}", p.server)))?;
    ok(&McpServerToolCallResponse {
        content: outcome.content,
        structured_content: outcome.structured,
        is_error: Some(outcome.is_error),
    })
}

pub async fn status_list(
    ctx: &mut RequestCtx,
    p: ListMcpServerStatusParams,
) -> Result<Reply, RpcError> {
    let thread = match &p.thread_id {
        Some(id) => Some(
            ctx.runtime
                .thread(id)
                .ok_or_else(|| RpcError::thread_not_found(id))?,
        ),
        None => None,
    };
    let mut data = Vec::new();
    for (servers, skip) in crate::thread_mcp::listed(&ctx.runtime, thread.as_deref()) {
        data.extend(statuses(&servers).await.into_iter().filter(|s| {
            !skip.contains(&s.name) && p.server_name.as_deref().is_none_or(|n| n == s.name)
        }));
    }
    ok(&ListMcpServerStatusResponse {
        data,
        next_cursor: None,
    })
}

/// How server `name` of `servers` authenticates, as the wire says it.
async fn auth_status(servers: &keel_mcp::McpServers, name: &str) -> &'static str {
    match servers.config(name).and_then(|c| c.transport().ok()) {
        Some(Transport::Http {
            bearer_token_env_var: Some(_),
            ..
        }) => "bearerToken",
        Some(Transport::Http {
            url,
            credentials: Some(path),
            ..
        }) => match keel_mcp::oauth::FileCredentials::new(path, &url)
            .signed_in()
            .await
        {
            true => "oAuth",
            false => "notLoggedIn",
        },
        _ => "unsupported",
    }
}

/// Every server of `servers` as `mcpServerStatus/list` shows it.
async fn statuses(servers: &keel_mcp::McpServers) -> Vec<McpServerStatus> {
    let tools = servers.tool_list();
    let resources = servers.resources();
    let mut auth = BTreeMap::new();
    for s in servers.status() {
        auth.insert(s.name.clone(), auth_status(servers, &s.name).await);
    }
    servers
        .status()
        .into_iter()
        .map(|s| {
            let auth_status = auth.get(&s.name).copied().unwrap_or("unsupported");
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
            let resources = resources
                .iter()
                .find(|(name, _)| *name == s.name)
                .map(|(_, r)| r.clone())
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
        .collect()
}
