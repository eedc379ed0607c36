//! Durable waits: handing a held call's wait to an engine that outlives
//! this process.
//!
//! Owns the [`DurableWaits`] seam and the process's one registration of
//! it ([`set_durable_waits`]). The gate ([`crate::EngineGate`]) tells it
//! when it starts waiting on a stored request and when that wait ended
//! here (decided, expired, cancelled by an abort). An implementation
//! starts a workflow that keeps the request's expiry timer and reads the
//! row when nudged (the binary's Temporal client does), so the request is
//! settled even when this process dies while it waits. The row stays the
//! only record: the in-process wait still ends on the row, and nothing
//! here may decide a request. It must not know about Temporal or front
//! ends; both methods return at once (the work is the implementation's).

use std::sync::{Arc, OnceLock};

/// Where held calls' waits are kept beyond this process.
pub trait DurableWaits: Send + Sync {
    /// The gate is about to wait on stored request `request_id`, held by
    /// a turn of `session_id`: make its wait durable (idempotent: a
    /// request waited on again after a restart is the same wait).
    fn waiting(&self, request_id: &str, session_id: &str);

    /// The wait on `request_id` ended in this process (its row says how):
    /// let the durable wait look at the row now rather than at its timer.
    fn ended(&self, request_id: &str);
}

static DURABLE_WAITS: OnceLock<Arc<dyn DurableWaits>> = OnceLock::new();

/// Registers the process's durable waits, once, before sessions start;
/// false when one was registered already (the first one stays).
pub fn set_durable_waits(waits: Arc<dyn DurableWaits>) -> bool {
    DURABLE_WAITS.set(waits).is_ok()
}

/// The registered durable waits, if any.
pub(crate) fn durable_waits() -> Option<&'static Arc<dyn DurableWaits>> {
    DURABLE_WAITS.get()
}
