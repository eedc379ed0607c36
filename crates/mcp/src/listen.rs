//! Tool-list changes from a 2026-07-28 server.
//!
//! A server of that version keeps no session, so it sends
//! `notifications/tools/list_changed` only on a stream the client opens
//! for them (`subscriptions/listen`). Owns that stream for one connection:
//! opened when the server says its tool list can change, each notice
//! handed to the connection's [`KeelClient`] as a session-based server's
//! would be, ended with the connection. It must not know what is done with
//! the notice.

use rmcp::model::{ServerNotification, SubscriptionFilter};
use rmcp::service::Peer;
use rmcp::{RoleClient, model::ProtocolVersion};
use serde_json::Value;

use crate::client::KeelClient;

/// Follows the tool-list changes of the server behind `peer`, when it
/// speaks 2026-07-28 and offers `tools.listChanged`; `None` otherwise (an
/// older server sends the notice on its session).
pub(crate) fn follow_tools(
    peer: &Peer<RoleClient>,
    client: KeelClient,
) -> Option<tokio::task::JoinHandle<()>> {
    let info = serde_json::to_value(&*peer.peer_info()?).ok()?;
    let modern = info["protocolVersion"].as_str() == Some(ProtocolVersion::V_2026_07_28.as_str());
    let changes = info["capabilities"]["tools"]["listChanged"] == Value::Bool(true);
    if !(modern && changes) {
        return None;
    }
    let peer = peer.clone();
    Some(tokio::spawn(async move {
        let filter = SubscriptionFilter::builder().tools_list_changed().build();
        let mut stream = match peer.listen(filter).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(server = %client.server(), error = %e, "cannot follow the tool list");
                return;
            }
        };
        loop {
            match stream.next().await {
                Ok(Some(ServerNotification::ToolListChangedNotification(_))) => {
                    client.note_tools_changed();
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }))
}
