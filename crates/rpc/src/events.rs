//! Core events on the wire.
//!
//! Owns the translation of every [`AgentEvent`] into the inner event object
//! hosts see (pi's field names; `message_update` carries only its delta in
//! `assistantMessageEvent`; every `agent_end` is the run's one terminal end
//! and says so with `isTerminal: true`) and the two framings: canonical
//! `{"type":"event","protocol_version":2,"session_id","seq","frame_id",
//! "payload":{"event_type","event"}}` with `seq` counting from 1 per
//! session, or the inner event written flat (`--rpc-flat-events`). An
//! event of a turn a worker ran also carries `log_seq`, its place in the
//! session's shared event log (the same on every front-end), at the top
//! level of either framing. It does not decide when events are written.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use keel_protocol::AgentEvent;
use serde::Serialize;

use crate::PROTOCOL_VERSION;

/// How events are framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventStyle {
    /// The spec's canonical envelope.
    Canonical,
    /// pi/oh-my-pi style: the inner event as the frame.
    Flat,
}

/// The inner event as it goes on the wire.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum InnerEvent<'a> {
    Plain(&'a AgentEvent),
    /// An `agent_end`, marked as the terminal end of its run.
    Terminal {
        #[serde(flatten)]
        event: &'a AgentEvent,
        #[serde(rename = "isTerminal")]
        is_terminal: bool,
    },
}

/// The inner event type and object for one core event.
pub(crate) fn inner_event(event: &AgentEvent) -> (&'static str, InnerEvent<'_>) {
    let inner = match event {
        AgentEvent::AgentEnd { .. } => InnerEvent::Terminal {
            event,
            is_terminal: true,
        },
        AgentEvent::AgentStart
        | AgentEvent::AgentSettled
        | AgentEvent::TurnStart
        | AgentEvent::TurnEnd { .. }
        | AgentEvent::MessageStart { .. }
        | AgentEvent::MessageUpdate { .. }
        | AgentEvent::MessageEnd { .. }
        | AgentEvent::ToolExecutionStart { .. }
        | AgentEvent::ToolExecutionUpdate { .. }
        | AgentEvent::ToolExecutionEnd { .. }
        | AgentEvent::QueueUpdate { .. }
        | AgentEvent::SessionInfoChanged { .. }
        | AgentEvent::ThinkingLevelChanged { .. }
        | AgentEvent::ModelChanged { .. }
        | AgentEvent::AutoRetryStart { .. }
        | AgentEvent::AutoRetryEnd { .. }
        | AgentEvent::AutoCompactionStart { .. }
        | AgentEvent::AutoCompactionEnd { .. }
        | AgentEvent::TodoReminder { .. }
        | AgentEvent::TodoAutoClear => InnerEvent::Plain(event),
    };
    (event.type_name(), inner)
}

#[derive(Serialize)]
pub(crate) struct Payload<'a> {
    event_type: &'a str,
    event: InnerEvent<'a>,
}

#[derive(Serialize)]
pub(crate) struct EventFrame<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    protocol_version: u32,
    session_id: &'a str,
    seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    log_seq: Option<u64>,
    frame_id: FrameId,
    payload: Payload<'a>,
}

/// A flat frame of an event from the shared event log: the inner event
/// and its place there.
#[derive(Serialize)]
pub(crate) struct FlatLogged<'a> {
    #[serde(flatten)]
    event: InnerEvent<'a>,
    log_seq: u64,
}

/// A frame id, `evt_` and 16 hex digits: a 64-bit number drawn at random
/// once per process plus a process-wide counter, so ids are unique within
/// the process and, with overwhelming probability, across processes. It
/// costs neither a syscall nor an allocation per frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameId(u64);

impl FrameId {
    fn next() -> Self {
        static BASE: OnceLock<u64> = OnceLock::new();
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let base = *BASE.get_or_init(|| uuid::Uuid::now_v7().as_u64_pair().1);
        FrameId(base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)))
    }
}

impl Serialize for FrameId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("evt_{:016x}", self.0))
    }
}

