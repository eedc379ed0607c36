//! One connection to one MCP server, on the official SDK (`rmcp`).
//!
//! Owns starting a server (a stdio child in its own process group, with
//! keel's environment policy; or a streamable HTTP endpoint with a bearer
//! token read from the environment and extra headers), the client side of
//! the handshake (a server's form question, elicitation, goes to the person
//! behind the call that is running, [`Attended`]; with nobody there it is
//! declined and logged; a changed tool list is noted), listing
//! tools, calling one with a timeout, and stopping the server (its whole
//! process group is killed). Results are read as MCP's wire JSON, so the
//! rest of the crate does not follow the SDK's types. It must not know how
//! tools are offered or approved.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use keel_tools::{Answer, Asker, Question};
use rmcp::model::{CallToolRequestParams, ElicitRequestParams, ElicitResult, ElicitationAction};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData, RoleClient};
use serde_json::{Map, Value};

use crate::config::{McpServerConfig, Protocol, Transport};
use crate::error::{Error, Result};

/// What keel's side of the connection does with the server's requests.
#[derive(Debug, Clone)]
pub struct KeelClient {
    server: String,
    /// Set when the server says its tool list changed.
    pub tools_changed: Arc<AtomicBool>,
    /// Told the server's name when its tool list changed.
    changed: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Progress token → where the progress of that call goes.
    progress: Arc<std::sync::Mutex<std::collections::HashMap<String, ProgressSink>>>,
    /// The person behind each call in flight that has one, by the call's
    /// progress token.
    attended: Arc<std::sync::Mutex<std::collections::HashMap<String, Attended>>>,
    /// How many calls are in flight on this connection.
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
}

/// The person behind a call: a question the server asks while it runs is
/// put to them.
#[derive(Clone)]
pub struct Attended {
    /// The model's call id.
    pub call_id: String,
    pub asker: Arc<dyn Asker>,
    /// Cancelled when the call is aborted: an open question is withdrawn.
    pub cancel: tokio_util::sync::CancellationToken,
}

impl std::fmt::Debug for Attended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attended")
            .field("call_id", &self.call_id)
            .finish_non_exhaustive()
    }
}

/// What may come with a call besides its arguments.
#[derive(Debug, Default)]
pub struct CallHooks {
    /// Where the server's progress messages for the call go.
    pub progress: Option<ProgressSink>,
    /// Who the server's questions during the call are put to.
    pub attended: Option<Attended>,
}

/// What a server offers to read, in MCP's wire shape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Resources {
    /// `resources/list`: each with its `uri`.
    pub listed: Vec<Value>,
    /// `resources/templates/list`: each with its `uriTemplate` (RFC 6570).
    pub templates: Vec<Value>,
}

impl Resources {
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty() && self.templates.is_empty()
    }
}

/// Where a call's progress messages go.
pub type ProgressSink = tokio::sync::mpsc::UnboundedSender<String>;

