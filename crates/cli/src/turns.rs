//! Turns run on a `keel worker` of a Temporal cluster.
//!
//! With a Temporal cluster and a shared database configured, `keel exec`
//! does not run its turn itself: it stores the prompt's session in the
//! database, starts the turn's workflow (`keel_temporal::TurnWorkflow`)
//! and shows the turn's events as the worker appends them to the
//! session's event log (`keel_session_store::EventLog`) — the front-end
//! half, [`remote`]. The worker half, [`worker`], runs the turn with the
//! same session, gate and tools an in-process turn has, and goes on with
//! a turn whose previous worker died.
//!
//! This module owns what both halves agree on, and the decisions that
//! need no cluster to test: whether the turn's prompt is already stored
//! ([`prompt_stored`]), what closes the events of a try that died
//! ([`closing_events`]), and the records besides the session's own events
//! that the log carries ([`LogRecord`]). It must not know the wire
//! protocols.

#[cfg(feature = "temporal")]
mod fence;
#[cfg(feature = "temporal")]
mod following;
#[cfg(feature = "temporal")]
pub mod frontend;
#[cfg(feature = "temporal")]
mod proxy;
#[cfg(feature = "temporal")]
pub mod remote;
#[cfg(feature = "temporal")]
pub mod worker;
#[cfg(feature = "temporal")]
mod worker_mcp;

use keel_core::keel_approvals::{PendingRequest, Resolution};
use keel_protocol::{AgentEvent, Message};
use keel_session_store::{EntryBody, SessionTree};
use serde::{Deserialize, Serialize};

/// What the log carries besides the session's own events: the gate's
/// side of a held call, so a front-end on another machine can say how to
/// decide it, and a front-end's interrupt, which the worker running the
/// turn follows. Tagged like the events (`type`), so a reader tells them
/// apart by trying this first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LogRecord {
    /// A call of the turn waits for a decision; `args` are the call's.
    ApprovalRequest {
        request: Box<PendingRequest>,
        #[serde(default)]
        args: serde_json::Value,
    },
    /// That wait ended.
    ApprovalResolved {
        request: Box<PendingRequest>,
        resolution: Resolution,
    },
    /// A front-end asked to interrupt the turn (the row's `turn` says
    /// which).
    InterruptRequested,
    /// The worker's run calls a tool the front-end that started the turn
    /// runs (`TurnInput::tools`); the gate there let the call pass.
    ToolCall {
        call_id: String,
        tool: String,
        #[serde(default)]
        args: serde_json::Value,
    },
    /// That front-end still runs the call: said every
    /// `RUNNING_BEAT` (2 s) while it does, so the worker can tell a
    /// slow tool from a front-end that went away.
    ToolRunning { call_id: String },
    /// That front-end's answer to the call.
    ToolResult {
        call_id: String,
        result: keel_protocol::ToolResult,
        #[serde(default)]
        is_error: bool,
    },
}

/// One line of the event log as this keel reads it: a record, or an event
/// of the session.
#[derive(Debug)]
pub enum Logged {
    Record(LogRecord),
    Event(Box<AgentEvent>),
}

impl Logged {
    /// Reads `text`; an error for a line neither (from a newer keel).
    pub fn read(text: &str) -> serde_json::Result<Self> {
        match serde_json::from_str::<LogRecord>(text) {
            Ok(record) => Ok(Self::Record(record)),
            Err(_) => serde_json::from_str(text).map(|e| Self::Event(Box::new(e))),
        }
    }
}

/// Where the runs of the sessions a front-end opens go: a cluster's
/// workers when Temporal and the shared database are configured and
/// `[temporal] turns` (or `KEEL_TEMPORAL_TURNS`) does not say `here`;
/// `None`: here. `model` is the model id to ask the workers for.
pub async fn on_workers(
    global: &crate::GlobalArgs,
    model: Option<String>,
) -> anyhow::Result<Option<std::sync::Arc<dyn keel_core::RunsElsewhere>>> {
    if keel_session_store::database_in_use().is_none() || crate::cluster::turns_here(global)? {
        return Ok(None);
    }
    let Some(settings) = crate::cluster::temporal_settings(global)? else {
        return Ok(None);
    };
    connect(&settings, model).await
}