/// One event frame, canonical or flat.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum WireEvent<'a> {
    Canonical(EventFrame<'a>),
    Flat(InnerEvent<'a>),
    FlatLogged(FlatLogged<'a>),
}

/// Per-session `seq` counters, kept for the life of the process so a
/// session opened again continues its numbering.
#[derive(Debug, Default, Clone)]
pub struct SeqCounters {
    inner: Arc<Mutex<HashMap<String, Arc<AtomicU64>>>>,
}

impl SeqCounters {
    fn counter(&self, session_id: &str) -> Arc<AtomicU64> {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(session_id.to_owned()).or_default().clone()
    }
}

/// Frames the events of one session.
pub struct EventFramer {
    style: EventStyle,
    session_id: String,
    seq: Arc<AtomicU64>,
}

impl EventFramer {
    pub fn new(style: EventStyle, session_id: &str, counters: &SeqCounters) -> Self {
        Self {
            style,
            session_id: session_id.to_owned(),
            seq: counters.counter(session_id),
        }
    }

    /// The frame for `event`, serialised: compact JSON, without the LF.
    pub fn encode(&self, event: &AgentEvent) -> serde_json::Result<Vec<u8>> {
        serde_json::to_vec(&self.frame(event, None))
    }

    /// The frame for `event`, ready to serialise; `log_seq`: its place in
    /// the session's shared event log, when it came from there.
    pub(crate) fn frame<'a>(
        &'a self,
        event: &'a AgentEvent,
        log_seq: Option<u64>,
    ) -> WireEvent<'a> {
        let (event_type, inner) = inner_event(event);
        match self.style {
            EventStyle::Flat => match log_seq {
                None => WireEvent::Flat(inner),
                Some(log_seq) => WireEvent::FlatLogged(FlatLogged {
                    event: inner,
                    log_seq,
                }),
            },
            EventStyle::Canonical => {
                let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
                WireEvent::Canonical(EventFrame {
                    kind: "event",
                    protocol_version: PROTOCOL_VERSION,
                    session_id: &self.session_id,
                    seq,
                    log_seq,
                    frame_id: FrameId::next(),
                    payload: Payload {
                        event_type,
                        event: inner,
                    },
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessageEvent, ThinkingLevel};
    use serde_json::{Value, json};

    fn text(w: WireEvent<'_>) -> String {
        serde_json::to_string(&w).unwrap()
    }

    fn value(w: WireEvent<'_>) -> Value {
        serde_json::to_value(&w).unwrap()
    }

    #[test]
    fn canonical_frames_number_per_session() {
        let counters = SeqCounters::default();
        let a = EventFramer::new(EventStyle::Canonical, "s1", &counters);
        let first = text(a.frame(&AgentEvent::AgentStart, None));
        let delta = AgentEvent::MessageUpdate {
            assistant_message_event: AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: "Hel".into(),
            },
        };
        let second = value(a.frame(&delta, None));
        let (head, tail) = first.split_once("\"frame_id\":\"evt_").unwrap();
        assert_eq!(
            head,
            r#"{"type":"event","protocol_version":2,"session_id":"s1","seq":1,"#
        );
        assert!(
            tail.ends_with(
                r#"","payload":{"event_type":"agent_start","event":{"type":"agent_start"}}}"#
            ),
            "{tail}"
        );
        assert_eq!(second["seq"], 2);
        insta::assert_json_snapshot!(second["payload"], @r#"
        {
          "event": {
            "assistantMessageEvent": {
              "contentIndex": 0,
              "delta": "Hel",
              "type": "text_delta"
            },
            "type": "message_update"
          },
          "event_type": "message_update"
        }
        "#);
        // Another session counts from 1; the same session continues.
        let b = EventFramer::new(EventStyle::Canonical, "s2", &counters);
        assert_eq!(value(b.frame(&AgentEvent::TurnStart, None))["seq"], 1);
        let a2 = EventFramer::new(EventStyle::Canonical, "s1", &counters);
        assert_eq!(value(a2.frame(&AgentEvent::TurnStart, None))["seq"], 3);
        assert_ne!(
            value(a.frame(&AgentEvent::TurnStart, None))["frame_id"],
            value(a.frame(&AgentEvent::TurnStart, None))["frame_id"]
        );
    }

    #[test]
    fn flat_frames_and_terminal_agent_end() {
        let f = EventFramer::new(EventStyle::Flat, "s", &SeqCounters::default());
        assert_eq!(
            text(f.frame(&AgentEvent::AgentEnd { messages: vec![] }, None)),
            r#"{"type":"agent_end","messages":[],"isTerminal":true}"#
        );
        assert_eq!(
            value(f.frame(
                &AgentEvent::ThinkingLevelChanged {
                    level: ThinkingLevel::High
                },
                None
            )),
            json!({"type":"thinking_level_changed","level":"high"})
        );
    }

    #[test]
    fn an_event_from_the_shared_log_says_where_it_stands_there() {
        let counters = SeqCounters::default();
        let canonical = EventFramer::new(EventStyle::Canonical, "s", &counters);
        let here = value(canonical.frame(&AgentEvent::TurnStart, None));
        assert!(here.get("log_seq").is_none(), "{here}");
        let logged = value(canonical.frame(&AgentEvent::TurnStart, Some(42)));
        assert_eq!(logged["log_seq"], 42);
        // The frame's own numbering goes on beside it.
        assert_eq!(logged["seq"], 2);
        let flat = EventFramer::new(EventStyle::Flat, "s", &counters);
        assert_eq!(
            text(flat.frame(&AgentEvent::AgentEnd { messages: vec![] }, Some(7))),
            r#"{"type":"agent_end","messages":[],"isTerminal":true,"log_seq":7}"#
        );
    }
}