impl ClientHandler for KeelClient {
    /// keel's name and version, and that it answers form elicitation
    /// (through the person behind the call, or with a decline, so a server
    /// that asks always learns what became of its question).
    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        capabilities.elicitation = Some(
            rmcp::model::ElicitationCapability::new()
                .with_form(rmcp::model::FormElicitationCapability::new()),
        );
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new("keel", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> std::result::Result<ElicitResult, ErrorData> {
        let (message, schema) = match request {
            ElicitRequestParams::FormElicitationParams {
                message,
                requested_schema,
                ..
            } => (
                message,
                serde_json::to_value(&requested_schema).unwrap_or(Value::Null),
            ),
            // URL mode (and modes yet to come; the SDK's enum is open).
            _ => {
                tracing::warn!(server = %self.server, "the MCP server asked a question that is not a form (elicitation); declined: keel takes form questions only");
                return Ok(ElicitResult::new(ElicitationAction::Decline));
            }
        };
        // Servers are shared by sessions and MCP does not say which call a
        // question belongs to: it goes to a person only when exactly one
        // call is in flight here and a person is behind it.
        let attended = {
            let attended = self.attended.lock().unwrap_or_else(|e| e.into_inner());
            let alone = self.in_flight.load(Ordering::SeqCst) == 1 && attended.len() == 1;
            alone.then(|| attended.values().next().cloned()).flatten()
        };
        let Some(attended) = attended else {
            tracing::warn!(
                server = %self.server,
                "the MCP server asked a question (elicitation); declined: no one attends the call it came with"
            );
            return Ok(ElicitResult::new(ElicitationAction::Decline));
        };
        let question = Question {
            from: self.server.clone(),
            message,
            schema: schema.clone(),
        };
        let answer = tokio::select! {
            a = attended.asker.ask(&attended.call_id, question) => a,
            _ = attended.cancel.cancelled() => Answer::Cancel,
            _ = context.ct.cancelled() => Answer::Cancel,
        };
        let answer = match answer {
            Answer::Accept(content) => {
                let content = with_defaults(&schema, content);
                match keel_tools::ask::check_answer(&schema, &content) {
                    Ok(()) => Answer::Accept(content),
                    Err(why) => {
                        tracing::warn!(server = %self.server, "the answer to the server's question does not fit it ({why}); declined");
                        Answer::Decline
                    }
                }
            }
            other => other,
        };
        tracing::info!(server = %self.server, action = answer.action(), "the MCP server's question was answered");
        Ok(match answer {
            Answer::Accept(content) => {
                let mut result = ElicitResult::new(ElicitationAction::Accept);
                result.content = Some(content);
                result
            }
            Answer::Decline => ElicitResult::new(ElicitationAction::Decline),
            Answer::Cancel => ElicitResult::new(ElicitationAction::Cancel),
        })
    }

    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        context: NotificationContext<RoleClient>,
    ) {
        let _ = context;
        let token = match &params.progress_token.0 {
            rmcp::model::NumberOrString::String(s) => s.to_string(),
            rmcp::model::NumberOrString::Number(n) => n.to_string(),
        };
        tracing::debug!(server = %self.server, token = %token, "MCP progress");
        // The SDK may put its own token on the request: then the one call
        // in flight on this connection is the one meant.
        let sink = {
            let sinks = self.progress.lock().unwrap_or_else(|e| e.into_inner());
            sinks.get(&token).cloned().or_else(|| {
                (sinks.len() == 1)
                    .then(|| sinks.values().next().cloned())
                    .flatten()
            })
        };
        if let Some(sink) = sink {
            let done = match params.total {
                Some(total) => format!("{}/{}", params.progress, total),
                None => format!("{}", params.progress),
            };
            let _ = sink.send(match params.message {
                Some(m) => format!("{m} ({done})"),
                None => done,
            });
        }
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        let _ = context;
        self.note_tools_changed();
    }
}

impl KeelClient {
    /// The server's name.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The server said its tool list changed.
    pub(crate) fn note_tools_changed(&self) {
        self.tools_changed.store(true, Ordering::SeqCst);
        if let Some(tx) = &self.changed {
            let _ = tx.send(self.server.clone());
        }
    }
}

/// A tool as the server lists it (MCP's wire shape).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerTool {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// `annotations` (`readOnlyHint`, `destructiveHint`, `openWorldHint`, …).
    pub annotations: Value,
}

/// What a call returned (MCP's wire shape).
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// `content`: text, image, audio, resource blocks.
    pub content: Vec<Value>,
    pub structured: Option<Value>,
    pub is_error: bool,
}

