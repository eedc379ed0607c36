//! The approval engine: the one place a tool call is let through or held.
//!
//! Owns [`ApprovalEngine`] over an [`ApprovalStore`] and a [`Clock`]: the
//! decision order (read runs → a matching always-allow rule runs → the mode
//! asks → held; else runs), failing closed; held calls written to the store
//! before anyone hears of them; waits that end on a decision (nudged in
//! process, re-read periodically so another process's decision is seen), on
//! expiry or on cancel; decisions by compare-and-swap; rules, modes, drafts
//! and the audit trail. It must not know about the agent loop, sessions'
//! contents, or any wire format: the caller maps [`GateOutcome`] onto its
//! own gate.

mod decide;
mod drafts;
mod gate;
mod wait;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;

use crate::card::PendingRequest;
use crate::class::{Class, ToolOrigin};
use crate::clock::{Clock, SystemClock};
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::rules::{self, Lifetime, NewRule, Rule, RuleScope};
use crate::store::{
    ApprovalRecord, ApprovalStore, ApprovedBy, AuditEntry, AuditFilter, NewAudit, RequestFilter,
    SqliteStore, Status, StoreLocation,
};

pub use drafts::DraftOutcome;
pub use wait::Look;

/// Tunables of an engine. The expiry is configured under `[approvals]` in
/// `config.toml` ([`EngineConfig::for_home`], see [`crate::settings`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineConfig {
    /// How long a held call waits before it expires (default 7 days).
    pub default_ttl: Duration,
    /// Per-class overrides of `default_ttl`.
    pub class_ttl: Vec<(Class, Duration)>,
    /// How often a wait re-reads its row, so a decision written by another
    /// process is seen (default 1 s).
    pub poll_interval: Duration,
    /// keel's own state (`KEEL_HOME`, the SQLite database): any call that
    /// touches it is money and never covered by rules. Engines opened on a
    /// home ([`ApprovalEngine::open_home`]) protect that home.
    pub protected: Vec<PathBuf>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            default_ttl: Duration::from_secs(7 * 24 * 60 * 60),
            class_ttl: Vec::new(),
            poll_interval: Duration::from_secs(1),
            protected: Vec::new(),
        }
    }
}

impl EngineConfig {
    /// How long a held call of `class` waits before it expires.
    pub fn ttl(&self, class: Class) -> Duration {
        self.class_ttl
            .iter()
            .find(|(c, _)| *c == class)
            .map_or(self.default_ttl, |(_, d)| *d)
    }
}

/// One tool call about to run, as the engine needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallContext {
    /// The key rules and modes are stored under (the workspace root, usually).
    pub workspace: String,
    /// Where relative paths resolve (the workspace root).
    pub cwd: PathBuf,
    pub session_id: String,
    pub call_id: String,
    pub tool_name: String,
    pub args: Value,
    /// Built-in, or a host/MCP tool with its declared class.
    #[serde(default)]
    pub origin: ToolOrigin,
    /// No one is there to answer: a held call becomes a draft.
    #[serde(default)]
    pub unattended: bool,
    /// The physical file a file-writing call lands on, resolved once by the
    /// caller (who then writes exactly there): classed instead of resolving
    /// the `path` argument again, and part of the call's digest, so an
    /// approval covers that file and no other.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_target: Option<PathBuf>,
}

impl CallContext {
    /// The stable digest a stored request is matched by: tool, arguments
    /// and, for a file-writing call, the physical file it lands on (a
    /// symlink changed since the request was stored makes it a new call).
    pub fn digest(&self) -> String {
        call_digest(&self.tool_name, &self.args, self.write_target.as_deref())
    }
}

/// The digest a stored request of this call carries ([`CallContext::digest`]):
/// a draft sent later compares it to know it writes the file it was judged on.
pub fn call_digest(tool: &str, args: &Value, write_target: Option<&std::path::Path>) -> String {
    match write_target {
        Some(target) => digest_with(tool, args, &target.to_string_lossy()),
        None => digest(tool, args),
    }
}

