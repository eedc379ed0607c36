//! Front-ends whose sessions run their runs on workers: `keel --mode rpc`
//! (and any front-end that opens sessions through `crate::setup`) with a
//! Temporal cluster and the shared database.
//!
//! Owns [`OnWorkers`], the [`RunsElsewhere`] of such sessions: a run
//! starts the turn's workflow, the run's events come back from the
//! session's event log (every event once, in order; the records of a held
//! call become the session's own `approval_request`/`approval_resolved`
//! through the gate's front end, so a host decides it as it would decide
//! a call held here), and an abort goes into the log as an interrupt. A
//! session also watches its log for calls held by turns another front-end
//! started, so its host can decide them too. The core session does the
//! rest (see `keel_core`'s `elsewhere`). It must
//! not know the wire protocols.

use keel_core::{RemoteEvents, RemoteRun, RunsElsewhere, Watched};
use keel_protocol::AgentEvent;
use keel_session_store::EventLog;
use keel_temporal::{TemporalClient, TemporalSettings, TurnInput};
use tokio::sync::mpsc;

use super::following::{TurnEvents, interrupt};
use super::{LogRecord, Logged};

/// Runs sessions' runs on the cluster's workers; see the module docs.
pub struct OnWorkers {
    client: TemporalClient,
    log: EventLog,
    /// The model id to ask the workers for (`None`: theirs).
    model: Option<String>,
}

impl OnWorkers {
    /// `None` when sessions are not in the shared database.
    pub async fn connect(
        settings: &TemporalSettings,
        model: Option<String>,
    ) -> anyhow::Result<Option<Self>> {
        let Some(log) = EventLog::shared() else {
            return Ok(None);
        };
        let client =
            TemporalClient::connect(settings, &crate::cluster::identity("front-end")).await?;
        Ok(Some(Self { client, log, model }))
    }
}

#[async_trait::async_trait]
impl RunsElsewhere for OnWorkers {
    async fn run(&self, run: RemoteRun, events: &dyn RemoteEvents) -> Result<(), String> {
        let after = self
            .log
            .last_seq(&run.session_id)
            .await
            .map_err(|e| e.to_string())?;
        let turn = TurnInput {
            session_id: run.session_id.clone(),
            cwd: run.cwd.display().to_string(),
            turn_id: format!("turn-{}-{after}", std::process::id()),
            prompt: run.prompt,
            base_leaf: run.base_leaf,
            log_from: after,
            model: self.model.clone(),
            approval_mode: None,
        };
        self.client
            .start_turn(&turn)
            .await
            .map_err(|e| e.to_string())?;
        tracing::info!(session = %turn.session_id, "the run goes to a worker");
        let mut turn_events = TurnEvents::follow(&self.client, &self.log, &turn);
        let mut interrupted = false;
        loop {
            tokio::select! {
                stored = turn_events.next() => match stored.map_err(|e| format!("{e:#}"))? {
                    Some(stored) => relay(events, &stored.event).await,
                    None => return Ok(()),
                },
                () = run.interrupt.cancelled(), if !interrupted => {
                    interrupted = true;
                    interrupt(&self.log, &turn).await;
                }
            }
        }
    }

    fn watch(&self, session_id: &str) -> Option<mpsc::Receiver<Watched>> {
        Some(watch_log(self.log, session_id.to_owned()))
    }
}

/// The held calls of a session's turns wherever they were started.
const WATCH_CAPACITY: usize = 64;

/// Follows `session_id`'s log from its current end for the gate's records.
fn watch_log(log: EventLog, session_id: String) -> mpsc::Receiver<Watched> {
    let (tx, rx) = mpsc::channel(WATCH_CAPACITY);
    tokio::spawn(async move {
        let after = match log.last_seq(&session_id).await {
            Ok(after) => after,
            Err(e) => {
                tracing::warn!(session = %session_id, error = %e, "cannot watch the session's held calls");
                return;
            }
        };
        let mut follower = log.follow(&session_id, after);
        while let Some(stored) = follower.recv().await {
            let watched = match Logged::read(&stored.event) {
                Ok(Logged::Record(LogRecord::ApprovalRequest { request, args })) => {
                    Watched::Held { request, args }
                }
                Ok(Logged::Record(LogRecord::ApprovalResolved {
                    request,
                    resolution,
                })) => Watched::Resolved {
                    request,
                    resolution,
                },
                Ok(Logged::Event(event)) if matches!(*event, AgentEvent::AgentEnd { .. }) => {
                    Watched::Ended
                }
                Ok(_) | Err(_) => continue,
            };
            if tx.send(watched).await.is_err() {
                return;
            }
        }
    });
    rx
}

/// One stored event, sent on as what it is.
async fn relay(events: &dyn RemoteEvents, text: &str) {
    match Logged::read(text) {
        Ok(Logged::Record(LogRecord::ApprovalRequest { request, args })) => {
            events.approval_requested(&request, &args).await;
        }
        Ok(Logged::Record(LogRecord::ApprovalResolved {
            request,
            resolution,
        })) => events.approval_resolved(&request, &resolution).await,
        Ok(Logged::Record(LogRecord::InterruptRequested)) => {}
        Ok(Logged::Event(event)) => events.event(*event).await,
        Err(e) => tracing::warn!(error = %e, "an event this keel cannot read"),
    }
}
