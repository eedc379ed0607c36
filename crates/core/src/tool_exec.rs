//! Runs the tool calls of one assistant message.
//!
//! Calls run one after another. Before each one the approval gate is asked;
//! a held call is made durable (the session log is flushed) and then waited
//! on, and only once it is decided does `tool_execution_start` go out. While
//! a tool runs its partial results are forwarded as `tool_execution_update`;
//! an approved call's result is reported back to the gate. A queued steering
//! message in `immediate` interrupt mode skips the remaining calls; an abort
//! answers the current and remaining calls with an "aborted" result (and has
//! the gate cancel what the turn waited on); a denial with `stop_turn` ends
//! the run after its call. Every call gets exactly one result message, so
//! the history the model sees stays valid. The unanswered calls of a turn
//! cut off by a crash or kill run here too, once the gate has said what it
//! knows of each ([`execute_interrupted`]), so none runs twice.

use std::collections::HashMap;

use keel_protocol::{
    AgentEvent, ContentBlock, InterruptMode, Message, StopReason, ToolResult, ToolResultMessage,
};
use std::sync::Arc;

use keel_protocol::SandboxGrant;
use keel_sandbox::Refusal;
use keel_tools::{SandboxSpec, Tool, ToolContext, UpdateSink};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::TOOL_UPDATE_CAPACITY;
use crate::ctx::RunCtx;
use crate::deps::{GateDecision, Recovery, ToolCallInfo};
use crate::sandboxed;
use crate::state::lock;

/// Text of the result given to a call that was cut short by an abort.
pub const ABORTED_TEXT: &str = "Tool execution was aborted";
/// Text of the result given to a call skipped for a steering message.
pub const SKIPPED_TEXT: &str = "Skipped due to queued user message.";

/// `(id, name, arguments)` of one call.
pub(crate) use crate::context::Call;

#[derive(Default)]
pub(crate) struct ToolCallOutcome {
    pub results: Vec<Message>,
}

/// Text of the result given to a call that may have been running when keel
/// stopped, about which nothing was stored, and that could change something.
pub const INTERRUPTED_TEXT: &str = "This call was cut off when keel stopped (a crash or a kill) \
     and keel was started again; it may or may not have happened. Check its effects before \
     trying again.";

/// Executes `calls` in order.
pub(crate) async fn execute_tool_calls(
    ctx: &RunCtx,
    calls: &[Call],
    invalid_args: &HashMap<String, String>,
    cancel: &CancellationToken,
) -> ToolCallOutcome {
    execute(ctx, calls, invalid_args, cancel, false).await
}

/// Executes the unanswered `calls` of a turn cut off by a crash or kill,
/// in order. Each asks the gate first what it knows
/// ([`ApprovalGate::recover`](crate::ApprovalGate::recover)): a stored
/// request goes through the gate as usual (held again, or its decision
/// honoured once); a known outcome is given without running; a call with
/// nothing stored runs when it is the first one (the one that may have
/// been running) only if it is read-only, else it is answered with
/// [`INTERRUPTED_TEXT`]; the calls after it never started and run as usual.
pub(crate) async fn execute_interrupted(
    ctx: &RunCtx,
    calls: &[Call],
    cancel: &CancellationToken,
) -> ToolCallOutcome {
    execute(ctx, calls, &HashMap::new(), cancel, true).await
}

async fn execute(
    ctx: &RunCtx,
    calls: &[Call],
    invalid_args: &HashMap<String, String>,
    cancel: &CancellationToken,
    recovering: bool,
) -> ToolCallOutcome {
    let mut outcome = ToolCallOutcome::default();
    for (index, (id, name, args)) in calls.iter().enumerate() {
        let early = if cancel.is_cancelled() {
            Some((ToolResult::text(ABORTED_TEXT), true))
        } else if steering_interrupts(ctx) {
            Some((ToolResult::text(SKIPPED_TEXT), true))
        } else if let Some(problem) = invalid_args.get(id) {
            Some((
                ToolResult::text(format!("Invalid arguments for tool {name}: {problem}")),
                true,
            ))
        } else if recovering {
            recovered(ctx, id, name, args, index == 0).await
        } else {
            None
        };
        let (result, is_error) = match early {
            Some(early) => {
                emit_start(ctx, id, name, args).await;
                early
            }
            None => run_one(ctx, id, name, args, cancel).await,
        };
        outcome
            .results
            .push(finish_call(ctx, id, name, result, is_error).await);
    }
    outcome
}

