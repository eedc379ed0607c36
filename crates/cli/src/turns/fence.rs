//! A worker's try acts only while it is the turn's current try.
//!
//! Owns [`TryFence`], core's [`RunFence`] of a worker's session: a look
//! at `keel_turn_tries` before a call that passed the gate runs. A try
//! whose worker was paused or cut off from Temporal longer than the
//! heartbeat timeout has been replaced by the server; the replacing try
//! claimed the turn when it started, so the old one, coming back, finds
//! it lost and the call does not run a second time. A look that fails
//! (the database away) stops the call too: the fence fails closed. It
//! must not know how decisions are taken.

use keel_core::RunFence;
use keel_session_store::EventLog;

/// The try a session acts for; see the module docs.
#[derive(Debug, Clone)]
pub(super) struct TryFence {
    pub log: EventLog,
    pub session_id: String,
    pub turn_id: String,
    pub attempt: u32,
}

#[async_trait::async_trait]
impl RunFence for TryFence {
    async fn check(&self) -> Result<(), String> {
        match self
            .log
            .holds_try(&self.session_id, &self.turn_id, self.attempt)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => {
                tracing::warn!(session = %self.session_id, attempt = self.attempt, "a later try of this turn runs: the call is left to it");
                Err("This call did not run here: another try of this turn took over.".to_owned())
            }
            Err(e) => {
                tracing::warn!(session = %self.session_id, error = %e, "cannot tell whether this try still holds the turn; the call does not run");
                Err(format!(
                    "This call did not run: whether this try still holds the turn cannot be checked ({e})."
                ))
            }
        }
    }
}
