//! The RPC server: the input loop, the command worker and the session it
//! drives.
//!
//! Owns the process-level flow. The input loop reads frames and routes a
//! host's replies (host tool results, host URI results, extension UI
//! responses) to their brokers at once, so they are never stuck behind a
//! command; everything else goes, in input order, to the command worker,
//! which answers one command at a time (`bash` runs in the background). Each
//! session's events are written by a pump task; a setter's response waits
//! until the events it caused are written. At end of input, pending
//! host requests are rejected, queued commands are answered, a running run
//! is aborted, the session is flushed and closed, and `serve` returns.
//! Handlers live in [`crate::handlers`]; this module does not implement
//! commands.

use crate::command::WireId;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keel_core::{SessionEvent, SessionHandle, shutdown_split};
use keel_jsonl::{DEFAULT_MAX_FRAME_BYTES, spawn_reader, spawn_writer};
use keel_protocol::{AgentEvent, Op, ThinkingLevel};
use keel_tools::Tool;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::approvals::RpcApprovals;
use crate::bash_jobs::BashJobs;
use crate::command::{Envelope, Inbound, Reply, parse};
use crate::events::{EventFramer, EventStyle, SeqCounters};
use crate::factory::{ModelChoice, OpenTarget, OpenedSession, SessionCloser, SessionFactory};
use crate::frames::{Out, Ready};
use crate::gates::Gates;
use crate::gates::tool::AskHost;
use crate::host_tools::HostTools;
use crate::host_uris::HostUris;
use crate::methods::Dispatch;
use crate::ui::Ui;
use crate::unattended::{Guarded, Unattended};
use crate::wire_errors::{self, PARSE_COMMAND, WireError};
use crate::{COMMAND_QUEUE_CAPACITY, Error, PROTOCOL_VERSION, PUMP_FLUSH_CAPACITY, Result};

/// Commands whose events (`model_changed`, `thinking_level_changed`,
/// `session_info_changed`) are written before their response, as pi does.
const EVENTS_BEFORE_RESPONSE: &[&str] = &[
    "set_model",
    "cycle_model",
    "set_thinking_level",
    "cycle_thinking_level",
    "set_session_name",
];

/// How RPC mode behaves.
#[derive(Debug, Clone)]
pub struct RpcOptions {
    /// Write events flat (pi style) instead of canonical frames.
    pub flat_events: bool,
    /// Longest inbound frame accepted.
    pub max_frame_bytes: usize,
    /// How long a host tool call may take.
    pub host_tool_timeout: Duration,
    /// How long a host URI request may take.
    pub host_uri_timeout: Duration,
    /// Default timeout of extension UI dialogs.
    pub ui_timeout: Duration,
    /// Emit `setTitle` UI requests (suppressed by default).
    pub emit_title: bool,
    /// The session to open first.
    pub initial: OpenTarget,
    /// How long `abort` waits for the run to end before answering.
    pub abort_timeout: Duration,
    /// The thinking level of the first session.
    pub thinking: ThinkingLevel,
    /// Where durable RPC state (workflow gates) is kept; `None`: memory.
    pub state_dir: Option<PathBuf>,
    /// Offer the `ask_host` tool, through which the agent opens gates.
    pub gate_tool: bool,
    /// How long `ask_host` waits for an answer.
    pub gate_timeout: Duration,
    /// Cancelled to shut down as if stdin had closed (for example on
    /// SIGTERM).
    pub shutdown: CancellationToken,
    /// The approval gate the factory's sessions use; RPC mode announces
    /// its held calls and serves the approval commands. `None`: approval
    /// commands fail (the sessions' gate is whatever the factory chose).
    pub approvals: Option<Arc<keel_core::EngineGate>>,
}