async fn emit_start(ctx: &RunCtx, id: &str, name: &str, args: &Value) {
    ctx.emit(AgentEvent::ToolExecutionStart {
        tool_call_id: id.to_owned(),
        tool_name: name.to_owned(),
        args: args.clone(),
    })
    .await;
}

/// Answers calls of a message that failed or was aborted while streaming.
pub(crate) async fn answer_unrun(
    ctx: &RunCtx,
    calls: &[Call],
    stop: StopReason,
) -> ToolCallOutcome {
    let text = match stop {
        StopReason::Aborted => ABORTED_TEXT,
        _ => "Tool call was not executed because the model response failed",
    };
    let mut outcome = ToolCallOutcome::default();
    for (id, name, _) in calls {
        outcome
            .results
            .push(commit_result(ctx, id, name, ToolResult::text(text), true).await);
    }
    outcome
}

/// The result of an interrupted call that must not run (again), or `None`
/// when it goes through the gate and runs as usual. `first`: the call may
/// have been running when keel stopped.
async fn recovered(
    ctx: &RunCtx,
    id: &str,
    name: &str,
    args: &Value,
    first: bool,
) -> Option<(ToolResult, bool)> {
    let info = call_info(ctx, id, name, args);
    match ctx.deps.gate.recover(&info).await {
        Recovery::Recorded => None,
        Recovery::Unrecorded { read_only } => {
            (first && !read_only).then(|| (ToolResult::text(INTERRUPTED_TEXT), true))
        }
        Recovery::Answer { text, is_error } => Some((ToolResult::text(text), is_error)),
    }
}

fn call_info(ctx: &RunCtx, id: &str, name: &str, args: &Value) -> ToolCallInfo {
    let (session_id, cwd, tool) = {
        let s = lock(&ctx.shared);
        (
            s.config.session_id.clone(),
            s.config.cwd.clone(),
            s.tools.iter().find(|t| t.name() == name).cloned(),
        )
    };
    // Resolved once, here: the gate judges this file and the tool writes it.
    let write_target = tool.as_ref().and_then(|t| t.write_target(&cwd, args));
    let hints = tool.as_ref().and_then(|t| t.hints());
    ToolCallInfo {
        session_id,
        call_id: id.to_owned(),
        tool_name: name.to_owned(),
        args: args.clone(),
        cwd,
        write_target,
        hints,
    }
}

fn steering_interrupts(ctx: &RunCtx) -> bool {
    let s = lock(&ctx.shared);
    s.config.interrupt_mode == InterruptMode::Immediate && s.queues.has_steering()
}

/// Asks the gate about one call; a held call is made durable, then waited
/// on. Never returns `Held`. A cancelled run ends the wait (after having the
/// gate cancel the session's waiting requests when the user aborted).
async fn decide(ctx: &RunCtx, info: &ToolCallInfo, cancel: &CancellationToken) -> GateDecision {
    let decision = judge(ctx, info, cancel).await;
    let lets_run = matches!(
        decision,
        GateDecision::Allow | GateDecision::Covered | GateDecision::Approved { .. }
    );
    match &ctx.deps.fence {
        Some(fence) if lets_run => match fence.check().await {
            Ok(()) => decision,
            Err(message) => GateDecision::Deny {
                message,
                stop_turn: true,
            },
        },
        _ => decision,
    }
}

