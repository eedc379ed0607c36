//! One run of the agent: from a prompt to `agent_end`.
//!
//! ```text
//! agent_start
//!   turn_start, pending user messages, assistant message (streamed),
//!   tool calls (each gated, executed, answered), turn_end   ← repeated while
//!   the model calls tools or steering messages are queued
//!   follow-up messages start more turns when the agent would stop
//!   (then todo reminders, or the clearing of a finished list: `todo.rs`)
//! agent_end
//! ```
//!
//! A run may also start by resuming a turn a crash or kill cut off
//! ([`Start::Resume`]): its first turn answers the unanswered tool calls
//! (no new user message, no model call), then the loop goes on as usual.
//!
//! Durable state is written before it is announced: every message is appended
//! to the session log before its `message_end`, and the log is flushed before
//! `turn_end` and `agent_end`.
//!
//! A model call that fails with a transient error is retried inside the
//! turn (see `stream_assistant`): the host sees `message_start`, perhaps
//! some deltas, then `auto_retry_start` (drop the message in progress),
//! then a new `message_start` for the next attempt; `auto_retry_end`
//! comes before the final `message_end`. The run still ends with one
//! `agent_end`.
//!
//! Before each model call the context is compacted when it has passed the
//! threshold (`auto_compaction_start/end` inside the turn; an abort then
//! ends the turn with an aborted message). A call that fails with
//! `contextWindowExceeded` ends its turn; the failed message is left off
//! the branch, the conversation is compacted (`willRetry: true`) and a new
//! turn makes the call again, once per run.

use std::sync::Arc;

use futures::StreamExt;
use keel_llm::{ErrorKind, ModelRequest};
use keel_protocol::{
    AgentEvent, AssistantMessage, CompactionReason, Message, StopReason, UserInput,
};
use tokio_util::sync::CancellationToken;

use crate::assemble::MessageBuilder;
use crate::ctx::RunCtx;
use crate::prompt::system_prompt;
use crate::state::lock;
use crate::tool_exec::{ToolCallOutcome, execute_tool_calls};

/// How a run starts.
pub(crate) enum Start {
    /// With a new user message (and the context queued ahead of it).
    Prompt(UserInput),
    /// With the unanswered tool calls of a turn a crash or kill cut off
    /// (see [`crate::resume`]); no user message is added.
    Resume,
}

