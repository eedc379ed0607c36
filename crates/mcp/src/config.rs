//! `[mcp_servers.NAME]`: one MCP server, with Codex's own keys, so a
//! `~/.codex/config.toml` table can be copied as it is.
//!
//! ```toml
//! [mcp_servers.files]
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
//! env = { LOG_LEVEL = "warn" }
//! startup_timeout_sec = 10     # default 10
//! tool_timeout_sec = 60        # default 60
//! disabled_tools = ["write_file"]
//!
//! [mcp_servers.tracker]
//! url = "https://mcp.example.org/mcp"
//! bearer_token_env_var = "TRACKER_TOKEN"
//! http_headers = { "X-Team" = "infra" }
//! tool_classes = { close_issue = "money" }   # keel's addition: overrides annotations
//! ```
//!
//! Owns the shape (`deny_unknown_fields`, so a typo is an error naming the
//! key) and the rules that make a server usable (a command or a URL, not
//! both). It must not start anything.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

/// Default time a server has to start and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// One `[mcp_servers.NAME]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// A stdio server: the program.
    pub command: Option<String>,
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment of a stdio server (on top of keel's, secrets dropped).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
    /// A streamable HTTP server: its URL.
    pub url: Option<String>,
    /// The environment variable holding the bearer token of an HTTP server.
    pub bearer_token_env_var: Option<String>,
    #[serde(default)]
    pub http_headers: BTreeMap<String, String>,
    /// Headers whose values come from environment variables.
    #[serde(default)]
    pub env_http_headers: BTreeMap<String, String>,
    pub startup_timeout_sec: Option<f64>,
    pub startup_timeout_ms: Option<u64>,
    pub tool_timeout_sec: Option<f64>,
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Only these tools (all when absent).
    pub enabled_tools: Option<Vec<String>>,
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// keel's addition: tool name → class (`read`, `write`, `send`,
    /// `money`), over what the server's annotations say.
    #[serde(default)]
    pub tool_classes: BTreeMap<String, String>,
    /// keel's addition: the class of every tool of this server that
    /// `tool_classes` does not name (annotations ignored).
    pub default_class: Option<String>,
    /// keel's addition: a stdio server's process confined as a command is
    /// (`read-only`, `workspace-write`: its `cwd` writable, or
    /// `danger-full-access`, the default for keel's own config; a trusted
    /// workspace's servers default to `workspace-write`).
    pub sandbox: Option<String>,
    /// keel's addition: whether a confined server may open network sockets
    /// (default: yes, servers reach their APIs).
    pub sandbox_network: Option<bool>,
    /// Where `keel mcp login` keeps an HTTP server's OAuth tokens (set by
    /// keel from its home, never configured).
    /// How keel opens a connection: `session` (the default: the
    /// `initialize` handshake, and MCP 2026-07-28's `server/discover` for
    /// a server that refuses it) or `2026-07-28` (discovery first).
    pub protocol: Option<String>,
    #[serde(skip)]
    pub credentials: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

/// How a connection is opened (`protocol`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `initialize` first.
    Session,
    /// `server/discover` first (MCP 2026-07-28, stateless).
    Stateless,
}

impl McpServerConfig {
    /// The `protocol` setting, or why it cannot be read.
    pub fn protocol(&self) -> Result<Protocol, String> {
        match self.protocol.as_deref() {
            None | Some("session") => Ok(Protocol::Session),
            Some("2026-07-28") => Ok(Protocol::Stateless),
            Some(other) => Err(format!(
                "protocol = \"{other}\": use \"session\" or \"2026-07-28\""
            )),
        }
    }
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        env: BTreeMap<String, String>,
        cwd: Option<PathBuf>,
        /// The walls of its process (`None`: unconfined).
        sandbox: Option<keel_protocol::SandboxPolicy>,
    },
    Http {
        url: String,
        bearer_token_env_var: Option<String>,
        headers: BTreeMap<String, String>,
        env_headers: BTreeMap<String, String>,
        /// Its OAuth tokens' file, when keel keeps one for it.
        credentials: Option<PathBuf>,
    },
}

