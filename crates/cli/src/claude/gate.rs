//! How the Claude SDKs' permission controls become keel's approval gate.
//!
//! [`ClaudeGate`] wraps the approvals engine's gate. Before the engine it
//! applies what only the SDK's host said: `disallowedTools` (denied),
//! `plan` mode (anything that is not a read is denied), and PreToolUse
//! hooks (`hook_callback`: deny, allow, or an updated input). A hook's
//! `allow` lets the call run without the engine, as Claude Code's does; a
//! hook that fails or does not answer denies (a hook never fails open).
//! Then the engine judges under the mode the permission mode maps onto:
//!
//! | permission mode | keel |
//! | --- | --- |
//! | `default` | `everything` (writes, sends and money ask) |
//! | `acceptEdits` | `outside` (workspace writes run; sends and money ask) |
//! | `bypassPermissions` | `money_only` (money still asks; the sandbox still confines commands) |
//! | `plan` | reads only; everything else is denied |
//! | `dontAsk` | `everything`, and what would ask is denied |
//!
//! A held call is asked of the SDK (`can_use_tool`, with
//! `--permission-prompt-tool=stdio`) by [`ClaudeFrontend`], whose answer
//! decides the stored row: allow (with `updatedInput`: the call runs with
//! it; with `updatedPermissions` `addRules`: always-allow rules), or deny
//! (`message` for the model; `interrupt` ends the turn). The first answer
//! wins wherever it comes from (`keel approvals`, the inbox). Without a
//! prompt tool the run is unattended: held calls become drafts, as in
//! `keel exec` without a terminal. `allowedTools` are always-allow rules of
//! the session in the engine, so the engine's shell analysis applies them
//! (`Bash(git log:*)` covers neither `git log && rm -rf x` nor
//! `bash -c …`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use keel_core::keel_approvals::{
    self as engine, ApprovalEngine, Class, Decision, Lifetime, Mode, NewRule, PendingRequest,
    Resolution, RuleScope, ToolOrigin, classify,
};
use keel_core::{
    ApprovalFrontend, ApprovalGate, EngineGate, GateDecision, Recovery, ToolCallInfo, WaitGuard,
    hinted_origin, workspace_key,
};
use keel_session_store::ApprovalEntry;
use serde_json::{Value, json};

use super::peer::Peer;
use super::wire::{self, claude_name, input_in, input_out, keel_name};

/// Who decisions the SDK takes are recorded as.
pub const DECIDER: &str = "claude-sdk";

/// How long a hook callback may take when its matcher names no timeout.
const HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// Claude Code's permission modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionMode {
    #[default]
    Default,
    AcceptEdits,
    BypassPermissions,
    Plan,
    DontAsk,
}

impl PermissionMode {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "default" | "manual" => PermissionMode::Default,
            "acceptEdits" => PermissionMode::AcceptEdits,
            "bypassPermissions" => PermissionMode::BypassPermissions,
            "plan" => PermissionMode::Plan,
            "dontAsk" => PermissionMode::DontAsk,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Default => "default",
            PermissionMode::AcceptEdits => "acceptEdits",
            PermissionMode::BypassPermissions => "bypassPermissions",
            PermissionMode::Plan => "plan",
            PermissionMode::DontAsk => "dontAsk",
        }
    }

    /// The engine's mode for this permission mode.
    pub fn engine_mode(self) -> Mode {
        match self {
            PermissionMode::Default | PermissionMode::Plan | PermissionMode::DontAsk => {
                Mode::Everything
            }
            PermissionMode::AcceptEdits => Mode::Outside,
            PermissionMode::BypassPermissions => Mode::MoneyOnly,
        }
    }
}

/// A tool rule as Claude Code writes it: `Bash`, `Bash(git log:*)`,
/// `Edit(src/**)`, `mcp__server__tool`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolRule {
    /// keel's tool name.
    pub tool: String,
    pub content: Option<String>,
}

