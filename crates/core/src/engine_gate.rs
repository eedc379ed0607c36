//! The approvals engine behind the loop's gate.
//!
//! Owns [`EngineGate`], the [`ApprovalGate`] keel's front ends give their
//! sessions: it maps a tool call onto the engine's [`CallContext`] (built-in
//! tools by name; host tools with the class their definition declares),
//! maps the engine's outcomes onto [`GateDecision`]s, and leaves every
//! announcement to an [`ApprovalFrontend`] (RPC mode writes frames, `keel
//! exec` asks on the terminal or prints how to decide). It fails closed: an
//! engine that could not be opened, or any engine error, denies the call
//! with a message that says why. For a turn resumed after a restart it
//! says what the stored row knows of each unanswered call
//! ([`ApprovalGate::recover`]). The stored row is the only record; this
//! type keeps no state beyond the front end it reports to. It must not know
//! about any wire format or terminal.

use std::path::Path;
use std::sync::{Arc, RwLock};

use keel_approvals::{
    ApprovalEngine, ApprovalRecord, CallContext, Class, GateOutcome, Mode, PendingRequest,
    Resolution, Status, ToolOrigin, classify, messages,
};
use tokio::sync::OnceCell;

use crate::deps::{ApprovalGate, GateDecision, Recovery, ToolCallInfo};

/// Longest result text kept on an approval row.
const OUTCOME_CHARS: usize = 4000;

/// Held by the gate while it waits on a request (see
/// [`ApprovalFrontend::held`]).
pub type WaitGuard = Box<dyn std::any::Any + Send>;

/// Who reads the notes about drafts at the start of a run.
pub const DRAFT_NOTE_PREFIX: &str = "[approvals update]";

/// What a front end does for the gate: show held calls to a person, and
/// tell the gate what only the front end knows.
#[async_trait::async_trait]
pub trait ApprovalFrontend: Send + Sync {
    /// A held call is stored and is about to be waited on (delivery
    /// `wait`), or was parked as a draft (delivery `draft`). Announce it.
    async fn requested(&self, request: &PendingRequest);

    /// The gate is about to wait on the stored request for `call`:
    /// announce it. What it returns is held while the wait lasts and
    /// dropped when it ends or the run is cancelled (a front end that
    /// counts waiting calls keeps its count there). By default:
    /// [`Self::requested`].
    async fn held(&self, request: &PendingRequest, call: &ToolCallInfo) -> WaitGuard {
        let _ = call;
        self.requested(request).await;
        Box::new(())
    }

    /// A waited-on request ended (decided, expired, cancelled).
    async fn resolved(&self, request: &PendingRequest, resolution: &Resolution) {
        let _ = (request, resolution);
    }

    /// An aborted run cancelled `request` while the gate waited on it (the
    /// wait itself is dropped). By default: [`Self::resolved`].
    async fn cancelled(&self, request: &PendingRequest) {
        let resolution = Resolution::Cancelled {
            request_id: request.id.clone(),
        };
        self.resolved(request, &resolution).await;
    }

    /// The mode `call` is judged under, when the front end has its own
    /// (the app-server's per-thread approval policy); `None`: the
    /// workspace's effective mode.
    fn mode(&self, call: &ToolCallInfo) -> Option<Mode> {
        let _ = call;
        None
    }

    /// Who decisions the gate takes for the front end are recorded as.
    fn decider(&self) -> &str {
        "user"
    }

    /// A refusal that comes before the approvals (an unattended
    /// declaration): the call does not run and the model reads the text.
    fn refuse(&self, call: &ToolCallInfo) -> Option<String> {
        let _ = call;
        None
    }

    /// No person is there to answer: held calls become drafts.
    fn unattended(&self) -> bool {
        false
    }

    /// `Some(class)` when `tool` is a host tool (with its declared class,
    /// `None` when it declares none); `None` for keel's own tools.
    fn host_class(&self, tool: &str) -> Option<Option<Class>> {
        let _ = tool;
        None
    }

    /// The URI schemes the host serves (`read`/`write` of `scheme://…`
    /// go to it), lowercase, with how each was registered.
    fn host_schemes(&self) -> Vec<(String, keel_tools::host::HostScheme)> {
        Vec::new()
    }
}

/// A front end that only logs (until a real one is installed).
#[derive(Debug, Clone, Copy, Default)]
pub struct LogFrontend;

