//! The MCP servers a thread gets tools from: the process's (`[mcp_servers]`
//! of `config.toml` and a trusted workspace's, restarted by
//! `config/mcpServer/reload`) and the thread's own, named by the client in
//! the `config` of `thread/start`, `thread/resume` or `thread/fork`
//! (started with the thread, stopped when it is unloaded).
//!
//! Owns the rule that a thread's own server hides the process's server of
//! the same name (so `mcp_servers.NAME.enabled = false` turns one off for
//! that thread), keeping a thread's tools current when either set changes,
//! and finding the server a client names. It must not read config files or
//! map anything onto the wire.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use keel_mcp::{McpServerConfig, McpServers, McpTool};
use keel_tools::Tool;

use crate::runtime::Runtime;
use crate::thread_state::LoadedThread;

/// Starts a thread's own servers (each within its startup timeout); none
/// when the client named none.
pub async fn start_own(
    configs: &BTreeMap<String, McpServerConfig>,
    cwd: &Path,
) -> Option<Arc<McpServers>> {
    if configs.is_empty() {
        return None;
    }
    Some(McpServers::start_in(configs, cwd).await)
}

/// The names of `servers` (none when there are none).
fn names(servers: Option<&Arc<McpServers>>) -> Vec<String> {
    servers.map(|s| s.names()).unwrap_or_default()
}

/// The MCP tools of a thread: the process's, except those of servers its
/// own config names, and its own.
pub fn tools_for(
    process: Option<&Arc<McpServers>>,
    own: Option<&Arc<McpServers>>,
) -> Vec<Arc<dyn Tool>> {
    let hidden: Vec<String> = names(own)
        .iter()
        .map(|n| keel_mcp::tool_name(n, ""))
        .collect();
    let mut tools: Vec<Arc<dyn Tool>> = process
        .map(McpTool::all)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !hidden.iter().any(|h| t.name().starts_with(h.as_str())))
        .collect();
    tools.extend(own.map(McpTool::all).unwrap_or_default());
    tools
}

/// Gives `thread` the MCP tools it should have now.
pub fn refresh(runtime: &Runtime, thread: &LoadedThread) {
    thread.handle.swap_tools(
        keel_mcp::TOOL_PREFIX,
        tools_for(runtime.mcp().as_ref(), thread.mcp.as_ref()),
    );
}

/// Keeps `thread`'s MCP tools current when a server of `servers` changes
/// its tool list (the process's servers after a reload, or its own).
pub fn follow(runtime: &Arc<Runtime>, thread: &Arc<LoadedThread>, servers: &Arc<McpServers>) {
    let runtime = Arc::downgrade(runtime);
    let thread = Arc::downgrade(thread);
    let (runtime_alive, thread_alive) = (runtime.clone(), thread.clone());
    let listening = move || runtime_alive.strong_count() > 0 && thread_alive.strong_count() > 0;
    keel_mcp::follow(servers, listening, move |_| {
        if let (Some(runtime), Some(thread)) = (runtime.upgrade(), thread.upgrade()) {
            refresh(&runtime, &thread);
        }
    });
}

/// [`follow`] for every set of servers `thread` gets tools from.
pub fn follow_all(runtime: &Arc<Runtime>, thread: &Arc<LoadedThread>) {
    if let Some(process) = runtime.mcp() {
        follow(runtime, thread, &process);
    }
    if let Some(own) = &thread.mcp {
        follow(runtime, thread, own);
    }
}

/// The servers to list for `thread` (or for the process when `None`):
/// each set with the names it must skip.
pub fn listed(
    runtime: &Runtime,
    thread: Option<&LoadedThread>,
) -> Vec<(Arc<McpServers>, Vec<String>)> {
    let own = thread.and_then(|t| t.mcp.clone());
    let mut out = Vec::new();
    if let Some(process) = runtime.mcp() {
        out.push((process, names(own.as_ref())));
    }
    if let Some(own) = own {
        out.push((own, Vec::new()));
    }
    out
}

/// The servers that answer for server `name` in `thread` (its own first).
pub fn server_for(
    runtime: &Runtime,
    thread: Option<&LoadedThread>,
    name: &str,
) -> Option<Arc<McpServers>> {
    let own = thread.and_then(|t| t.mcp.clone());
    if let Some(own) = own
        && own.has(name)
    {
        return Some(own);
    }
    runtime.mcp().filter(|p| p.has(name))
}