impl Default for RpcOptions {
    fn default() -> Self {
        Self {
            flat_events: false,
            max_frame_bytes: DEFAULT_MAX_FRAME_BYTES,
            host_tool_timeout: Duration::from_secs(600),
            host_uri_timeout: Duration::from_secs(60),
            ui_timeout: Duration::from_secs(300),
            emit_title: false,
            initial: OpenTarget::New {
                parent_session: None,
            },
            abort_timeout: Duration::from_secs(30),
            thinking: ThinkingLevel::Off,
            state_dir: None,
            gate_tool: false,
            gate_timeout: Duration::from_secs(1800),
            shutdown: CancellationToken::new(),
            approvals: None,
        }
    }
}

/// One unit of work for the command worker.
enum Job {
    Command(Envelope),
    Reject {
        id: Option<Box<WireId>>,
        command: String,
        error: WireError,
    },
}

/// What a handler produced.
pub(crate) enum Answer {
    /// Respond `success:true` with this `data` (none: no `data` member).
    Data(Option<Value>),
    /// Respond `success:false`.
    Failed(WireError),
    /// The handler wrote its response(s) itself.
    Sent,
}

impl From<std::result::Result<Option<Value>, WireError>> for Answer {
    fn from(r: std::result::Result<Option<Value>, WireError>) -> Self {
        match r {
            Ok(data) => Answer::Data(data),
            Err(e) => Answer::Failed(e),
        }
    }
}

/// The sub-protocol brokers, shared by the input loop, the worker and the
/// tools that reach the host.
#[derive(Clone)]
pub(crate) struct Brokers {
    pub host_tools: Arc<HostTools>,
    pub host_uris: Arc<HostUris>,
    pub ui: Arc<Ui>,
    pub gates: Arc<Gates>,
    pub unattended: Arc<Unattended>,
    pub approvals: Option<Arc<RpcApprovals>>,
}

impl Brokers {
    /// Who the questions of the session's tools go to: the host, through
    /// extension UI dialogs.
    pub fn asker(&self) -> Option<Arc<dyn keel_tools::Asker>> {
        Self::asker_of(&self.ui, &self.unattended)
    }

    /// [`Self::asker`] before the brokers are all built.
    fn asker_of(ui: &Arc<Ui>, unattended: &Arc<Unattended>) -> Option<Arc<dyn keel_tools::Asker>> {
        Some(Arc::new(crate::elicit::UiAsker {
            ui: ui.clone(),
            unattended: unattended.clone(),
        }))
    }

    /// The tools a session offers: its own, then the host's; all guarded
    /// by the unattended control plane once it is negotiated.
    pub fn session_tools(&self, base: &[Arc<dyn Tool>]) -> Vec<Arc<dyn Tool>> {
        let tools = self.host_tools.tools_with(base);
        if !self.unattended.active() {
            return tools;
        }
        let uris = self.host_uris.clone();
        let host_scheme: Arc<dyn Fn(&str) -> bool + Send + Sync> = Arc::new(move |s: &str| {
            keel_tools::host::HostUriResolver::scheme(uris.as_ref(), s).is_some()
        });
        tools
            .into_iter()
            .map(|inner| {
                Arc::new(Guarded {
                    inner,
                    policy: self.unattended.clone(),
                    host_scheme: host_scheme.clone(),
                }) as Arc<dyn Tool>
            })
            .collect()
    }

    /// The host is gone: nothing pending can be answered any more.
    async fn close(&self) {
        self.host_tools.close().await;
        self.host_uris.close().await;
        self.ui.close().await;
    }
}

/// The session the worker drives.
pub(crate) struct Active {
    pub handle: SessionHandle,
    task: JoinHandle<()>,
    pump: JoinHandle<()>,
    closer: Option<Arc<dyn SessionCloser>>,
    /// The session's own tools (built-ins with host URI routing).
    pub base_tools: Vec<Arc<dyn Tool>>,
    /// Count of `agent_end` frames written.
    pub runs: watch::Receiver<u64>,
    /// Asks the pump to write the events already emitted, then answers.
    flushes: mpsc::Sender<oneshot::Sender<()>>,
}

