//! A session's history (core messages) as protocol turns, for
//! `thread/read`, `thread/resume` and `thread/turns/list`.
//!
//! The history is the active branch of the session's entry tree, every
//! message on it (those a compaction summarised included) and the
//! compactions between them ([`steps`]), so no turn is lost or renumbered
//! by a compaction. Each user message that follows an assistant answer
//! starts a turn (a steering message inside a run is kept in the run's
//! turn). A compaction between turns (`thread/compact/start`) is a turn of
//! its own holding a `contextCompaction` item, as Codex shows it; one
//! inside a run (the context passed its threshold) is an item of that
//! run's turn. Turn ids are derived from the thread id and the turn's
//! position, so they are stable across reads, and a live turn gets the id
//! it will be read back under ([`next_turn_id`]), on every front-end.

use std::collections::HashMap;
use std::path::Path;

use keel_app_server_protocol::v2::{ThreadItem, Turn, TurnError, TurnItemsView, TurnStatus};
use keel_protocol::{ContentBlock, Message, StopReason};
use keel_session_store::{EntryBody, SessionTree};

use crate::errors::turn_error;
use crate::items::{Ending, completed_item, started_item, user_inputs};

/// One step of a thread's history.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    Message(&'a Message),
    /// A compaction, at this time (Unix seconds).
    Compaction(i64),
}

/// The steps of `tree`'s active branch, oldest first.
pub fn steps(tree: &SessionTree) -> Vec<Step<'_>> {
    steps_to(tree, tree.leaf())
}

/// The steps of the branch up to entry `leaf` (none: no steps).
pub fn steps_to<'a>(tree: &'a SessionTree, leaf: Option<&str>) -> Vec<Step<'a>> {
    if leaf.is_none() {
        return Vec::new();
    }
    tree.branch_to(leaf)
        .into_iter()
        .filter_map(|entry| match &entry.body {
            EntryBody::Message { message } => Some(Step::Message(message)),
            EntryBody::Compaction { .. } => Some(Step::Compaction(
                chrono::DateTime::parse_from_rfc3339(&entry.timestamp)
                    .map(|t| t.timestamp())
                    .unwrap_or(0),
            )),
            _ => None,
        })
        .collect()
}

/// The steps of plain messages (a history without compactions).
pub fn message_steps(messages: &[Message]) -> Vec<Step<'_>> {
    messages.iter().map(Step::Message).collect()
}

fn new_turn(thread_id: &str, n: usize, at: i64) -> Turn {
    Turn {
        id: format!("{thread_id}-turn-{n}"),
        root_turn_id: None,
        items: Vec::new(),
        items_view: TurnItemsView::Full,
        status: TurnStatus::Completed,
        error: None,
        started_at: Some(at),
        completed_at: Some(at),
        duration_ms: None,
    }
}

