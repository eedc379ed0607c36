//! The session handle's side of resuming a turn that a crash or kill cut
//! off: whether there is one, which tools its calls need, and starting the
//! run that finishes it (the run itself is [`crate::resume`]); and, for a
//! driver that knows the turn is still owed an answer (a durable turn
//! whose model call died with its worker), going on with the model from a
//! branch that ends with a user message or tool results. It must not know
//! about front ends.

use super::{SessionHandle, TaskOp};
use crate::error::{Error, Result};
use crate::state::lock;

impl SessionHandle {
    /// Whether [`Self::resume_interrupted`] would start a run now: the
    /// active branch ends with tool calls that have no results and the
    /// session is idle.
    pub fn has_cut_off_turn(&self) -> bool {
        let s = lock(&self.shared);
        !s.running && s.compacting.is_none() && s.context.view(&s.tree).interrupted().is_some()
    }

    /// The tools that calls of a cut-off turn name and the session does
    /// not offer now (a front end's own tools, registered later), one
    /// name per call. Empty when nothing is cut off, the session is busy,
    /// or every tool is there.
    pub fn cut_off_calls_missing_tools(&self) -> Vec<String> {
        let s = lock(&self.shared);
        if s.running || s.compacting.is_some() {
            return Vec::new();
        }
        let Some(interrupted) = s.context.view(&s.tree).interrupted() else {
            return Vec::new();
        };
        interrupted
            .calls
            .into_iter()
            .map(|(_, name, _)| name)
            .filter(|name| !s.tools.iter().any(|t| t.name() == name))
            .collect()
    }

    /// Resumes a turn a crash or kill cut off: when the active branch ends
    /// with an assistant message whose tool calls have no results, a run
    /// starts (`agent_start` …) that answers those calls — each through
    /// the gate, which honours a decision made while keel was down and
    /// announces a request still pending again — and then continues the
    /// turn with the model, without a new user message. Returns whether
    /// such a run started (false: nothing was cut off, or the session is
    /// busy).
    pub async fn resume_interrupted(&self) -> Result<bool> {
        // A turn of the session running elsewhere is that turn going on:
        // it is not cut off, and another run could not start anyway.
        if let Some(elsewhere) = &self.deps.elsewhere {
            let session_id = lock(&self.shared).config.session_id.clone();
            if elsewhere.running(&session_id).await.is_some() {
                return Ok(false);
            }
        }
        {
            let mut s = lock(&self.shared);
            if s.running
                || s.compacting.is_some()
                || s.context.view(&s.tree).interrupted().is_none()
            {
                return Ok(false);
            }
            s.running = true;
        }
        self.start_resume_run().await
    }

    /// Goes on with the model when the active branch ends with what the
    /// model has not answered yet (a user message, or tool results whose
    /// turn went no further), without a new user message: a run starts
    /// (`agent_start` …) as if the model call that died had just been made.
    /// Returns whether it started (false: the branch ends with an assistant
    /// message or is empty, the session is busy, or a cut-off turn must be
    /// resumed first with [`Self::resume_interrupted`]).
    ///
    /// Only a driver that knows the turn was cut off may call this: after
    /// a declined call the branch also ends with tool results, and the
    /// turn is over. That is why [`Self::resume_interrupted`] never does it.
    pub async fn answer_pending(&self) -> Result<bool> {
        {
            let mut s = lock(&self.shared);
            if s.running || s.compacting.is_some() {
                return Ok(false);
            }
            let view = s.context.view(&s.tree);
            if view.interrupted().is_some() || !view.awaits_model() {
                return Ok(false);
            }
            s.running = true;
        }
        self.start_resume_run().await
    }

    /// Sends the run that `running` (already set) was claimed for.
    async fn start_resume_run(&self) -> Result<bool> {
        if self.ops.send(TaskOp::Resume).await.is_err() {
            lock(&self.shared).running = false;
            return Err(Error::Closed);
        }
        Ok(true)
    }
}