impl ToolRule {
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        match text.split_once('(') {
            Some((tool, rest)) if rest.ends_with(')') => ToolRule {
                tool: keel_name(tool.trim()),
                content: Some(rest[..rest.len() - 1].trim().to_owned())
                    .filter(|c| !c.is_empty() && c != "*"),
            },
            _ => ToolRule {
                tool: keel_name(text),
                content: None,
            },
        }
    }

    /// The engine's scope for this rule; `None` when it has none.
    pub fn scope(&self) -> Option<RuleScope> {
        match (&self.content, self.tool.as_str()) {
            (None, _) => Some(RuleScope::Tool),
            (Some(c), "bash") => {
                let words: Vec<String> = command_words(c).map(str::to_owned).collect();
                (!words.is_empty()).then_some(RuleScope::Command { prefix: words })
            }
            (Some(c), _) => Some(RuleScope::PathGlob { glob: c.clone() }),
        }
    }

    /// Whether this (deny) rule covers `call`. A command the analyser does
    /// not fully understand is covered by any rule of its tool.
    pub fn covers(&self, call: &ToolCallInfo) -> bool {
        if self.tool != call.tool_name {
            return false;
        }
        let Some(content) = &self.content else {
            return true;
        };
        match call.tool_name.as_str() {
            "bash" => {
                let command = call.args.get("command").and_then(Value::as_str);
                let prefix: Vec<&str> = command_words(content).collect();
                let analysis = engine::analyze(command.unwrap_or_default());
                !analysis.understood
                    || analysis.commands.iter().any(|c| {
                        let argv: Vec<&str> = c.argv().iter().map(|w| w.text()).collect();
                        argv.len() >= prefix.len() && argv[..prefix.len()] == prefix[..]
                    })
            }
            _ => {
                let path = call.args.get("path").and_then(Value::as_str);
                path.is_some_and(|p| glob_matches(content, p))
            }
        }
    }
}

/// The words of a command rule (`git log:*` → `git`, `log`).
fn command_words(content: &str) -> impl Iterator<Item = &str> {
    content
        .trim_end_matches(":*")
        .trim_end_matches('*')
        .split_whitespace()
}

/// `*` within one folder, `**` across folders.
fn glob_matches(glob: &str, path: &str) -> bool {
    fn go(g: &[u8], p: &[u8]) -> bool {
        match (g.first(), p.first()) {
            (None, None) => true,
            (Some(b'*'), _) if g.get(1) == Some(&b'*') => {
                (0..=p.len()).any(|i| go(&g[2..], &p[i..]))
            }
            (Some(b'*'), _) => (0..=p.len())
                .take_while(|i| *i == 0 || p[i - 1] != b'/')
                .any(|i| go(&g[1..], &p[i..])),
            (Some(a), Some(b)) if a == b => go(&g[1..], &p[1..]),
            _ => false,
        }
    }
    go(glob.as_bytes(), path.trim_start_matches("./").as_bytes())
}

/// One matcher of the SDK's hooks of one event.
#[derive(Debug, Clone, Default)]
pub struct HookMatcher {
    pub matcher: Option<String>,
    pub callback_ids: Vec<String>,
    pub timeout: Option<Duration>,
}

impl HookMatcher {
    fn matches(&self, tool: &str) -> bool {
        match self.matcher.as_deref().map(str::trim) {
            None | Some("") | Some("*") => true,
            Some(m) => m.split('|').any(|alt| alt.trim() == tool),
        }
    }
}

/// The hooks the SDK registered (`initialize`'s `hooks`), by event name.
pub fn read_hooks(hooks: &Value) -> HashMap<String, Vec<HookMatcher>> {
    let mut out = HashMap::new();
    let Some(map) = hooks.as_object() else {
        return out;
    };
    for (event, matchers) in map {
        let list = matchers
            .as_array()
            .map(|ms| {
                ms.iter()
                    .map(|m| HookMatcher {
                        matcher: m.get("matcher").and_then(Value::as_str).map(str::to_owned),
                        callback_ids: m
                            .get("hookCallbackIds")
                            .and_then(Value::as_array)
                            .map(|ids| {
                                ids.iter()
                                    .filter_map(|i| i.as_str().map(str::to_owned))
                                    .collect()
                            })
                            .unwrap_or_default(),
                        timeout: m
                            .get("timeout")
                            .and_then(Value::as_f64)
                            .filter(|t| *t > 0.0)
                            .map(Duration::from_secs_f64),
                    })
                    .collect()
            })
            .unwrap_or_default();
        out.insert(event.clone(), list);
    }
    out
}