/// Runs the agent from `start` until it stops, fails or is aborted.
pub(crate) async fn run_agent(ctx: RunCtx, start: Start, cancel: CancellationToken) {
    ctx.emit(AgentEvent::AgentStart).await;
    let start_len = {
        let mut guard = lock(&ctx.shared);
        let s = &mut *guard;
        s.context.messages_mut(&s.tree).len()
    };
    let mut stopped = false;
    let mut pending: Vec<Message> = match start {
        Start::Prompt(prompt) => {
            let context = std::mem::take(&mut lock(&ctx.shared).pending_context);
            let mut pending: Vec<Message> =
                context.into_iter().map(|m| ctx.user_message(m)).collect();
            pending.push(ctx.user_message(prompt));
            pending
        }
        Start::Resume => {
            let interrupted = {
                let s = lock(&ctx.shared);
                s.context.view(&s.tree).interrupted()
            };
            if let Some(interrupted) = interrupted {
                stopped = !crate::resume::resume_turn(&ctx, interrupted, &cancel).await;
            }
            let steering = lock(&ctx.shared).queues.take_steering();
            steering.into_iter().map(|m| ctx.user_message(m)).collect()
        }
    };
    // A call that overflowed the context is made again once per run, after
    // compacting.
    let mut overflow_retried = false;
    let mut todo_reminders = 0u32;

    'outer: loop {
        if std::mem::take(&mut stopped) {
            lock(&ctx.shared).running = false;
            break;
        }
        loop {
            ctx.emit(AgentEvent::TurnStart).await;
            let prompted = !pending.is_empty();
            for message in pending.drain(..) {
                ctx.emit(AgentEvent::MessageStart {
                    message: message.clone(),
                })
                .await;
                ctx.commit_message(message).await;
            }
            if prompted && lock(&ctx.shared).config.sync_prompts {
                ctx.flush_log().await;
            }

            let assistant = if crate::compaction::due(&ctx, 0)
                && crate::compaction::run(
                    &ctx,
                    CompactionReason::Threshold,
                    None,
                    &cancel,
                    None,
                    false,
                )
                .await
                    == Err(crate::compaction::CompactError::Aborted)
            {
                let builder = start_message(&ctx).await;
                finish_message(&ctx, builder, Some(Failure::Aborted), None).await
            } else {
                stream_assistant(&ctx, &cancel).await
            };
            let stop = assistant.stop_reason;
            if stop == StopReason::Error
                && !overflow_retried
                && !cancel.is_cancelled()
                && assistant.message.error_kind.as_deref()
                    == Some(ErrorKind::ContextWindowExceeded.as_wire())
                && lock(&ctx.shared).auto_compaction
            {
                overflow_retried = true;
                ctx.flush_log().await;
                ctx.emit(AgentEvent::TurnEnd {
                    message: Message::Assistant(assistant.message.clone()),
                    tool_results: Vec::new(),
                })
                .await;
                let compacted = crate::compaction::run(
                    &ctx,
                    CompactionReason::Overflow,
                    None,
                    &cancel,
                    assistant.entry_id.as_deref(),
                    true,
                )
                .await;
                if compacted.is_ok() && !cancel.is_cancelled() {
                    continue;
                }
                lock(&ctx.shared).running = false;
                break 'outer;
            }
            let calls: Vec<_> = assistant
                .tool_calls()
                .into_iter()
                .map(|(id, name, args)| (id.to_owned(), name.to_owned(), args.clone()))
                .collect();

            let outcome = if calls.is_empty() {
                ToolCallOutcome::default()
            } else if matches!(stop, StopReason::Error | StopReason::Aborted) {
                // The calls never ran: answer each so the history stays valid.
                crate::tool_exec::answer_unrun(&ctx, &calls, stop).await
            } else {
                execute_tool_calls(&ctx, &calls, &assistant.invalid_args, &cancel).await
            };

            ctx.flush_log().await;
            ctx.emit(AgentEvent::TurnEnd {
                message: Message::Assistant(assistant.message),
                tool_results: outcome.results,
            })
            .await;

            if matches!(stop, StopReason::Error | StopReason::Aborted) || cancel.is_cancelled() {
                lock(&ctx.shared).running = false;
                break 'outer;
            }
            let steering = lock(&ctx.shared).queues.take_steering();
            if !steering.is_empty() {
                emit_queue_update(&ctx).await;
                pending = steering.into_iter().map(|m| ctx.user_message(m)).collect();
                continue;
            }
            if calls.is_empty() {
                break;
            }
        }
        // The last look at the queues and giving up the session happen under
        // one lock: a message queued after this point starts a new run
        // instead of waiting in a queue no run drains.
        let mut todo_step = crate::todo::AtStop::Stop;
        let next = {
            let mut s = lock(&ctx.shared);
            let steering = s.queues.take_steering();
            let next = if steering.is_empty() {
                s.queues.take_follow_up()
            } else {
                steering
            };
            if next.is_empty() {
                todo_step = crate::todo::at_stop(&mut s, &mut todo_reminders);
                s.running = todo_step.continues();
            }
            next
        };
        if next.is_empty() {
            let Some(reminder) = crate::todo::announce(&ctx, todo_step).await else {
                break;
            };
            pending = vec![ctx.user_message(reminder)];
            continue;
        }
        emit_queue_update(&ctx).await;
        pending = next.into_iter().map(|m| ctx.user_message(m)).collect();
    }

    ctx.flush_log().await;
    let messages = {
        let mut guard = lock(&ctx.shared);
        let s = &mut *guard;
        let messages = s.context.messages_mut(&s.tree);
        messages[start_len.min(messages.len())..].to_vec()
    };
    ctx.emit(AgentEvent::AgentEnd { messages }).await;
    // Settled unless a message queued meanwhile starts another run.
    let settled = {
        let s = lock(&ctx.shared);
        let (steering, follow_up) = s.queues.snapshot();
        steering.is_empty() && follow_up.is_empty()
    };
    if settled {
        ctx.emit(AgentEvent::AgentSettled).await;
    }
}

async fn emit_queue_update(ctx: &RunCtx) {
    let (steering, follow_up) = lock(&ctx.shared).queues.snapshot();
    ctx.emit(AgentEvent::QueueUpdate {
        steering,
        follow_up,
    })
    .await;
}

/// The configured system prompt, or the generated one for these tools.
pub(crate) fn effective_system_prompt(
    config: &crate::config::SessionConfig,
    tools: &[keel_protocol::ToolSpec],
    today: &str,
) -> String {
    config.system_prompt.clone().unwrap_or_else(|| {
        system_prompt(&config.cwd, today, tools, config.project_context.as_deref())
    })
}

