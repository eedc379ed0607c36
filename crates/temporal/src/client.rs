//! The client other keel processes reach Temporal with.
//!
//! Owns [`TemporalClient`]: connecting to the configured cluster, starting
//! the wait of an approval request (idempotent: the workflow id is derived
//! from the request id, and a running wait is reused), nudging it after a
//! decision, and reading how it ended; starting a turn on a worker
//! (refused while the session has a running turn) and waiting for how it
//! ended. A nudge to a wait that does not
//! exist or has ended is [`Error::NotFound`]; callers treat nudges as
//! best-effort, since the row is the record. It must not know what the
//! decision was.

use keel_approvals::Resolution;
use temporalio_client::errors::{WorkflowInteractionError, WorkflowStartError};
use temporalio_client::{
    Client, ClientOptions, Connection, ConnectionOptions, Url, WorkflowCancelOptions,
    WorkflowDescribeOptions, WorkflowExecutionStatus, WorkflowGetResultOptions,
    WorkflowIdConflictPolicy, WorkflowSignalOptions, WorkflowStartOptions,
};

use crate::approval::ApprovalWorkflow;
use crate::error::{Error, Result};
use crate::ids::{approval_workflow_id, turn_workflow_id};
use crate::settings::TemporalSettings;
use crate::turn::TurnWorkflow;
use crate::turn_types::{RunningTurn, TurnInput, TurnOutcome};

/// How long connecting may take (a host that drops packets would
/// otherwise hold a command that only wants to nudge).
pub const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A connection to the cluster, bound to keel's namespace and task queue.
#[derive(Clone)]
pub struct TemporalClient {
    client: Client,
    settings: TemporalSettings,
}

impl std::fmt::Debug for TemporalClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalClient")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl TemporalClient {
    /// Connects; `identity` names this process in the cluster's history
    /// (for example `keel-worker@host:pid`).
    pub async fn connect(settings: &TemporalSettings, identity: &str) -> Result<Self> {
        let url = settings.url()?;
        let target = Url::parse(&url).map_err(|e| Error::Config(format!("{url}: {e}")))?;
        let connect_error = |message: String| Error::Connect {
            address: settings.address.clone(),
            message,
        };
        let connection = Connection::connect(
            ConnectionOptions::new(target)
                .identity(identity.to_owned())
                .connect_timeout(CONNECT_TIMEOUT)
                .build(),
        )
        .await
        .map_err(|e| connect_error(e.to_string()))?;
        let client = Client::new(
            connection,
            ClientOptions::new(settings.namespace.clone()).build(),
        )
        .map_err(|e| connect_error(e.to_string()))?;
        Ok(Self {
            client,
            settings: settings.clone(),
        })
    }

    /// The SDK client (the worker polls through it).
    pub(crate) fn inner(&self) -> &Client {
        &self.client
    }

    pub fn settings(&self) -> &TemporalSettings {
        &self.settings
    }

    /// Starts the wait on `request_id`, or finds the running one.
    pub async fn start_approval_wait(&self, request_id: &str) -> Result<()> {
        let options = WorkflowStartOptions::new(
            self.settings.task_queue.clone(),
            approval_workflow_id(request_id),
        )
        .id_conflict_policy(WorkflowIdConflictPolicy::UseExisting)
        .build();
        self.client
            .start_workflow(ApprovalWorkflow::run, request_id.to_owned(), options)
            .await
            .map_err(|e| Error::Server(e.to_string()))?;
        Ok(())
    }

    /// Makes the wait on `request_id`, held by a turn of `session_id`, a
    /// child of that turn's workflow when one runs (it signals `held`);
    /// else a workflow of its own ([`Self::start_approval_wait`]), as for
    /// a turn that runs in a front-end.
    pub async fn start_wait_in_turn(&self, session_id: &str, request_id: &str) -> Result<()> {
        let id = turn_workflow_id(session_id);
        let signalled = self
            .client
            .get_workflow_handle::<TurnWorkflow>(id.clone())
            .signal(
                TurnWorkflow::held,
                request_id.to_owned(),
                WorkflowSignalOptions::default(),
            )
            .await
            .map_err(|e| interaction_error(id, e));
        match signalled {
            Err(Error::NotFound(_)) => self.start_approval_wait(request_id).await,
            other => other,
        }
    }

    /// The workflow the wait on `request_id` is a child of (`None`: none).
    pub async fn approval_wait_parent(&self, request_id: &str) -> Result<Option<String>> {
        let id = approval_workflow_id(request_id);
        let described = self
            .client
            .get_workflow_handle::<ApprovalWorkflow>(id.clone())
            .describe(WorkflowDescribeOptions::default())
            .await
            .map_err(|e| interaction_error(id, e))?;
        Ok(described.parent_id().map(str::to_owned))
    }

    /// Tells the wait on `request_id` to look at its row again.
    pub async fn nudge(&self, request_id: &str) -> Result<()> {
        let id = approval_workflow_id(request_id);
        self.client
            .get_workflow_handle::<ApprovalWorkflow>(id.clone())
            .signal(
                ApprovalWorkflow::nudge,
                (),
                WorkflowSignalOptions::default(),
            )
            .await
            .map_err(|e| interaction_error(id, e))
    }

    /// Cancels the wait on `request_id` (its turn is gone): the workflow
    /// marks the row cancelled, unless a decision landed first.
    pub async fn cancel_approval_wait(&self, request_id: &str) -> Result<()> {
        let id = approval_workflow_id(request_id);
        self.client
            .get_workflow_handle::<ApprovalWorkflow>(id.clone())
            .cancel(WorkflowCancelOptions::default())
            .await
            .map_err(|e| interaction_error(id, e))
    }

    /// How the wait on `request_id` ended (waits for it to end).
    pub async fn approval_result(&self, request_id: &str) -> Result<Resolution> {
        self.client
            .get_workflow_handle::<ApprovalWorkflow>(approval_workflow_id(request_id))
            .get_result(WorkflowGetResultOptions::default())
            .await
            .map_err(|e| Error::Server(e.to_string()))
    }
}

