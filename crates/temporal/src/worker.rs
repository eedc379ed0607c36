//! `keel worker`: the process that runs keel's workflows.
//!
//! Owns [`run_worker`]: it connects to the cluster, registers the approval
//! wait and its activities over the shared approval store and, when given
//! a [`TurnRunner`], the turn workflow and its activity, polls the task
//! queue until `shutdown` fires (SIGTERM in the binary), then stops
//! gracefully, so the next worker takes over at once instead of after the
//! sticky-queue timeout. Beside the poller runs the reconcile loop (RFC
//! §4.6 backstop): every [`RECONCILE_EVERY`] it nudges the waits of rows
//! decided more than [`RECONCILE_AFTER`] ago that no turn has consumed, so a
//! nudge lost between a decision and its workflow costs seconds, not the
//! row's whole expiry. Several workers may share a queue: a nudge is
//! idempotent. It must not know any wire protocol.

use std::time::Duration;

use keel_approvals::ApprovalEngine;
use temporalio_sdk::{Runtime, Worker, WorkerOptions};
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalActivities, ApprovalWorkflow};
use crate::client::TemporalClient;
use crate::error::{Error, Result};
use crate::settings::TemporalSettings;
use crate::turn::{TurnActivities, TurnWorkflow};
use crate::turn_types::TurnRunner;

/// How often the reconcile loop looks for decided rows nobody consumed.
pub const RECONCILE_EVERY: Duration = Duration::from_secs(5);
/// How old a decision must be before the reconcile loop nudges it again
/// (younger ones are still on their way through the first nudge).
pub const RECONCILE_AFTER: Duration = Duration::from_secs(10);
/// Decisions older than this are left alone (their turns are long gone).
const RECONCILE_WINDOW: Duration = Duration::from_secs(24 * 60 * 60);
/// Rows looked at per status and round.
const RECONCILE_BATCH: usize = 200;

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub settings: TemporalSettings,
    /// This process in the cluster's history (`keel-worker@host:pid`).
    pub identity: String,
    /// How long the server keeps a workflow's next task for the worker
    /// that ran it last before any worker may take it: short, so a
    /// killed worker's workflows move on within seconds.
    pub sticky_timeout: Duration,
}

impl WorkerConfig {
    pub fn new(settings: TemporalSettings, identity: String) -> Self {
        Self {
            settings,
            identity,
            sticky_timeout: Duration::from_secs(2),
        }
    }
}

/// Runs a worker until `shutdown` fires; see the module docs.
pub async fn run_worker(
    config: WorkerConfig,
    engine: ApprovalEngine,
    turns: Option<std::sync::Arc<dyn TurnRunner>>,
    shutdown: CancellationToken,
) -> Result<()> {
    let runtime = Runtime::from_current_tokio(Default::default())
        .map_err(|e| Error::Server(format!("cannot start the Temporal runtime: {e}")))?;
    let client = TemporalClient::connect(&config.settings, &config.identity).await?;
    let mut builder = WorkerOptions::new(config.settings.task_queue.clone())
        .sticky_queue_schedule_to_start_timeout(config.sticky_timeout)
        .register_activities(ApprovalActivities::new(engine.clone()))
        .register_workflow::<ApprovalWorkflow>()
        .map_err(|e| Error::Server(e.to_string()))?;
    if let Some(runner) = turns {
        builder = builder
            .register_activities(TurnActivities::new(runner))
            .register_workflow::<TurnWorkflow>()
            .map_err(|e| Error::Server(e.to_string()))?;
    }
    let options = builder.build();
    let mut worker = Worker::new(&runtime, client.inner().clone(), options)
        .map_err(|e| Error::Server(format!("cannot start the worker: {e}")))?;

    let stop = worker.shutdown_handle();
    let stopping = shutdown.clone();
    let stopper = tokio::spawn(async move {
        stopping.cancelled().await;
        tracing::info!("the worker is shutting down");
        stop();
    });
    let reconcile = tokio::spawn(reconcile_loop(client, engine, shutdown.clone()));
    tracing::info!(
        address = %config.settings.address,
        namespace = %config.settings.namespace,
        task_queue = %config.settings.task_queue,
        "the worker is polling"
    );
    let ran = worker.run().await;
    shutdown.cancel();
    stopper.abort();
    reconcile.abort();
    ran.map_err(|e| Error::Server(format!("the worker stopped: {e}")))
}

async fn reconcile_loop(
    client: TemporalClient,
    engine: ApprovalEngine,
    shutdown: CancellationToken,
) {
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(RECONCILE_EVERY) => {}
        }
        match engine
            .decided_unconsumed(RECONCILE_AFTER, RECONCILE_WINDOW, RECONCILE_BATCH)
            .await
        {
            Ok(ids) => {
                for id in ids {
                    match client.nudge(&id).await {
                        Ok(()) => tracing::debug!(request = %id, "re-nudged a decided approval"),
                        Err(Error::NotFound(_)) => {}
                        Err(e) => tracing::warn!(request = %id, error = %e, "cannot re-nudge"),
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "the approval reconcile round failed"),
        }
    }
}