/// The finished assistant message and what was wrong with its tool calls.
pub(crate) struct StreamedAssistant {
    pub message: AssistantMessage,
    /// The session entry the message was written as.
    pub entry_id: Option<String>,
    pub stop_reason: StopReason,
    pub invalid_args: std::collections::HashMap<String, String>,
}

impl StreamedAssistant {
    fn tool_calls(&self) -> Vec<(&str, &str, &serde_json::Value)> {
        self.message.tool_calls()
    }
}

/// Streams one assistant message, announcing deltas, and commits it (also
/// when it failed or was aborted).
///
/// A call that fails with a transient error is retried while the session's
/// auto-retry is on and the [`RetryPolicy`](crate::RetryPolicy) allows: the
/// partial message is dropped without a `message_end` (nothing of it is
/// committed), `auto_retry_start` announces the wait, and the next attempt
/// starts a new message with `message_start`. `auto_retry_end` closes the
/// series before the final `message_end`. An abort during the wait ends the
/// message as aborted; [`abort_retry`](crate::SessionHandle::abort_retry)
/// ends it with the error that caused the retry.
async fn stream_assistant(ctx: &RunCtx, cancel: &CancellationToken) -> StreamedAssistant {
    let mut retries = 0u32;
    loop {
        let mut builder = start_message(ctx).await;
        let (request, provider) = model_request(ctx);
        let failure = consume_stream(ctx, provider.as_ref(), &mut builder, request, cancel).await;
        let error = match failure {
            Some(Failure::Model(e)) => e,
            other => {
                if retries > 0 {
                    let final_error = match &other {
                        Some(Failure::Aborted) => Some(ABORTED_MESSAGE.to_owned()),
                        Some(Failure::Model(e)) => Some(e.to_string()),
                        None => None,
                    };
                    return finish_message(ctx, builder, other, Some((retries, final_error))).await;
                }
                return finish_message(ctx, builder, other, None).await;
            }
        };
        let Some((delay, max)) = retry_delay(ctx, retries + 1, &error) else {
            let series = (retries > 0).then(|| (retries, Some(error.to_string())));
            return finish_message(ctx, builder, Some(Failure::Model(error)), series).await;
        };
        retries += 1;
        // The wait is cancellable before it is announced, so an
        // `abort_retry` sent on seeing `auto_retry_start` always lands.
        let wait = CancellationToken::new();
        lock(&ctx.shared).retry_wait = Some(wait.clone());
        tracing::info!(attempt = retries, delay_ms = delay.as_millis() as u64, error = %error,
            "model call failed; retrying");
        ctx.emit(AgentEvent::AutoRetryStart {
            attempt: retries,
            max_attempts: max,
            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            error_message: error.to_string(),
            error_kind: Some(error.kind.as_wire().to_owned()),
        })
        .await;
        let waited = tokio::select! {
            biased;
            _ = cancel.cancelled() => Some(Failure::Aborted),
            _ = wait.cancelled() => Some(Failure::Model(error)),
            _ = ctx.deps.clock.sleep(delay) => None,
        };
        lock(&ctx.shared).retry_wait = None;
        if let Some(failure) = waited {
            let final_error = match &failure {
                Failure::Aborted => ABORTED_MESSAGE.to_owned(),
                Failure::Model(e) => e.to_string(),
            };
            let builder = start_message(ctx).await;
            return finish_message(
                ctx,
                builder,
                Some(failure),
                Some((retries, Some(final_error))),
            )
            .await;
        }
    }
}

const ABORTED_MESSAGE: &str = "Request was aborted";

/// The wait before retry `attempt` and the most retries, when the session
/// retries this error.
fn retry_delay(
    ctx: &RunCtx,
    attempt: u32,
    error: &keel_llm::Error,
) -> Option<(std::time::Duration, u32)> {
    let (enabled, policy, session_id) = {
        let s = lock(&ctx.shared);
        (s.auto_retry, s.config.retry, s.config.session_id.clone())
    };
    if !enabled {
        return None;
    }
    let seed = crate::retry::jitter_seed(&session_id, ctx.deps.clock.now_ms(), attempt);
    policy
        .delay(attempt, error, seed)
        .map(|d| (d, policy.max_retries))
}