#[async_trait::async_trait]
impl ApprovalFrontend for LogFrontend {
    async fn requested(&self, request: &PendingRequest) {
        tracing::info!(id = %request.id, title = %request.title, "tool call held for approval");
    }
}

/// The key rules and modes of a workspace are stored under: its canonical
/// path (the path as given when it cannot be resolved).
pub fn workspace_key(cwd: &Path) -> String {
    std::fs::canonicalize(cwd)
        .unwrap_or_else(|_| cwd.to_path_buf())
        .display()
        .to_string()
}

/// Where a tool that describes itself with `hints` (an MCP tool) comes
/// from, for the engine: the class the configuration sets, else the one
/// its annotations imply.
pub fn hinted_origin(hints: &keel_tools::ToolHints) -> ToolOrigin {
    let class = hints
        .class
        .as_deref()
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| {
            Class::from_mcp_hints(hints.read_only, hints.destructive, hints.open_world)
        });
    ToolOrigin::Host { class: Some(class) }
}

/// The gate of keel's sessions, over the approvals engine. One per process
/// and workspace; every session of the process may share it.
pub struct EngineGate {
    engine: OnceCell<Result<ApprovalEngine, String>>,
    /// Opens the engine on first use (a gate made with [`Self::lazy`]).
    opener: std::sync::Mutex<Option<Opener>>,
    /// The workspace every call is judged under; `None`: each call's own
    /// ([`workspace_key`] of its cwd).
    workspace: Option<String>,
    frontend: RwLock<Arc<dyn ApprovalFrontend>>,
    /// Nudges a person when a call is held (`[approvals.notify]`).
    notifier: RwLock<Option<Arc<crate::notify::Notifier>>>,
    /// What the front end holds for each call held by a run elsewhere,
    /// by request id, until that wait ends.
    elsewhere: std::sync::Mutex<std::collections::HashMap<String, WaitGuard>>,
}

/// A held request is nudged about when it was stored this recently (a
/// request held again after a restart is not nudged again).
const NUDGE_WINDOW_MS: i64 = 10_000;

/// Opens an engine, or says why it cannot.
type Opener = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<ApprovalEngine, String>> + Send + 'static>,
>;

impl std::fmt::Debug for EngineGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineGate")
            .field("workspace", &self.workspace)
            .field("available", &self.engine.get().map(Result::is_ok))
            .finish()
    }
}

impl EngineGate {
    fn with(engine: Option<Result<ApprovalEngine, String>>, workspace: Option<String>) -> Self {
        Self {
            engine: OnceCell::new_with(engine),
            opener: std::sync::Mutex::new(None),
            workspace,
            frontend: RwLock::new(Arc::new(LogFrontend)),
            notifier: RwLock::new(None),
            elsewhere: Default::default(),
        }
    }

    /// Nudges `notifier`'s webhook whenever a call is newly held.
    pub fn set_notifier(&self, notifier: Option<Arc<crate::notify::Notifier>>) {
        *self.notifier.write().unwrap_or_else(|e| e.into_inner()) = notifier;
    }

    fn nudge(&self, request: &PendingRequest) {
        let notifier = self
            .notifier
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        if let Some(n) = notifier
            && request.created_at >= now - NUDGE_WINDOW_MS
        {
            n.held(request);
        }
    }

    /// A gate over `engine` for calls in `workspace` (a [`workspace_key`]).
    pub fn new(engine: ApprovalEngine, workspace: impl Into<String>) -> Self {
        Self::with(Some(Ok(engine)), Some(workspace.into()))
    }

    /// A gate without an engine: every call is denied with `reason`.
    pub fn unavailable(reason: impl Into<String>, workspace: impl Into<String>) -> Self {
        Self::with(Some(Err(reason.into())), Some(workspace.into()))
    }

    /// A gate whose engine `open` opens on first use, judging each call
    /// in its own workspace (a server whose threads have many): what the
    /// app-server gives every thread, so a process that never runs a tool
    /// never opens the store.
    pub fn lazy(
        open: impl std::future::Future<Output = Result<ApprovalEngine, String>> + Send + 'static,
    ) -> Self {
        let gate = Self::with(None, None);
        *gate.opener.lock().unwrap_or_else(|e| e.into_inner()) = Some(Box::pin(open));
        gate
    }

