//! The state shared by every connection of one server process: loaded
//! threads, connections and their thread subscriptions, the server-request
//! broker, the approvals engine on `$KEEL_HOME/keel.db` (opened on first
//! use), and what the host provides (models, home). One runtime serves
//! stdio, WebSocket and unix clients alike, so threads, subscriptions and
//! approvals are shared, not per-connection.
//!
//! It must not know transports or JSON-RPC framing.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use keel_app_server_protocol::RequestId;
use keel_core::keel_approvals::{ApprovalEngine, EngineConfig};
use keel_core::{ApprovalFrontend, EngineGate};
use keel_session_store::SessionStore;
use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::commands::ProcessTable;
use crate::outbound::{Connection, ConnectionId};
use crate::thread_state::LoadedThread;

/// Default limit on one inbound frame, in bytes.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 8 * 1024 * 1024;

pub use keel_core::ModelSource;

/// Settings of one server process.
#[derive(Debug, Clone)]
pub struct AppServerConfig {
    /// `KEEL_HOME`: reported as `codexHome`; sessions live under it.
    pub home: PathBuf,
    /// The directory new threads use when `thread/start` names none.
    pub default_cwd: PathBuf,
    pub max_frame_bytes: usize,
    /// How long every approval request waits for an answer, over
    /// `[approvals] expire_after` and `[approvals.expire_after_by_class]`
    /// of `config.toml`; `None`: as configured there (default 7 days).
    pub approval_timeout: Option<Duration>,
    /// keel's version, for `userAgent` and `cliVersion`.
    pub version: String,
    /// The sandbox policy of threads and `command/exec` that name none
    /// (`[sandbox]` of `config.toml`).
    pub sandbox: keel_protocol::SandboxPolicy,
    /// Run commands unconfined where the kernel cannot confine them.
    pub allow_unconfined: bool,
}

impl AppServerConfig {
    pub fn new(home: PathBuf, default_cwd: PathBuf) -> Self {
        Self {
            home,
            default_cwd,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            approval_timeout: None,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            sandbox: keel_protocol::SandboxPolicy::default(),
            allow_unconfined: false,
        }
    }
}

