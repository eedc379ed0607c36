//! Claude Code's headless mode, for the Claude Agent SDKs
//! (`@anthropic-ai/claude-agent-sdk`, `claude-agent-sdk` on PyPI): `keel
//! --output-format stream-json --input-format stream-json --verbose …`,
//! the command line they spawn (docs/clients.md).
//!
//! Stdin carries the SDK's `user` messages and `control_request`s
//! (`initialize`, `interrupt`, `set_permission_mode`, `set_model`,
//! `set_max_thinking_tokens`, `mcp_status`, `end_session`) and its
//! answers to keel's (`can_use_tool`, `hook_callback`, `mcp_message`,
//! `elicitation`: [`peer`], [`sdk_mcp`], [`elicit`]); stdout
//! carries the messages [`wire`] documents. Each user message is one run
//! with one `system`/`init` before it and one `result` after it; messages
//! that come during a run wait their turn. A frame that cannot be read
//! gets a `{"type":"system","subtype":"error"}` line (or, for a control
//! request, an error `control_response`) and nothing else changes. When
//! stdin closes, the queued messages still run, then keel exits; SIGTERM
//! (the SDK's `close()`) interrupts the run and exits once it has ended.
//! The session is an ordinary keel session ([`open`]); what the SDK's
//! permission controls do is [`gate`]'s.

mod args;
mod checkpoints;
mod controls;
mod elicit;
mod gate;
mod mcp_set;
mod open;
mod peer;
mod run;
mod sdk_mcp;
mod wire;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use keel_core::ToolCallInfo;
use keel_protocol::{AgentEvent, ImageContent, Op, UserInput};
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};

pub use args::{ClaudeArgs, invoked};
use gate::{PermissionMode, Policy, ToolRule};
use open::{HostConfig, Opened, Request};
use peer::Peer;
use run::{Action, RunView};

use crate::GlobalArgs;

/// How long the run may take to end after SIGTERM or a lost SDK.
const DRAIN: Duration = Duration::from_secs(10);
/// How long what is written may take to reach stdout at exit.
const FLUSH: Duration = Duration::from_secs(5);

/// One warning line on stderr: `keel: warning: <text>`.
#[allow(clippy::print_stderr)]
fn warn(text: &str) {
    eprintln!("keel: warning: {text}");
}

/// Which messages reach stdout (`--output-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    StreamJson,
    /// Only the `result`.
    Json,
    /// Only the result's text.
    Text,
}

struct Driver {
    global: GlobalArgs,
    args: ClaudeArgs,
    cwd: PathBuf,
    format: Format,
    peer: Arc<Peer>,
    policy: Arc<Policy>,
    host: HostConfig,
    opened: Option<Opened>,
    queue: VecDeque<Queued>,
    run: Option<RunView>,
    /// A prompt was submitted and the session is not idle yet.
    busy: bool,
    input_open: bool,
    total_cost: f64,
    /// A run could not start (with no session open: nothing can run).
    failed: bool,
    /// The SDK's own MCP servers being connected: runs wait for them.
    sdk_mcp: Option<tokio::sync::oneshot::Receiver<SdkServers>>,
    /// The SDK's own MCP servers, and those `setMcpServers()` manages.
    mcp_set: Arc<mcp_set::McpSet>,
    /// The first `initialize`: what the session was opened with.
    launched: Option<Value>,
}

/// A user message waiting for its run.
struct Queued {
    input: UserInput,
    /// Its `uuid` (the SDK's, else keel's): what `rewindFiles()` names.
    uuid: String,
    /// The message as it came, for `--replay-user-messages`.
    message: Value,
}

impl Queued {
    fn text(prompt: String) -> Self {
        Self {
            message: json!({"role": "user", "content": prompt}),
            input: UserInput::text(prompt),
            uuid: wire::uuid(),
        }
    }
}

