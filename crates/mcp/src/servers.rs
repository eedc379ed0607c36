//! The MCP servers of one session: started together, watched, restarted,
//! stopped.
//!
//! Owns [`McpServers`]: every enabled server starts in parallel, each
//! bounded by its own startup timeout (a server that hangs delays nothing
//! beyond that); its state and tools are kept for listing (`keel mcp
//! list`, RPC `get_state`, app-server `mcpServerStatus/list`); a call to a
//! server that died starts it again first, with a backoff between failed
//! starts (1 s, doubling, at most a minute); servers can be added, replaced
//! and removed while the set runs ([`McpServers::put`],
//! [`McpServers::remove`]); [`McpServers::stop`] ends every connection and
//! kills every stdio server's process group. It must not know how tools are
//! offered to the model.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;

use crate::client::{CallOutcome, Connection, Resources, ServerTool};
use crate::config::McpServerConfig;
use crate::error::{Error, Result};

/// First wait after a failed start (doubled each time).
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Longest wait between starts.
const MAX_BACKOFF: Duration = Duration::from_secs(60);

/// Where a server stands.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerState {
    Starting,
    Ready,
    Failed,
    Disabled,
    Stopped,
}

/// A server as it is listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServerStatus {
    pub name: String,
    pub state: ServerState,
    /// The tools offered (configured filters applied), by their MCP names.
    pub tools: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The MCP version the server and keel agreed on (`2026-07-28`: a
    /// stateless server found with `server/discover`; earlier ones: the
    /// `initialize` handshake), once connected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
}

/// What is known of a server: `(state, tools, error, resources)`.
type Known = (ServerState, Vec<ServerTool>, Option<String>, Resources);