/// The shared state of one server.
pub struct Runtime {
    pub config: AppServerConfig,
    pub models: Arc<dyn ModelSource>,
    pub store: SessionStore,
    pub broker: Broker,
    pub processes: Arc<ProcessTable>,
    /// `fs/watch` watches of every connection.
    pub watchers: crate::watch::Watchers,
    /// The approval gate of every thread: core's gate over the approvals
    /// engine (opened on first use), with this server as its front end.
    pub gate: Arc<EngineGate>,
    threads: Mutex<HashMap<String, Arc<LoadedThread>>>,
    connections: Mutex<HashMap<ConnectionId, Arc<Connection>>>,
    /// thread id → subscribed connections.
    subscriptions: Mutex<HashMap<String, HashSet<ConnectionId>>>,
    next_connection: AtomicU64,
    /// Cancelled when the server shuts down.
    pub shutdown: CancellationToken,
    /// The walls of `command/exec` (threads get theirs from the builder).
    pub sandbox: Arc<keel_sandbox::Sandbox>,
    /// The MCP servers whose tools every thread gets (replaced by
    /// `config/mcpServer/reload`).
    mcp: std::sync::RwLock<Option<Arc<keel_mcp::McpServers>>>,
    /// Where threads' turns run when not here (a cluster's workers; see
    /// `keel_core`'s `RunsElsewhere`); `None`: here.
    elsewhere: std::sync::RwLock<Option<Arc<dyn keel_core::RunsElsewhere>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Runtime {
    /// A runtime whose approval gate announces held calls through the
    /// front end `frontend` makes for it (the app-server's is
    /// `approvals::frontend`).
    pub fn new(
        config: AppServerConfig,
        models: Arc<dyn ModelSource>,
        frontend: impl FnOnce(Weak<Runtime>) -> Arc<dyn ApprovalFrontend>,
    ) -> Arc<Self> {
        let gate = Arc::new(EngineGate::lazy(open_engine(
            config.home.clone(),
            config.approval_timeout,
        )));
        let sandbox = Arc::new(
            keel_sandbox::Sandbox::new(vec![config.home.clone()])
                .allow_unconfined(config.allow_unconfined),
        );
        let runtime = Arc::new(Self {
            gate,
            store: SessionStore::for_home(&config.home),
            config,
            models,
            broker: Broker::new(),
            processes: Arc::new(ProcessTable::default()),
            watchers: crate::watch::Watchers::default(),
            threads: Mutex::new(HashMap::new()),
            connections: Mutex::new(HashMap::new()),
            subscriptions: Mutex::new(HashMap::new()),
            next_connection: AtomicU64::new(1),
            shutdown: CancellationToken::new(),
            sandbox,
            mcp: std::sync::RwLock::new(None),
            elsewhere: std::sync::RwLock::new(None),
        });
        runtime
            .gate
            .set_frontend(frontend(Arc::downgrade(&runtime)));
        runtime
            .gate
            .set_notifier(keel_core::notify::Notifier::for_home(&runtime.config.home));
        runtime
    }

    /// The approvals engine on the configured store (`$KEEL_HOME/keel.db`
    /// unless `[approvals] store` or `KEEL_APPROVALS_DATABASE_URL` says
    /// otherwise; held calls expire as `[approvals]` configures, or after
    /// `approval_timeout` whatever their class when that is set), or why it
    /// could not be opened: then every tool call that would need a decision
    /// is denied, saying why.
    pub async fn approvals(&self) -> Result<&ApprovalEngine, &str> {
        self.gate.opened().await
    }

    pub fn next_connection_id(&self) -> ConnectionId {
        self.next_connection.fetch_add(1, Ordering::Relaxed)
    }

    pub fn add_connection(&self, conn: Arc<Connection>) {
        lock(&self.connections).insert(conn.id, conn);
    }

    /// Forgets a closed connection: its subscriptions, its processes, its
    /// file watches and its eligibility for pending approvals (which stay
    /// pending).
    pub async fn remove_connection(&self, id: ConnectionId) {
        lock(&self.connections).remove(&id);
        for subs in lock(&self.subscriptions).values_mut() {
            subs.remove(&id);
        }
        self.broker.connection_closed(id);
        self.watchers.connection_closed(id);
        self.processes.kill_owned_by(id).await;
    }

    pub fn connection(&self, id: ConnectionId) -> Option<Arc<Connection>> {
        lock(&self.connections).get(&id).cloned()
    }

    /// Answers `turn/interrupt` requests (`{}`) on the connections that
    /// sent them, if they are still open.
    pub async fn answer_interrupts(&self, requests: Vec<(ConnectionId, RequestId)>) {
        for (conn, id) in requests {
            if let Some(conn) = self.connection(conn) {
                conn.respond(id, serde_json::json!({})).await;
            }
        }
    }

    /// The MCP servers threads get tools from now.
    pub fn mcp(&self) -> Option<Arc<keel_mcp::McpServers>> {
        self.mcp.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Replaces the MCP servers; returns the old ones (to be stopped).
    pub fn set_mcp(
        &self,
        servers: Option<Arc<keel_mcp::McpServers>>,
    ) -> Option<Arc<keel_mcp::McpServers>> {
        std::mem::replace(
            &mut *self.mcp.write().unwrap_or_else(|e| e.into_inner()),
            servers,
        )
    }

    /// Sends the turns of threads opened from now on elsewhere.
    pub fn set_runs_elsewhere(&self, elsewhere: Option<Arc<dyn keel_core::RunsElsewhere>>) {
        *self.elsewhere.write().unwrap_or_else(|e| e.into_inner()) = elsewhere;
    }

    /// Where threads' turns run when not here.
    /// The id of `thread`'s turn that runs now without an id known here (a
    /// queued message's, or one another front-end started on a worker):
    /// the one its history gives it, counted up to the entry the run began
    /// after when it runs elsewhere (the tree may already hold what the run
    /// stored, all of it when the run ended before this front-end heard
    /// it), so every front-end knows the turn by one id. `log_seq`: where
    /// the event that opens the turn was stored, when it came from the
    /// session's log.
    pub async fn unnamed_turn_id(&self, thread: &LoadedThread, log_seq: Option<u64>) -> String {
        let running = match (self.runs_elsewhere(), log_seq) {
            (Some(elsewhere), Some(seq)) => elsewhere.run_at(&thread.id, seq).await,
            (Some(elsewhere), None) => elsewhere.running(&thread.id).await,
            (None, _) => None,
        };
        let tree = thread.handle.tree();
        let steps = match &running {
            Some(run) => crate::history::steps_to(&tree, run.base_leaf.as_deref()),
            None => crate::history::steps(&tree),
        };
        crate::history::next_turn_id(&thread.id, &steps)
    }

    pub fn runs_elsewhere(&self) -> Option<Arc<dyn keel_core::RunsElsewhere>> {
        self.elsewhere
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn thread(&self, id: &str) -> Option<Arc<LoadedThread>> {
        lock(&self.threads).get(id).cloned()
    }

    /// Loads a thread. Its turns will pass the approval gate, so a gate
    /// not open yet starts opening now, off the first turn's path.
    pub fn insert_thread(&self, thread: Arc<LoadedThread>) {
        self.gate.warm();
        lock(&self.threads).insert(thread.id.clone(), thread);
    }

    pub fn remove_thread(&self, id: &str) -> Option<Arc<LoadedThread>> {
        lock(&self.subscriptions).remove(id);
        lock(&self.threads).remove(id)
    }

    /// Ids of the loaded threads, sorted.
    pub fn loaded_thread_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.threads).keys().cloned().collect();
        ids.sort();
        ids
    }

    pub fn subscribe(&self, thread_id: &str, conn: ConnectionId) {
        lock(&self.subscriptions)
            .entry(thread_id.to_owned())
            .or_default()
            .insert(conn);
    }

    /// Whether `conn` was subscribed.
    pub fn unsubscribe(&self, thread_id: &str, conn: ConnectionId) -> bool {
        lock(&self.subscriptions)
            .get_mut(thread_id)
            .is_some_and(|s| s.remove(&conn))
    }

    /// The connections subscribed to a thread.
    pub fn subscribers(&self, thread_id: &str) -> Vec<Arc<Connection>> {
        let ids: Vec<ConnectionId> = lock(&self.subscriptions)
            .get(thread_id)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        let conns = lock(&self.connections);
        let mut out: Vec<Arc<Connection>> =
            ids.iter().filter_map(|id| conns.get(id).cloned()).collect();
        out.sort_by_key(|c| c.id);
        out
    }

    /// Stops every loaded thread (aborting runs) and flushes its file.
    pub async fn shutdown_threads(&self) {
        self.shutdown.cancel();
        let threads: Vec<Arc<LoadedThread>> = lock(&self.threads).drain().map(|(_, t)| t).collect();
        for t in threads {
            t.stop().await;
        }
        self.processes.kill_all().await;
    }
}

impl crate::notify::Notifier for Runtime {
    fn subscribers(&self, thread_id: &str) -> Vec<Arc<Connection>> {
        Runtime::subscribers(self, thread_id)
    }
}

/// Opens the approvals engine on the configured store, with expiry as
/// configured or `timeout` for every request.
async fn open_engine(home: PathBuf, timeout: Option<Duration>) -> Result<ApprovalEngine, String> {
    let clock = Arc::new(keel_core::keel_approvals::SystemClock);
    let opened = match timeout {
        None => ApprovalEngine::open_home(&home, clock).await,
        Some(timeout) => {
            let config = EngineConfig {
                default_ttl: timeout,
                class_ttl: Vec::new(),
                ..EngineConfig::default()
            };
            ApprovalEngine::open_home_with(&home, clock, config).await
        }
    };
    opened.map_err(|e| e.to_string())
}