/// The turns of `steps`, every item included.
pub fn turns_of(thread_id: &str, steps: &[Step<'_>], cwd: &Path) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut tools: HashMap<String, ThreadItem> = HashMap::new();
    let mut last_was_assistant = true;
    for (i, step) in steps.iter().enumerate() {
        let message = match step {
            Step::Message(message) => *message,
            Step::Compaction(at) => {
                if turns.is_empty() || last_was_assistant {
                    let n = turns.len();
                    turns.push(new_turn(thread_id, n, *at));
                }
                if let Some(turn) = turns.last_mut() {
                    turn.items.push(ThreadItem::ContextCompaction {
                        id: format!("{thread_id}-item-{i}"),
                    });
                }
                continue;
            }
        };
        match message {
            Message::User(u) => {
                if turns.is_empty() || last_was_assistant {
                    let n = turns.len();
                    turns.push(new_turn(thread_id, n, u.timestamp / 1000));
                }
                last_was_assistant = false;
                if let Some(turn) = turns.last_mut() {
                    turn.items.push(ThreadItem::UserMessage {
                        id: format!("{thread_id}-item-{i}"),
                        client_id: None,
                        content: user_inputs(&u.content),
                    });
                }
            }
            Message::Assistant(a) => {
                last_was_assistant = true;
                let Some(turn) = turns.last_mut() else {
                    continue;
                };
                turn.completed_at = Some(a.timestamp / 1000);
                for (j, block) in a.content.iter().enumerate() {
                    match block {
                        ContentBlock::Text { text } if !text.is_empty() => {
                            turn.items.push(ThreadItem::AgentMessage {
                                id: format!("{thread_id}-item-{i}-{j}"),
                                text: text.clone(),
                                phase: None,
                            })
                        }
                        ContentBlock::Thinking { thinking, .. } if !thinking.is_empty() => {
                            turn.items.push(ThreadItem::Reasoning {
                                id: format!("{thread_id}-item-{i}-{j}"),
                                summary: vec![thinking.clone()],
                                content: Vec::new(),
                            })
                        }
                        ContentBlock::ToolCall {
                            id,
                            name,
                            arguments,
                        } => {
                            tools.insert(id.clone(), started_item(id, name, arguments, cwd));
                        }
                        ContentBlock::Text { .. }
                        | ContentBlock::Thinking { .. }
                        | ContentBlock::Image { .. } => {}
                    }
                }
                match a.stop_reason {
                    StopReason::Error => {
                        turn.status = TurnStatus::Failed;
                        turn.error = Some(turn_error(
                            a.error_kind.as_deref(),
                            a.error_message
                                .as_deref()
                                .unwrap_or("the model call failed"),
                        ));
                    }
                    StopReason::Aborted => turn.status = TurnStatus::Interrupted,
                    StopReason::Stop | StopReason::Length | StopReason::ToolUse => {}
                }
            }
            Message::ToolResult(r) => {
                let Some(turn) = turns.last_mut() else {
                    continue;
                };
                if let Some(item) = tools.remove(&r.tool_call_id) {
                    let result = keel_protocol::ToolResult {
                        content: r.content.clone(),
                        details: r.details.clone(),
                    };
                    turn.items.push(completed_item(
                        item,
                        Some(&result),
                        Ending::Ran {
                            is_error: r.is_error,
                        },
                        0,
                    ));
                }
            }
        }
    }
    turns
}

/// Each step with the number of turns [`turns_of`] has opened up to and
/// including it (a user message after an assistant one opens a turn, and
/// so does a compaction between turns).
fn with_turn_counts<'a>(steps: &'a [Step<'a>]) -> impl Iterator<Item = (usize, &'a Step<'a>)> + 'a {
    let mut turns = 0usize;
    let mut last_was_assistant = true;
    steps.iter().map(move |step| {
        match step {
            Step::Message(Message::User(_)) => {
                if turns == 0 || last_was_assistant {
                    turns += 1;
                }
                last_was_assistant = false;
            }
            Step::Message(Message::Assistant(_)) => last_was_assistant = true,
            Step::Message(Message::ToolResult(_)) => {}
            Step::Compaction(_) => {
                if turns == 0 || last_was_assistant {
                    turns += 1;
                }
            }
        }
        (turns, step)
    })
}

/// The id [`turns_of`] gives the turn in which the model made tool call
/// `call_id` (for a request announced again after a restart).
pub fn turn_of_call(thread_id: &str, steps: &[Step<'_>], call_id: &str) -> Option<String> {
    with_turn_counts(steps).find_map(|(turns, step)| match step {
        Step::Message(Message::Assistant(a))
            if turns > 0
                && a.content
                    .iter()
                    .any(|b| matches!(b, ContentBlock::ToolCall { id, .. } if id == call_id)) =>
        {
            Some(format!("{thread_id}-turn-{}", turns - 1))
        }
        Step::Message(_) | Step::Compaction(_) => None,
    })
}

/// The id [`turns_of`] gives the last turn, if there is one.
pub fn last_turn_id(thread_id: &str, steps: &[Step<'_>]) -> Option<String> {
    with_turn_counts(steps)
        .last()
        .and_then(|(turns, _)| turns.checked_sub(1))
        .map(|n| format!("{thread_id}-turn-{n}"))
}

/// The id [`turns_of`] will give the turn that a prompt sent now opens
/// (or joins, when the branch ends with a user message the model has not
/// answered), so a live turn has the id it is later read back under, on
/// every front-end that computes it from the same branch.
pub fn next_turn_id(thread_id: &str, steps: &[Step<'_>]) -> String {
    let turns = with_turn_counts(steps).last().map_or(0, |(turns, _)| turns);
    let joins_last = steps
        .iter()
        .rev()
        .find_map(|step| match step {
            Step::Message(Message::User(_)) => Some(true),
            Step::Message(Message::Assistant(_) | Message::ToolResult(_)) => Some(false),
            Step::Compaction(_) => None,
        })
        .unwrap_or(false);
    let n = if joins_last {
        turns.saturating_sub(1)
    } else {
        turns
    };
    format!("{thread_id}-turn-{n}")
}

/// A turn's summary view: only its last agent message.
pub fn summarize(mut turn: Turn) -> Turn {
    let last = turn
        .items
        .iter()
        .rev()
        .find(|i| matches!(i, ThreadItem::AgentMessage { .. }))
        .cloned();
    turn.items = last.into_iter().collect();
    turn.items_view = TurnItemsView::Summary;
    turn
}

/// Keeps `error` only for failed turns (for a tidy summary).
pub fn error_if_failed(status: TurnStatus, error: Option<TurnError>) -> Option<TurnError> {
    match status {
        TurnStatus::Failed => error,
        TurnStatus::Completed | TurnStatus::Interrupted | TurnStatus::InProgress => None,
    }
}

/// The text of the first user message.
pub fn preview_of(messages: &[Message]) -> String {
    messages
        .iter()
        .find_map(|m| match m {
            Message::User(u) => u.content.iter().find_map(|b| match b {
                ContentBlock::Text { text } => Some(text.clone()),
                _ => None,
            }),
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessage, ToolResultMessage, UserMessage};
    use serde_json::json;

    fn assistant(content: Vec<ContentBlock>, stop: StopReason) -> Message {
        Message::Assistant(AssistantMessage {
            content,
            api: "a".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Default::default(),
            stop_reason: stop,
            error_message: None,
            error_kind: None,
            timestamp: 2000,
            response_id: None,
        })
    }

    fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(text)],
            timestamp: 1000,
        })
    }

    fn kinds(turn: &Turn) -> Vec<&'static str> {
        turn.items
            .iter()
            .map(|i| match i {
                ThreadItem::UserMessage { .. } => "user",
                ThreadItem::AgentMessage { .. } => "agent",
                ThreadItem::ContextCompaction { .. } => "compaction",
                _ => "other",
            })
            .collect()
    }

    #[test]
    fn a_compaction_keeps_every_turn_and_is_shown_where_it_happened() {
        let (u1, a1) = (
            user("one"),
            assistant(vec![ContentBlock::text("a1")], StopReason::Stop),
        );
        let (u2, a2) = (
            user("two"),
            assistant(vec![ContentBlock::text("a2")], StopReason::Stop),
        );
        let (u3, a3) = (
            user("three"),
            assistant(vec![ContentBlock::text("a3")], StopReason::Stop),
        );
        // Between turns (asked for): a turn of its own; inside a run (the
        // threshold passed after the user message): an item of that turn.
        let steps = [
            Step::Message(&u1),
            Step::Message(&a1),
            Step::Compaction(5),
            Step::Message(&u2),
            Step::Message(&a2),
            Step::Message(&u3),
            Step::Compaction(6),
            Step::Message(&a3),
        ];
        let turns = turns_of("t", &steps, Path::new("/w"));
        let shapes: Vec<Vec<&str>> = turns.iter().map(kinds).collect();
        assert_eq!(
            shapes,
            [
                vec!["user", "agent"],
                vec!["compaction"],
                vec!["user", "agent"],
                vec!["user", "compaction", "agent"],
            ]
        );
        let ids: Vec<&str> = turns.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["t-turn-0", "t-turn-1", "t-turn-2", "t-turn-3"]);
        assert_eq!(turns[1].started_at, Some(5));
        assert_eq!(last_turn_id("t", &steps).as_deref(), Some("t-turn-3"));
    }

    /// Before its prompt is stored and after, a turn's live id is the one
    /// the history gives it.
    #[test]
    fn a_live_turn_has_the_id_it_is_read_back_under() {
        let (u1, a1, u2, a2, u3) = (
            user("one"),
            assistant(vec![ContentBlock::text("a1")], StopReason::Stop),
            user("two"),
            assistant(vec![ContentBlock::text("a2")], StopReason::Stop),
            user("three"),
        );
        assert_eq!(next_turn_id("t", &[]), "t-turn-0");
        let history = [
            Step::Message(&u1),
            Step::Message(&a1),
            Step::Compaction(5),
            Step::Message(&u2),
            Step::Message(&a2),
        ];
        for end in 0..=history.len() {
            let before = &history[..end];
            let mut with_prompt = before.to_vec();
            with_prompt.push(Step::Message(&u3));
            let read_back = turns_of("t", &with_prompt, Path::new("/w"))
                .last()
                .map(|t| t.id.clone())
                .unwrap();
            assert_eq!(next_turn_id("t", before), read_back, "before, at {end}");
            assert_eq!(
                next_turn_id("t", &with_prompt),
                read_back,
                "after, at {end}"
            );
        }
    }

    #[test]
    fn groups_messages_into_turns_with_items() {
        let messages = vec![
            Message::User(UserMessage {
                content: vec![ContentBlock::text("run ls")],
                timestamp: 1000,
            }),
            assistant(
                vec![ContentBlock::ToolCall {
                    id: "c1".into(),
                    name: "bash".into(),
                    arguments: json!({"command": "ls"}),
                }],
                StopReason::ToolUse,
            ),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "c1".into(),
                tool_name: "bash".into(),
                content: vec![ContentBlock::text("a\n")],
                details: Some(json!({"exitCode": 0})),
                is_error: false,
                timestamp: 1500,
            }),
            assistant(vec![ContentBlock::text("done")], StopReason::Stop),
            Message::User(UserMessage {
                content: vec![ContentBlock::text("again")],
                timestamp: 3000,
            }),
            assistant(vec![], StopReason::Aborted),
        ];
        let turns = turns_of("t", &message_steps(&messages), Path::new("/w"));
        assert_eq!(turns.len(), 2);
        let kinds: Vec<String> = turns[0]
            .items
            .iter()
            .map(|i| {
                serde_json::to_value(i).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        assert_eq!(kinds, ["userMessage", "commandExecution", "agentMessage"]);
        assert_eq!(turns[1].status, TurnStatus::Interrupted);
        let s = summarize(turns[0].clone());
        assert_eq!(s.items.len(), 1);
        assert_eq!(s.items_view, TurnItemsView::Summary);
        // The ids agree with the turns listed.
        assert_eq!(
            turn_of_call("t", &message_steps(&messages), "c1").as_deref(),
            Some("t-turn-0")
        );
        assert_eq!(turn_of_call("t", &message_steps(&messages), "c9"), None);
        assert_eq!(
            last_turn_id("t", &message_steps(&messages)),
            Some(turns[1].id.clone())
        );
        assert_eq!(
            last_turn_id("t", &message_steps(&messages[..4])),
            Some(turns[0].id.clone())
        );
        assert_eq!(last_turn_id("t", &message_steps(&[])), None);
    }
}
