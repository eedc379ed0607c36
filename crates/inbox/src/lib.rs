//! The web approval inbox: `keel approvals serve`.
//!
//! This crate owns a small web app over the approvals store every keel
//! process shares (SQLite or PostgreSQL): the inbox of held calls as cards
//! with live updates (server-sent events), the decisions (Allow, Always
//! allow, Decline with a note; Send and Discard for drafts), and per
//! workspace the mode menu, the "Allowed without asking" list and the
//! recent history. Pages are rendered on the server, with a little
//! progressive JavaScript and a stylesheet compiled into the binary (no
//! CDN, no build step). Nothing is served without a login (the token is
//! exchanged for a session cookie), every change carries a CSRF token and
//! must come from the inbox's own origin, `Host` is checked, the
//! Content-Security-Policy is strict, and everything shown is escaped.
//! Decisions go through the engine's compare-and-swap like the CLI's and
//! are audited with `decidedBy: "web"`. It must not know the agent loop.

mod auth;
mod cards;
mod context;
mod html;
mod routes;

use std::sync::Arc;

use keel_approvals::{ApprovalEngine, ApprovalRecord};
use keel_session_store::SessionStore;

pub use auth::{
    Auth, COOKIE, LOGIN_FAILURES_PER_WINDOW, LOGIN_WINDOW, Refusal, Served, random_hex,
};
pub use cards::{CallContext, card, diff_of};
pub use html::esc;
pub use routes::router;

/// Who a decision made here is recorded as.
pub const DECIDER: &str = "web";

/// Runs an approved draft (keel's own tools, behind the sandbox), once.
#[async_trait::async_trait]
pub trait DraftSender: Send + Sync {
    /// Runs the approved draft `row`; the text the tool produced, or why it
    /// could not run.
    async fn send(&self, engine: &ApprovalEngine, row: &ApprovalRecord) -> Result<String, String>;
}

/// One inbox: the engine it decides through, who may use it, where
/// sessions live (for the cards' context), and how drafts are sent.
pub struct Inbox {
    pub engine: ApprovalEngine,
    pub auth: Auth,
    pub sessions: SessionStore,
    pub drafts: Option<Arc<dyn DraftSender>>,
}