impl McpServerConfig {
    /// How to reach it, or what is wrong with the table.
    pub fn transport(&self) -> Result<Transport, String> {
        match (&self.command, &self.url) {
            (Some(command), None) => Ok(Transport::Stdio {
                command: command.clone(),
                args: self.args.clone(),
                env: self.env.clone(),
                cwd: self.cwd.clone(),
                sandbox: self.sandbox_policy()?,
            }),
            (None, Some(url)) if url.starts_with("http://") || url.starts_with("https://") => {
                Ok(Transport::Http {
                    url: url.clone(),
                    bearer_token_env_var: self.bearer_token_env_var.clone(),
                    headers: self.http_headers.clone(),
                    env_headers: self.env_http_headers.clone(),
                    credentials: self.credentials.clone(),
                })
            }
            (None, Some(url)) => Err(format!("url {url:?} must start with http:// or https://")),
            (Some(_), Some(_)) => Err("has both `command` and `url`; give one".to_owned()),
            (None, None) => Err("needs `command` (a stdio server) or `url` (HTTP)".to_owned()),
        }
    }

    /// The walls `sandbox` asks for (`None`: unconfined).
    pub fn sandbox_policy(&self) -> Result<Option<keel_protocol::SandboxPolicy>, String> {
        let Some(text) = &self.sandbox else {
            return Ok(None);
        };
        let mode = keel_protocol::SandboxMode::parse(text).ok_or_else(|| {
            format!("sandbox {text:?}: use read-only, workspace-write or danger-full-access")
        })?;
        let policy = keel_protocol::SandboxPolicy {
            network_access: self.sandbox_network.unwrap_or(true),
            ..keel_protocol::SandboxPolicy::of(mode)
        };
        Ok((!policy.is_unconfined()).then_some(policy))
    }

    pub fn startup_timeout(&self) -> Duration {
        match (self.startup_timeout_sec, self.startup_timeout_ms) {
            (Some(s), _) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
            (_, Some(ms)) if ms > 0 => Duration::from_millis(ms),
            _ => DEFAULT_STARTUP_TIMEOUT,
        }
    }

    pub fn tool_timeout(&self) -> Duration {
        match self.tool_timeout_sec {
            Some(s) if s.is_finite() && s > 0.0 => Duration::from_secs_f64(s),
            _ => DEFAULT_TOOL_TIMEOUT,
        }
    }

    /// Whether the server's tool `name` is offered.
    pub fn offers(&self, name: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == name))
            && !self.disabled_tools.iter().any(|t| t == name)
    }

    /// The configured class of tool `name`, if any.
    pub fn class_of(&self, name: &str) -> Option<&str> {
        self.tool_classes
            .get(name)
            .or(self.default_class.as_ref())
            .map(String::as_str)
    }
}

/// The servers a host names in config overrides: Codex's `config` map of
/// `thread/start`, with dotted keys (`"mcp_servers.docs"` → a table,
/// `"mcp_servers.docs.command"` → one key) or a nested `"mcp_servers"`
/// table, merged in key order. Each enabled server must be usable; one
/// with only `enabled = false` hides a server of the same name. Keys
/// outside `mcp_servers` are not this crate's and are left alone.
pub fn from_overrides(
    overrides: &serde_json::Map<String, serde_json::Value>,
) -> Result<BTreeMap<String, McpServerConfig>, String> {
    use serde_json::Value;
    let mut root = Value::Object(serde_json::Map::new());
    for (key, value) in overrides {
        if key != "mcp_servers" && !key.starts_with("mcp_servers.") {
            continue;
        }
        let mut at = &mut root;
        for part in key.split('.') {
            if part.is_empty() {
                return Err(format!("config key {key:?} has an empty part"));
            }
            if !at.is_object() {
                *at = Value::Object(serde_json::Map::new());
            }
            at = match at {
                Value::Object(map) => map.entry(part.to_owned()).or_insert(Value::Null),
                _ => return Err(format!("config key {key:?} is not a table path")),
            };
        }
        merge(at, value.clone());
    }
    let servers = match root.get("mcp_servers") {
        None => return Ok(BTreeMap::new()),
        Some(v) => v.clone(),
    };
    let mut configs = BTreeMap::new();
    let Value::Object(tables) = servers else {
        return Err("config mcp_servers must be a table of NAME → server".to_owned());
    };
    for (name, table) in tables {
        let hidden = table
            .as_object()
            .is_some_and(|t| t.len() == 1 && t.get("enabled") == Some(&Value::Bool(false)));
        let config: McpServerConfig = if hidden {
            McpServerConfig {
                enabled: false,
                ..McpServerConfig::default()
            }
        } else {
            serde_json::from_value(table).map_err(|e| format!("mcp_servers.{name}: {e}"))?
        };
        if config.enabled {
            config
                .transport()
                .map_err(|e| format!("mcp_servers.{name}: {e}"))?;
        }
        configs.insert(name, config);
    }
    Ok(configs)
}

