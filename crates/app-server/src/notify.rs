//! Reaching a thread's clients, for modules below the runtime: the
//! [`Notifier`] the runtime implements, so the broker and the plan tool
//! send to a thread's subscribers without knowing the runtime.

use std::sync::Arc;

use keel_app_server_protocol::v2::ServerNotification;

use crate::outbound::Connection;

/// The connections of a thread, and a notification to all of them.
#[async_trait::async_trait]
pub trait Notifier: Send + Sync {
    /// The connections subscribed to `thread_id`, in connection order.
    fn subscribers(&self, thread_id: &str) -> Vec<Arc<Connection>>;

    /// Sends `notification` to every subscriber of `thread_id`.
    async fn notify_thread(&self, thread_id: &str, notification: &ServerNotification) {
        for conn in self.subscribers(thread_id) {
            conn.notify(notification).await;
        }
    }
}