/// What the SDK's host set, shared by the gate, the front end and the
/// session driver.
#[derive(Default)]
pub struct Policy {
    state: Mutex<PolicyState>,
    /// What the files the tools change held before (`rewindFiles`).
    pub checkpoints: super::checkpoints::Checkpoints,
}

#[derive(Default)]
struct PolicyState {
    mode: PermissionMode,
    disallowed: Vec<ToolRule>,
    hooks: HashMap<String, Vec<HookMatcher>>,
    /// Inputs decided calls run with instead of the model's, by call id.
    rewrites: HashMap<String, Value>,
    /// Calls denied in the current run (`permission_denials`).
    denials: Vec<Value>,
    /// Held calls are asked of the SDK (`--permission-prompt-tool=stdio`).
    asks_host: bool,
    /// What hook input names the transcript and the folder.
    transcript: String,
    /// The `mcp__server__` prefixes of the MCP servers whose calls are
    /// judged as in Claude's default mode (`setMcpPermissionModeOverride`).
    forced: std::collections::BTreeSet<String>,
}

impl Policy {
    pub fn new(mode: PermissionMode, disallowed: Vec<ToolRule>, asks_host: bool) -> Self {
        Self {
            state: Mutex::new(PolicyState {
                mode,
                disallowed,
                asks_host,
                ..PolicyState::default()
            }),
            checkpoints: super::checkpoints::Checkpoints::new(false),
        }
    }

    /// Keeps file checkpoints (the SDK's `enableFileCheckpointing`).
    pub fn with_checkpoints(mut self, on: bool) -> Self {
        self.checkpoints = super::checkpoints::Checkpoints::new(on);
        self
    }

