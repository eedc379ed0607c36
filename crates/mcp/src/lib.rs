//! keel's MCP client.
//!
//! This crate owns connecting to Model Context Protocol servers configured
//! with Codex's keys (`[mcp_servers.NAME]`: stdio commands or streamable
//! HTTP URLs), on the official Rust SDK (`rmcp`); their lifecycle (started
//! in parallel, each bounded by its startup timeout; a dead server reported
//! and started again on the next call, with backoff; stopped with its
//! process group when the session ends); and their tools as keel tools
//! named `mcp__<server>__<tool>`, with the server's JSON Schema and the
//! annotations the approval gate classes them by. It must not know
//! approvals (the class comes from the annotations through the tool's
//! hints) or any wire format of keel's own.

mod client;
pub mod config;
mod confine;
mod error;
mod listen;
pub mod oauth;
mod servers;
mod tls;
mod tool;
pub mod workspace;

pub use client::{Attended, CallHooks, CallOutcome, Connection, Resources, ServerTool};
pub use config::{McpServerConfig, Transport};
pub use confine::{confine_with, confiner};
pub use error::{Error, Result};
pub use servers::{McpServers, ServerState, ServerStatus, ToolsChanged};

/// The prefix of every MCP tool's name.
pub const TOOL_PREFIX: &str = "mcp__";
pub use tool::{McpTool, follow, tool_name};
