//! Following one turn a worker runs: what `keel exec` and the front-ends
//! of `RunsElsewhere` share.
//!
//! Owns [`TurnEvents`] (the turn's stored events in order, until the
//! workflow has ended and its last event has been read), asking Temporal
//! again for the result while it is away, and [`interrupt`] (a record in
//! the session's log that the worker running the turn follows). It must
//! not know how events are shown.

use std::time::Duration;

use anyhow::{Context, bail};
use keel_session_store::{EventLog, StoredEvent};
use keel_temporal::{TemporalClient, TurnInput, TurnOutcome};
use tokio::sync::mpsc;
use tokio_util::task::AbortOnDropHandle;

use super::LogRecord;

/// The stored events of one turn; see the module docs.
pub(super) struct TurnEvents {
    events: mpsc::Receiver<StoredEvent>,
    /// Aborted with the follower.
    result: AbortOnDropHandle<keel_temporal::Result<TurnOutcome>>,
    outcome: Option<TurnOutcome>,
    seen: u64,
}

impl TurnEvents {
    /// Follows `turn` from where it began.
    pub(super) fn follow(client: &TemporalClient, log: &EventLog, turn: &TurnInput) -> Self {
        let (client, session_id) = (client.clone(), turn.session_id.clone());
        Self {
            events: log.follow(&turn.session_id, turn.log_from),
            result: AbortOnDropHandle::new(tokio::spawn(async move {
                outcome_of(&client, &session_id).await
            })),
            outcome: None,
            seen: turn.log_from,
        }
    }

    /// The turn's next event; `None` once it is over. Safe to cancel (in a
    /// `select!`) and call again.
    pub(super) async fn next(&mut self) -> anyhow::Result<Option<StoredEvent>> {
        loop {
            if let Some(o) = &self.outcome
                && self.seen >= o.last_seq
            {
                return Ok(None);
            }
            tokio::select! {
                event = self.events.recv() => {
                    let Some(event) = event else { bail!("the session's event log stopped") };
                    self.seen = event.seq;
                    return Ok(Some(event));
                }
                ended = &mut self.result, if self.outcome.is_none() => {
                    self.outcome = Some(ended.context("the turn's result")??);
                }
            }
        }
    }

    /// How the turn ended, once [`Self::next`] said it is over.
    pub(super) fn into_outcome(mut self) -> Option<TurnOutcome> {
        self.outcome.take()
    }
}

/// How the turn ended, asking again while the server cannot be reached
/// (a restarting cluster loses nothing; the turn goes on meanwhile).
pub(super) async fn outcome_of(
    client: &TemporalClient,
    session_id: &str,
) -> keel_temporal::Result<TurnOutcome> {
    let mut warned = false;
    loop {
        match client.turn_result(session_id).await {
            Err(keel_temporal::Error::Server(e)) => {
                if !warned {
                    tracing::warn!(error = %e, "cannot reach Temporal for the turn's result; trying again");
                    warned = true;
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            ended => return ended,
        }
    }
}

/// The pause between two tries while the server (the turn's result) or
/// the database (a word to the worker) cannot be reached.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// Asks the worker running `turn` to abort it: a record in the session's
/// event log, which that worker follows.
pub(super) async fn interrupt(log: &EventLog, turn: &TurnInput) {
    if let Err(e) = tell_worker_surely(log, turn, &LogRecord::InterruptRequested).await {
        tracing::warn!(error = %format!("{e:#}"), "cannot interrupt the turn");
    }
}

/// How long a word the worker must not miss (a tool's result, an
/// interrupt) is tried again while the event log cannot be written.
const TELL_PATIENCE: Duration = Duration::from_secs(120);

/// Like [`tell_worker`], trying again for up to [`TELL_PATIENCE`] while
/// the log cannot be written (the database restarts). A try whose answer
/// was lost may have stored the record: the worker takes the first of a
/// call's results and one interrupt, so a second copy changes nothing.
pub(super) async fn tell_worker_surely(
    log: &EventLog,
    turn: &TurnInput,
    record: &LogRecord,
) -> anyhow::Result<()> {
    let started = tokio::time::Instant::now();
    let mut warned = false;
    loop {
        match tell_worker(log, turn, record).await {
            Ok(()) => return Ok(()),
            Err(e) if started.elapsed() < TELL_PATIENCE => {
                if !warned {
                    tracing::warn!(error = %format!("{e:#}"), "cannot reach the event log to tell the worker; trying again");
                    warned = true;
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Appends `record`, a front-end's word to the worker running `turn`, to
/// the session's event log (the worker follows it).
pub(super) async fn tell_worker(
    log: &EventLog,
    turn: &TurnInput,
    record: &LogRecord,
) -> anyhow::Result<()> {
    let text = serde_json::to_string(record)?;
    log.append(&turn.session_id, &turn.turn_id, 0, &[text])
        .await?;
    Ok(())
}