/// The gate's decision on a call, waited for when it is held.
async fn judge(ctx: &RunCtx, info: &ToolCallInfo, cancel: &CancellationToken) -> GateDecision {
    let gate = ctx.deps.gate.clone();
    let decision = gate.check(info).await;
    let GateDecision::Held { approval_id } = decision else {
        return decision;
    };
    // The request is stored; what the session logged so far (the assistant
    // message that made the call) is on disk before anyone hears of it.
    ctx.flush_log().await;
    let decided = if cancel.is_cancelled() {
        None
    } else {
        tokio::select! {
            biased;
            d = gate.wait(info, &approval_id) => Some(d),
            _ = cancel.cancelled() => None,
        }
    };
    match decided {
        Some(GateDecision::Held { approval_id }) => GateDecision::deny(format!(
            "The approval gate returned request {approval_id} still undecided; the call did not run."
        )),
        Some(d) => d,
        None => {
            if lock(&ctx.shared).abort_requested {
                gate.abort(&info.session_id).await;
            }
            GateDecision::deny(ABORTED_TEXT)
        }
    }
}

async fn run_one(
    ctx: &RunCtx,
    id: &str,
    name: &str,
    args: &Value,
    cancel: &CancellationToken,
) -> (ToolResult, bool) {
    let tool = lock(&ctx.shared)
        .tools
        .iter()
        .find(|t| t.name() == name)
        .cloned();
    let Some(tool) = tool else {
        emit_start(ctx, id, name, args).await;
        return (ToolResult::text(format!("Tool {name} not found")), true);
    };
    let mut info = call_info(ctx, id, name, args);
    let decision = decide(ctx, &info, cancel).await;
    crate::approval_entry::record(ctx, &info, &decision).await;
    let lets_run = matches!(
        decision,
        GateDecision::Allow | GateDecision::Covered | GateDecision::Approved { .. }
    );
    // Whoever decided may have changed the input the call runs with.
    if lets_run && let Some(rewritten) = ctx.deps.gate.rewrite(&info).await {
        info = call_info(ctx, id, name, &rewritten);
    }
    emit_start(ctx, id, name, &info.args).await;
    let approval_id = match decision {
        GateDecision::Allow => None,
        GateDecision::Covered => Some(None),
        GateDecision::Approved { approval_id } => Some(Some(approval_id)),
        GateDecision::Deny { message, stop_turn } => {
            if stop_turn {
                cancel.cancel();
            }
            return (ToolResult::text(message), true);
        }
        GateDecision::Held { approval_id } => {
            return (
                ToolResult::text(format!(
                    "The approval request {approval_id} is still undecided; the call did not run."
                )),
                true,
            );
        }
    };
    // A person's yes (now, or through a rule they saved) widens the
    // sandbox by what it covered, for this call only.
    let grant = match approval_id {
        Some(_) => ctx.deps.gate.grant(&info).await,
        None => SandboxGrant::default(),
    };
    let spec = sandboxed::spec_for(ctx, &info, grant);
    let (mut result, mut is_error, refusal) =
        run_checked(ctx, &tool, &info, spec.clone(), cancel).await;
    if let (Some(refusal), Some(spec)) = (refusal, spec) {
        (result, is_error) =
            beyond_the_sandbox(ctx, &tool, &info, spec, refusal, result, cancel).await;
    }
    let result = scrub(result);
    if let Some(Some(approval_id)) = approval_id {
        ctx.deps
            .gate
            .finish(&info, &approval_id, &result_text(&result), is_error)
            .await;
    }
    (result, is_error)
}

/// Runs the call under `spec`, unless keel's own write is refused first;
/// says what the sandbox refused when it stopped the call.
async fn run_checked(
    ctx: &RunCtx,
    tool: &Arc<dyn Tool>,
    info: &ToolCallInfo,
    spec: Option<SandboxSpec>,
    cancel: &CancellationToken,
) -> (ToolResult, bool, Option<Refusal>) {
    if let Some(refusal) = sandboxed::write_refusal(ctx, spec.as_ref(), info) {
        return (ToolResult::default(), true, Some(refusal));
    }
    let (result, is_error) = run_tool(ctx, tool, info, spec.clone(), cancel).await;
    let refusal = if is_error && !cancel.is_cancelled() {
        sandboxed::refused(ctx, spec.as_ref(), &result_text(&result))
    } else {
        None
    };
    (result, is_error, refusal)
}