/// The command worker's state.
pub(crate) struct Server {
    pub out: Out,
    pub factory: Arc<dyn SessionFactory>,
    pub options: RpcOptions,
    pub active: Active,
    /// The selected model; `None` when none is configured.
    pub model: Option<ModelChoice>,
    pub brokers: Brokers,
    pub bash: BashJobs,
    seqs: SeqCounters,
}

/// Runs RPC mode over `input`/`output` until `input` ends.
pub async fn serve<R, W>(
    input: R,
    output: W,
    factory: Arc<dyn SessionFactory>,
    options: RpcOptions,
) -> Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (sender, writer) = spawn_writer(output);
    let out = Out::new(sender);
    let host_uris = Arc::new(HostUris::new(out.clone(), options.host_uri_timeout));
    let unattended = Arc::new(Unattended::new(options.state_dir.as_deref()));
    let approvals = options.approvals.clone().map(|gate| {
        RpcApprovals::install(gate, out.clone(), unattended.clone(), host_uris.clone())
    });
    let ui = Arc::new(Ui::new(out.clone(), options.ui_timeout, options.emit_title));
    let model = {
        let source = factory.models();
        source
            .models()
            .into_iter()
            .next()
            .map(|m| ModelChoice::of(source, m))
    };
    let seqs = SeqCounters::default();
    // The gate file is read while the session opens (each on a blocking
    // thread of its own), not before: the session does not use the gates.
    let (gates, opened) = tokio::join!(
        Gates::load(out.clone(), options.state_dir.as_deref()),
        factory.open(
            options.initial.clone(),
            model.as_ref().map(|m| &m.info),
            options.thinking,
            Brokers::asker_of(&ui, &unattended),
        )
    );
    let opened = opened.map_err(Error::Open)?;
    let brokers = Brokers {
        host_tools: Arc::new(HostTools::new(out.clone(), options.host_tool_timeout)),
        host_uris,
        ui,
        gates: Arc::new(gates),
        unattended,
        approvals,
    };
    let active = install(opened, &out, &options, &seqs, &brokers);
    let mut server = Server {
        out: out.clone(),
        factory,
        active,
        model,
        brokers: brokers.clone(),
        bash: BashJobs::default(),
        seqs,
        options: options.clone(),
    };
    out.send(&Ready {
        kind: "ready",
        protocol_version: if options.flat_events {
            1
        } else {
            PROTOCOL_VERSION
        },
        supported_protocol_versions: vec![1, PROTOCOL_VERSION],
        max_frame_bytes: options.max_frame_bytes,
    })
    .await;

    let cancel = CancellationToken::new();
    let (mut frames, reader) = spawn_reader(input, options.max_frame_bytes, cancel.clone());
    let (jobs_tx, mut jobs_rx) = mpsc::channel::<Job>(COMMAND_QUEUE_CAPACITY);
    let worker = tokio::spawn(async move {
        // A turn of the opened session cut off by a crash goes on first.
        server.resume_interrupted().await;
        while let Some(job) = jobs_rx.recv().await {
            server.run_job(job).await;
        }
        server.shutdown().await;
    });

    loop {
        let item = tokio::select! {
            item = frames.recv() => item,
            _ = options.shutdown.cancelled() => None,
        };
        let Some(item) = item else { break };
        let job = match item {
            Ok(bytes) => match parse(&bytes) {
                Inbound::Command(env) => Job::Command(env),
                Inbound::Reply(reply) => {
                    route_reply(reply, &brokers).await;
                    continue;
                }
                Inbound::Reject { id, command, error } => Job::Reject { id, command, error },
            },
            Err(keel_jsonl::Error::Oversize { len, max }) => Job::Reject {
                id: None,
                command: PARSE_COMMAND.to_owned(),
                error: wire_errors::frame_too_large(len, max),
            },
            Err(e) => {
                tracing::warn!(error = %e, "reading stdin failed; treating it as closed");
                break;
            }
        };
        if jobs_tx.send(job).await.is_err() {
            break;
        }
    }
    // End of input: nobody can answer the host's pending requests any more.
    cancel.cancel();
    brokers.close().await;
    drop(jobs_tx);
    if let Err(e) = worker.await {
        tracing::error!(error = %e, "the command worker failed");
    }
    let _ = reader.await;
    if let Some(approvals) = &brokers.approvals {
        approvals.uninstall();
    }
    drop(out);
    drop(brokers);
    match tokio::time::timeout(Duration::from_secs(5), writer).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(Error::Frames(e)),
        Ok(Err(e)) => Err(Error::Task(e.to_string())),
        Err(_) => {
            tracing::warn!("the frame writer did not finish in time");
            Ok(())
        }
    }
}

