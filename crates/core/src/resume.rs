//! Resuming a turn that a crash or kill cut off.
//!
//! A session opened again may end with an assistant message whose tool
//! calls have no results: keel stopped while a call waited for approval or
//! ran. [`interrupted`] finds those calls on the active branch; the resume
//! turn ([`resume_turn`]) answers each one exactly once — through the gate,
//! which honours a decision made while keel was down, announces a request
//! that is still pending again, and never runs a call twice that may have
//! happened (see [`crate::tool_exec::execute_interrupted`]) — then the run
//! goes on as after any tool calls: the model hears the results. Nothing of
//! the cut-off turn is written again; only the missing results are added.
//! It must not know about front ends or the approvals engine.

use std::borrow::Borrow;
use std::collections::HashSet;

use keel_protocol::{AgentEvent, AssistantMessage, Message};
use tokio_util::sync::CancellationToken;

use crate::run::RunCtx;
use crate::tool_exec::{Call, execute_interrupted};

/// The cut-off turn: its assistant message and the calls without results.
#[derive(Debug, Clone)]
pub(crate) struct Interrupted {
    pub message: AssistantMessage,
    pub calls: Vec<Call>,
}

/// The unanswered calls of the active branch's last assistant message,
/// when nothing but results of its calls follows it.
pub(crate) fn interrupted<M: Borrow<Message>>(messages: &[M]) -> Option<Interrupted> {
    let (at, message) = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m.borrow() {
            Message::Assistant(a) => Some((i, a)),
            Message::User(_) | Message::ToolResult(_) => None,
        })?;
    let mut answered = HashSet::new();
    for later in &messages[at + 1..] {
        match later.borrow() {
            Message::ToolResult(r) => {
                answered.insert(r.tool_call_id.as_str());
            }
            // The conversation went on after the message.
            Message::User(_) | Message::Assistant(_) => return None,
        }
    }
    let calls: Vec<Call> = message
        .tool_calls()
        .into_iter()
        .filter(|(id, _, _)| !answered.contains(id))
        .map(|(id, name, args)| (id.to_owned(), name.to_owned(), args.clone()))
        .collect();
    (!calls.is_empty()).then(|| Interrupted {
        message: message.clone(),
        calls,
    })
}

/// The resume turn: `turn_start`, a result for every unanswered call,
/// `turn_end`. Returns whether the run goes on (false after an abort or a
/// decline that stops the turn).
pub(crate) async fn resume_turn(
    ctx: &RunCtx,
    interrupted: Interrupted,
    cancel: &CancellationToken,
) -> bool {
    ctx.emit(AgentEvent::TurnStart).await;
    let outcome = execute_interrupted(ctx, &interrupted.calls, cancel).await;
    ctx.flush_log().await;
    ctx.emit(AgentEvent::TurnEnd {
        message: Message::Assistant(interrupted.message),
        tool_results: outcome.results,
    })
    .await;
    !cancel.is_cancelled()
}
