//! The background commands of the RPC `bash` command, tracked so that an
//! abort cancels them and shutdown waits (bounded) for them to report.
//! It holds tasks only; what a command does is `handlers::bash`'s.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How long shutdown waits for cancelled commands to report.
const CANCEL_GRACE: Duration = Duration::from_secs(10);

/// The background commands.
#[derive(Default)]
pub(crate) struct BashJobs {
    jobs: Vec<(CancellationToken, JoinHandle<()>)>,
}

impl BashJobs {
    pub(crate) fn push(&mut self, cancel: CancellationToken, task: JoinHandle<()>) {
        self.jobs.retain(|(_, t)| !t.is_finished());
        self.jobs.push((cancel, task));
    }

    pub(crate) fn cancel(&mut self) {
        for (cancel, _) in &self.jobs {
            cancel.cancel();
        }
    }

    /// Cancels every command and waits (bounded) for them to answer.
    pub async fn cancel_all(mut self) {
        self.cancel();
        for (_, task) in self.jobs.drain(..) {
            let _ = tokio::time::timeout(CANCEL_GRACE, task).await;
        }
    }
}
