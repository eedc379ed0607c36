//! `set_mcp_servers`: the host replaces the MCP servers whose tools the
//! session offers.
//!
//! Owns swapping the session's MCP tools (named `mcp__…`) for the new
//! servers' tools, keeping every other tool; starting and stopping the
//! servers is the factory's business. It must not know how servers are
//! reached.

use serde_json::{Value, json};

use crate::command::SetMcpServersArgs;
use crate::server::Server;
use crate::wire_errors::{self, WireError};

impl Server {
    pub(super) async fn set_mcp_servers(
        &mut self,
        args: SetMcpServersArgs,
    ) -> Result<Option<Value>, WireError> {
        if !args.servers.is_object() {
            return Err(wire_errors::invalid_params(
                "set_mcp_servers",
                "servers must be an object of NAME → server table",
            ));
        }
        let (tools, statuses) = self
            .factory
            .set_mcp_servers(args.servers)
            .await
            .map_err(|e| wire_errors::invalid_params("set_mcp_servers", &e))?;
        self.handle().swap_tools("mcp__", tools);
        Ok(Some(json!({ "servers": statuses })))
    }
}
