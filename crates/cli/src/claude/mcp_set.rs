//! The MCP servers of a Claude-mode session besides `config.toml`'s: those
//! the SDK's host names (`--mcp-config`, `initialize`'s `mcpServers`,
//! `setMcpServers()`), and the SDK's own (`createSdkMcpServer`, reached
//! over the control channel by [`super::sdk_mcp`]).
//!
//! Owns [`McpSet`]: which `mcp__` tools the model is offered (keel's
//! servers' and the SDK's together, so that a change in one list keeps the
//! other), the SDK servers' states, and `mcp_set_servers`: servers it names
//! are added, or replaced when their configuration changed; servers an
//! earlier call named and this one omits are removed; servers only the
//! command line or `initialize` named stay. It must not know how runs are
//! driven or how calls are decided.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use keel_core::SessionHandle;
use keel_mcp::{McpServerConfig, McpServers};
use keel_tools::Tool;
use serde_json::{Map, Value, json};

use super::peer::Peer;
use super::sdk_mcp;

/// A server in the SDK's process.
struct SdkServer {
    name: String,
    /// `connected` or `failed`, as `mcp_status` says it.
    status: &'static str,
    tools: Vec<Arc<dyn Tool>>,
}

/// The SDK's servers and what `setMcpServers()` manages.
#[derive(Default)]
pub struct McpSet {
    sdk: Mutex<Vec<SdkServer>>,
    /// The servers `setMcpServers()` named last: only these does a later
    /// call remove by omitting them.
    named: Mutex<BTreeSet<String>>,
    /// One `setMcpServers()` at a time.
    setting: tokio::sync::Mutex<()>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl McpSet {
    /// The SDK's servers and their states, in the order they came.
    pub fn sdk_servers(&self) -> Vec<(String, String)> {
        lock(&self.sdk)
            .iter()
            .map(|s| (s.name.clone(), s.status.to_owned()))
            .collect()
    }

    /// Whether `name` is a server of the SDK's process.
    pub fn is_sdk(&self, name: &str) -> bool {
        lock(&self.sdk).iter().any(|s| s.name == name)
    }

    /// Records what connecting the SDK's server `name` gave; its tools are
    /// offered from the next [`Self::offer`].
    pub fn take_sdk(&self, name: &str, outcome: Result<Vec<Arc<dyn Tool>>, String>) {
        let (status, tools) = match outcome {
            Ok(tools) => ("connected", tools),
            Err(e) => {
                super::warn(&format!("the SDK's MCP server {name}: {e}"));
                ("failed", Vec::new())
            }
        };
        let mut sdk = lock(&self.sdk);
        sdk.retain(|s| s.name != name);
        sdk.push(SdkServer {
            name: name.to_owned(),
            status,
            tools,
        });
    }

    fn drop_sdk(&self, name: &str) -> bool {
        let mut sdk = lock(&self.sdk);
        let before = sdk.len();
        sdk.retain(|s| s.name != name);
        sdk.len() != before
    }

    /// Offers the model `servers`' tools and the SDK servers' (every other
    /// `mcp__` tool goes).
    pub fn offer(&self, servers: Option<&Arc<McpServers>>, session: &SessionHandle) {
        let keels = servers.map(keel_mcp::McpTool::all).unwrap_or_default();
        self.offer_with(keels, session);
    }

    fn offer_with(&self, mut tools: Vec<Arc<dyn Tool>>, session: &SessionHandle) {
        tools.extend(lock(&self.sdk).iter().flat_map(|s| s.tools.iter().cloned()));
        session.swap_tools(keel_mcp::TOOL_PREFIX, tools);
    }

    /// Keeps the session's tools in step with `servers`' lists while the
    /// session is open.
    pub fn follow(self: &Arc<Self>, servers: &Arc<McpServers>, session: SessionHandle) {
        let open = session.clone();
        let this = self.clone();
        keel_mcp::follow(
            servers,
            move || !open.is_closed(),
            move |tools| this.offer_with(tools, &session),
        );
    }

    /// `mcp_set_servers`: `{added, removed, errors}`. A server that does
    /// not start is in `added` and in `errors` (it stays listed, failed,
    /// and is started again on its next call, as a configured one is).
    pub async fn set_servers(
        &self,
        request: &Value,
        servers: &Arc<McpServers>,
        session: &SessionHandle,
        peer: &Arc<Peer>,
        home: &std::path::Path,
    ) -> Result<Value, String> {
        let Some(entries) = request.get("servers").and_then(Value::as_object) else {
            return Err("mcp_set_servers without servers".to_owned());
        };
        let _one = self.setting.lock().await;
        let mut errors = Map::new();
        let mut process = BTreeMap::new();
        let mut sdk_names = Vec::new();
        for (name, entry) in entries {
            if entry.get("type").and_then(Value::as_str) == Some("sdk") {
                sdk_names.push(name.clone());
                continue;
            }
            match server_config(name, entry, home) {
                Ok(config) => {
                    process.insert(name.clone(), config);
                }
                Err(e) => {
                    errors.insert(name.clone(), Value::String(e));
                }
            }
        }
        let before = std::mem::take(&mut *lock(&self.named));
        let mut removed = Vec::new();
        for name in before.iter().filter(|n| !entries.contains_key(*n)) {
            let was_keels = servers.remove(name).await;
            if self.drop_sdk(name) || was_keels {
                removed.push(name.clone());
            }
        }
        let mut added = Vec::new();
        for (name, config) in process {
            if servers.config(&name).as_ref() == Some(&config) {
                continue;
            }
            self.drop_sdk(&name);
            added.push(name.clone());
            if let Err(e) = servers.put(&name, config).await {
                errors.insert(name, Value::String(e.to_string()));
            }
        }
        for name in sdk_names {
            if self.is_sdk(&name) {
                continue;
            }
            // A server of keel's of that name gives way to the SDK's.
            servers.remove(&name).await;
            added.push(name.clone());
            let outcome = sdk_mcp::connect(peer.clone(), &name).await;
            if let Err(e) = &outcome {
                errors.insert(name.clone(), Value::String(e.clone()));
            }
            self.take_sdk(&name, outcome);
        }
        *lock(&self.named) = entries.keys().cloned().collect();
        self.offer(Some(servers), session);
        Ok(json!({"added": added, "removed": removed, "errors": errors}))
    }
}

/// One entry of `--mcp-config`'s or `setMcpServers()`'s `mcpServers`
/// (Claude Code's shape: `type` stdio, http or sse) as keel's server. An
/// HTTP server the host gives no `Authorization` header uses the sign-in
/// `keel mcp login` keeps under keel's `home` for that name, which only
/// ever goes to the address it was made for.
pub fn server_config(
    name: &str,
    s: &Value,
    home: &std::path::Path,
) -> Result<McpServerConfig, String> {
    let strings = |key: &str| -> BTreeMap<String, String> {
        s.get(key)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut config = McpServerConfig {
        command: s.get("command").and_then(Value::as_str).map(str::to_owned),
        args: s
            .get("args")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
        env: strings("env"),
        url: s.get("url").and_then(Value::as_str).map(str::to_owned),
        http_headers: strings("headers"),
        enabled: true,
        ..McpServerConfig::default()
    };
    let authorized = config
        .http_headers
        .keys()
        .any(|k| k.eq_ignore_ascii_case("authorization"));
    if config.url.is_some() && !authorized {
        config.credentials = Some(keel_mcp::oauth::credentials_path(home, name));
    }
    config
        .transport()
        .map_err(|e| format!("server {name}: {e}"))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_codes_entries_read_as_keels_servers() {
        let home = std::path::Path::new("/keel-home");
        let stdio = server_config(
            "files",
            &json!({"type": "stdio", "command": "npx", "args": ["-y", "x"], "env": {"K": "v"}}),
            home,
        )
        .unwrap();
        assert_eq!(stdio.command.as_deref(), Some("npx"));
        assert_eq!(stdio.args, ["-y", "x"]);
        assert_eq!(stdio.env["K"], "v");
        let http = server_config(
            "remote",
            &json!({"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-A": "b"}}),
            home,
        )
        .unwrap();
        assert_eq!(http.url.as_deref(), Some("http://127.0.0.1:1/mcp"));
        assert_eq!(http.http_headers["X-A"], "b");
        // A keel sign-in for that name, unless the host authorizes itself.
        assert_eq!(
            http.credentials,
            Some(keel_mcp::oauth::credentials_path(home, "remote"))
        );
        assert_eq!(stdio.credentials, None);
        let own = server_config(
            "remote",
            &json!({"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"authorization": "Bearer t"}}),
            home,
        )
        .unwrap();
        assert_eq!(own.credentials, None);
        let none = server_config("broken", &json!({"type": "stdio"}), home).unwrap_err();
        assert!(none.starts_with("server broken: "), "{none}");
    }
}
