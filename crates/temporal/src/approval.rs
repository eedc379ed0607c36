//! The approval wait as a workflow (approvals RFC §4.6).
//!
//! Owns [`ApprovalWorkflow`] and the activities it runs
//! ([`ApprovalActivities`]). The workflow carries nothing but the request
//! id: each round it looks at the row through an activity (which applies
//! the row's expiry first), returns the row's answer once it is no longer
//! pending, and otherwise sleeps until a `nudge` signal or a durable timer
//! at the row's expiry, whichever comes first. A nudge has no payload and
//! duplicates are harmless; a lost one costs nothing but time, because the
//! timer wakes the workflow at the deadline and the reconcile loop
//! (`worker.rs`) nudges decided rows again. A cancelled workflow marks the
//! row cancelled before it ends. It must not know who decides, or how the
//! call runs afterwards.

use std::sync::Arc;
use std::time::Duration;

use keel_approvals::{ApprovalEngine, Look, Resolution};
use temporalio_macros::{activities, workflow, workflow_methods};
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::{
    ActivityOptions, CancellableFuture, SyncWorkflowContext, WorkflowCancellationToken,
    WorkflowContext, WorkflowResult, WorkflowTermination,
};

/// How long one look at the row may take, retried by Temporal's default
/// policy when the store is down (the row is read, never changed, except
/// by the expiry's own compare-and-swap).
const LOOK_TIMEOUT: Duration = Duration::from_secs(30);
/// The shortest sleep between two looks, so a clock skew between the
/// worker and the store cannot make the workflow spin at the deadline.
const MIN_NAP: Duration = Duration::from_secs(1);

/// The activities of the approval wait, over the shared approval store.
pub struct ApprovalActivities {
    engine: ApprovalEngine,
}

impl ApprovalActivities {
    pub fn new(engine: ApprovalEngine) -> Self {
        Self { engine }
    }
}

#[activities]
impl ApprovalActivities {
    /// One look at the row ([`ApprovalEngine::look`]).
    #[activity(name = "keel.approval.look")]
    pub async fn look(
        self: Arc<Self>,
        _ctx: ActivityContext,
        request_id: String,
    ) -> Result<Look, ActivityError> {
        Ok(self.engine.look(&request_id).await?)
    }

    /// Marks the row cancelled (unless a decision landed first), then looks.
    #[activity(name = "keel.approval.cancel")]
    pub async fn cancel(
        self: Arc<Self>,
        _ctx: ActivityContext,
        request_id: String,
    ) -> Result<Look, ActivityError> {
        self.engine.cancel(&request_id, "abort").await?;
        Ok(self.engine.look(&request_id).await?)
    }
}

/// Waits on one approval request's row; see the module docs.
#[workflow]
#[derive(Default)]
pub struct ApprovalWorkflow {
    /// Set by a nudge, cleared before each look.
    nudged: bool,
}

fn look_options() -> ActivityOptions {
    ActivityOptions::start_to_close_timeout(LOOK_TIMEOUT)
}

#[workflow_methods]
impl ApprovalWorkflow {
    #[run(name = "keel.approval")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        request_id: String,
    ) -> WorkflowResult<Resolution> {
        loop {
            ctx.state_mut(|s| s.nudged = false);
            let look = ctx
                .execute_activity(ApprovalActivities::look, request_id.clone(), look_options())
                .await?;
            let expires_in = match look {
                Look::Done { resolution } => return Ok(resolution),
                Look::Pending { expires_in_ms } => Duration::from_millis(expires_in_ms),
            };
            let cancelled = {
                let mut timer = ctx.timer(expires_in.max(MIN_NAP));
                let woke = temporalio_sdk::workflows::select! {
                    woke = ctx.wait_condition(|s: &Self| s.nudged) => Some(woke),
                    _ = timer => None,
                };
                // A timer left behind would still fire (harmlessly) later;
                // cancel it so the history stays short.
                if woke.is_some() {
                    timer.cancel();
                }
                matches!(woke, Some(Err(_)))
            };
            if cancelled {
                return Self::cancel(ctx, &request_id).await;
            }
        }
    }

    /// Any message wakes the wait for one more look; the row is the record.
    #[signal(name = "nudge")]
    pub fn nudge(&mut self, _ctx: &mut SyncWorkflowContext<Self>) {
        self.nudged = true;
    }
}

impl ApprovalWorkflow {
    /// A cancelled wait marks the row cancelled (the turn that waited is
    /// gone; the call must not run later), unless a decision landed first,
    /// and ends with what the row then says.
    async fn cancel(
        ctx: &mut WorkflowContext<Self>,
        request_id: &str,
    ) -> WorkflowResult<Resolution> {
        // The workflow is being cancelled; an activity that inherited that
        // would be cancelled before it ran. This one must run.
        let mut options = look_options();
        options.cancellation_token = Some(WorkflowCancellationToken::new());
        let look = ctx
            .execute_activity(ApprovalActivities::cancel, request_id.to_owned(), options)
            .await?;
        match look {
            Look::Done { resolution } => Ok(resolution),
            Look::Pending { .. } => Err(WorkflowTermination::cancelled()),
        }
    }
}