/// A call the sandbox stopped: the model is told what was refused, and a
/// person is asked (through the durable gate) whether it may run again
/// with the missing permission; a yes runs it once more with just that.
async fn beyond_the_sandbox(
    ctx: &RunCtx,
    tool: &Arc<dyn Tool>,
    info: &ToolCallInfo,
    spec: SandboxSpec,
    refusal: Refusal,
    mut result: ToolResult,
    cancel: &CancellationToken,
) -> (ToolResult, bool) {
    let blocked = sandboxed::blocked_text(&spec.policy, &refusal);
    let Some(ask) = sandboxed::escalation(info, &refusal) else {
        append_text(&mut result, &blocked);
        return (result, true);
    };
    let decision = decide(ctx, &ask, cancel).await;
    let approval_id = match decision {
        GateDecision::Approved { approval_id } => Some(approval_id),
        GateDecision::Covered => None,
        GateDecision::Allow | GateDecision::Held { .. } => {
            append_text(
                &mut result,
                &format!("{blocked} It was not run again: nobody was asked."),
            );
            return (result, true);
        }
        GateDecision::Deny { message, stop_turn } => {
            if stop_turn {
                cancel.cancel();
            }
            append_text(
                &mut result,
                &format!(
                    "{blocked} A person was asked to let it run again with {}; it was not: {message}",
                    refusal.grant().describe()
                ),
            );
            return (result, true);
        }
    };
    let asked = ctx.deps.gate.grant(&ask).await;
    let mut grant = spec.grant.clone();
    grant.widen(asked);
    let widened = SandboxSpec { grant, ..spec };
    let (mut again, is_error, still) = run_checked(ctx, tool, info, Some(widened), cancel).await;
    if let Some(still) = still {
        let text = sandboxed::blocked_text(&spec_policy(ctx), &still);
        append_text(&mut again, &text);
    }
    let again = scrub(again);
    if let Some(approval_id) = approval_id {
        ctx.deps
            .gate
            .finish(&ask, &approval_id, &result_text(&again), is_error)
            .await;
    }
    (again, is_error)
}

/// Adds `text` to the result's last text (a paragraph of its own), or
/// as its first block.
fn append_text(result: &mut ToolResult, text: &str) {
    match result.content.last_mut() {
        Some(ContentBlock::Text { text: last }) => {
            last.push_str("\n\n");
            last.push_str(text);
        }
        _ => result.content.push(ContentBlock::text(text)),
    }
}

fn spec_policy(ctx: &RunCtx) -> keel_protocol::SandboxPolicy {
    lock(&ctx.shared).config.sandbox.clone().unwrap_or_default()
}

/// Runs the tool once, forwarding its partial results.
async fn run_tool(
    ctx: &RunCtx,
    tool: &Arc<dyn Tool>,
    info: &ToolCallInfo,
    sandbox: Option<SandboxSpec>,
    cancel: &CancellationToken,
) -> (ToolResult, bool) {
    let (id, name, args) = (&info.call_id, &info.tool_name, &info.args);
    let scratch_dir = lock(&ctx.shared).config.scratch_dir.clone();
    let (update_tx, mut update_rx) = mpsc::channel::<ToolResult>(TOOL_UPDATE_CAPACITY);
    let updates: UpdateSink = std::sync::Arc::new(move |partial: ToolResult| {
        // Partial results are advisory; when the consumer lags, drop one.
        let _ = update_tx.try_send(partial);
    });
    let tool_cancel = cancel.child_token();
    let tool_ctx = ToolContext {
        call_id: id.clone(),
        cwd: info.cwd.clone(),
        fs: ctx.deps.fs.clone(),
        process: ctx.deps.process.clone(),
        cancel: tool_cancel.clone(),
        updates,
        scratch_dir,
        write_target: info.write_target.clone(),
        sandbox,
        asker: ctx.deps.asker.clone(),
    };
    let exec = tool.execute(&tool_ctx, args.clone());
    tokio::pin!(exec);
    let result = loop {
        tokio::select! {
            r = &mut exec => break r,
            Some(partial) = update_rx.recv() => emit_update(ctx, id, name, args, partial).await,
        }
    };
    // Partial results sent just before the tool returned still go out, in order.
    while let Ok(partial) = update_rx.try_recv() {
        emit_update(ctx, id, name, args, partial).await;
    }
    if cancel.is_cancelled() {
        (ToolResult::text(ABORTED_TEXT), true)
    } else {
        match result {
            Ok(out) => (out.result, out.is_error),
            Err(keel_tools::Error::Aborted) => (ToolResult::text(ABORTED_TEXT), true),
            Err(e) => (ToolResult::text(e.to_string()), true),
        }
    }
}

