//! An agent turn as a workflow.
//!
//! Owns [`TurnWorkflow`] (`keel.turn`, one per running turn of a session:
//! its id is derived from the session id, so two front-ends cannot run two
//! turns of one session at once) and [`TurnActivities`], whose one
//! activity runs the turn through the injected [`TurnRunner`] while it
//! heartbeats every [`HEARTBEAT_EVERY`]. A worker that dies stops
//! heartbeating: after [`HEARTBEAT_TIMEOUT`] the server gives the activity
//! to another worker, whose runner goes on from what the session holds
//! (the core's crash resume answers the calls the dead worker left
//! unanswered exactly once, through the gate). A held call inside the
//! turn waits on its own `keel.approval` workflow, a child of the turn
//! (the gate's durable-wait seam signals `held` with the request id; the
//! child's id is derived from it), so a decision nudges the wait and the
//! running activity sees the row change at once. The server cancelling the
//! activity (a timeout it noticed before this worker did, or the workflow
//! cancelled by an operator) stops the try where it is; an interrupt from
//! a front-end is not a cancellation but a record in the session's event
//! log, which the runner follows. It must not know how a turn runs.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use temporalio_common::RetryPolicy;
use temporalio_macros::{activities, workflow, workflow_methods};
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::{
    ActivityCancellationType, ActivityOptions, ChildWorkflowOptions, ParentClosePolicy,
    SyncWorkflowContext, WorkflowContext, WorkflowResult,
};

use crate::approval::ApprovalWorkflow;
use crate::ids::approval_workflow_id;
use tokio_util::sync::CancellationToken;

use crate::turn_types::{TurnInput, TurnOutcome, TurnRunner};

/// How often the running activity tells the server it is alive.
pub const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);
/// How long without a heartbeat before the turn moves to another worker.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);
/// The longest a turn may run, held calls included (their own expiry is
/// shorter by default).
pub const TURN_LIMIT: Duration = Duration::from_secs(30 * 24 * 60 * 60);
/// How many tries a turn gets before it fails for good.
pub const TURN_ATTEMPTS: u32 = 20;

/// The activity of a turn, over the binary's runner.
pub struct TurnActivities {
    runner: Arc<dyn TurnRunner>,
}

impl TurnActivities {
    pub fn new(runner: Arc<dyn TurnRunner>) -> Self {
        Self { runner }
    }
}

#[activities]
impl TurnActivities {
    /// Runs the turn (or goes on with it) until it ends.
    #[activity(name = "keel.turn.run")]
    pub async fn run(
        self: Arc<Self>,
        ctx: ActivityContext,
        turn: TurnInput,
    ) -> Result<TurnOutcome, ActivityError> {
        let attempt = ctx.info().attempt.max(1);
        let stop = CancellationToken::new();
        let mut running = std::pin::pin!(self.runner.run(turn, attempt, stop.clone()));
        let mut beat = tokio::time::interval(HEARTBEAT_EVERY);
        loop {
            tokio::select! {
                ended = &mut running => return Ok(ended?),
                () = ctx.cancelled(), if !stop.is_cancelled() => stop.cancel(),
                _ = beat.tick() => {
                    if let Err(e) = ctx.record_heartbeat(()).await {
                        tracing::warn!(error = %e, "cannot record the turn's heartbeat");
                    }
                }
            }
        }
    }
}

/// Runs one turn; see the module docs.
#[workflow]
#[derive(Default)]
pub struct TurnWorkflow {
    /// Requests the running try holds, signalled and not yet given their
    /// child wait.
    held: Vec<String>,
}

fn run_options() -> ActivityOptions {
    ActivityOptions::with_start_to_close_timeout(TURN_LIMIT)
        .heartbeat_timeout(HEARTBEAT_TIMEOUT)
        .cancellation_type(ActivityCancellationType::WaitCancellationCompleted)
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(Duration::from_millis(200))
                .maximum_interval(Duration::from_secs(10))
                .maximum_attempts(TURN_ATTEMPTS)
                .build(),
        )
        .build()
}

#[workflow_methods]
impl TurnWorkflow {
    #[run(name = "keel.turn")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        turn: TurnInput,
    ) -> WorkflowResult<TurnOutcome> {
        let mut running =
            std::pin::pin!(ctx.execute_activity(TurnActivities::run, turn, run_options()));
        let mut waiting: HashSet<String> = HashSet::new();
        loop {
            let signalled = temporalio_sdk::workflows::select! {
                ended = &mut running => return Ok(ended?),
                signalled = ctx.wait_condition(|s: &Self| !s.held.is_empty()) => signalled,
            };
            if signalled.is_err() {
                // Cancelled: the activity is told, and its end is the turn's.
                return Ok(running.await?);
            }
            let held = ctx.state_mut(|s| std::mem::take(&mut s.held));
            for request_id in held {
                if waiting.insert(request_id.clone()) {
                    start_wait(ctx, request_id).await;
                }
            }
        }
    }

    /// The running try holds `request_id`: its wait becomes a child of
    /// the turn.
    #[signal(name = "held")]
    pub fn held(&mut self, _ctx: &mut SyncWorkflowContext<Self>, request_id: String) {
        self.held.push(request_id);
    }
}

/// Starts the child `keel.approval` wait of `request_id`. It is left
/// running when the turn ends (the row settles it; a call's try that
/// died leaves its wait to the next one). A wait that exists already (an
/// earlier try's, or one started before the turn knew) is that wait.
async fn start_wait(ctx: &WorkflowContext<TurnWorkflow>, request_id: String) {
    let options = ChildWorkflowOptions::builder()
        .workflow_id(approval_workflow_id(&request_id))
        .parent_close_policy(ParentClosePolicy::Abandon)
        .build();
    if let Err(e) = ctx
        .start_child_workflow(ApprovalWorkflow::run, request_id, options)
        .await
    {
        tracing::debug!(error = ?e, "the held call's wait was not started as a child");
    }
}