async fn route_reply(reply: Reply, brokers: &Brokers) {
    match reply {
        Reply::ToolUpdate(u) => brokers.host_tools.update(u).await,
        Reply::ToolResult(r) => brokers.host_tools.result(r).await,
        Reply::UriResult(r) => brokers.host_uris.result(r).await,
        Reply::Ui(r) => brokers.ui.response(r).await,
    }
}

/// Wires an opened session into RPC mode: host URI routing on its file
/// tools, the host's tools, todo reminders, and a pump writing its events.
fn install(
    opened: OpenedSession,
    out: &Out,
    options: &RpcOptions,
    seqs: &SeqCounters,
    brokers: &Brokers,
) -> Active {
    let OpenedSession {
        session,
        closer,
        name,
        file: _,
    } = opened;
    if name.is_some() {
        session.restore_name(name);
    }
    let (handle, events, task) = session.split();
    let mut base_tools =
        keel_tools::host::with_host_uris(handle.tools(), brokers.host_uris.clone());
    if options.gate_tool {
        base_tools.push(Arc::new(AskHost {
            gates: brokers.gates.clone(),
            ui: brokers.ui.clone(),
            wait: options.gate_timeout,
        }));
    }
    handle.set_tools(brokers.session_tools(&base_tools));
    // The protocol's todo behaviour: reminders while tasks are unfinished,
    // the list cleared once they are all done.
    handle.set_todo_policy(keel_core::TodoPolicy::REMIND);
    let style = if options.flat_events {
        EventStyle::Flat
    } else {
        EventStyle::Canonical
    };
    let framer = EventFramer::new(style, &handle.snapshot().session_id, seqs);
    let (runs_tx, runs) = watch::channel(0u64);
    let (flushes, flush_rx) = mpsc::channel(PUMP_FLUSH_CAPACITY);
    let pump = tokio::spawn(pump(
        events,
        flush_rx,
        Pump {
            framer,
            out: out.clone(),
            runs: runs_tx,
            handle: handle.clone(),
            unattended: brokers.unattended.clone(),
            aborted: false,
        },
    ));
    Active {
        handle,
        task,
        pump,
        closer,
        base_tools,
        runs,
        flushes,
    }
}

/// What the pump writes with and keeps between events.
struct Pump {
    framer: EventFramer,
    out: Out,
    runs: watch::Sender<u64>,
    handle: SessionHandle,
    unattended: Arc<Unattended>,
    /// The run was aborted for its budget (once per run).
    aborted: bool,
}

/// Writes a session's events; in unattended mode it also counts model
/// usage and aborts the run once the budget is used up. A flush request
/// is answered once the events emitted before it are written.
async fn pump(
    mut events: mpsc::Receiver<SessionEvent>,
    mut flushes: mpsc::Receiver<oneshot::Sender<()>>,
    mut p: Pump,
) {
    loop {
        tokio::select! {
            biased;
            Some(done) = flushes.recv() => {
                // Only what is queued now: a streaming run cannot hold the
                // response back for long.
                for _ in 0..events.len() {
                    let Ok(event) = events.try_recv() else { break };
                    p.write(event).await;
                }
                let _ = done.send(());
            }
            event = events.recv() => match event {
                Some(event) => p.write(event).await,
                None => break,
            },
        }
    }
}

