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

use keel_protocol::{AgentEvent, Message};
use tokio_util::sync::CancellationToken;

use crate::context::Interrupted;
use crate::ctx::RunCtx;
use crate::tool_exec::execute_interrupted;

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