    /// Opens the engine on the approvals store configured for the keel
    /// home `home` (`keel.db` in it unless configured otherwise, see
    /// `keel_approvals::StoreLocation::for_home`), with the expiry it
    /// configures (`keel_approvals::EngineConfig::for_home`). When that
    /// fails the gate still exists and denies every call, saying why.
    pub async fn open(home: &Path, workspace: impl Into<String>) -> Self {
        let opened = ApprovalEngine::open_home(home, Arc::new(keel_approvals::SystemClock)).await;
        match opened {
            Ok(engine) => {
                let gate = Self::new(engine, workspace);
                gate.set_notifier(crate::notify::Notifier::for_home(home));
                gate
            }
            Err(e) => {
                let reason = e.to_string();
                tracing::error!("{reason}; every tool call will be denied");
                Self::unavailable(reason, workspace)
            }
        }
    }

    /// [`Self::open`] on first use (or at [`Self::warm`]) instead of now,
    /// with `mode` as this process's override of the workspace's mode: a
    /// process answers its host before the store is open.
    pub fn opening(home: &Path, workspace: impl Into<String>, mode: Option<Mode>) -> Self {
        let at = home.to_path_buf();
        let gate = Self::lazy(async move {
            let engine = ApprovalEngine::open_home(&at, Arc::new(keel_approvals::SystemClock))
                .await
                .map_err(|e| e.to_string())?;
            engine.set_mode_override(mode);
            Ok(engine)
        });
        let gate = Self {
            workspace: Some(workspace.into()),
            ..gate
        };
        gate.set_notifier(crate::notify::Notifier::for_home(home));
        gate
    }

    /// The engine, or why there is none (`Err` too for a lazy gate whose
    /// engine is not opened yet: see [`Self::opened`]).
    pub fn engine(&self) -> Result<&ApprovalEngine, &str> {
        match self.engine.get() {
            Some(opened) => opened.as_ref().map_err(String::as_str),
            None => Err("the approvals store is not open yet"),
        }
    }

    /// The engine, opened now if the gate is lazy, or why there is none.
    pub async fn opened(&self) -> Result<&ApprovalEngine, &str> {
        self.engine
            .get_or_init(|| async {
                let open = self.opener.lock().unwrap_or_else(|e| e.into_inner()).take();
                match open {
                    Some(open) => open.await.inspect_err(|reason| {
                        tracing::error!("{reason}; every tool call will be denied");
                    }),
                    None => Err("the approvals store was never configured".to_owned()),
                }
            })
            .await
            .as_ref()
            .map_err(String::as_str)
    }

    /// Opens a lazy gate's engine in the background now, so the first call
    /// (or the first turn's check for decided drafts) finds it open
    /// instead of opening it on the turn's way to the model. Nothing for a
    /// gate that is open (or opening) already, or outside a runtime.
    pub fn warm(self: &Arc<Self>) {
        if self.engine.initialized() {
            return;
        }
        let pending = self
            .opener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        if pending {
            let gate = Arc::clone(self);
            runtime.spawn(async move {
                let _ = gate.opened().await;
            });
        }
    }

    /// The workspace key calls are judged under (empty for a gate that
    /// judges each call in its own).
    pub fn workspace(&self) -> &str {
        self.workspace.as_deref().unwrap_or_default()
    }

    /// Installs the front end that announces held calls.
    pub fn set_frontend(&self, frontend: Arc<dyn ApprovalFrontend>) {
        *self.frontend.write().unwrap_or_else(|e| e.into_inner()) = frontend;
    }