impl Pump {
    async fn write(&mut self, SessionEvent { event, log_seq }: SessionEvent) {
        self.out.send(&self.framer.frame(&event, log_seq)).await;
        let over_budget = match &event {
            AgentEvent::MessageEnd {
                message: keel_protocol::Message::Assistant(a),
            } => self.unattended.record_usage(&a.usage),
            _ => self.unattended.time_left() == Some(Duration::ZERO),
        };
        if over_budget && !self.aborted && self.handle.snapshot().is_streaming {
            self.aborted = true;
            let _ = self.handle.submit(Op::Abort).await;
        }
        if matches!(event, AgentEvent::AgentEnd { .. }) {
            self.aborted = false;
            self.runs.send_modify(|n| *n += 1);
        }
    }
}

impl Server {
    pub fn handle(&self) -> &SessionHandle {
        &self.active.handle
    }

    async fn run_job(&mut self, job: Job) {
        match job {
            Job::Reject { id, command, error } => {
                self.out.respond_err(id.as_deref(), &command, &error).await;
            }
            Job::Command(env) => {
                let Envelope {
                    id,
                    name,
                    dispatch,
                    command,
                } = env;
                let answer = match (dispatch, self.brokers.unattended.check_command(name)) {
                    (_, Err(denied)) => Answer::Failed(denied),
                    (Dispatch::NotSupported, Ok(())) => {
                        Answer::Failed(wire_errors::not_supported(name))
                    }
                    (Dispatch::Serial | Dispatch::Background | Dispatch::Reply, Ok(())) => {
                        self.dispatch(id.as_deref(), name, command).await
                    }
                };
                if EVENTS_BEFORE_RESPONSE.contains(&name) {
                    self.flush_events().await;
                }
                match answer {
                    Answer::Data(data) => self.out.respond_ok(id.as_deref(), name, data).await,
                    Answer::Failed(e) => self.out.respond_err(id.as_deref(), name, &e).await,
                    Answer::Sent => {}
                }
            }
        }
    }

    /// Waits until the events the session emitted so far are written.
    async fn flush_events(&self) {
        let (done, written) = oneshot::channel();
        if self.active.flushes.send(done).await.is_ok() {
            let _ = written.await;
        }
    }

    /// Aborts the running run, if any, and waits (bounded) until its
    /// `agent_end` has been written.
    pub async fn abort_and_wait(&mut self) {
        let before = *self.active.runs.borrow();
        let snap = self.handle().snapshot();
        if !snap.is_streaming {
            if snap.is_compacting {
                // A compaction asked for with `compact`: cancel it.
                let _ = self.handle().submit(Op::Abort).await;
            }
            return;
        }
        if let Err(e) = self.handle().submit(Op::Abort).await {
            tracing::warn!(error = %e, "abort could not reach the session");
            return;
        }
        let mut runs = self.active.runs.clone();
        let waited =
            tokio::time::timeout(self.options.abort_timeout, runs.wait_for(|n| *n > before)).await;
        if waited.is_err() {
            tracing::warn!("the aborted run did not end within the abort timeout");
        }
    }

    /// Replaces the active session with `opened` (the old one is aborted,
    /// flushed and closed first).
    pub async fn replace_session(&mut self, opened: OpenedSession) {
        let new = install(opened, &self.out, &self.options, &self.seqs, &self.brokers);
        let old = std::mem::replace(&mut self.active, new);
        close_session(old).await;
    }

    /// Re-applies the host's tools to the active session.
    pub fn refresh_tools(&self) {
        self.handle()
            .set_tools(self.brokers.session_tools(&self.active.base_tools));
    }

    async fn shutdown(self) {
        self.bash.cancel_all().await;
        close_session(self.active).await;
    }
}

async fn close_session(active: Active) {
    let Active {
        handle,
        task,
        pump,
        closer,
        ..
    } = active;
    if handle.snapshot().is_compacting {
        let _ = handle.submit(Op::Abort).await;
    }
    shutdown_split(&handle, task).await;
    drop(handle);
    if let Err(e) = pump.await {
        tracing::error!(error = %e, "the event pump failed");
    }
    if let Some(closer) = closer
        && let Err(e) = closer.close().await
    {
        tracing::error!(error = %e, "closing the session failed");
    }
}