/// A live connection.
pub struct Connection {
    /// `None` once stopped.
    service: Option<RunningService<RoleClient, KeelClient>>,
    /// The process group of a stdio server (killed when the connection ends).
    group: Option<i32>,
    pub tools_changed: Arc<AtomicBool>,
    progress: Arc<std::sync::Mutex<std::collections::HashMap<String, ProgressSink>>>,
    attended: Arc<std::sync::Mutex<std::collections::HashMap<String, Attended>>>,
    in_flight: Arc<std::sync::atomic::AtomicUsize>,
    /// The stream of a 2026-07-28 server's tool-list changes.
    listener: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("group", &self.group)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Starts server `name` and completes the handshake: the `initialize`
    /// handshake of a session-based server, and `server/discover` (MCP
    /// 2026-07-28, stateless) for a server that refuses it; with `protocol
    /// = "2026-07-28"`, discovery first (falling back to `initialize` for
    /// a server that does not know it). `env` is the child's base
    /// environment (keel's, secrets dropped).
    pub async fn start(
        name: &str,
        config: &McpServerConfig,
        env: Vec<(String, String)>,
        changed: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    ) -> Result<Self> {
        let preferred = vec![rmcp::model::ProtocolVersion::V_2026_07_28];
        // The lifecycle tried first, and the one tried when the server
        // refuses it.
        let (first, then) = match config.protocol().map_err(Error::Config)? {
            Protocol::Session => (
                ClientLifecycleMode::Initialize,
                Some(ClientLifecycleMode::Discover {
                    preferred_versions: preferred,
                }),
            ),
            Protocol::Stateless => (
                ClientLifecycleMode::Auto {
                    preferred_versions: preferred,
                    legacy_version: None,
                },
                None,
            ),
        };
        let tried = Self::connect(name, config, env.clone(), changed.clone(), first).await;
        let (first_error, then) = match (tried, then) {
            (Ok(conn), _) => return Ok(conn),
            (Err(a), Some(then)) if a.refused => (a.error, then),
            (Err(a), _) => return Err(a.error),
        };
        tracing::debug!(server = name, error = %first_error, "the server refused `initialize`; trying `server/discover` (MCP 2026-07-28)");
        Self::connect(name, config, env, changed, then)
            .await
            .map_err(|a| {
                Error::Start(format!(
                    "{first_error}; and with `server/discover` (MCP 2026-07-28): {}",
                    a.error
                ))
            })
    }

