//! Waiting on a held call.
//!
//! Owns [`ApprovalEngine::wait`]: the wait is on the stored row, not on a
//! socket or a channel. It re-reads the row whenever this engine nudges
//! (a local decision), when the store's change feed ticks (a decision
//! written by another process to the same database: `PRAGMA data_version`
//! on SQLite, `LISTEN/NOTIFY` on PostgreSQL; see `store::ChangeFeed`),
//! every `poll_interval` as the backstop, and at the row's deadline
//! (expiry); a cancel marks the row cancelled. Nothing here consumes the decision; see
//! [`ApprovalEngine::settle`]. It must not know about the agent loop.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use tokio_util::sync::CancellationToken;

use super::{ApprovalEngine, Resolution};
use crate::error::{Error, Result};
use crate::store::{Delivery, RequestFilter, Status, Subscription};

/// Where a held call stands, as one look at its row sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Look {
    /// Decided, expired or cancelled: the wait is over.
    Done { resolution: Resolution },
    /// Still pending; it expires in `expires_in_ms` (by this engine's clock).
    Pending { expires_in_ms: u64 },
}

impl ApprovalEngine {
    /// One look at a held call's row: expired first when its deadline has
    /// passed, then how it ended, or how long it may still wait. The step
    /// every wait repeats, here in process ([`Self::wait`]) and in a
    /// durable driver's approval workflow.
    pub async fn look(&self, request_id: &str) -> Result<Look> {
        let row = self.request(request_id).await?;
        let row = self.expire_if_due(row).await?;
        Ok(match Resolution::from_record(&row) {
            Some(resolution) => Look::Done { resolution },
            None => Look::Pending {
                expires_in_ms: u64::try_from(row.expires_at.saturating_sub(self.now()))
                    .unwrap_or(0),
            },
        })
    }

    /// Held calls whose wait should have ended: decided (approved, declined
    /// or expired) between `window` and `settled_for` ago, and not consumed
    /// by any turn yet; at most `batch` of each status, newest first. A
    /// durable driver nudges their waits again, in case a nudge was lost.
    pub async fn decided_unconsumed(
        &self,
        settled_for: Duration,
        window: Duration,
        batch: usize,
    ) -> Result<Vec<String>> {
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let now = self.now();
        let (newest, oldest) = (now - ms(settled_for), now.saturating_sub(ms(window)));
        let mut out = Vec::new();
        for status in [Status::Approved, Status::Declined, Status::Expired] {
            let rows = self
                .requests(RequestFilter {
                    status: Some(status),
                    delivery: Some(Delivery::Wait),
                    unconsumed: true,
                    limit: Some(batch),
                    ..Default::default()
                })
                .await?;
            out.extend(
                rows.into_iter()
                    .filter(|r| r.decided_at.is_some_and(|at| at <= newest && at >= oldest))
                    .map(|r| r.id),
            );
        }
        Ok(out)
    }

    /// Listens for changes other processes make to the store (see
    /// `store::ChangeFeed`); never fires for a store that cannot tell.
    pub fn subscribe_changes(&self) -> Subscription {
        self.inner
            .store
            .change_feed()
            .map_or_else(Subscription::never, |feed| feed.subscribe())
    }

    /// Waits until the request is decided, expires, or `cancel` fires (then
    /// the request is marked cancelled, unless a decision landed first).
    /// A store that cannot be reached for a while (a PostgreSQL restart)
    /// does not end the wait: it looks again each poll until it can.
    pub async fn wait(&self, request_id: &str, cancel: &CancellationToken) -> Result<Resolution> {
        // Listen to other processes before the first read, for the same
        // reason as below.
        let mut changes = self.subscribe_changes();
        // Said once per wait, not at every look.
        let mut unreachable = false;
        loop {
            // Register for nudges before reading, so a decision between the
            // read and the await is not missed.
            let notified = self.inner.nudge.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();

            let until_expiry = match self.look(request_id).await {
                Ok(Look::Done { resolution }) => return Ok(resolution),
                Ok(Look::Pending { expires_in_ms }) => expires_in_ms,
                // The row outlives the outage: look again once it is back
                // (the expiry is on the row, so it is not missed).
                Err(e) if e.is_unavailable() => {
                    if !unreachable {
                        tracing::warn!(error = %e, request_id, "cannot look at the held call's row; waiting for the approvals database");
                        unreachable = true;
                    }
                    u64::MAX
                }
                Err(e) => return Err(e),
            };
            let nap = self
                .inner
                .config
                .poll_interval
                .min(Duration::from_millis(until_expiry.max(1)));
            tokio::select! {
                _ = &mut notified => {}
                () = changes.changed() => {}
                _ = tokio::time::sleep(nap) => {}
                _ = cancel.cancelled() => {
                    self.cancel(request_id, "abort").await?;
                    let row = self.request(request_id).await?;
                    return Resolution::from_record(&row).ok_or_else(|| Error::Conflict {
                        id: row.id.clone(),
                        expected: row.revision,
                    });
                }
            }
        }
    }
}