/// Each SDK MCP server's tools, or why it could not be reached.
type SdkServers = Vec<(String, Result<Vec<Arc<dyn keel_tools::Tool>>, String>)>;

/// The result of a pending SDK MCP connect, when there is one.
async fn sdk_connected(
    pending: &mut Option<tokio::sync::oneshot::Receiver<SdkServers>>,
) -> SdkServers {
    match pending {
        Some(rx) => rx.await.unwrap_or_default(),
        None => std::future::pending().await,
    }
}

pub async fn run(global: &GlobalArgs, args: ClaudeArgs) -> anyhow::Result<ExitCode> {
    for (flag, known) in &args.ignored {
        if *known {
            tracing::debug!(flag, "accepted; keel has nothing to do for it");
        } else {
            warn(&format!("unknown flag --{flag}: ignored"));
        }
    }
    if args.session_id.is_some() && args.fork_session {
        warn(
            "--session-id with --fork-session: the fork gets an id of keel's; it is in system/init",
        );
    }
    if args.resume_session_at.is_some() {
        warn("--resume-session-at: not supported; the whole session is resumed");
    }
    let format = match args.output_format.as_deref() {
        None | Some("text") => Format::Text,
        Some("json") => Format::Json,
        Some("stream-json") => Format::StreamJson,
        Some(other) => anyhow::bail!("--output-format {other}: use text, json or stream-json"),
    };
    let stream_input = args.input_format.as_deref() == Some("stream-json");
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let mode = match args.permission_mode.as_deref() {
        Some(m) => PermissionMode::parse(m)
            .ok_or_else(|| anyhow::anyhow!("--permission-mode {m}: unknown permission mode"))?,
        None => PermissionMode::Default,
    };
    if let Some(tool) = &args.permission_prompt_tool
        && tool != "stdio"
    {
        warn(&format!(
            "--permission-prompt-tool {tool}: only `stdio` is supported; held calls become drafts"
        ));
    }
    let disallowed = args
        .disallowed_tools
        .iter()
        .map(|t| ToolRule::parse(t))
        .collect();
    let asks_host = args.permission_prompt_tool.as_deref() == Some("stdio");
    let policy = Arc::new(
        Policy::new(mode, disallowed, asks_host)
            .with_checkpoints(checkpoints::Checkpoints::wanted()),
    );
    let (sender, writer) = keel_jsonl::spawn_writer(crate::stdio::stdout());
    let peer = Arc::new(Peer::new(sender));
    let host = HostConfig::from_args(&args)?;
    let mut driver = Driver {
        global: global.clone(),
        args,
        cwd,
        format,
        peer: peer.clone(),
        policy,
        host,
        opened: None,
        queue: VecDeque::new(),
        run: None,
        busy: false,
        input_open: stream_input,
        total_cost: 0.0,
        failed: false,
        sdk_mcp: None,
        mcp_set: Arc::default(),
        launched: None,
    };
    if !stream_input {
        let prompt = match driver.args.prompt.clone() {
            Some(p) => p,
            None => read_stdin().await?,
        };
        driver.queue.push_back(Queued::text(prompt));
    }
    let outcome = driver.serve().await;
    let failed = driver.failed;
    driver.close().await;
    peer.close();
    drop(driver);
    let _ = tokio::time::timeout(FLUSH, writer).await;
    outcome?;
    Ok(if peer.gone().is_cancelled() || failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

async fn read_stdin() -> anyhow::Result<String> {
    use tokio::io::AsyncReadExt;
    let mut text = String::new();
    tokio::io::stdin()
        .read_to_string(&mut text)
        .await
        .context("cannot read the prompt from stdin")?;
    if text.trim().is_empty() {
        anyhow::bail!("no prompt given: keel -p \"what to do\" (or --input-format stream-json)");
    }
    Ok(text)
}

/// The next event of the session, when there is one.
async fn next_event(opened: &mut Option<Opened>) -> Option<AgentEvent> {
    match opened {
        Some(o) => o.session.next_event().await,
        None => std::future::pending().await,
    }
}

impl Driver {
    async fn serve(&mut self) -> anyhow::Result<()> {
        let cancel = tokio_util::sync::CancellationToken::new();
        let (mut frames, _reader) = keel_jsonl::spawn_reader(
            crate::stdio::stdin(),
            keel_jsonl::DEFAULT_MAX_FRAME_BYTES,
            cancel.clone(),
        );
        let mut sigterm = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
        let mut sigint = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
        let gone = self.peer.gone();
        if !self.input_open {
            cancel.cancel();
            self.start_next().await;
        }
        let mut draining: Option<tokio::time::Instant> = None;
        loop {
            let stuck = self.failed && self.opened.is_none();
            if (!self.input_open && self.queue.is_empty() && !self.busy) || stuck {
                break;
            }
            let deadline = draining
                .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(24 * 3600));
            tokio::select! {
                item = frames.recv(), if self.input_open => match item {
                    None => {
                        self.input_open = false;
                        // Nothing can answer a request any more.
                        self.peer.close_all();
                    }
                    Some(Ok(bytes)) => self.frame(&bytes).await,
                    Some(Err(e)) => self.bad_frame(&e.to_string()).await,
                },
                servers = sdk_connected(&mut self.sdk_mcp) => {
                    self.sdk_mcp = None;
                    self.take_sdk_servers(servers);
                    if !self.busy {
                        self.start_next().await;
                    }
                }
                ev = next_event(&mut self.opened) => {
                    let Some(ev) = ev else { anyhow::bail!("the session stopped unexpectedly") };
                    self.event(ev).await;
                }
                _ = sigterm.recv() => draining = Some(self.stop(&cancel).await),
                _ = sigint.recv() => draining = Some(self.stop(&cancel).await),
                () = gone.cancelled(), if draining.is_none() => {
                    tracing::info!("the SDK is gone: the run is interrupted");
                    draining = Some(self.stop(&cancel).await);
                }
                () = tokio::time::sleep_until(deadline) => {
                    tracing::warn!("the run did not end in time after being interrupted");
                    break;
                }
            }
        }
        Ok(())
    }

    /// Stops reading, drops the queue and interrupts the run; returns when
    /// the drain must be over.
    async fn stop(&mut self, cancel: &tokio_util::sync::CancellationToken) -> tokio::time::Instant {
        cancel.cancel();
        self.input_open = false;
        self.queue.clear();
        self.peer.close_all();
        self.interrupt().await;
        tokio::time::Instant::now() + DRAIN
    }

    async fn interrupt(&mut self) {
        if let (Some(run), Some(o)) = (self.run.as_mut(), &self.opened) {
            run.interrupted = true;
            let _ = o.session.submit(Op::Abort).await;
        }
    }

    async fn close(&mut self) {
        let Some(o) = self.opened.take() else { return };
        o.session.shutdown().await;
        if let Some(mcp) = &o.mcp {
            mcp.stop().await;
        }
        if let Some(w) = &o.writer
            && let Err(e) = w.close().await
        {
            tracing::error!(error = %e, "cannot save the session");
        }
        o.engine_gate.set_frontend(Arc::new(keel_core::LogFrontend));
    }

    /// Writes `frame` as `--output-format` says.
    async fn emit(&self, frame: Value) {
        let is_result = frame.get("type").and_then(Value::as_str) == Some("result");
        match self.format {
            Format::StreamJson => self.peer.send(&frame).await,
            Format::Json if is_result => self.peer.send(&frame).await,
            Format::Text if is_result => {
                let text = frame
                    .get("result")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| frame.get("errors").map(|e| e.to_string()))
                    .unwrap_or_default();
                print_text(&text);
            }
            Format::Json | Format::Text => {}
        }
    }

    async fn bad_frame(&self, why: &str) {
        tracing::warn!("unreadable frame from the SDK: {why}");
        let session_id = self.session_id();
        self.peer
            .send(&json!({
                "type": "system",
                "subtype": "error",
                "error": format!("keel could not read a message: {why}"),
                "session_id": session_id,
                "uuid": wire::uuid(),
            }))
            .await;
    }

    fn session_id(&self) -> String {
        self.opened
            .as_ref()
            .map(|o| o.session.snapshot().session_id)
            .unwrap_or_default()
    }

    async fn ensure_open(&mut self) -> anyhow::Result<()> {
        if self.opened.is_some() {
            return Ok(());
        }
        let request = Request {
            global: &self.global,
            args: &self.args,
            cwd: &self.cwd,
            host: &self.host,
            policy: self.policy.clone(),
            peer: self.peer.clone(),
            mcp_set: &self.mcp_set,
        };
        let mut opened = open::open(request, &mut |w| warn(w)).await?;
        if let Some(w) = &opened.writer {
            self.policy.set_transcript(w.path().display().to_string());
        }
        // A turn a crash or kill cut off ends first, unseen.
        let resumed = opened
            .session
            .handle()
            .resume_interrupted()
            .await
            .context("cannot resume the cut-off turn")?;
        if resumed {
            while let Some(ev) = opened.session.next_event().await {
                if matches!(ev, AgentEvent::AgentSettled) {
                    break;
                }
            }
        }
        self.opened = Some(opened);
        Ok(())
    }

    async fn frame(&mut self, bytes: &[u8]) {
        let v = match keel_jsonl::parse_object(bytes) {
            Ok(o) => Value::Object(o.members),
            Err(e) => return self.bad_frame(&e.to_string()).await,
        };
        match v.get("type").and_then(Value::as_str) {
            Some("user") => self.user(&v).await,
            Some("control_request") => self.control(&v).await,
            Some("control_response") => {
                let r = &v["response"];
                let Some(id) = r.get("request_id").and_then(Value::as_str) else {
                    return self
                        .bad_frame("a control_response without request_id")
                        .await;
                };
                let reply = match r.get("subtype").and_then(Value::as_str) {
                    Some("success") => Ok(r.get("response").cloned().unwrap_or(Value::Null)),
                    _ => Err(r
                        .get("error")
                        .and_then(Value::as_str)
                        .unwrap_or("the SDK refused the request")
                        .to_owned()),
                };
                if !self.peer.answered(id, reply) {
                    tracing::debug!(id, "an answer to a request nothing waits on");
                }
            }
            Some("control_cancel_request" | "keep_alive" | "update_environment_variables") => {}
            Some(other) => {
                self.bad_frame(&format!("unknown message type `{other}`"))
                    .await
            }
            None => self.bad_frame("a message without a type").await,
        }
    }

    async fn user(&mut self, v: &Value) {
        let input = match user_input(v) {
            Ok(i) => i,
            Err(why) => return self.bad_frame(&why).await,
        };
        let uuid = v
            .get("uuid")
            .and_then(Value::as_str)
            .map_or_else(wire::uuid, str::to_owned);
        let message = v.get("message").cloned().unwrap_or(Value::Null);
        self.queue.push_back(Queued {
            input,
            uuid,
            message,
        });
        if !self.busy {
            self.start_next().await;
        }
    }

    /// The SDK's MCP servers' tools join the session's.
    fn take_sdk_servers(&mut self, servers: SdkServers) {
        for (name, outcome) in servers {
            self.mcp_set.take_sdk(&name, outcome);
        }
        if let Some(o) = &self.opened {
            self.mcp_set.offer(o.mcp.as_ref(), &o.session.handle());
        }
    }

    /// Starts the next queued message's run.
    async fn start_next(&mut self) {
        if self.sdk_mcp.is_some() {
            return;
        }
        let Some(Queued {
            input,
            uuid,
            message,
        }) = self.queue.pop_front()
        else {
            return;
        };
        if let Err(e) = self.ensure_open().await {
            self.fail(&format!("{e:#}")).await;
            return;
        }
        let Some(o) = &self.opened else { return };
        let snap = o.session.snapshot();
        let tools: Vec<String> = o
            .session
            .handle()
            .tool_specs()
            .iter()
            .map(|t| wire::claude_name(&t.name))
            .collect();
        let mut servers: Vec<(String, String)> = o
            .mcp
            .as_ref()
            .map(|m| {
                m.status()
                    .into_iter()
                    .map(|s| (s.name, mcp_state(s.state).to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        servers.extend(self.mcp_set.sdk_servers());
        let key = if std::env::var_os("ANTHROPIC_API_KEY").is_some() {
            "ANTHROPIC_API_KEY"
        } else {
            "none"
        };
        let cwd = self.cwd.display().to_string();
        let init = wire::init(&wire::Init {
            session_id: &snap.session_id,
            cwd: &cwd,
            model: &snap.model.id,
            tools,
            mcp_servers: servers,
            permission_mode: self.policy.mode().as_str(),
            api_key_source: key,
        });
        // What this run's tools change is kept under its message.
        self.policy.checkpoints.mark(&uuid);
        let submitted = o.session.submit(Op::Prompt(input)).await;
        self.run = Some(RunView::new(
            &snap.session_id,
            &snap.model.id,
            self.args.include_partial_messages,
            self.args.max_turns,
        ));
        self.emit(init).await;
        if self.args.replay_user_messages {
            let replay = json!({
                "type": "user",
                "message": message,
                "parent_tool_use_id": null,
                "session_id": snap.session_id,
                "uuid": uuid,
                "isReplay": true,
            });
            self.emit(replay).await;
        }
        match submitted {
            Ok(()) => self.busy = true,
            Err(e) => {
                self.run = None;
                self.fail(&format!("cannot start the run: {e}")).await;
            }
        }
    }

    /// The session could not be opened or run: one error `result`.
    async fn fail(&mut self, why: &str) {
        let usage = keel_protocol::Usage::default();
        let session_id = self.session_id();
        let frame = wire::result(&wire::Summary {
            ending: wire::Ending::Error,
            text: "",
            errors: vec![why.to_owned()],
            session_id: &session_id,
            model: "",
            duration_ms: 0,
            duration_api_ms: 0,
            num_turns: 0,
            stop_reason: None,
            usage: &usage,
            total_cost_usd: self.total_cost,
            context_window: 0,
            max_output_tokens: 0,
            denials: Vec::new(),
            structured_output: None,
        });
        self.emit(frame).await;
        crate::report_error(&anyhow::anyhow!("{why}"));
        self.failed = true;
    }

    async fn event(&mut self, ev: AgentEvent) {
        match &ev {
            AgentEvent::AgentEnd { messages } => {
                let Some(run) = self.run.take() else { return };
                self.total_cost += run.cost();
                let (window, max_out) = self
                    .opened
                    .as_ref()
                    .map(|o| {
                        let m = o.session.snapshot().model;
                        (m.context_window, m.max_output_tokens.unwrap_or_default())
                    })
                    .unwrap_or_default();
                let frame = run.result(
                    messages,
                    (window, max_out),
                    self.total_cost,
                    self.policy.take_denials(),
                    self.host.json_schema.is_some(),
                );
                self.emit(frame).await;
            }
            AgentEvent::AgentSettled => {
                self.busy = false;
                self.start_next().await;
            }
            _ => {
                let Some(run) = self.run.as_mut() else { return };
                let (frames, action) = run.frames(&ev);
                for f in frames {
                    self.emit(f).await;
                }
                match action {
                    Some(Action::Stop) => {
                        if let Some(o) = &self.opened {
                            let _ = o.session.submit(Op::Abort).await;
                        }
                    }
                    Some(Action::ToolDone {
                        call_id,
                        tool,
                        args,
                        result,
                    }) => self.post_tool_use(call_id, tool, args, &result),
                    None => {}
                }
            }
        }
    }

    /// Calls the PostToolUse hooks of a finished call; their answers
    /// change nothing (the result is the model's already).
    fn post_tool_use(
        &self,
        call_id: String,
        tool: String,
        args: Value,
        result: &keel_protocol::ToolResultMessage,
    ) {
        let callbacks = self
            .policy
            .callbacks("PostToolUse", &wire::claude_name(&tool));
        if callbacks.is_empty() {
            return;
        }
        let call = ToolCallInfo {
            session_id: self.session_id(),
            call_id,
            tool_name: tool,
            args,
            cwd: self.cwd.clone(),
            write_target: None,
            hints: None,
        };
        let text = keel_protocol::joined_text(&result.content);
        let input = self.policy.hook_input(
            "PostToolUse",
            &call,
            json!({"tool_response": {"content": text, "is_error": result.is_error}}),
        );
        let peer = self.peer.clone();
        tokio::spawn(async move {
            for (id, timeout) in callbacks {
                let asked = peer.request(wire::hook_request(&id, input.clone(), &call.call_id));
                if tokio::time::timeout(timeout, asked).await.is_err() {
                    tracing::info!(id, "a PostToolUse hook did not answer in time");
                }
            }
        });
    }
}

fn mcp_state(state: keel_mcp::ServerState) -> &'static str {
    match state {
        keel_mcp::ServerState::Starting => "pending",
        keel_mcp::ServerState::Ready => "connected",
        keel_mcp::ServerState::Failed => "failed",
        keel_mcp::ServerState::Disabled | keel_mcp::ServerState::Stopped => "disabled",
    }
}

#[allow(clippy::print_stdout)]
fn print_text(text: &str) {
    println!("{text}");
}

/// A `user` message's text and images.
fn user_input(v: &Value) -> Result<UserInput, String> {
    let content = v
        .get("message")
        .and_then(|m| m.get("content"))
        .ok_or("a user message without message.content")?;
    let mut input = UserInput::default();
    match content {
        Value::String(s) => input.message = s.clone(),
        Value::Array(blocks) => {
            let mut texts = Vec::new();
            for b in blocks {
                match b.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        texts.push(b.get("text").and_then(Value::as_str).unwrap_or_default());
                    }
                    Some("image") => {
                        let source = b.get("source").ok_or("an image without source")?;
                        let data = source.get("data").and_then(Value::as_str);
                        let mime = source.get("media_type").and_then(Value::as_str);
                        let (Some(data), Some(mime)) = (data, mime) else {
                            return Err("an image that is not base64 data".to_owned());
                        };
                        input.images.push(ImageContent {
                            kind: "image".to_owned(),
                            data: data.to_owned(),
                            mime_type: mime.to_owned(),
                        });
                    }
                    _ => {}
                }
            }
            input.message = texts.join("\n");
        }
        _ => return Err("message.content is neither text nor blocks".to_owned()),
    }
    if input.message.trim().is_empty() && input.images.is_empty() {
        return Err("a user message with nothing in it".to_owned());
    }
    Ok(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_messages_are_text_or_blocks_with_images() {
        let plain = json!({"type": "user", "message": {"role": "user", "content": "hi"}});
        assert_eq!(user_input(&plain).unwrap().message, "hi");
        let blocks = json!({"type": "user", "message": {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
        ]}});
        let input = user_input(&blocks).unwrap();
        assert_eq!(input.message, "look");
        assert_eq!(input.images[0].mime_type, "image/png");
        assert!(user_input(&json!({"type": "user"})).is_err());
        let empty = json!({"type": "user", "message": {"content": []}});
        assert!(user_input(&empty).is_err());
    }
}
