//! Held calls of this process's turns wait on Temporal too.
//!
//! With a Temporal cluster configured (`--temporal`, `KEEL_TEMPORAL_ADDRESS`,
//! `[temporal] address`), every call a turn here holds gets its
//! `keel.approval` workflow (started when the wait starts, nudged when it
//! ends here; a child of the turn's `keel.turn` workflow when the turn
//! runs on a worker, else a workflow of its own), so a `keel worker` expires it on its durable timer even when
//! this process dies while it waits, and the reconcile loop covers it. The
//! turn itself still runs here and still ends its wait on the row. Owns
//! the [`keel_core::DurableWaits`] implementation; the client calls run in
//! order on one task behind a bounded queue, never in the turn's way, and
//! [`Installed::drain`] lets the last ones out before the process exits
//! (a nudge lost there would leave its workflow open until the call's
//! expiry). A build without the `temporal` feature says once that it
//! cannot.

use keel_temporal::TemporalSettings;

use crate::GlobalArgs;

/// The durable waits this process registered, if any.
#[derive(Default)]
pub struct Installed {
    #[cfg(feature = "temporal")]
    waits: Option<std::sync::Arc<engine::TemporalWaits>>,
}

/// How long an exiting process waits for its last client calls.
#[cfg(feature = "temporal")]
const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl Installed {
    /// Lets the client calls still queued out (at most [`DRAIN_TIMEOUT`]).
    pub async fn drain(&self) {
        #[cfg(feature = "temporal")]
        if let Some(waits) = &self.waits {
            waits.drain(DRAIN_TIMEOUT).await;
        }
    }
}

/// Registers the durable waits of this process, when a cluster is set.
pub fn install(global: &GlobalArgs) -> anyhow::Result<Installed> {
    let Some(settings) = crate::cluster::temporal_settings(global)? else {
        return Ok(Installed::default());
    };
    Ok(register(settings))
}

#[cfg(not(feature = "temporal"))]
fn register(settings: TemporalSettings) -> Installed {
    tracing::warn!(
        address = %settings.address,
        "held calls wait in this process only: {}",
        keel_temporal::NOT_BUILT
    );
    Installed::default()
}

#[cfg(feature = "temporal")]
fn register(settings: TemporalSettings) -> Installed {
    let (jobs, queue) = tokio::sync::mpsc::channel(DURABLE_WAIT_QUEUE);
    tokio::spawn(engine::run(settings, queue));
    let waits = std::sync::Arc::new(engine::TemporalWaits { jobs });
    keel_core::set_durable_waits(waits.clone());
    Installed { waits: Some(waits) }
}

/// Client calls waiting to be made (held calls are few; a full queue
/// drops the call with a warning, and the row still settles the wait).
#[cfg(feature = "temporal")]
const DURABLE_WAIT_QUEUE: usize = 256;

#[cfg(feature = "temporal")]
mod engine {
    use keel_temporal::{Error, TemporalClient, TemporalSettings};
    use tokio::sync::mpsc;

    pub(super) enum Job {
        Start {
            request_id: String,
            session_id: String,
        },
        Nudge(String),
        /// Answered once every job before it was made.
        Drained(tokio::sync::oneshot::Sender<()>),
    }

    pub(super) struct TemporalWaits {
        pub(super) jobs: mpsc::Sender<Job>,
    }

    impl TemporalWaits {
        /// Waits until the jobs queued so far were made (or `timeout`).
        pub(super) async fn drain(&self, timeout: std::time::Duration) {
            let (done, made) = tokio::sync::oneshot::channel();
            let queued = tokio::time::timeout(timeout, self.jobs.send(Job::Drained(done)));
            if queued.await.is_ok_and(|sent| sent.is_ok())
                && tokio::time::timeout(timeout, made).await.is_err()
            {
                tracing::warn!("Temporal did not take the last durable-wait updates in time");
            }
        }

        fn send(&self, job: Job) {
            if self.jobs.try_send(job).is_err() {
                tracing::warn!(
                    "the Temporal queue is full or closed; a held call waits in this process only"
                );
            }
        }
    }

    impl keel_core::DurableWaits for TemporalWaits {
        fn waiting(&self, request_id: &str, session_id: &str) {
            self.send(Job::Start {
                request_id: request_id.to_owned(),
                session_id: session_id.to_owned(),
            });
        }

        fn ended(&self, request_id: &str) {
            self.send(Job::Nudge(request_id.to_owned()));
        }
    }

    /// Makes the client calls in order; connects on first use and again
    /// after a failure.
    pub(super) async fn run(settings: TemporalSettings, mut queue: mpsc::Receiver<Job>) {
        let mut client: Option<TemporalClient> = None;
        while let Some(job) = queue.recv().await {
            let (id, start) = match job {
                Job::Drained(done) => {
                    let _ = done.send(());
                    continue;
                }
                Job::Start {
                    request_id,
                    session_id,
                } => (request_id, Some(session_id)),
                Job::Nudge(id) => (id, None),
            };
            if client.is_none() {
                match TemporalClient::connect(&settings, &crate::cluster::identity("turns")).await {
                    Ok(c) => client = Some(c),
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot reach Temporal; a held call waits in this process only");
                        continue;
                    }
                }
            }
            let Some(c) = client.as_ref() else { continue };
            let made = if let Some(session_id) = &start {
                // A child of the session's turn when a worker runs it.
                c.start_wait_in_turn(session_id, &id).await
            } else {
                match c.nudge(&id).await {
                    // Not started (Temporal was down then): nothing to nudge.
                    Err(Error::NotFound(_)) => Ok(()),
                    other => other,
                }
            };
            match made {
                Ok(()) => tracing::debug!(request = %id, "durable wait updated"),
                Err(e) => {
                    tracing::warn!(request = %id, error = %e, "Temporal refused a durable wait's update");
                    client = None;
                }
            }
        }
    }
}
