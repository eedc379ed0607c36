//! The approval store: durable rows for requests, rules, modes and audit.
//!
//! Owns the record types ([`ApprovalRecord`], [`AuditEntry`], ...) and the
//! [`ApprovalStore`] trait every backend implements: insert a request before
//! anyone hears of it, decide it by compare-and-swap on (id, revision),
//! consume and finish it exactly once, list rules and modes, append audit
//! lines. [`SqliteStore`] is the embedded backend, [`PostgresStore`] the
//! server one; [`StoreLocation`] picks between them. It must not know about classes' meaning, modes'
//! effect, waiting, or the agent loop.

mod changes;
pub mod identity;
mod location;
mod pg_schema;
mod postgres;
mod rows;
mod schema;
mod sqlite;

#[cfg(test)]
mod tests;

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::class::Class;
use crate::error::{Error, Result};
use crate::mode::Mode;
use crate::rules::{AlwaysOffer, Rule};

/// The columns every store selects, in the order its row readers take
/// them by position: one list, so the SQLite and PostgreSQL readers cannot
/// drift apart.
pub(crate) const REQUEST_COLUMNS: &str = "id, workspace, session_id, call_id, tool, operation, args_json, \
    digest, class, reason, understood, offer_json, delivery, status, note, by_message, stop_turn, \
    decided_by, approved_by, rule_id, idempotency_key, revision, created_at, decided_at, \
    expires_at, consumed_at, finished_at, outcome, outcome_is_error, reported_at";

pub(crate) const RULE_COLUMNS: &str = "id, workspace, tool, operation, scope_kind, scope_value, label, \
    session_id, created_at, created_from, last_matched_at, match_count";

pub(crate) const AUDIT_COLUMNS: &str = "id, at, workspace, session_id, call_id, request_id, tool, class, \
    mode, outcome, approved_by, rule_ids, decider, detail";

pub use changes::{ChangeFeed, PG_CHANNEL, SQLITE_CHECK_INTERVAL, Subscription};
pub use location::{
    DATABASE_ENV, DEFAULT_SQLITE_FILE, Given, STORE_ENV, StoreLocation, StoreSource,
    set_command_line_database,
};
pub use postgres::{PostgresStore, redact_dsn};
pub use sqlite::SqliteStore;

macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(Error::Invalid { what: $what, value: s.to_owned() }),
                }
            }
        }
    };
}

string_enum!(
    /// Where a request stands.
    Status, "approval status" {
        /// Waiting for a person.
        Pending = "pending",
        Approved = "approved",
        Declined = "declined",
        /// Nobody answered before `expires_at`; nothing ran.
        Expired = "expired",
        /// The turn was aborted while it waited; nothing ran.
        Cancelled = "cancelled",
    }
);

string_enum!(
    /// How a held call is delivered.
    Delivery, "approval delivery" {
        /// The turn waits for the decision.
        Wait = "wait",
        /// Unattended run: the call is parked; a person may send it later.
        Draft = "draft",
    }
);

string_enum!(
    /// Who let a call run.
    ApprovedBy, "approved_by" {
        /// Nothing asked (read, or the mode does not ask for the class).
        Auto = "auto",
        /// An always-allow rule.
        Rule = "rule",
        /// A person's decision.
        User = "user",
    }
);

/// A request to store (always pending).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRequest {
    pub id: String,
    pub workspace: String,
    pub session_id: String,
    pub call_id: String,
    pub tool: String,
    pub operation: Option<String>,
    pub args: Value,
    /// A digest of tool + arguments: the same call announced again after a
    /// restart finds its row by (session, call id, digest).
    pub digest: String,
    pub class: Class,
    pub reason: String,
    pub understood: bool,
    pub offer: Option<AlwaysOffer>,
    pub delivery: Delivery,
    pub created_at: i64,
    pub expires_at: i64,
}

/// One approval request row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub id: String,
    pub workspace: String,
    pub session_id: String,
    pub call_id: String,
    pub tool: String,
    pub operation: Option<String>,
    pub args: Value,
    pub digest: String,
    pub class: Class,
    pub reason: String,
    pub understood: bool,
    pub offer: Option<AlwaysOffer>,
    pub delivery: Delivery,
    pub status: Status,
    /// The decliner's note (or the message that declined it).
    pub note: Option<String>,
    /// Declined by a new user message rather than a decision.
    pub by_message: bool,
    /// Declined with "stop the turn".
    pub stop_turn: bool,
    pub decided_by: Option<String>,
    pub approved_by: Option<ApprovedBy>,
    /// The rule created by "always allow".
    pub rule_id: Option<String>,
    pub idempotency_key: Option<String>,
    /// Bumped by every decision; decisions compare-and-swap on it.
    pub revision: i64,
    pub created_at: i64,
    pub decided_at: Option<i64>,
    pub expires_at: i64,
    /// When the decision was handed to the turn (or an approved draft claimed).
    pub consumed_at: Option<i64>,
    /// When the approved call finished running.
    pub finished_at: Option<i64>,
    pub outcome: Option<String>,
    pub outcome_is_error: bool,
    /// When a draft's outcome was told to the agent.
    pub reported_at: Option<i64>,
}

impl ApprovalRecord {
    pub fn is_pending(&self) -> bool {
        self.status == Status::Pending
    }
}

/// What a decision writes (the store bumps the revision).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionUpdate {
    pub status: Status,
    pub note: Option<String>,
    pub by_message: bool,
    pub stop_turn: bool,
    pub decided_by: Option<String>,
    pub approved_by: Option<ApprovedBy>,
    pub rule_id: Option<String>,
    pub idempotency_key: Option<String>,
    pub decided_at: i64,
    /// The audit line of this decision, appended in the same commit when
    /// the decision wins (so a waiter that wakes on the commit never
    /// records its claim before the decision it claims).
    pub audit: Option<NewAudit>,
}