    /// One try at starting the server with `lifecycle`.
    async fn connect(
        name: &str,
        config: &McpServerConfig,
        env: Vec<(String, String)>,
        changed: Option<tokio::sync::mpsc::UnboundedSender<String>>,
        lifecycle: ClientLifecycleMode,
    ) -> std::result::Result<Self, Attempt> {
        let handler = KeelClient {
            server: name.to_owned(),
            tools_changed: Arc::new(AtomicBool::new(false)),
            changed,
            progress: Arc::default(),
            attended: Arc::default(),
            in_flight: Arc::default(),
        };
        let tools_changed = handler.tools_changed.clone();
        let progress = handler.progress.clone();
        let attended = handler.attended.clone();
        let in_flight = handler.in_flight.clone();
        let notices = handler.clone();
        match config.transport().map_err(Error::Config)? {
            Transport::Stdio {
                command,
                args,
                env: extra,
                cwd,
                sandbox,
            } => {
                let mut cmd = tokio::process::Command::new(&command);
                cmd.args(&args)
                    .env_clear()
                    .envs(env)
                    .envs(extra)
                    .process_group(0)
                    .kill_on_drop(true);
                if let Some(cwd) = &cwd {
                    cmd.current_dir(cwd);
                }
                if let Some(policy) = sandbox {
                    let confiner = crate::confine::confiner().ok_or_else(|| {
                        Error::Start(format!(
                            "`{command}` asks for a sandbox, and this process has none to confine it"
                        ))
                    })?;
                    let workspace = match cwd {
                        Some(c) => c,
                        None => std::env::current_dir().map_err(|e| Error::Start(e.to_string()))?,
                    };
                    let spec = keel_tools::SandboxSpec::new(policy, workspace);
                    confiner.confine(&mut cmd, &spec).map_err(|e| {
                        Error::Start(format!("`{command}` cannot be confined: {e}"))
                    })?;
                }
                let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| Error::Start(format!("cannot start `{command}`: {e}")))?;
                // What the server prints goes to keel's log, not the terminal.
                if let Some(stderr) = stderr {
                    let server = name.to_owned();
                    tokio::spawn(async move {
                        use tokio::io::AsyncBufReadExt;
                        let mut lines = tokio::io::BufReader::new(stderr).lines();
                        while let Ok(Some(line)) = lines.next_line().await {
                            tracing::debug!(server = %server, "{line}");
                        }
                    });
                }
                let group = transport.id().and_then(|p| i32::try_from(p).ok());
                let service = handler
                    .serve_with_lifecycle(transport, lifecycle)
                    .await
                    .map_err(|e| {
                        kill_group(group);
                        Attempt {
                            refused: is_refusal(&e),
                            error: Error::Start(format!(
                                "`{command}` did not complete the MCP handshake: {e}"
                            )),
                        }
                    })?;
                Ok(Self {
                    listener: crate::listen::follow_tools(service.peer(), notices),
                    service: Some(service),
                    group,
                    tools_changed,
                    progress,
                    attended,
                    in_flight,
                })
            }
            Transport::Http {
                url,
                bearer_token_env_var,
                headers,
                env_headers,
                credentials,
            } => {
                use rmcp::transport::StreamableHttpClientTransport;
                use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
                crate::tls::ensure_provider();
                let mut cfg = StreamableHttpClientTransportConfig::with_uri(url.clone());
                if let Some(var) = &bearer_token_env_var {
                    let token = std::env::var(var).map_err(|_| {
                        Error::Config(format!("bearer_token_env_var: {var} is not set"))
                    })?;
                    cfg = cfg.auth_header(token);
                }
                cfg = cfg.custom_headers(header_map(headers, env_headers)?);
                // Signed in with `keel mcp login` (a configured token wins).
                let signed_in = match (&bearer_token_env_var, credentials) {
                    (None, Some(path)) => {
                        let store = crate::oauth::FileCredentials::new(path, &url);
                        crate::oauth::signed_in_client(&url, store).await?
                    }
                    _ => None,
                };
                let had_tokens = signed_in.is_some();
                let refused = |e: String| {
                    if !(e.contains("Auth required") || e.contains("401")) {
                        return Error::Start(format!(
                            "{url} did not complete the MCP handshake: {e}"
                        ));
                    }
                    Error::Start(match (&bearer_token_env_var, had_tokens) {
                        (Some(var), _) => {
                            format!("{url} refused the token in {var} (401 Unauthorized)")
                        }
                        (None, true) => format!(
                            "{url} no longer takes keel's sign-in (401 Unauthorized): run `keel mcp login {name}` again"
                        ),
                        (None, false) => format!(
                            "{url} asks to sign in (401 Unauthorized): run `keel mcp login {name}`"
                        ),
                    })
                };
                let service = match signed_in {
                    Some(client) => {
                        let transport = StreamableHttpClientTransport::with_client(client, cfg);
                        handler
                            .serve_with_lifecycle(transport, lifecycle)
                            .await
                            .map_err(|e| Attempt {
                                refused: is_refusal(&e),
                                error: refused(e.to_string()),
                            })?
                    }
                    None => {
                        let transport = StreamableHttpClientTransport::from_config(cfg);
                        handler
                            .serve_with_lifecycle(transport, lifecycle)
                            .await
                            .map_err(|e| Attempt {
                                refused: is_refusal(&e),
                                error: refused(e.to_string()),
                            })?
                    }
                };
                Ok(Self {
                    listener: crate::listen::follow_tools(service.peer(), notices),
                    service: Some(service),
                    group: None,
                    tools_changed,
                    progress,
                    attended,
                    in_flight,
                })
            }
        }
    }

    /// The server's tools.
    fn service(&self) -> Result<&RunningService<RoleClient, KeelClient>> {
        self.service
            .as_ref()
            .ok_or_else(|| Error::Call("the connection was stopped".to_owned()))
    }

    pub async fn tools(&self) -> Result<Vec<ServerTool>> {
        let tools = self
            .service()?
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| Error::Call(format!("tools/list failed: {e}")))?;
        Ok(tools
            .into_iter()
            .filter_map(|t| serde_json::to_value(t).ok())
            .filter_map(|v| {
                Some(ServerTool {
                    name: v.get("name")?.as_str()?.to_owned(),
                    description: v
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    input_schema: v.get("inputSchema").cloned().unwrap_or(Value::Null),
                    annotations: v.get("annotations").cloned().unwrap_or(Value::Null),
                })
            })
            .collect())
    }

    /// The server's resources and resource templates (MCP's wire shape:
    /// `uri` or `uriTemplate`, `name`, `description`, `mimeType`); none
    /// when it offers none.
    pub async fn resources(&self) -> Resources {
        let service = match self.service() {
            Ok(s) => s,
            Err(_) => return Resources::default(),
        };
        let offers = service
            .peer_info()
            .and_then(|i| serde_json::to_value(&*i).ok())
            .is_some_and(|v| !v["capabilities"]["resources"].is_null());
        if !offers {
            return Resources::default();
        }
        let listed = match service.peer().list_all_resources().await {
            Ok(list) => list
                .into_iter()
                .filter_map(|r| serde_json::to_value(r).ok())
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "resources/list failed");
                Vec::new()
            }
        };
        let templates = match service.peer().list_all_resource_templates().await {
            Ok(list) => list
                .into_iter()
                .filter_map(|r| serde_json::to_value(r).ok())
                .collect(),
            Err(e) => {
                tracing::debug!(error = %e, "resources/templates/list failed");
                Vec::new()
            }
        };
        Resources { listed, templates }
    }

    /// Reads resource `uri`: its `contents` (MCP's wire shape).
    pub async fn read_resource(&self, uri: &str, timeout: Duration) -> Result<Vec<Value>> {
        let params = rmcp::model::ReadResourceRequestParams::new(uri.to_owned());
        let result = tokio::time::timeout(timeout, self.service()?.peer().read_resource(params))
            .await
            .map_err(|_| Error::Timeout(timeout))?
            .map_err(|e| Error::Call(e.to_string()))?;
        let v = serde_json::to_value(&result).map_err(|e| Error::Call(e.to_string()))?;
        Ok(v.get("contents")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default())
    }

    /// Calls tool `name` with `args`, bounded by `timeout`; the server's
    /// progress notifications and questions for it go where `hooks` say.
    pub async fn call(
        &self,
        name: &str,
        args: Value,
        timeout: Duration,
        hooks: CallHooks,
    ) -> Result<CallOutcome> {
        let arguments: Option<Map<String, Value>> = match args {
            Value::Object(m) => Some(m),
            Value::Null => None,
            other => {
                return Err(Error::Call(format!(
                    "arguments must be an object, not {other}"
                )));
            }
        };
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let token = format!("keel-{}", NEXT.fetch_add(1, Ordering::Relaxed));
        if let Some(sink) = hooks.progress {
            self.progress
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(token.clone(), sink);
            params.meta = Some(rmcp::model::RequestMetaObject::with_progress_token(
                rmcp::model::ProgressToken(rmcp::model::NumberOrString::String(
                    token.clone().into(),
                )),
            ));
        }
        let _in_flight = InFlight::enter(self, &token, hooks.attended);
        // The service's call answers a 2026-07-28 server's `input_required`
        // rounds (its questions) through this connection's handler.
        let result = tokio::time::timeout(timeout, self.service()?.call_tool(params)).await;
        let result = result
            .map_err(|_| Error::Timeout(timeout))?
            .map_err(|e| Error::Call(e.to_string()))?;
        let v = serde_json::to_value(&result).map_err(|e| Error::Call(e.to_string()))?;
        Ok(CallOutcome {
            content: v
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            structured: v.get("structuredContent").cloned(),
            is_error: v.get("isError").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// The MCP version the server agreed on.
    pub fn protocol_version(&self) -> Option<String> {
        let info = self.service.as_ref()?.peer_info()?;
        let v = serde_json::to_value(&*info).ok()?;
        v.get("protocolVersion")?.as_str().map(str::to_owned)
    }

    /// Whether the connection has ended (the server died or hung up).
    pub fn is_closed(&self) -> bool {
        self.service
            .as_ref()
            .is_none_or(|s| s.is_transport_closed())
    }

    /// Stops the server: the connection ends and a stdio server's process
    /// group is killed.
    pub async fn stop(mut self) {
        if let Some(listener) = self.listener.take() {
            listener.abort();
        }
        if let Some(service) = self.service.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), service.cancel()).await;
        }
        kill_group(self.group.take());
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(listener) = &self.listener {
            listener.abort();
        }
        kill_group(self.group);
    }
}

