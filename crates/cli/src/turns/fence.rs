//! A worker's try acts only while it is the turn's current try.
//!
//! Owns [`FencedGate`], the approval gate of a worker's session: the
//! gate's own, plus a look at `keel_turn_tries` before a call is let run.
//! A try whose worker was paused or cut off from Temporal longer than the
//! heartbeat timeout has been replaced by the server; the replacing try
//! claimed the turn when it started, so the old one, coming back, finds
//! it lost and denies the call instead of running it a second time. A
//! look that fails (the database away) denies too: the gate fails
//! closed. It must not know how decisions are taken.

use std::sync::Arc;

use keel_core::keel_approvals::{Mode, PendingRequest, Resolution};
use keel_core::{ApprovalGate, GateDecision, Recovery, ToolCallInfo};
use keel_session_store::ApprovalEntry;
use keel_session_store::EventLog;

/// The try a gate acts for.
#[derive(Debug, Clone)]
pub(super) struct Try {
    pub log: EventLog,
    pub session_id: String,
    pub turn_id: String,
    pub attempt: u32,
}

/// The gate of a worker's try; see the module docs.
pub(super) struct FencedGate {
    inner: Arc<dyn ApprovalGate>,
    this: Try,
}

impl FencedGate {
    pub(super) fn new(inner: Arc<dyn ApprovalGate>, this: Try) -> Self {
        Self { inner, this }
    }

    /// `decision`, unless it lets the call run and this try is no longer
    /// the turn's.
    async fn fenced(&self, decision: GateDecision) -> GateDecision {
        if !matches!(
            decision,
            GateDecision::Allow | GateDecision::Covered | GateDecision::Approved { .. }
        ) {
            return decision;
        }
        let t = &self.this;
        match t.log.holds_try(&t.session_id, &t.turn_id, t.attempt).await {
            Ok(true) => decision,
            Ok(false) => {
                tracing::warn!(session = %t.session_id, attempt = t.attempt, "a later try of this turn runs: the call is left to it");
                GateDecision::Deny {
                    message: "This call did not run here: another try of this turn took over."
                        .to_owned(),
                    stop_turn: true,
                }
            }
            Err(e) => {
                tracing::warn!(session = %t.session_id, error = %e, "cannot tell whether this try still holds the turn; the call does not run");
                GateDecision::Deny {
                    message: format!(
                        "This call did not run: whether this try still holds the turn cannot be checked ({e})."
                    ),
                    stop_turn: true,
                }
            }
        }
    }
}

#[async_trait::async_trait]
impl ApprovalGate for FencedGate {
    async fn check(&self, call: &ToolCallInfo) -> GateDecision {
        let decision = self.inner.check(call).await;
        self.fenced(decision).await
    }

    async fn grant(&self, call: &ToolCallInfo) -> keel_protocol::SandboxGrant {
        self.inner.grant(call).await
    }

    async fn wait(&self, call: &ToolCallInfo, approval_id: &str) -> GateDecision {
        let decision = self.inner.wait(call, approval_id).await;
        self.fenced(decision).await
    }

    async fn outcome(&self, call: &ToolCallInfo, decision: &GateDecision) -> Option<ApprovalEntry> {
        self.inner.outcome(call, decision).await
    }

    async fn finish(&self, call: &ToolCallInfo, approval_id: &str, outcome: &str, is_error: bool) {
        self.inner
            .finish(call, approval_id, outcome, is_error)
            .await;
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

    fn session_mode(&self, call: &ToolCallInfo) -> Option<Mode> {
        self.inner.session_mode(call)
    }

    fn host_hints(&self, tool: &str) -> Option<keel_tools::ToolHints> {
        self.inner.host_hints(tool)
    }

    async fn held_elsewhere(&self, request: &PendingRequest, call: &ToolCallInfo) {
        self.inner.held_elsewhere(request, call).await;
    }

    async fn resolved_elsewhere(&self, request: &PendingRequest, resolution: &Resolution) {
        self.inner.resolved_elsewhere(request, resolution).await;
    }
}