impl TemporalClient {
    /// Starts `turn` on a worker; [`Error::Busy`] while another turn of
    /// its session runs.
    pub async fn start_turn(&self, turn: &TurnInput) -> Result<()> {
        let running = RunningTurn {
            turn_id: turn.turn_id.clone(),
            log_from: turn.log_from,
            base_leaf: turn.base_leaf.clone(),
        };
        let details = serde_json::to_string(&running).map_err(|e| Error::Server(e.to_string()))?;
        let options = WorkflowStartOptions::new(
            self.settings.task_queue.clone(),
            turn_workflow_id(&turn.session_id),
        )
        .id_conflict_policy(WorkflowIdConflictPolicy::Fail)
        .static_summary(format!("keel turn {}", turn.turn_id))
        .static_details(details)
        .build();
        match self
            .client
            .start_workflow(TurnWorkflow::run, turn.clone(), options)
            .await
        {
            Ok(_) => Ok(()),
            Err(WorkflowStartError::AlreadyStarted { .. }) => {
                Err(Error::Busy(turn.session_id.clone()))
            }
            Err(e) => Err(Error::Server(e.to_string())),
        }
    }

    /// The turn `session_id` runs now, if one runs (read from its
    /// workflow, so a front-end that did not start it can follow it).
    pub async fn running_turn(&self, session_id: &str) -> Result<Option<RunningTurn>> {
        Ok(self
            .latest_turn(session_id)
            .await?
            .and_then(|(turn, running)| running.then_some(turn)))
    }

    /// The latest turn of `session_id`, running or ended, and whether it
    /// runs (`None`: none, or one a keel that did not record it started).
    pub async fn latest_turn(&self, session_id: &str) -> Result<Option<(RunningTurn, bool)>> {
        let id = turn_workflow_id(session_id);
        let described = match self
            .client
            .get_workflow_handle::<TurnWorkflow>(id.clone())
            .describe(WorkflowDescribeOptions::default())
            .await
        {
            Ok(described) => described,
            Err(WorkflowInteractionError::NotFound(_)) => return Ok(None),
            Err(e) => return Err(interaction_error(id, e)),
        };
        let running = described.status() == WorkflowExecutionStatus::Running;
        Ok(described
            .static_details()
            .and_then(|d| serde_json::from_str::<RunningTurn>(d).ok())
            .map(|turn| (turn, running)))
    }

    /// How the latest turn of `session_id` ended (waits for it to end).
    /// A turn that ended without an outcome (it failed on every try, or
    /// was cancelled or terminated by an operator) is [`Error::Turn`]; not
    /// reaching the server is [`Error::Server`], worth asking again.
    pub async fn turn_result(&self, session_id: &str) -> Result<TurnOutcome> {
        use temporalio_client::errors::WorkflowGetResultError as E;
        self.client
            .get_workflow_handle::<TurnWorkflow>(turn_workflow_id(session_id))
            .get_result(WorkflowGetResultOptions::default())
            .await
            .map_err(|e| match e {
                E::Rpc(_) | E::Other(_) => Error::Server(e.to_string()),
                E::NotFound(_) => Error::NotFound(turn_workflow_id(session_id)),
                other => Error::Turn(other.to_string()),
            })
    }
}

/// A missing (or removed) workflow is [`Error::NotFound`]; anything else
/// the server said is [`Error::Server`].
fn interaction_error(id: String, e: WorkflowInteractionError) -> Error {
    match e {
        WorkflowInteractionError::NotFound(_) => Error::NotFound(id),
        other => Error::Server(other.to_string()),
    }
}