struct Server {
    name: String,
    config: McpServerConfig,
    conn: tokio::sync::Mutex<Option<Connection>>,
    status: Mutex<Known>,
    /// Failed starts in a row and when the next may be tried.
    backoff: Mutex<(u32, Option<Instant>)>,
    /// The MCP version of the last connection.
    protocol: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Called with the servers' tools after a server's tool list changed.
pub type ToolsChanged = Box<dyn Fn() + Send + Sync>;
/// Whether a listener still wants to hear (its session is still open).
pub type StillListening = Box<dyn Fn() -> bool + Send + Sync>;

/// One who hears about changed tool lists, for as long as it listens.
struct Listener {
    listening: StillListening,
    changed: ToolsChanged,
}

/// The servers of one session.
pub struct McpServers {
    /// In configuration order, then in the order they were added.
    servers: Mutex<Vec<Arc<Server>>>,
    env: Vec<(String, String)>,
    /// Where connections report a changed tool list.
    changed: tokio::sync::mpsc::UnboundedSender<String>,
    /// Who hears about a changed tool list; those no longer listening
    /// (their session was closed or replaced) are dropped whenever another
    /// is added or a list changes, so a long-lived set of servers does not
    /// keep every session it ever served.
    listeners: Mutex<Vec<Listener>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field(
                "servers",
                &self
                    .all()
                    .iter()
                    .map(|s| s.name.clone())
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl McpServers {
    /// [`Self::start`] with the environment keel's commands get in `cwd`
    /// (its secrets dropped, `[shell_environment_policy]` applied).
    pub async fn start_in(
        configs: &BTreeMap<String, McpServerConfig>,
        cwd: &std::path::Path,
    ) -> Arc<Self> {
        let env = keel_tools::EnvPolicy::configured()
            .child_env_now(&[], cwd)
            .into_iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        Self::start(configs, env).await
    }

    /// Starts every enabled server of `configs` in parallel and waits until
    /// each is ready, failed or past its startup timeout. `env` is the
    /// environment stdio servers start from (keel's, secrets dropped).
    pub async fn start(
        configs: &BTreeMap<String, McpServerConfig>,
        env: Vec<(String, String)>,
    ) -> Arc<Self> {
        let servers: Vec<Arc<Server>> = configs
            .iter()
            .map(|(name, config)| new_server(name, config.clone()))
            .collect();
        let (changed, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let this = Arc::new(Self {
            servers: Mutex::new(servers),
            env,
            changed,
            listeners: Mutex::new(Vec::new()),
        });
        // A server that says its tools changed is listed again, and the
        // listeners offer the new list from the next model call on.
        let weak = Arc::downgrade(&this);
        tokio::spawn(async move {
            while let Some(name) = rx.recv().await {
                let Some(this) = weak.upgrade() else {
                    return;
                };
                this.refresh(&name).await;
            }
        });
        let all = this.all();
        let starts = all
            .iter()
            .filter(|s| s.config.enabled)
            .map(|s| this.connect(s));
        futures::future::join_all(starts).await;
        this
    }

    /// Starts `server` (bounded by its startup timeout) and records the outcome.
    async fn connect(&self, server: &Arc<Server>) -> Result<()> {
        let mut slot = server.conn.lock().await;
        if let Some(old) = slot.take() {
            old.stop().await;
        }
        let timeout = server.config.startup_timeout();
        let started = tokio::time::timeout(timeout, async {
            let conn = Connection::start(
                &server.name,
                &server.config,
                self.env.clone(),
                Some(self.changed.clone()),
            )
            .await?;
            let tools = conn.tools().await?;
            let resources = conn.resources().await;
            Ok::<_, Error>((conn, tools, resources))
        })
        .await
        .map_err(|_| Error::Start(format!("did not start within {}s", timeout.as_secs_f64())))
        .and_then(|r| r);
        match started {
            Ok((conn, tools, resources)) => {
                let tools: Vec<ServerTool> = tools
                    .into_iter()
                    .filter(|t| server.config.offers(&t.name))
                    .collect();
                *lock(&server.protocol) = conn.protocol_version();
                *lock(&server.status) = (ServerState::Ready, tools, None, resources);
                *lock(&server.backoff) = (0, None);
                *slot = Some(conn);
                Ok(())
            }
            Err(e) => {
                tracing::warn!(server = %server.name, error = %e, "MCP server failed to start");
                let mut b = lock(&server.backoff);
                let wait = FIRST_BACKOFF
                    .saturating_mul(2u32.saturating_pow(b.0))
                    .min(MAX_BACKOFF);
                *b = (b.0.saturating_add(1), Some(Instant::now() + wait));
                let mut st = lock(&server.status);
                st.0 = ServerState::Failed;
                st.2 = Some(e.to_string());
                Err(e)
            }
        }
    }

    /// Calls `changed` whenever a server's tool list changed (after the
    /// new list is known), until `listening` says no more.
    pub fn on_tools_changed(&self, listening: StillListening, changed: ToolsChanged) {
        let mut listeners = lock(&self.listeners);
        listeners.retain(|l| (l.listening)());
        listeners.push(Listener { listening, changed });
    }

    /// How many still listen for changed tool lists.
    pub fn listeners(&self) -> usize {
        let mut listeners = lock(&self.listeners);
        listeners.retain(|l| (l.listening)());
        listeners.len()
    }

    /// When server `name` said its tool list changed (and nobody listed
    /// it since), lists its tools again and tells the listeners.
    async fn refresh(&self, name: &str) {
        if self.relist(name).await {
            self.tell_listeners();
        }
    }

    /// Lists the tools of server `name` again if it said they changed;
    /// whether it did.
    async fn relist(&self, name: &str) -> bool {
        let Ok(s) = self.named(name) else {
            return false;
        };
        let conn = s.conn.lock().await;
        let Some(c) = conn.as_ref() else {
            return false;
        };
        if !c
            .tools_changed
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            return false;
        }
        match c.tools().await {
            Ok(tools) => {
                let tools = tools
                    .into_iter()
                    .filter(|t| s.config.offers(&t.name))
                    .collect();
                lock(&s.status).1 = tools;
                tracing::info!(server = name, "the MCP server's tool list changed");
            }
            Err(e) => tracing::warn!(server = name, error = %e, "listing changed tools failed"),
        }
        true
    }

    /// The names of the servers, in configuration order.
    pub fn names(&self) -> Vec<String> {
        self.all().iter().map(|s| s.name.clone()).collect()
    }

    /// Whether a server is named `name`.
    pub fn has(&self, name: &str) -> bool {
        self.named(name).is_ok()
    }

    /// Every server, its state and tools.
    pub fn status(&self) -> Vec<ServerStatus> {
        self.all()
            .iter()
            .map(|s| {
                let st = lock(&s.status);
                ServerStatus {
                    name: s.name.clone(),
                    state: st.0.clone(),
                    tools: st.1.iter().map(|t| t.name.clone()).collect(),
                    error: st.2.clone(),
                    protocol_version: lock(&s.protocol).clone(),
                }
            })
            .collect()
    }

    /// The tools of the ready servers: `(server, tool, the server's config)`.
    pub fn tool_list(&self) -> Vec<(String, ServerTool, McpServerConfig)> {
        self.all()
            .iter()
            .flat_map(|s| {
                let tools = lock(&s.status).1.clone();
                tools
                    .into_iter()
                    .map(|t| (s.name.clone(), t, s.config.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The resources of every ready server that offers any: `(server,
    /// resources)`.
    pub fn resources(&self) -> Vec<(String, Resources)> {
        self.all()
            .iter()
            .map(|s| (s.name.clone(), lock(&s.status).3.clone()))
            .filter(|(_, r)| !r.is_empty())
            .collect()
    }

    /// The server `name`, connected: started again first when it died
    /// (unless its backoff has not passed).
    async fn live(&self, name: &str) -> Result<Arc<Server>> {
        let s = self.named(name)?;
        if lock(&s.status).0 == ServerState::Disabled {
            return Err(Error::Call(format!("MCP server {name} is disabled")));
        }
        let dead = {
            let conn = s.conn.lock().await;
            conn.as_ref().is_none_or(Connection::is_closed)
        };
        if !dead {
            return Ok(s);
        }
        {
            let mut st = lock(&s.status);
            if st.0 == ServerState::Ready {
                st.0 = ServerState::Failed;
                st.2 = Some("the server stopped".to_owned());
            }
        }
        if let Some(at) = lock(&s.backoff).1
            && Instant::now() < at
        {
            return Err(Error::Call(format!(
                "MCP server {name} is down ({}); it is started again in {}s",
                lock(&s.status).2.clone().unwrap_or_default(),
                at.saturating_duration_since(Instant::now()).as_secs() + 1
            )));
        }
        tracing::info!(server = name, "starting the MCP server again");
        self.connect(&s).await.map_err(|e| {
            Error::Call(format!(
                "MCP server {name} is down and did not start again: {e}"
            ))
        })?;
        Ok(s)
    }

    /// Marks `s` failed when its connection closed during a request.
    fn note_closed(s: &Server, conn: &Connection) {
        if conn.is_closed() {
            let mut st = lock(&s.status);
            st.0 = ServerState::Failed;
            st.2 = Some("the server stopped during a call".to_owned());
        }
    }

    /// Calls `tool` of `server` (started again first when it died); the
    /// server's progress messages and questions for the call go where
    /// `hooks` say.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        args: Value,
        hooks: crate::client::CallHooks,
    ) -> Result<CallOutcome> {
        let s = self.live(server).await?;
        let conn = s.conn.lock().await;
        let Some(c) = conn.as_ref() else {
            return Err(Error::Call(format!("MCP server {server} is not connected")));
        };
        let outcome = c.call(tool, args, s.config.tool_timeout(), hooks).await;
        if outcome.is_err() {
            Self::note_closed(&s, c);
        }
        drop(conn);
        // A tool list the call changed is known before the model is asked
        // again.
        self.refresh(server).await;
        outcome
    }

    /// Reads resource `uri` of `server` (started again first when it died).
    pub async fn read_resource(&self, server: &str, uri: &str) -> Result<Vec<Value>> {
        let s = self.live(server).await?;
        let conn = s.conn.lock().await;
        let Some(c) = conn.as_ref() else {
            return Err(Error::Call(format!("MCP server {server} is not connected")));
        };
        let contents = c.read_resource(uri, s.config.tool_timeout()).await;
        if contents.is_err() {
            Self::note_closed(&s, c);
        }
        contents
    }

    /// Starts server `name` again now (its backoff forgotten), enabled or
    /// not; the listeners hear of its tools.
    pub async fn reconnect(&self, name: &str) -> Result<()> {
        let s = self.named(name)?;
        *lock(&s.backoff) = (0, None);
        lock(&s.status).0 = ServerState::Starting;
        let started = self.connect(&s).await;
        self.tell_listeners();
        started
    }

    /// Turns server `name` on (started now) or off (stopped, its tools
    /// gone) for the rest of this set's life; the listeners hear of it.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<()> {
        let s = self.named(name)?;
        if enabled {
            return self.reconnect(name).await;
        }
        if let Some(conn) = s.conn.lock().await.take() {
            conn.stop().await;
        }
        *lock(&s.status) = (
            ServerState::Disabled,
            Vec::new(),
            None,
            Resources::default(),
        );
        self.tell_listeners();
        Ok(())
    }

    /// Adds server `name`, or replaces the one of that name (stopped
    /// first, its place in the order kept), and starts it when enabled
    /// (bounded by its startup timeout); the listeners hear of its tools.
    /// The error is why it did not start; it stays listed, failed, and is
    /// started again on its next call.
    pub async fn put(&self, name: &str, config: McpServerConfig) -> Result<()> {
        let server = new_server(name, config);
        let old = {
            let mut servers = lock(&self.servers);
            match servers.iter_mut().find(|s| s.name == name) {
                Some(slot) => Some(std::mem::replace(slot, server.clone())),
                None => {
                    servers.push(server.clone());
                    None
                }
            }
        };
        if let Some(old) = old {
            Self::stop_one(&old).await;
        }
        let started = if server.config.enabled {
            self.connect(&server).await
        } else {
            Ok(())
        };
        self.tell_listeners();
        started
    }

    /// Stops and forgets server `name`; the listeners hear its tools are
    /// gone. Whether there was one.
    pub async fn remove(&self, name: &str) -> bool {
        let removed = {
            let mut servers = lock(&self.servers);
            let at = servers.iter().position(|s| s.name == name);
            at.map(|i| servers.remove(i))
        };
        let Some(server) = removed else {
            return false;
        };
        Self::stop_one(&server).await;
        self.tell_listeners();
        true
    }

    /// The configuration of server `name`.
    pub fn config(&self, name: &str) -> Option<McpServerConfig> {
        self.named(name).ok().map(|s| s.config.clone())
    }

    fn all(&self) -> Vec<Arc<Server>> {
        lock(&self.servers).clone()
    }

    fn named(&self, name: &str) -> Result<Arc<Server>> {
        lock(&self.servers)
            .iter()
            .find(|s| s.name == name)
            .cloned()
            .ok_or_else(|| Error::Call(format!("no MCP server named {name}")))
    }

    /// Ends `s`'s connection (its process group killed).
    async fn stop_one(s: &Server) {
        if let Some(conn) = s.conn.lock().await.take() {
            conn.stop().await;
        }
        let mut st = lock(&s.status);
        if st.0 != ServerState::Disabled {
            st.0 = ServerState::Stopped;
        }
    }

    fn tell_listeners(&self) {
        let mut listeners = lock(&self.listeners);
        listeners.retain(|l| (l.listening)());
        for listener in listeners.iter() {
            (listener.changed)();
        }
    }

    /// Stops every server (their process groups are killed).
    pub async fn stop(&self) {
        for s in self.all() {
            Self::stop_one(&s).await;
        }
    }
}

/// A server of `config`, not started yet.
fn new_server(name: &str, config: McpServerConfig) -> Arc<Server> {
    let state = if config.enabled {
        ServerState::Starting
    } else {
        ServerState::Disabled
    };
    Arc::new(Server {
        name: name.to_owned(),
        config,
        conn: tokio::sync::Mutex::new(None),
        status: Mutex::new((state, Vec::new(), None, Resources::default())),
        backoff: Mutex::new((0, None)),
        protocol: Mutex::new(None),
    })
}

#[cfg(test)]
#[path = "servers_tests.rs"]
mod tests;