    fn frontend(&self) -> Arc<dyn ApprovalFrontend> {
        self.frontend
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn context(&self, call: &ToolCallInfo, frontend: &dyn ApprovalFrontend) -> CallContext {
        CallContext {
            workspace: match &self.workspace {
                Some(w) => w.clone(),
                None => workspace_key(&call.cwd),
            },
            cwd: call.cwd.clone(),
            session_id: call.session_id.clone(),
            call_id: call.call_id.clone(),
            tool_name: call.tool_name.clone(),
            args: call.args.clone(),
            origin: match (frontend.host_class(&call.tool_name), &call.hints) {
                (Some(class), _) => ToolOrigin::Host { class },
                (None, Some(h)) => hinted_origin(h),
                (None, None) => ToolOrigin::Builtin,
            },
            unattended: frontend.unattended(),
            write_target: call.write_target.clone(),
        }
    }

    /// The engine's verdict as the loop's decision (`Held` stays `Held`;
    /// a draft is announced here, since nothing waits on it).
    async fn decision(
        &self,
        outcome: GateOutcome,
        frontend: &dyn ApprovalFrontend,
    ) -> GateDecision {
        match outcome {
            GateOutcome::Allow {
                request_id: Some(approval_id),
                ..
            } => GateDecision::Approved { approval_id },
            GateOutcome::Allow {
                request_id: None,
                approved_by: keel_approvals::ApprovedBy::Rule,
                ..
            } => GateDecision::Covered,
            GateOutcome::Allow {
                request_id: None, ..
            } => GateDecision::Allow,
            GateOutcome::Held { request } => {
                self.nudge(&request);
                GateDecision::Held {
                    approval_id: request.id,
                }
            }
            GateOutcome::Drafted { request, message } => {
                self.nudge(&request);
                frontend.requested(&request).await;
                GateDecision::deny(message)
            }
            GateOutcome::Deny {
                message, stop_turn, ..
            } => GateDecision::Deny { message, stop_turn },
        }
    }
}

fn failed(error: impl std::fmt::Display) -> GateDecision {
    GateDecision::deny(messages::check_failed(&error.to_string()))
}

fn cut(text: &str) -> String {
    if text.chars().count() <= OUTCOME_CHARS {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(OUTCOME_CHARS - 1).collect();
    out.push('…');
    out
}

/// [`ApprovalGate::recover`] for any gate over the approvals engine: what
/// the stored request for the call (`context`, as `check` would build it)
/// says, or, without one, whether the call only reads.
pub async fn recover_from(engine: &ApprovalEngine, context: &CallContext) -> Recovery {
    match engine.row_for_call(context).await {
        Ok(Some(row)) => recovery_of(&row),
        Ok(None) => Recovery::Unrecorded {
            read_only: classify(
                &context.tool_name,
                &context.args,
                context.origin,
                &context.cwd,
            )
            .class
                == Class::Read,
        },
        Err(e) => Recovery::Answer {
            text: messages::check_failed(&e.to_string()),
            is_error: true,
        },
    }
}

/// What a stored request says about a call found without a result after
/// a restart. Rows whose decision is not yet handed over (pending, decided
/// while keel was down, approved and claimed but never finished) go back
/// through `check`, which honours them once; a row whose outcome was
/// already handed over answers the call with that outcome.
fn recovery_of(row: &ApprovalRecord) -> Recovery {
    if row.consumed_at.is_none() || (row.status == Status::Approved && row.finished_at.is_none()) {
        return Recovery::Recorded;
    }
    if row.status == Status::Approved {
        return Recovery::Answer {
            text: row
                .outcome
                .clone()
                .unwrap_or_else(|| "(no output)".to_owned()),
            is_error: row.outcome_is_error,
        };
    }
    match Resolution::from_record(row).and_then(|r| r.message_for_model()) {
        Some(text) => Recovery::Answer {
            text,
            is_error: true,
        },
        None => Recovery::Recorded,
    }
}

#[async_trait::async_trait]
impl ApprovalGate for EngineGate {
    fn host_schemes(&self) -> Vec<(String, keel_tools::host::HostScheme)> {
        self.frontend().host_schemes()
    }

    fn session_mode(&self, call: &ToolCallInfo) -> Option<keel_approvals::Mode> {
        self.frontend().mode(call)
    }

    fn host_hints(&self, tool: &str) -> Option<keel_tools::ToolHints> {
        let class = self.frontend().host_class(tool)?;
        Some(keel_tools::ToolHints {
            class: class.map(|c| c.to_string()),
            ..keel_tools::ToolHints::default()
        })
    }

    async fn check(&self, call: &ToolCallInfo) -> GateDecision {
        let frontend = self.frontend();
        if let Some(message) = frontend.refuse(call) {
            return GateDecision::deny(message);
        }
        let engine = match self.opened().await {
            Ok(engine) => engine,
            Err(reason) => return failed(reason),
        };
        let mode = frontend.mode(call);
        let outcome = engine
            .gate_check_in(&self.context(call, frontend.as_ref()), mode)
            .await;
        self.decision(outcome, frontend.as_ref()).await
    }

    async fn grant(&self, call: &ToolCallInfo) -> keel_protocol::SandboxGrant {
        let frontend = self.frontend();
        let Ok(engine) = self.opened().await else {
            return keel_protocol::SandboxGrant::default();
        };
        let context = self.context(call, frontend.as_ref());
        let places = keel_approvals::Places::new(&call.cwd).protecting(&engine.config().protected);
        let c = keel_approvals::classify_judged(
            &context.tool_name,
            &context.args,
            context.origin,
            &places,
            context.write_target.as_deref(),
        );
        crate::sandboxed::grant_of(&c, call)
    }

    async fn wait(&self, call: &ToolCallInfo, approval_id: &str) -> GateDecision {
        let frontend = self.frontend();
        let engine = match self.opened().await {
            Ok(engine) => engine,
            Err(reason) => return failed(reason),
        };
        let request = match engine.request(approval_id).await {
            Ok(row) => PendingRequest::from_record(&row),
            Err(e) => return failed(e),
        };
        // Stored first (by `check`), announced now, then waited on (and,
        // with durable waits, kept by an engine that outlives this process).
        let durable = crate::durable::durable_waits();
        if let Some(d) = durable {
            d.waiting(approval_id, &call.session_id);
        }
        let guard = frontend.held(&request, call).await;
        // The wait ends on a decision or expiry; a cancelled run drops this
        // future (an abort has the loop call `abort` first).
        let never = tokio_util::sync::CancellationToken::new();
        let resolution = engine.wait(approval_id, &never).await;
        drop(guard);
        if let Some(d) = durable {
            d.ended(approval_id);
        }
        let resolution = match resolution {
            Ok(r) => r,
            Err(e) => return failed(e),
        };
        frontend.resolved(&request, &resolution).await;
        let outcome = engine.settle(resolution).await;
        match self.decision(outcome, frontend.as_ref()).await {
            GateDecision::Held { approval_id } => failed(format!(
                "request {approval_id} is still pending after its wait ended"
            )),
            other => other,
        }
    }

    async fn outcome(
        &self,
        call: &ToolCallInfo,
        decision: &GateDecision,
    ) -> Option<keel_session_store::ApprovalEntry> {
        crate::approval_entry::describe(self.opened().await.ok()?, call, decision).await
    }

    async fn finish(&self, _call: &ToolCallInfo, approval_id: &str, outcome: &str, is_error: bool) {
        if let Ok(engine) = self.opened().await
            && let Err(e) = engine
                .finish(approval_id, Some(cut(outcome)), is_error)
                .await
        {
            tracing::error!(error = %e, approval_id, "recording an approved call's outcome failed");
        }
    }

    async fn decline_waiting(&self, session_id: &str, message: &str) -> usize {
        let Ok(engine) = self.opened().await else {
            return 0;
        };
        let decider = self.frontend().decider().to_owned();
        match engine.decline_waiting(session_id, message, &decider).await {
            Ok(ids) => ids.len(),
            Err(e) => {
                tracing::error!(error = %e, "declining the waiting calls failed");
                0
            }
        }
    }

    async fn abort(&self, session_id: &str) {
        let Ok(engine) = self.opened().await else {
            return;
        };
        let rows = match engine.cancel_waiting(session_id, "abort").await {
            Ok(rows) => rows,
            Err(e) => {
                tracing::error!(error = %e, "cancelling the calls an aborted run waited on failed");
                return;
            }
        };
        let frontend = self.frontend();
        for row in rows {
            if let Some(d) = crate::durable::durable_waits() {
                d.ended(&row.id);
            }
            frontend.cancelled(&PendingRequest::from_record(&row)).await;
        }
    }

    async fn recover(&self, call: &ToolCallInfo) -> Recovery {
        let frontend = self.frontend();
        let context = self.context(call, frontend.as_ref());
        match self.opened().await {
            Ok(engine) => recover_from(engine, &context).await,
            // No engine: `check` will deny whatever is asked.
            Err(_) => Recovery::Recorded,
        }
    }

    async fn take_notes(&self, session_id: &str) -> Vec<String> {
        let Ok(engine) = self.opened().await else {
            return Vec::new();
        };
        match engine.take_draft_outcomes(session_id).await {
            Ok(outcomes) => outcomes
                .into_iter()
                .map(|o| format!("{DRAFT_NOTE_PREFIX} {}", o.message))
                .collect(),
            Err(e) => {
                tracing::error!(error = %e, "reading the outcomes of drafts failed");
                Vec::new()
            }
        }
    }

    async fn held_elsewhere(&self, request: &PendingRequest, call: &ToolCallInfo) {
        let guard = self.frontend().held(request, call).await;
        self.elsewhere
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(request.id.clone(), guard);
    }

    async fn resolved_elsewhere(&self, request: &PendingRequest, resolution: &Resolution) {
        let guard = self
            .elsewhere
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&request.id);
        drop(guard);
        self.frontend().resolved(request, resolution).await;
    }
}