/// A call counted in flight, with its progress sink and person, until it
/// ends (or its future is dropped).
struct InFlight<'a> {
    conn: &'a Connection,
    token: String,
}

impl<'a> InFlight<'a> {
    fn enter(conn: &'a Connection, token: &str, attended: Option<Attended>) -> Self {
        conn.in_flight.fetch_add(1, Ordering::SeqCst);
        if let Some(a) = attended {
            conn.attended
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(token.to_owned(), a);
        }
        Self {
            conn,
            token: token.to_owned(),
        }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.conn
            .progress
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.token);
        self.conn
            .attended
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.token);
        self.conn.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `content` with the schema's `default` for each property it leaves out
/// (SEP-1034: a form shows the defaults, so accepting it as shown gives
/// them).
fn with_defaults(schema: &Value, content: Value) -> Value {
    let Value::Object(mut given) = content else {
        return content;
    };
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, spec) in properties {
            if let Some(default) = spec.get("default")
                && !given.contains_key(name)
            {
                given.insert(name.clone(), default.clone());
            }
        }
    }
    Value::Object(given)
}

/// A try at starting a server that did not work; `refused`: the server
/// answered the handshake with an error (another lifecycle may do).
struct Attempt {
    error: Error,
    refused: bool,
}

impl From<Error> for Attempt {
    fn from(error: Error) -> Self {
        Self {
            error,
            refused: false,
        }
    }
}