/// Writes `value` over `at`, table by table.
fn merge(at: &mut serde_json::Value, value: serde_json::Value) {
    use serde_json::Value;
    match (at, value) {
        (Value::Object(old), Value::Object(new)) => {
            for (k, v) in new {
                merge(old.entry(k).or_insert(Value::Null), v);
            }
        }
        (at, value) => *at = value,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overrides(v: serde_json::Value) -> Result<BTreeMap<String, McpServerConfig>, String> {
        from_overrides(v.as_object().unwrap())
    }

    #[test]
    fn overrides_name_servers_by_dotted_keys_or_tables() {
        let dotted = overrides(serde_json::json!({
            "model": "ignored here",
            "mcp_servers.docs": {"command": "docs-server"},
            "mcp_servers.docs.args": ["--ro"],
            "mcp_servers.web.url": "http://127.0.0.1:9/mcp",
        }))
        .unwrap();
        assert_eq!(dotted["docs"].command.as_deref(), Some("docs-server"));
        assert_eq!(dotted["docs"].args, vec!["--ro"]);
        assert!(matches!(
            dotted["web"].transport(),
            Ok(Transport::Http { .. })
        ));
        let nested = overrides(serde_json::json!({
            "mcp_servers": {"docs": {"command": "d", "tool_timeout_sec": 5}},
        }))
        .unwrap();
        assert_eq!(nested["docs"].tool_timeout(), Duration::from_secs(5));
        let hidden = overrides(serde_json::json!({"mcp_servers.docs.enabled": false})).unwrap();
        assert!(!hidden["docs"].enabled);
        assert!(overrides(serde_json::json!({})).unwrap().is_empty());
        // Mistakes name the server and the key.
        let e = overrides(serde_json::json!({"mcp_servers.docs.comand": "x"})).unwrap_err();
        assert!(
            e.contains("mcp_servers.docs") && e.contains("comand"),
            "{e}"
        );
        let e = overrides(serde_json::json!({"mcp_servers.docs.args": ["x"]})).unwrap_err();
        assert!(e.contains("needs `command`"), "{e}");
        assert!(overrides(serde_json::json!({"mcp_servers": 3})).is_err());
    }

    #[test]
    fn a_codex_table_reads_as_it_is() {
        let t: McpServerConfig = toml::from_str(
            "command = \"npx\"\nargs = [\"-y\", \"srv\"]\nenv = { A = \"1\" }\n\
             startup_timeout_sec = 2.5\ntool_timeout_sec = 30\ndisabled_tools = [\"rm\"]\n",
        )
        .unwrap();
        assert!(matches!(t.transport().unwrap(), Transport::Stdio { .. }));
        assert_eq!(t.startup_timeout(), Duration::from_millis(2500));
        assert!(t.offers("ls") && !t.offers("rm"));
        let e = toml::from_str::<McpServerConfig>("comand = \"x\"").unwrap_err();
        assert!(e.to_string().contains("comand"), "{e}");
        let both: McpServerConfig = toml::from_str("command = \"x\"\nurl = \"http://h\"").unwrap();
        assert!(both.transport().is_err());
        let http: McpServerConfig =
            toml::from_str("url = \"https://h/mcp\"\ntool_classes = { close = \"money\" }")
                .unwrap();
        assert_eq!(http.class_of("close"), Some("money"));
        assert_eq!(http.class_of("list"), None);
    }
}