#[cfg(feature = "temporal")]
async fn connect(
    settings: &keel_temporal::TemporalSettings,
    model: Option<String>,
) -> anyhow::Result<Option<std::sync::Arc<dyn keel_core::RunsElsewhere>>> {
    Ok(frontend::OnWorkers::connect(settings, model)
        .await?
        .map(|o| std::sync::Arc::new(o) as std::sync::Arc<dyn keel_core::RunsElsewhere>))
}

#[cfg(not(feature = "temporal"))]
async fn connect(
    settings: &keel_temporal::TemporalSettings,
    _model: Option<String>,
) -> anyhow::Result<Option<std::sync::Arc<dyn keel_core::RunsElsewhere>>> {
    tracing::warn!(
        address = %settings.address,
        "turns run in this process: {}",
        keel_temporal::NOT_BUILT
    );
    Ok(None)
}

/// A wait's end in one word (`approved`, `declined`, `expired`,
/// `cancelled`).
pub fn resolution_name(resolution: &Resolution) -> &'static str {
    match resolution {
        Resolution::Approved { .. } => "approved",
        Resolution::Declined { .. } => "declined",
        Resolution::Expired { .. } => "expired",
        Resolution::Cancelled { .. } => "cancelled",
    }
}

/// Whether the branch past `base_leaf` (the session's last entry when the
/// turn started) holds a user message: the turn's prompt, stored by an
/// earlier try. `None` for `base_leaf` means the session was empty.
pub fn prompt_stored(tree: &SessionTree, base_leaf: Option<&str>) -> bool {
    let branch = tree.branch();
    let after = match base_leaf {
        None => 0,
        Some(base) => match branch.iter().position(|e| e.id == base) {
            Some(at) => at + 1,
            // The base is not on the branch any more: someone branched
            // away from it; the prompt cannot be told apart, so it counts
            // as stored rather than sent twice.
            None => return true,
        },
    };
    branch[after..].iter().any(|e| {
        matches!(
            &e.body,
            EntryBody::Message {
                message: Message::User(_)
            }
        )
    })
}

/// The events that close what a try that died left open, given the
/// events it stored: a message in progress is dropped (`auto_retry_start`
/// … `auto_retry_end`, as after a failed model call) and an open run ends
/// (`agent_end`), so a client never sees two runs interleave and never
/// keeps half a message. Empty when the try ended cleanly.
pub fn closing_events(stored: &[AgentEvent]) -> Vec<AgentEvent> {
    let mut run_open = false;
    let mut message_open = false;
    let mut retrying = false;
    for event in stored {
        match event {
            AgentEvent::AgentStart => run_open = true,
            AgentEvent::AgentEnd { .. } => {
                run_open = false;
                message_open = false;
            }
            AgentEvent::MessageStart {
                message: Message::Assistant(_),
            } => message_open = true,
            AgentEvent::MessageEnd { .. } => message_open = false,
            AgentEvent::AutoRetryStart { .. } => {
                retrying = true;
                message_open = false;
            }
            AgentEvent::AutoRetryEnd { .. } => retrying = false,
            AgentEvent::AgentSettled
            | AgentEvent::TurnStart
            | AgentEvent::TurnEnd { .. }
            | AgentEvent::MessageStart { .. }
            | AgentEvent::MessageUpdate { .. }
            | AgentEvent::ToolExecutionStart { .. }
            | AgentEvent::ToolExecutionUpdate { .. }
            | AgentEvent::ToolExecutionEnd { .. }
            | AgentEvent::QueueUpdate { .. }
            | AgentEvent::SessionInfoChanged { .. }
            | AgentEvent::ThinkingLevelChanged { .. }
            | AgentEvent::ModelChanged { .. }
            | AgentEvent::AutoCompactionStart { .. }
            | AgentEvent::AutoCompactionEnd { .. }
            | AgentEvent::TodoReminder { .. }
            | AgentEvent::TodoAutoClear => {}
        }
    }
    let mut closing = Vec::new();
    if message_open && !retrying {
        closing.push(AgentEvent::AutoRetryStart {
            attempt: 1,
            max_attempts: 1,
            delay_ms: 0,
            error_message: WORKER_LOST.to_owned(),
            error_kind: Some("workerLost".to_owned()),
        });
        retrying = true;
    }
    if retrying {
        closing.push(AgentEvent::AutoRetryEnd {
            success: false,
            attempt: 1,
            final_error: Some(WORKER_LOST.to_owned()),
        });
    }
    if run_open {
        closing.push(AgentEvent::AgentEnd {
            messages: Vec::new(),
        });
    }
    closing
}