/// Whether the handshake failed on the server's error answer (not a
/// transport failure, a timeout or a sign-in).
fn is_refusal(e: &rmcp::service::ClientInitializeError) -> bool {
    matches!(e, rmcp::service::ClientInitializeError::JsonRpcError(_))
}

fn kill_group(group: Option<i32>) {
    if let Some(pgid) = group {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// `http_headers` and `env_http_headers` (values read from the
/// environment now) as one header map.
fn header_map(
    headers: std::collections::BTreeMap<String, String>,
    env_headers: std::collections::BTreeMap<String, String>,
) -> Result<std::collections::HashMap<http::HeaderName, http::HeaderValue>> {
    let mut map = std::collections::HashMap::new();
    let pairs = headers
        .into_iter()
        .map(Ok)
        .chain(env_headers.into_iter().map(|(k, var)| {
            std::env::var(&var)
                .map(|v| (k.clone(), v))
                .map_err(|_| Error::Config(format!("env_http_headers.{k}: {var} is not set")))
        }));
    for pair in pairs {
        let (k, v) = pair?;
        let name = http::HeaderName::try_from(k.as_str())
            .map_err(|e| Error::Config(format!("http_headers.{k}: {e}")))?;
        let value = http::HeaderValue::try_from(v.as_str())
            .map_err(|_| Error::Config(format!("http_headers.{k}: not a header value")))?;
        map.insert(name, value);
    }
    Ok(map)
}
