//! A worker's own MCP servers: the `[mcp_servers.NAME]` of its
//! configuration, with the trusted servers of the turn's workspace
//! (`keel_mcp::workspace::servers_for`), as an in-process turn there
//! would have them.
//!
//! Owns [`WorkerMcp`]: the servers are started when a workspace's first
//! turn comes and kept for the next (a server is a process; starting it
//! per turn would cost a start each time), started again when the
//! configuration names other servers, and stopped when the worker ends.
//! It must not know how turns run.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_mcp::{McpServerConfig, McpServers};

/// The servers of each workspace this worker has run turns in.
#[derive(Default)]
pub struct WorkerMcp {
    started: tokio::sync::Mutex<HashMap<PathBuf, Started>>,
}

/// The servers started for one workspace, and what they were started from.
struct Started {
    configured: BTreeMap<String, McpServerConfig>,
    servers: Option<Arc<McpServers>>,
}

impl WorkerMcp {
    /// The tools of the servers for turns in `cwd`, given the worker's
    /// configured servers (none: no tools).
    pub async fn tools(
        &self,
        home: &Path,
        own: &BTreeMap<String, McpServerConfig>,
        cwd: &Path,
    ) -> Vec<Arc<dyn keel_tools::Tool>> {
        let configured = keel_mcp::workspace::servers_for(home, own, cwd);
        let mut started = self.started.lock().await;
        let current = started.get(cwd).filter(|s| s.configured == configured);
        let servers = match current {
            Some(s) => s.servers.clone(),
            None => {
                if let Some(Started {
                    servers: Some(old), ..
                }) = started.remove(cwd)
                {
                    old.stop().await;
                }
                let servers = crate::setup::start_mcp(&configured, cwd).await;
                started.insert(
                    cwd.to_owned(),
                    Started {
                        configured,
                        servers: servers.clone(),
                    },
                );
                servers
            }
        };
        crate::setup::mcp_tools(servers.as_ref())
    }

    /// Stops every server this worker started.
    pub async fn stop(&self) {
        let started = std::mem::take(&mut *self.started.lock().await);
        for (_, s) in started {
            if let Some(servers) = s.servers {
                servers.stop().await;
            }
        }
    }
}