    fn state(&self) -> MutexGuard<'_, PolicyState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn mode(&self) -> PermissionMode {
        self.state().mode
    }

    pub fn set_mode(&self, mode: PermissionMode) {
        self.state().mode = mode;
    }

    /// Has every call of MCP server `server`'s tools judged as in
    /// Claude's `default` mode (keel's `everything`), or no longer.
    pub fn force_asking(&self, server: &str, on: bool) {
        let prefix = keel_mcp::tool_name(server, "");
        let mut state = self.state();
        match on {
            true => state.forced.insert(prefix),
            false => state.forced.remove(&prefix),
        };
    }

    /// The mode the engine judges `call` under.
    pub fn engine_mode(&self, call: &ToolCallInfo) -> Mode {
        let state = self.state();
        if state.forced.iter().any(|p| call.tool_name.starts_with(p)) {
            return PermissionMode::Default.engine_mode();
        }
        state.mode.engine_mode()
    }

    /// More tools the host refuses (`initialize`'s `disallowedTools`).
    pub fn add_disallowed(&self, rules: impl IntoIterator<Item = ToolRule>) {
        self.state().disallowed.extend(rules);
    }

    pub fn set_hooks(&self, hooks: HashMap<String, Vec<HookMatcher>>) {
        self.state().hooks = hooks;
    }

    pub fn set_transcript(&self, path: String) {
        self.state().transcript = path;
    }

    /// The hook events registered that keel does not call.
    pub fn uncalled_hooks(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .state()
            .hooks
            .iter()
            .filter(|(event, list)| {
                !list.is_empty() && !matches!(event.as_str(), "PreToolUse" | "PostToolUse")
            })
            .map(|(event, _)| event.clone())
            .collect();
        names.sort();
        names
    }

    /// The callback ids of `event`'s hooks that match `tool`, with their
    /// timeouts.
    pub fn callbacks(&self, event: &str, tool: &str) -> Vec<(String, Duration)> {
        self.state()
            .hooks
            .get(event)
            .map(|list| {
                list.iter()
                    .filter(|m| m.matches(tool))
                    .flat_map(|m| {
                        m.callback_ids
                            .iter()
                            .map(|id| (id.clone(), m.timeout.unwrap_or(HOOK_TIMEOUT)))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The denials of the run that just ended.
    pub fn take_denials(&self) -> Vec<Value> {
        std::mem::take(&mut self.state().denials)
    }

    fn deny(&self, call: &ToolCallInfo) {
        self.state().denials.push(json!({
            "tool_name": claude_name(&call.tool_name),
            "tool_use_id": call.call_id,
            "tool_input": input_out(&call.tool_name, &call.args),
        }));
    }

    fn rewrite(&self, call_id: &str, input: Value) {
        self.state().rewrites.insert(call_id.to_owned(), input);
    }

    /// The hook input of `event` for `call`.
    pub fn hook_input(&self, event: &str, call: &ToolCallInfo, extra: Value) -> Value {
        let s = self.state();
        let mut input = json!({
            "session_id": call.session_id,
            "transcript_path": s.transcript,
            "cwd": call.cwd.display().to_string(),
            "permission_mode": s.mode.as_str(),
            "hook_event_name": event,
            "tool_name": claude_name(&call.tool_name),
            "tool_input": input_out(&call.tool_name, &call.args),
            "tool_use_id": call.call_id,
        });
        if let (Value::Object(map), Value::Object(more)) = (&mut input, extra) {
            map.extend(more);
        }
        input
    }
}

/// What the PreToolUse hooks said of a call.
enum HookVerdict {
    /// Nothing: the gate decides.
    Pass,
    Allow,
    Deny {
        message: String,
        stop_turn: bool,
    },
}

/// The gate of a session driven by a Claude SDK.
pub struct ClaudeGate {
    pub inner: Arc<EngineGate>,
    pub policy: Arc<Policy>,
    pub peer: Arc<Peer>,
}

impl ClaudeGate {
    /// Asks the PreToolUse hooks that match `call`, in order; the first
    /// deny wins. An updated input is kept for the call (and the later
    /// hooks and the gate judge it).
    async fn pre_tool_use(&self, call: &mut ToolCallInfo) -> HookVerdict {
        let mut verdict = HookVerdict::Pass;
        for (id, timeout) in self
            .policy
            .callbacks("PreToolUse", &claude_name(&call.tool_name))
        {
            let input = self.policy.hook_input("PreToolUse", call, json!({}));
            let asked = self
                .peer
                .request(wire::hook_request(&id, input, &call.call_id));
            let answer = match tokio::time::timeout(timeout, asked).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(e)) => return hook_failed(&e),
                Err(_) => return hook_failed("it did not answer in time"),
            };
            if answer.get("continue") == Some(&Value::Bool(false)) {
                let why = answer
                    .get("stopReason")
                    .and_then(Value::as_str)
                    .unwrap_or("A hook stopped the turn.");
                return HookVerdict::Deny {
                    message: why.to_owned(),
                    stop_turn: true,
                };
            }
            let specific = answer.get("hookSpecificOutput");
            let reason = specific
                .and_then(|s| s.get("permissionDecisionReason"))
                .or_else(|| answer.get("reason"))
                .and_then(Value::as_str);
            let decision = specific
                .and_then(|s| s.get("permissionDecision"))
                .and_then(Value::as_str);
            if decision == Some("deny") || answer.get("decision") == Some(&json!("block")) {
                return HookVerdict::Deny {
                    message: reason
                        .unwrap_or("A PreToolUse hook denied this call.")
                        .to_owned(),
                    stop_turn: false,
                };
            }
            if let Some(updated) = specific.and_then(|s| s.get("updatedInput"))
                && updated.is_object()
            {
                call.args = input_in(&call.tool_name, updated);
                call.write_target = None;
                self.policy.rewrite(&call.call_id, call.args.clone());
            }
            if decision == Some("allow") || answer.get("decision") == Some(&json!("approve")) {
                verdict = HookVerdict::Allow;
            }
        }
        verdict
    }

    fn plan_refuses(&self, call: &ToolCallInfo) -> bool {
        if self.policy.mode() != PermissionMode::Plan {
            return false;
        }
        let origin = call
            .hints
            .as_ref()
            .map_or(ToolOrigin::Builtin, hinted_origin);
        let c = classify(&call.tool_name, &call.args, origin, &call.cwd);
        c.class != Class::Read || !c.understood
    }
}

fn hook_failed(why: &str) -> HookVerdict {
    HookVerdict::Deny {
        message: format!("The PreToolUse hook failed ({why}); the call did not run."),
        stop_turn: false,
    }
}

#[async_trait::async_trait]
impl ApprovalGate for ClaudeGate {
    async fn check(&self, call: &ToolCallInfo) -> GateDecision {
        if self
            .policy
            .state()
            .disallowed
            .iter()
            .any(|r| r.covers(call))
        {
            self.policy.deny(call);
            return GateDecision::deny(format!(
                "The host does not allow {} here; the call did not run.",
                claude_name(&call.tool_name)
            ));
        }
        let mut call = call.clone();
        let verdict = self.pre_tool_use(&mut call).await;
        if self.plan_refuses(&call) {
            self.policy.deny(&call);
            return GateDecision::deny(
                "Plan mode: this call would change something, so it did not run. Read and plan; say what you would do.",
            );
        }
        match verdict {
            HookVerdict::Deny { message, stop_turn } => {
                self.policy.deny(&call);
                return GateDecision::Deny { message, stop_turn };
            }
            HookVerdict::Allow => return GateDecision::Allow,
            HookVerdict::Pass => {}
        }
        let decision = self.inner.check(&call).await;
        match decision {
            GateDecision::Held { approval_id } if self.policy.mode() == PermissionMode::DontAsk => {
                let message = "Not allowed in advance, and this session does not ask (dontAsk): the call did not run.";
                if let Ok(engine) = self.inner.engine() {
                    let note = Some(message.to_owned());
                    let declined = Decision::Decline {
                        note,
                        stop_turn: false,
                    };
                    let _ = engine.decide(&approval_id, declined, DECIDER, None).await;
                }
                self.policy.deny(&call);
                GateDecision::deny(message)
            }
            GateDecision::Deny { .. } => {
                self.policy.deny(&call);
                decision
            }
            other => other,
        }
    }

    async fn grant(&self, call: &ToolCallInfo) -> keel_protocol::SandboxGrant {
        self.inner.grant(call).await
    }

    async fn wait(&self, call: &ToolCallInfo, approval_id: &str) -> GateDecision {
        let decision = self.inner.wait(call, approval_id).await;
        if matches!(decision, GateDecision::Deny { .. }) {
            self.policy.deny(call);
        }
        decision
    }

    async fn outcome(&self, call: &ToolCallInfo, decision: &GateDecision) -> Option<ApprovalEntry> {
        self.inner.outcome(call, decision).await
    }

    async fn finish(&self, call: &ToolCallInfo, approval_id: &str, outcome: &str, is_error: bool) {
        self.inner
            .finish(call, approval_id, outcome, is_error)
            .await;
    }

    /// Asked once a call is decided to run, just before it runs: the input
    /// its decider gave it, and the checkpoint of the file it writes.
    async fn rewrite(&self, call: &ToolCallInfo) -> Option<Value> {
        let rewritten = self.policy.state().rewrites.remove(&call.call_id);
        let args = rewritten.as_ref().unwrap_or(&call.args);
        if matches!(call.tool_name.as_str(), "write" | "edit")
            && let Some(path) = args.get("path").and_then(Value::as_str)
        {
            // Reading the file (up to 16 MiB) is kept off the runtime.
            let path = keel_tools::normalize_path(&call.cwd.join(path));
            let policy = self.policy.clone();
            let kept = tokio::task::spawn_blocking(move || policy.checkpoints.before_write(&path));
            if let Err(e) = kept.await {
                tracing::warn!(error = %e, "cannot keep a checkpoint");
            }
        }
        rewritten
    }

    async fn decline_waiting(&self, session_id: &str, message: &str) -> usize {
        self.inner.decline_waiting(session_id, message).await
    }

    async fn abort(&self, session_id: &str) {
        self.inner.abort(session_id).await;
    }

    async fn recover(&self, call: &ToolCallInfo) -> Recovery {
        self.inner.recover(call).await
    }

    async fn take_notes(&self, session_id: &str) -> Vec<String> {
        self.inner.take_notes(session_id).await
    }
}

/// The approvals front end of a session driven by a Claude SDK.
pub struct ClaudeFrontend {
    pub engine: Option<ApprovalEngine>,
    pub policy: Arc<Policy>,
    pub peer: Arc<Peer>,
}

#[async_trait::async_trait]
impl ApprovalFrontend for ClaudeFrontend {
    async fn requested(&self, request: &PendingRequest) {
        tracing::info!(id = %request.id, title = %request.title, "tool call held as a draft");
    }

    async fn held(&self, request: &PendingRequest, call: &ToolCallInfo) -> WaitGuard {
        let Some(engine) = self.engine.clone() else {
            return Box::new(());
        };
        let (peer, policy) = (self.peer.clone(), self.policy.clone());
        let (request, call) = (request.clone(), call.clone());
        let task = tokio::spawn(async move {
            let suggestion = request.always.as_ref().map(|a| {
                json!([{
                    "type": "addRules",
                    "rules": [{"toolName": claude_name(&call.tool_name)}],
                    "behavior": "allow",
                    "destination": "session",
                    "label": a.label,
                }])
            });
            let asked = peer.request(json!({
                "subtype": "can_use_tool",
                "tool_name": claude_name(&call.tool_name),
                "input": input_out(&call.tool_name, &call.args),
                "tool_use_id": call.call_id,
                "permission_suggestions": suggestion.unwrap_or_else(|| json!([])),
                "decision_reason": format!("{}: {}", request.class_label, request.reason),
                "title": request.title,
                "description": request.reason,
            }));
            let decision = match asked.await {
                Ok(answer) => decision_of(&engine, &policy, &call, &answer).await,
                Err(e) => Decision::Decline {
                    note: Some(format!("The host could not be asked: {e}")),
                    stop_turn: false,
                },
            };
            match engine.decide(&request.id, decision, DECIDER, None).await {
                Ok(_) | Err(engine::Error::AlreadyDecided { .. }) => {}
                Err(e) => {
                    tracing::error!(id = %request.id, error = %e, "recording the SDK's answer failed")
                }
            }
        });
        Box::new(AbortOnDrop(task))
    }

    async fn resolved(&self, _request: &PendingRequest, _resolution: &Resolution) {}

    fn mode(&self, call: &ToolCallInfo) -> Option<Mode> {
        Some(self.policy.engine_mode(call))
    }

    fn decider(&self) -> &str {
        DECIDER
    }

    fn unattended(&self) -> bool {
        !self.policy.state().asks_host
    }
}

/// Stops asking the SDK once the wait is over.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The engine's decision for the SDK's `PermissionResult`.
async fn decision_of(
    engine: &ApprovalEngine,
    policy: &Policy,
    call: &ToolCallInfo,
    answer: &Value,
) -> Decision {
    match answer.get("behavior").and_then(Value::as_str) {
        Some("allow") => {
            if let Some(updated) = answer.get("updatedInput")
                && updated.is_object()
                && *updated != input_out(&call.tool_name, &call.args)
            {
                policy.rewrite(&call.call_id, input_in(&call.tool_name, updated));
            }
            for update in answer
                .get("updatedPermissions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                add_rules(engine, call, update).await;
            }
            Decision::Approve
        }
        Some("deny") => Decision::Decline {
            note: answer
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned),
            stop_turn: answer.get("interrupt") == Some(&Value::Bool(true)),
        },
        _ => Decision::Decline {
            note: Some("The host's answer could not be read; the call did not run.".to_owned()),
            stop_turn: false,
        },
    }
}

/// An `addRules` allow update as always-allow rules: of the session
/// (`destination` `session`) or of the workspace (the settings files).
async fn add_rules(engine: &ApprovalEngine, call: &ToolCallInfo, update: &Value) {
    if update.get("type").and_then(Value::as_str) != Some("addRules")
        || update.get("behavior").and_then(Value::as_str) != Some("allow")
    {
        return;
    }
    let lifetime = match update.get("destination").and_then(Value::as_str) {
        Some("session") | None => Lifetime::Session {
            session_id: call.session_id.clone(),
        },
        Some(_) => Lifetime::Permanent,
    };
    for rule in update
        .get("rules")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(name) = rule.get("toolName").and_then(Value::as_str) else {
            continue;
        };
        let text = match rule.get("ruleContent").and_then(Value::as_str) {
            Some(c) => format!("{name}({c})"),
            None => name.to_owned(),
        };
        if let Err(e) = add_rule(engine, &call.cwd, &text, lifetime.clone()).await {
            tracing::info!(rule = %text, "no always-allow rule for it: {e}");
        }
    }
}