/// The request of the next model call and the provider to send it to.
fn model_request(ctx: &RunCtx) -> (ModelRequest, Arc<dyn keel_llm::Provider>) {
    let mut guard = lock(&ctx.shared);
    let s = &mut *guard;
    let compact = s.config.model.compact_tools;
    let tools: Vec<_> = s
        .tools
        .iter()
        .map(|t| {
            let spec = t.spec();
            if compact {
                keel_tools::compact::compact_spec(&spec)
            } else {
                spec
            }
        })
        .collect();
    let system = effective_system_prompt(&s.config, &tools, &ctx.deps.clock.today());
    (
        ModelRequest {
            model: s.config.model.id.clone(),
            system_prompt: system,
            messages: s.context.messages_mut(&s.tree).clone(),
            tools,
            thinking_level: s.config.thinking_level,
            max_output_tokens: s.config.model.max_output_tokens,
            output_schema: s.config.output_schema.clone(),
        },
        s.provider.clone(),
    )
}

/// Announces a new, empty assistant message of the current model.
async fn start_message(ctx: &RunCtx) -> MessageBuilder {
    let model = lock(&ctx.shared).config.model.clone();
    let builder = MessageBuilder::new(AssistantMessage {
        content: Vec::new(),
        api: model.api.clone(),
        provider: model.provider.clone(),
        model: model.id.clone(),
        usage: Default::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        error_kind: None,
        timestamp: ctx.deps.clock.now_ms(),
        response_id: None,
    });
    ctx.emit(AgentEvent::MessageStart {
        message: Message::Assistant(builder.message.clone()),
    })
    .await;
    builder
}

/// Closes the open blocks, records the failure, prices the usage, ends a
/// retry series (`(retries, final error)`) and commits the message.
async fn finish_message(
    ctx: &RunCtx,
    mut builder: MessageBuilder,
    failure: Option<Failure>,
    series: Option<(u32, Option<String>)>,
) -> StreamedAssistant {
    for delta in builder.close() {
        ctx.emit(AgentEvent::MessageUpdate {
            assistant_message_event: delta,
        })
        .await;
    }
    if let Some(failure) = failure {
        match failure {
            Failure::Aborted => {
                builder.message.stop_reason = StopReason::Aborted;
                builder.message.error_message = Some(ABORTED_MESSAGE.to_owned());
            }
            Failure::Model(e) => {
                builder.message.stop_reason = StopReason::Error;
                builder.message.error_kind = Some(e.kind.as_wire().to_owned());
                builder.message.error_message = Some(e.to_string());
            }
        }
    }
    if let Some((attempt, final_error)) = series {
        ctx.emit(AgentEvent::AutoRetryEnd {
            success: final_error.is_none(),
            attempt,
            final_error,
        })
        .await;
    }
    let pricing = lock(&ctx.shared).config.model.pricing;
    pricing.apply(&mut builder.message.usage);
    let stop_reason = builder.message.stop_reason;
    let entry_id = ctx
        .commit_entry(Message::Assistant(builder.message.clone()))
        .await;
    StreamedAssistant {
        message: builder.message,
        entry_id,
        stop_reason,
        invalid_args: builder.invalid_args,
    }
}

enum Failure {
    Aborted,
    Model(keel_llm::Error),
}

async fn consume_stream(
    ctx: &RunCtx,
    provider: &dyn keel_llm::Provider,
    builder: &mut MessageBuilder,
    request: ModelRequest,
    cancel: &CancellationToken,
) -> Option<Failure> {
    let opened = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Some(Failure::Aborted),
        r = provider.stream(request, cancel.clone()) => r,
    };
    let mut stream = match opened {
        Ok(s) => s,
        Err(e) if e.kind == ErrorKind::Cancelled => return Some(Failure::Aborted),
        Err(e) => return Some(Failure::Model(e)),
    };
    loop {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Some(Failure::Aborted),
            item = stream.next() => item,
        };
        match item {
            Some(Ok(event)) => {
                for delta in builder.apply(event) {
                    ctx.emit(AgentEvent::MessageUpdate {
                        assistant_message_event: delta,
                    })
                    .await;
                }
                if builder.finished {
                    return None;
                }
            }
            Some(Err(e)) if e.kind == ErrorKind::Cancelled => return Some(Failure::Aborted),
            Some(Err(e)) => return Some(Failure::Model(e)),
            None => {
                return Some(Failure::Model(keel_llm::Error {
                    kind: ErrorKind::StreamCut,
                    message: "the model stream ended before the response completed".to_owned(),
                    status: None,
                    retry_after: None,
                }));
            }
        }
    }
}