/// Which requests to list. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestFilter {
    pub workspace: Option<String>,
    pub session_id: Option<String>,
    pub status: Option<Status>,
    pub delivery: Option<Delivery>,
    /// Only requests whose decision no turn has consumed yet.
    pub unconsumed: bool,
    /// Newest first, at most this many (all when `None`).
    pub limit: Option<usize>,
}

/// An audit line to append.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewAudit {
    pub at: i64,
    pub workspace: String,
    pub session_id: Option<String>,
    pub call_id: Option<String>,
    pub request_id: Option<String>,
    pub tool: Option<String>,
    pub class: Option<Class>,
    pub mode: Option<Mode>,
    /// `allowed`, `held`, `drafted`, `approved`, `declined`, `expired`,
    /// `cancelled`, `claimed`, `maybe_ran`, `finished`, `failed_closed`,
    /// `rule_added`, `rule_removed`, `mode_set`.
    pub outcome: String,
    pub approved_by: Option<ApprovedBy>,
    pub rule_ids: Vec<String>,
    pub decider: Option<String>,
    pub detail: String,
}

/// A stored audit line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub id: i64,
    #[serde(flatten)]
    pub entry: NewAudit,
}

/// Which audit lines to read. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditFilter {
    pub workspace: Option<String>,
    pub call_id: Option<String>,
    pub request_id: Option<String>,
    /// Newest first, at most this many (all when `None`).
    pub limit: Option<usize>,
}

/// `stored`, the row found under `new`'s id, when it is `new`'s own
/// (same session, call and arguments): what a retried insert returns.
pub(crate) fn own_row(new: &NewRequest, stored: ApprovalRecord) -> Result<ApprovalRecord> {
    if stored.session_id == new.session_id
        && stored.call_id == new.call_id
        && stored.digest == new.digest
    {
        Ok(stored)
    } else {
        Err(crate::Error::RequestIdTaken(new.id.clone()))
    }
}

/// A durable home for approvals. Every method is one atomic step; the
/// conditional ones report whether their condition held instead of failing.
#[async_trait]
pub trait ApprovalStore: Send + Sync + fmt::Debug {
    /// Stores a pending request. Inserting one whose id is stored already
    /// for the same call returns the stored row, so a retry after an answer
    /// that was lost (the server went away after the commit) finds its own
    /// row instead of making a second one; the same id for another call is
    /// [`Error::RequestIdTaken`](crate::Error::RequestIdTaken).
    async fn insert_request(&self, request: NewRequest) -> Result<ApprovalRecord>;
    async fn get_request(&self, id: &str) -> Result<Option<ApprovalRecord>>;
    /// The newest request for this call in this session.
    async fn latest_for_call(
        &self,
        session_id: &str,
        call_id: &str,
    ) -> Result<Option<ApprovalRecord>>;
    async fn list_requests(&self, filter: RequestFilter) -> Result<Vec<ApprovalRecord>>;
    /// Compare-and-swap: applies `update` only if the row is still pending
    /// at `revision`. `Ok(None)` when it was not.
    async fn decide(
        &self,
        id: &str,
        revision: i64,
        update: DecisionUpdate,
    ) -> Result<Option<ApprovalRecord>>;
    /// Sets `consumed_at` on a decided row not consumed yet; true when this
    /// caller consumed it.
    async fn consume(&self, id: &str, at: i64) -> Result<bool>;
    /// Records that the call finished (with its outcome) once; true when
    /// this caller recorded it.
    async fn finish(
        &self,
        id: &str,
        at: i64,
        outcome: Option<String>,
        is_error: bool,
    ) -> Result<bool>;
    async fn mark_reported(&self, ids: &[String], at: i64) -> Result<()>;
    /// Whether this session has a draft whose outcome was not reported yet
    /// (a cheap check run before every run of the session).
    async fn has_unreported_drafts(&self, session_id: &str) -> Result<bool> {
        Ok(self
            .list_requests(RequestFilter {
                session_id: Some(session_id.to_owned()),
                delivery: Some(Delivery::Draft),
                ..Default::default()
            })
            .await?
            .iter()
            .any(|r| r.reported_at.is_none()))
    }

    async fn insert_rule(&self, rule: Rule) -> Result<()>;
    /// Rules of one workspace (all when `None`), oldest first.
    async fn list_rules(&self, workspace: Option<&str>) -> Result<Vec<Rule>>;
    async fn get_rule(&self, id: &str) -> Result<Option<Rule>>;
    /// True when a rule was deleted.
    async fn delete_rule(&self, id: &str) -> Result<bool>;
    /// Bumps `match_count` and `last_matched_at`.
    async fn touch_rules(&self, ids: &[String], at: i64) -> Result<()>;

    async fn get_mode(&self, workspace: &str) -> Result<Option<Mode>>;
    async fn set_mode(&self, workspace: &str, mode: Mode, at: i64) -> Result<()>;

    async fn append_audit(&self, entry: NewAudit) -> Result<()>;
    async fn audit(&self, filter: AuditFilter) -> Result<Vec<AuditEntry>>;

    /// What ticks when another process may have decided a request here
    /// (see [`ChangeFeed`]); `None` when the store cannot tell, and waits
    /// only re-read on their poll interval.
    fn change_feed(&self) -> Option<ChangeFeed> {
        None
    }
}
