//! What a session hands out: [`SessionEvent`], an event and, when it came
//! from the session's shared event log (a run a worker ran), its place
//! there. A leaf: it knows only the protocol's event.

use keel_protocol::AgentEvent;

/// One event of a session, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionEvent {
    pub event: AgentEvent,
    /// The event's sequence number in the session's shared event log (the
    /// same on every front-end that streams it); `None` for an event this
    /// process made itself.
    pub log_seq: Option<u64>,
}

impl SessionEvent {
    /// An event this process made.
    pub fn here(event: AgentEvent) -> Self {
        Self {
            event,
            log_seq: None,
        }
    }
}