/// What the closing events say.
pub const WORKER_LOST: &str = "the worker running this turn stopped; another worker goes on";

#[cfg(test)]
mod tests {
    use keel_protocol::{AssistantMessage, UserMessage};
    use keel_session_store::{Entry, EntryBody};

    use super::*;

    fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: vec![keel_protocol::ContentBlock::text(text)],
            timestamp: 0,
        })
    }

    fn assistant() -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![],
            api: "test".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Default::default(),
            stop_reason: keel_protocol::StopReason::Stop,
            error_message: None,
            error_kind: None,
            timestamp: 1,
            response_id: None,
        })
    }

    fn tree_of(bodies: Vec<EntryBody>) -> SessionTree {
        let mut tree = SessionTree::new(Vec::new(), Default::default(), None);
        for body in bodies {
            let entry: Entry = tree.mint(body, "2026-12-04T00:00:00Z".to_owned());
            tree.push(entry);
        }
        tree
    }

    fn message(m: Message) -> EntryBody {
        EntryBody::Message { message: m }
    }

    #[test]
    fn a_log_line_is_a_record_an_event_or_unreadable() {
        let interrupt = serde_json::to_string(&LogRecord::InterruptRequested).unwrap();
        assert!(matches!(
            Logged::read(&interrupt),
            Ok(Logged::Record(LogRecord::InterruptRequested))
        ));
        let start = serde_json::to_string(&AgentEvent::AgentStart).unwrap();
        assert!(
            matches!(Logged::read(&start), Ok(Logged::Event(e)) if *e == AgentEvent::AgentStart)
        );
        assert!(Logged::read("{\"type\":\"from_a_newer_keel\"}").is_err());
    }

    #[test]
    fn the_prompt_is_stored_once_a_user_message_follows_the_base() {
        let model = EntryBody::ModelChange {
            provider: "p".into(),
            model_id: "m".into(),
        };
        let mut tree = tree_of(vec![
            model.clone(),
            message(user("a")),
            message(assistant()),
        ]);
        let base = tree.leaf().map(str::to_owned);
        assert!(!prompt_stored(&tree, base.as_deref()));
        // A model change recorded by the worker is not the prompt.
        tree.push(tree.mint(model, "t".into()));
        assert!(!prompt_stored(&tree, base.as_deref()));
        tree.push(tree.mint(message(user("b")), "t".into()));
        assert!(prompt_stored(&tree, base.as_deref()));

        let empty = tree_of(vec![]);
        assert!(!prompt_stored(&empty, None));
        assert!(prompt_stored(&tree, None));
        assert!(prompt_stored(&tree, Some("not-on-the-branch")));
    }

    #[test]
    fn a_dead_tries_open_message_and_run_are_closed() {
        let start = AgentEvent::MessageStart {
            message: assistant(),
        };
        let end = AgentEvent::MessageEnd {
            message: assistant(),
        };
        let names = |events: Vec<AgentEvent>| -> Vec<&'static str> {
            events.iter().map(AgentEvent::type_name).collect()
        };
        assert_eq!(
            names(closing_events(&[
                AgentEvent::AgentStart,
                AgentEvent::TurnStart,
                start.clone()
            ])),
            ["auto_retry_start", "auto_retry_end", "agent_end"]
        );
        // Cut while a call waited: only the run is open.
        assert_eq!(
            names(closing_events(&[
                AgentEvent::AgentStart,
                start.clone(),
                end.clone()
            ])),
            ["agent_end"]
        );
        assert!(
            closing_events(&[
                AgentEvent::AgentStart,
                start,
                end,
                AgentEvent::AgentEnd { messages: vec![] }
            ])
            .is_empty()
        );
        assert!(closing_events(&[]).is_empty());
    }
}