/// The secrets of keel's environment (provider keys, tokens, database
/// passwords), read again only when a new secret variable is named.
fn secrets() -> std::sync::Arc<keel_tools::Scrubber> {
    type Cached = Option<(u64, std::sync::Arc<keel_tools::Scrubber>)>;
    static SECRETS: std::sync::Mutex<Cached> = std::sync::Mutex::new(None);
    let generation = keel_tools::child_env::secrets_generation();
    let mut cached = SECRETS.lock().unwrap_or_else(|e| e.into_inner());
    match &*cached {
        Some((g, s)) if *g == generation => s.clone(),
        _ => {
            let s = std::sync::Arc::new(keel_tools::Scrubber::from_env());
            *cached = Some((generation, s.clone()));
            s
        }
    }
}

/// `result` with every known secret value replaced by `[redacted]`, before
/// it is shown, stored, audited or sent to the model.
fn scrub(mut result: ToolResult) -> ToolResult {
    let secrets = secrets();
    if secrets.is_empty() {
        return result;
    }
    for block in &mut result.content {
        if let ContentBlock::Text { text } = block
            && let Some(clean) = secrets.scrub(text)
        {
            *text = clean;
        }
    }
    if let Some(details) = result.details.take() {
        let raw = details.to_string();
        result.details = match secrets.scrub(&raw) {
            Some(clean) => serde_json::from_str(&clean).ok(),
            None => Some(details),
        };
    }
    result
}

/// The text parts of a result, for the approval record.
fn result_text(result: &ToolResult) -> String {
    keel_protocol::joined_text(&result.content)
}

async fn emit_update(ctx: &RunCtx, id: &str, name: &str, args: &Value, partial: ToolResult) {
    ctx.emit(AgentEvent::ToolExecutionUpdate {
        tool_call_id: id.to_owned(),
        tool_name: name.to_owned(),
        args: args.clone(),
        partial_result: scrub(partial),
    })
    .await;
}

/// Announces the end of an executed call and commits its result.
async fn finish_call(
    ctx: &RunCtx,
    id: &str,
    name: &str,
    result: ToolResult,
    is_error: bool,
) -> Message {
    ctx.emit(AgentEvent::ToolExecutionEnd {
        tool_call_id: id.to_owned(),
        tool_name: name.to_owned(),
        result: result.clone(),
        is_error,
    })
    .await;
    commit_result(ctx, id, name, result, is_error).await
}

/// Commits the result message of a call (announced with message_start/end).
async fn commit_result(
    ctx: &RunCtx,
    id: &str,
    name: &str,
    result: ToolResult,
    is_error: bool,
) -> Message {
    let message = Message::ToolResult(ToolResultMessage {
        tool_call_id: id.to_owned(),
        tool_name: name.to_owned(),
        content: if result.content.is_empty() {
            vec![ContentBlock::text("(no output)")]
        } else {
            result.content
        },
        details: result.details,
        is_error,
        timestamp: ctx.deps.clock.now_ms(),
    });
    ctx.emit(AgentEvent::MessageStart {
        message: message.clone(),
    })
    .await;
    ctx.commit_message(message.clone()).await;
    message
}