/// What the gate says about a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum GateOutcome {
    /// Run it.
    Allow {
        approved_by: ApprovedBy,
        /// The rules that let it run (`approved_by: rule`), or the rule an
        /// "always allow" decision created.
        rule_ids: Vec<String>,
        /// The approval request, when a person approved it.
        request_id: Option<String>,
    },
    /// Held for a person: show `request`, then [`ApprovalEngine::wait`].
    Held { request: PendingRequest },
    /// Unattended: parked as a draft; the model reads `message`.
    Drafted {
        request: PendingRequest,
        message: String,
    },
    /// Do not run it; the model reads `message`. `stop_turn`: end the turn.
    Deny {
        message: String,
        request_id: Option<String>,
        stop_turn: bool,
    },
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Resolution {
    Approved {
        request_id: String,
        rule_id: Option<String>,
    },
    Declined {
        request_id: String,
        note: Option<String>,
        /// A new user message declined it (the note is that message).
        by_message: bool,
        stop_turn: bool,
    },
    Expired {
        request_id: String,
    },
    Cancelled {
        request_id: String,
    },
}

impl Resolution {
    /// The resolution a decided row stands for; `None` while pending.
    pub fn from_record(r: &ApprovalRecord) -> Option<Self> {
        let request_id = r.id.clone();
        Some(match r.status {
            Status::Pending => return None,
            Status::Approved => Resolution::Approved {
                request_id,
                rule_id: r.rule_id.clone(),
            },
            Status::Declined => Resolution::Declined {
                request_id,
                note: r.note.clone(),
                by_message: r.by_message,
                stop_turn: r.stop_turn,
            },
            Status::Expired => Resolution::Expired { request_id },
            Status::Cancelled => Resolution::Cancelled { request_id },
        })
    }

    pub fn request_id(&self) -> &str {
        match self {
            Resolution::Approved { request_id, .. }
            | Resolution::Declined { request_id, .. }
            | Resolution::Expired { request_id }
            | Resolution::Cancelled { request_id } => request_id,
        }
    }

    /// What the model reads when the call did not run; `None` when approved.
    pub fn message_for_model(&self) -> Option<String> {
        use crate::card::messages;
        match self {
            Resolution::Approved { .. } => None,
            Resolution::Declined {
                note, by_message, ..
            } => Some(if *by_message {
                messages::superseded(note.as_deref().unwrap_or(""))
            } else {
                messages::declined(note.as_deref())
            }),
            Resolution::Expired { .. } => Some(messages::expired()),
            Resolution::Cancelled { .. } => Some(messages::cancelled()),
        }
    }
}

/// A person's decision on a held call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Allow once.
    Approve,
    /// Allow, and save an always-allow rule (`scope` defaults to the
    /// request's offer). Refused for money and for calls not fully understood.
    ApproveAlways {
        #[serde(default)]
        scope: Option<RuleScope>,
        #[serde(default)]
        lifetime: Lifetime,
    },
    /// Do not run it; `note` is for the model. `stop_turn` ends the turn.
    Decline {
        #[serde(default)]
        note: Option<String>,
        #[serde(default)]
        stop_turn: bool,
    },
    /// A new user message arrived while it waited: declined, with the
    /// message as its note.
    Superseded { message: String },
}

/// The approval engine. Cloning shares it.
#[derive(Debug, Clone)]
pub struct ApprovalEngine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    store: Arc<dyn ApprovalStore>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    /// Woken whenever this engine decides, cancels or expires a request.
    nudge: Notify,
    /// A mode this process uses instead of the stored one (for example
    /// `--approval-mode`); never written to the store.
    mode_override: std::sync::RwLock<Option<Mode>>,
}