/// Saves the Claude-style rule `text` as an always-allow rule.
pub async fn add_rule(
    engine: &ApprovalEngine,
    cwd: &std::path::Path,
    text: &str,
    lifetime: Lifetime,
) -> engine::Result<()> {
    let rule = ToolRule::parse(text);
    let Some(scope) = rule.scope() else {
        return Ok(());
    };
    engine
        .add_rule(NewRule {
            workspace: workspace_key(cwd),
            tool: rule.tool,
            operation: None,
            scope,
            lifetime,
            label: Some(format!("allowed by the host: {text}")),
            created_from: None,
        })
        .await
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn bash(command: &str) -> ToolCallInfo {
        ToolCallInfo {
            session_id: "s".into(),
            call_id: "c".into(),
            tool_name: "bash".into(),
            args: json!({"command": command}),
            cwd: PathBuf::from("/w"),
            write_target: None,
            hints: None,
        }
    }

    #[test]
    fn rules_read_as_claude_code_writes_them() {
        assert_eq!(
            ToolRule::parse("Bash(git log:*)").scope(),
            Some(RuleScope::Command {
                prefix: vec!["git".into(), "log".into()]
            })
        );
        assert_eq!(ToolRule::parse("Write").scope(), Some(RuleScope::Tool));
        assert_eq!(ToolRule::parse("Glob").tool, "find");
        assert_eq!(
            ToolRule::parse("Edit(src/**)").scope(),
            Some(RuleScope::PathGlob {
                glob: "src/**".into()
            })
        );
    }

    #[test]
    fn a_denied_command_is_found_inside_compound_lines_and_substitutions() {
        let rule = ToolRule::parse("Bash(rm:*)");
        assert!(rule.covers(&bash("rm -rf x")));
        assert!(rule.covers(&bash("ls && rm -rf x")));
        assert!(rule.covers(&bash("echo $(rm -rf x)")));
        assert!(rule.covers(&bash("bash -c 'rm -rf x'")));
        assert!(!rule.covers(&bash("ls -la")));
        assert!(ToolRule::parse("Bash").covers(&bash("ls")));
    }

    #[test]
    fn hook_matchers_take_alternatives_and_globs_take_folders() {
        let m = HookMatcher {
            matcher: Some("Write|Edit".into()),
            ..HookMatcher::default()
        };
        assert!(m.matches("Edit"));
        assert!(!m.matches("Bash"));
        assert!(HookMatcher::default().matches("Bash"));
        assert!(glob_matches("src/**", "src/a/b.rs"));
        assert!(glob_matches("src/*.rs", "src/a.rs"));
        assert!(!glob_matches("src/*.rs", "src/a/b.rs"));
    }

    #[test]
    fn permission_modes_map_onto_keels() {
        for (text, mode) in [
            ("default", Mode::Everything),
            ("acceptEdits", Mode::Outside),
            ("bypassPermissions", Mode::MoneyOnly),
            ("plan", Mode::Everything),
            ("dontAsk", Mode::Everything),
        ] {
            let m = PermissionMode::parse(text).unwrap();
            assert_eq!(m.as_str(), text);
            assert_eq!(m.engine_mode(), mode);
        }
        assert_eq!(PermissionMode::parse("auto"), None);
    }

    #[test]
    fn a_server_forced_to_ask_is_judged_as_in_default_mode() {
        let policy = Policy::new(PermissionMode::BypassPermissions, Vec::new(), true);
        let call = |name: &str| ToolCallInfo {
            tool_name: name.to_owned(),
            ..bash("true")
        };
        policy.force_asking("calc", true);
        assert_eq!(
            policy.engine_mode(&call("mcp__calc__add")),
            Mode::Everything
        );
        // Only that server: not another whose name it begins.
        assert_eq!(
            policy.engine_mode(&call("mcp__calculus__add")),
            Mode::MoneyOnly
        );
        assert_eq!(policy.engine_mode(&call("bash")), Mode::MoneyOnly);
        policy.force_asking("calc", false);
        assert_eq!(policy.engine_mode(&call("mcp__calc__add")), Mode::MoneyOnly);
    }
}