impl ApprovalEngine {
    pub fn new(store: Arc<dyn ApprovalStore>, clock: Arc<dyn Clock>, config: EngineConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                store,
                clock,
                config,
                nudge: Notify::new(),
                mode_override: std::sync::RwLock::new(None),
            }),
        }
    }

    /// An engine over the SQLite database at `path` (created and migrated
    /// if needed), with the wall clock and default settings.
    pub async fn open_sqlite(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_sqlite_with(path, Arc::new(SystemClock), EngineConfig::default()).await
    }

    pub async fn open_sqlite_with(
        path: impl AsRef<Path>,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
    ) -> Result<Self> {
        let store = SqliteStore::open(path.as_ref().to_path_buf()).await?;
        Ok(Self::new(Arc::new(store), clock, config))
    }

    /// An engine over the store at `location`.
    pub async fn open_at(
        location: &StoreLocation,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
    ) -> Result<Self> {
        Ok(Self::new(location.open().await?, clock, config))
    }

    /// An engine over the configured store of the keel home `home`
    /// ([`StoreLocation::for_home`]: `KEEL_APPROVALS_DATABASE_URL`, else
    /// `[approvals] store` in `config.toml`, else `home/keel.db`), with the
    /// configured expiry ([`EngineConfig::for_home`]: `[approvals]
    /// expire_after` and `[approvals.expire_after_by_class]`). Every keel
    /// process opens its approvals through here, so they agree. An error
    /// names the store (a password hidden) or the setting that is wrong.
    pub async fn open_home(home: &Path, clock: Arc<dyn Clock>) -> Result<Self> {
        let config = EngineConfig::for_home(home)?;
        Self::open_home_with(home, clock, config).await
    }

    /// [`open_home`](Self::open_home) with `config` instead of the
    /// configured settings (a caller that overrides them, for example with
    /// a command-line flag, starts from [`EngineConfig::for_home`]).
    pub async fn open_home_with(
        home: &Path,
        clock: Arc<dyn Clock>,
        mut config: EngineConfig,
    ) -> Result<Self> {
        let location = StoreLocation::for_home(home)?;
        config.protected.push(home.to_path_buf());
        if let StoreLocation::Sqlite(db) = &location {
            config.protected.push(db.clone());
        }
        Self::open_at(&location, clock, config).await
    }

    pub fn store(&self) -> &Arc<dyn ApprovalStore> {
        &self.inner.store
    }

    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    fn now(&self) -> i64 {
        self.inner.clock.now_ms()
    }

    fn nudge(&self) {
        self.inner.nudge.notify_waiters();
    }

    /// Appends an audit line; a failure is logged, not returned (used after
    /// the state change it records has happened).
    async fn audit_best_effort(&self, entry: NewAudit) {
        if let Err(e) = self.inner.store.append_audit(entry).await {
            tracing::warn!(error = %e, "writing an approvals audit line failed");
        }
    }

    /// The audit line of `update` on the pending row `r`, written with the
    /// decision itself ([`DecisionUpdate::audit`]).
    fn audit_of_update(
        &self,
        r: &ApprovalRecord,
        u: &crate::store::DecisionUpdate,
        detail: String,
    ) -> NewAudit {
        NewAudit {
            at: u.decided_at,
            approved_by: u.approved_by,
            rule_ids: u.rule_id.iter().cloned().collect(),
            decider: u.decided_by.clone(),
            ..self.audit_for(r, u.status.as_str(), detail)
        }
    }

    fn audit_for(&self, r: &ApprovalRecord, outcome: &str, detail: String) -> NewAudit {
        NewAudit {
            at: self.now(),
            workspace: r.workspace.clone(),
            session_id: Some(r.session_id.clone()),
            call_id: Some(r.call_id.clone()),
            request_id: Some(r.id.clone()),
            tool: Some(r.tool.clone()),
            class: Some(r.class),
            mode: None,
            outcome: outcome.to_owned(),
            approved_by: r.approved_by,
            rule_ids: r.rule_id.iter().cloned().collect(),
            decider: r.decided_by.clone(),
            detail,
        }
    }

    // ----- modes -----

    /// The workspace's mode (`outside` when never set).
    pub async fn mode(&self, workspace: &str) -> Result<Mode> {
        Ok(self
            .inner
            .store
            .get_mode(workspace)
            .await?
            .unwrap_or_default())
    }

    /// Makes this engine (and its clones) judge every workspace under
    /// `mode` instead of the stored mode, without storing anything; `None`
    /// goes back to the stored modes.
    pub fn set_mode_override(&self, mode: Option<Mode>) {
        let mut slot = self
            .inner
            .mode_override
            .write()
            .unwrap_or_else(|e| e.into_inner());
        *slot = mode;
    }

    /// The mode set by [`set_mode_override`](Self::set_mode_override), if any.
    pub fn mode_override(&self) -> Option<Mode> {
        *self
            .inner
            .mode_override
            .read()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The mode calls in `workspace` are judged under: the override, else
    /// the stored mode, else `outside`.
    pub async fn effective_mode(&self, workspace: &str) -> Result<Mode> {
        match self.mode_override() {
            Some(mode) => Ok(mode),
            None => self.mode(workspace).await,
        }
    }

    pub async fn set_mode(&self, workspace: &str, mode: Mode, decider: &str) -> Result<()> {
        self.inner
            .store
            .set_mode(workspace, mode, self.now())
            .await?;
        self.audit_best_effort(NewAudit {
            at: self.now(),
            workspace: workspace.to_owned(),
            mode: Some(mode),
            outcome: "mode_set".to_owned(),
            decider: Some(decider.to_owned()),
            detail: format!("mode set to {mode}"),
            ..Default::default()
        })
        .await;
        Ok(())
    }

    // ----- rules -----

    /// Validates and stores a rule. Money, wrappers, interpreters alone and
    /// anything not fully understood are refused.
    pub async fn add_rule(&self, new: NewRule) -> Result<Rule> {
        self.add_rule_checked(new, None, "user").await
    }

    async fn add_rule_checked(
        &self,
        new: NewRule,
        class: Option<Class>,
        decider: &str,
    ) -> Result<Rule> {
        rules::validate(&new, class)?;
        let rule = Rule {
            id: format!("rule_{}", uuid::Uuid::now_v7().simple()),
            label: new.label.clone().unwrap_or_else(|| {
                rules::default_label(&new.tool, new.operation.as_deref(), &new.scope)
            }),
            workspace: new.workspace,
            tool: new.tool,
            operation: new.operation,
            scope: new.scope,
            lifetime: new.lifetime,
            created_at: self.now(),
            created_from: new.created_from,
            last_matched_at: None,
            match_count: 0,
        };
        self.inner.store.insert_rule(rule.clone()).await?;
        self.audit_best_effort(NewAudit {
            at: self.now(),
            workspace: rule.workspace.clone(),
            request_id: rule.created_from.clone(),
            tool: Some(rule.tool.clone()),
            outcome: "rule_added".to_owned(),
            rule_ids: vec![rule.id.clone()],
            decider: Some(decider.to_owned()),
            detail: rule.label.clone(),
            ..Default::default()
        })
        .await;
        Ok(rule)
    }

    /// Rules of one workspace (all when `None`).
    pub async fn rules(&self, workspace: Option<&str>) -> Result<Vec<Rule>> {
        self.inner.store.list_rules(workspace).await
    }

    pub async fn remove_rule(&self, id: &str, decider: &str) -> Result<Rule> {
        let rule = self
            .inner
            .store
            .get_rule(id)
            .await?
            .ok_or_else(|| Error::RuleNotFound(id.to_owned()))?;
        if !self.inner.store.delete_rule(id).await? {
            return Err(Error::RuleNotFound(id.to_owned()));
        }
        self.audit_best_effort(NewAudit {
            at: self.now(),
            workspace: rule.workspace.clone(),
            tool: Some(rule.tool.clone()),
            outcome: "rule_removed".to_owned(),
            rule_ids: vec![rule.id.clone()],
            decider: Some(decider.to_owned()),
            detail: rule.label.clone(),
            ..Default::default()
        })
        .await;
        Ok(rule)
    }

    // ----- views -----

    /// Requests still pending (expiring those past due first), newest first.
    pub async fn pending(&self, workspace: Option<&str>) -> Result<Vec<PendingRequest>> {
        self.expire_due().await?;
        let rows = self
            .inner
            .store
            .list_requests(RequestFilter {
                workspace: workspace.map(str::to_owned),
                status: Some(Status::Pending),
                ..Default::default()
            })
            .await?;
        Ok(rows.iter().map(PendingRequest::from_record).collect())
    }

    pub async fn request(&self, id: &str) -> Result<ApprovalRecord> {
        self.inner
            .store
            .get_request(id)
            .await?
            .ok_or_else(|| Error::RequestNotFound(id.to_owned()))
    }

    /// Requests in any state (newest first).
    pub async fn requests(&self, filter: RequestFilter) -> Result<Vec<ApprovalRecord>> {
        self.inner.store.list_requests(filter).await
    }

    /// "Why did this run (or not)?": every audit line for a tool call id,
    /// newest first.
    pub async fn explain(&self, call_id: &str) -> Result<Vec<AuditEntry>> {
        self.inner
            .store
            .audit(AuditFilter {
                call_id: Some(call_id.to_owned()),
                ..Default::default()
            })
            .await
    }
}

/// A stable digest of a call (tool + arguments with keys sorted).
pub(crate) fn digest(tool: &str, args: &Value) -> String {
    digest_with(tool, args, "")
}

/// [`digest`] with `extra` text after the arguments (none when empty).
fn digest_with(tool: &str, args: &Value, extra: &str) -> String {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String((*k).clone()).to_string());
                    out.push(':');
                    if let Some(inner) = map.get(*k) {
                        canonical(inner, out);
                    }
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    canonical(item, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::from(tool);
    text.push('\n');
    canonical(args, &mut text);
    if !extra.is_empty() {
        text.push('\n');
        text.push_str(extra);
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}
