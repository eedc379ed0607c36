//! Compaction: summarising the older part of the conversation so the rest
//! fits the model's window.
//!
//! **When.** Automatically before a model call once the context passes the
//! threshold (the window minus a reserve, [`CompactionSettings`]); after a
//! call fails with `contextWindowExceeded` (the failed message is left off
//! the branch, the conversation is compacted and the call is made again,
//! once per run); or when asked for ([`crate::SessionHandle::compact`]).
//!
//! **What is kept.** Walking back from the newest message until about
//! `keep_recent_tokens` are covered, the cut is made before a user or an
//! assistant message, never before a tool result, so a tool call and its
//! results always stay on the same side. When that would leave nothing to
//! summarise, only the last turn (from the last user message) is kept; a
//! conversation of one turn that fits is not compacted.
//!
//! **The request.** One call through the session's provider, no tools,
//! system prompt [`SYSTEM_PROMPT`]; the user message holds the previous
//! summary (if the conversation was compacted before, so the new summary
//! includes it) in `<previous-summary>`, the messages to summarise in
//! `<conversation>` (`[User]: …`, `[Assistant]: …`, `[Assistant tool
//! calls]: read(path="…")`, `[Tool result]: …` cut to 2000 characters), then
//! [`INSTRUCTIONS`] and, for a manual compaction, `Additional focus: …`.
//!
//! **The result.** A `compaction` entry (summary, first kept entry,
//! tokens before and after, files read and modified) is appended and the
//! context is rebuilt as `[summary] + kept messages`. A failure or an abort
//! changes nothing.

use futures::StreamExt;
use keel_llm::{ErrorKind, ModelRequest};
use keel_protocol::joined_text as text_of;
use keel_protocol::{
    AgentEvent, AssistantMessage, CompactionDetails, CompactionReason, CompactionResult,
    ContentBlock, Message, StopReason, ThinkingLevel, UserMessage,
};
use keel_session_store::{Context, EntryBody};
use tokio_util::sync::CancellationToken;

use crate::assemble::MessageBuilder;
pub use crate::config::CompactionSettings;
use crate::context::{context_tokens, estimate_tokens};
use crate::ctx::RunCtx;
use crate::history::{move_leaf, rebuild, record};
use crate::state::lock;

/// The system prompt of the summarisation call.
pub const SYSTEM_PROMPT: &str = "You are a context summarization assistant. You read a \
conversation between a user and an AI coding agent and write a structured summary that the \
agent will continue from. Do NOT continue the conversation. Do NOT answer questions asked in \
it. Output ONLY the summary.";

/// The instructions after the conversation.
pub const INSTRUCTIONS: &str = "The conversation above is the older part of a coding session; \
it is being removed from the agent's context to make room. Write the summary the agent will \
read instead, in this Markdown format:

## Goal
What the user wants, in one or two sentences.

## Constraints & Preferences
Requirements and preferences the user stated.

## Progress
### Done
### In Progress
### Blocked

## Key Decisions
Decisions made and why.

## Next Steps
A numbered list.

## Critical Context
Anything else needed to continue: exact file paths, function names, commands, error messages.

Keep paths, names, commands and errors exact. Be concise. If a previous summary is given, \
merge it into the new one: nothing it says that still matters may be lost.";

/// Longest tool result text put into the summarisation request.
const TOOL_RESULT_CHARS: usize = 2000;

/// How a compaction ended badly.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CompactError {
    Aborted,
    Failed(String),
}

impl CompactError {
    pub fn message(&self) -> String {
        match self {
            CompactError::Aborted => "Compaction was aborted".to_owned(),
            CompactError::Failed(m) => m.clone(),
        }
    }
}

/// The index of the first kept message of `ctx`, or `None` when nothing
/// can be summarised. Never the index of a tool result.
pub(crate) fn find_cut(ctx: &Context, keep_budget: u64) -> Option<usize> {
    let msgs = &ctx.messages;
    let start = usize::from(ctx.compaction.is_some());
    let valid = |i: usize| i > start && !matches!(msgs[i], Message::ToolResult(_));
    let mut acc = 0u64;
    for i in (start..msgs.len()).rev() {
        acc += estimate_tokens(&msgs[i]);
        if acc >= keep_budget {
            if let Some(cut) = (start + 1..=i).rev().find(|&j| valid(j)) {
                return Some(cut);
            }
            break;
        }
    }
    // Everything fits the budget: keep only the last turn.
    (start + 1..msgs.len())
        .rev()
        .find(|&i| matches!(msgs[i], Message::User(_)))
}

fn push_line(out: &mut String, label: &str, text: &str) {
    if text.trim().is_empty() {
        return;
    }
    out.push_str(&format!("[{label}]: {}\n", text.trim_end()));
}

/// The messages as the summarisation request shows them.
pub(crate) fn serialize(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        match m {
            Message::User(u) => push_line(&mut out, "User", &text_of(&u.content)),
            Message::Assistant(a) => {
                push_line(&mut out, "Assistant", &a.text());
                let calls: Vec<String> = a
                    .tool_calls()
                    .into_iter()
                    .map(|(_, name, args)| format!("{name}({})", call_args(args)))
                    .collect();
                if !calls.is_empty() {
                    push_line(&mut out, "Assistant tool calls", &calls.join("; "));
                }
            }
            Message::ToolResult(r) => {
                let text = text_of(&r.content);
                let cut = match text.char_indices().nth(TOOL_RESULT_CHARS) {
                    Some((at, _)) => format!("{}… [truncated]", &text[..at]),
                    None => text,
                };
                let label = if r.is_error {
                    "Tool error"
                } else {
                    "Tool result"
                };
                push_line(&mut out, label, &cut);
            }
        }
    }
    out
}

fn call_args(args: &serde_json::Value) -> String {
    match args.as_object() {
        Some(map) => map
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", "),
        None => args.to_string(),
    }
}

/// The user message of the summarisation request.
pub(crate) fn prompt(previous: Option<&str>, messages: &[Message], custom: Option<&str>) -> String {
    let mut text = String::new();
    if let Some(prev) = previous {
        text.push_str(&format!(
            "<previous-summary>\n{prev}\n</previous-summary>\n\n"
        ));
    }
    text.push_str(&format!(
        "<conversation>\n{}</conversation>\n\n{INSTRUCTIONS}",
        serialize(messages)
    ));
    if let Some(focus) = custom.map(str::trim).filter(|c| !c.is_empty()) {
        text.push_str(&format!("\n\nAdditional focus: {focus}"));
    }
    text
}

/// Files read and changed by the tool calls of `messages`, added to
/// `previous`.
fn details(previous: Option<&serde_json::Value>, messages: &[Message]) -> CompactionDetails {
    let mut d: CompactionDetails = previous
        .and_then(|v| serde_json::from_value(v.clone()).ok())
        .unwrap_or_default();
    for m in messages {
        let Message::Assistant(a) = m else { continue };
        for (_, name, args) in a.tool_calls() {
            let Some(path) = args.get("path").and_then(|p| p.as_str()) else {
                continue;
            };
            let list = match name {
                "read" => &mut d.read_files,
                "write" | "edit" => &mut d.modified_files,
                _ => continue,
            };
            if !list.iter().any(|p| p == path) {
                list.push(path.to_owned());
            }
        }
    }
    d
}

/// Whether the context (plus `pending` tokens not committed yet) has passed
/// the threshold and automatic compaction is on.
pub(crate) fn due(ctx: &RunCtx, pending: u64) -> bool {
    let s = lock(&ctx.shared);
    if !s.auto_compaction {
        return false;
    }
    let threshold = s.config.compaction.threshold(s.config.model.context_window);
    threshold > 0 && s.context.view(&s.tree).tokens() + pending > threshold
}

/// Runs one compaction with its `auto_compaction_start/end` events.
/// `drop_last`: the entry of a failed message to leave off the branch
/// (overflow). `will_retry` is reported on success.
pub(crate) async fn run(
    ctx: &RunCtx,
    reason: CompactionReason,
    custom: Option<&str>,
    cancel: &CancellationToken,
    drop_last: Option<&str>,
    will_retry: bool,
) -> Result<CompactionResult, CompactError> {
    lock(&ctx.shared).is_compacting = true;
    ctx.emit(AgentEvent::AutoCompactionStart { reason }).await;
    let outcome = compact(ctx, custom, cancel, drop_last).await;
    lock(&ctx.shared).is_compacting = false;
    let end = match &outcome {
        Ok(result) => AgentEvent::AutoCompactionEnd {
            reason,
            result: Some(result.clone()),
            aborted: false,
            will_retry,
            error_message: None,
        },
        Err(e) => AgentEvent::AutoCompactionEnd {
            reason,
            result: None,
            aborted: *e == CompactError::Aborted,
            will_retry: false,
            error_message: match e {
                CompactError::Aborted => None,
                CompactError::Failed(m) => Some(m.clone()),
            },
        },
    };
    match &outcome {
        Ok(r) => tracing::info!(
            reason = reason.as_str(),
            before = r.tokens_before,
            after = r.tokens_after,
            "compacted the conversation"
        ),
        Err(e) => tracing::warn!(reason = reason.as_str(), error = %e.message(),
            "compaction did not complete"),
    }
    ctx.emit(end).await;
    outcome
}

async fn compact(
    ctx: &RunCtx,
    custom: Option<&str>,
    cancel: &CancellationToken,
    drop_last: Option<&str>,
) -> Result<CompactionResult, CompactError> {
    let (mut context, model, provider, settings) = {
        let s = lock(&ctx.shared);
        (
            s.tree.context(),
            s.config.model.clone(),
            s.provider.clone(),
            s.config.compaction,
        )
    };
    if let Some(id) = drop_last
        && context.entry_ids.last().map(String::as_str) == Some(id)
    {
        context.messages.pop();
        context.entry_ids.pop();
    }
    let tokens_before = context_tokens(&context.messages, context.fresh_from);
    let window = model.context_window;
    let cut = find_cut(&context, settings.keep_budget(window)).ok_or_else(|| {
        CompactError::Failed("Nothing to compact (the conversation is too short)".to_owned())
    })?;
    let start = usize::from(context.compaction.is_some());
    let older = &context.messages[start..cut];
    let previous = context.compaction.as_ref();
    let request = ModelRequest {
        model: model.id.clone(),
        system_prompt: SYSTEM_PROMPT.to_owned(),
        messages: vec![Message::User(UserMessage {
            content: vec![ContentBlock::text(prompt(
                previous.map(|c| c.summary.as_str()),
                older,
                custom,
            ))],
            timestamp: ctx.deps.clock.now_ms(),
        })],
        tools: Vec::new(),
        thinking_level: ThinkingLevel::Off,
        max_output_tokens: Some(
            model
                .max_output_tokens
                .map_or(settings.summary_tokens(window), |m| {
                    m.min(settings.summary_tokens(window))
                }),
        ),
        output_schema: None,
    };
    let summary = summarise(provider.as_ref(), request, cancel).await?;
    let details = details(previous.and_then(|c| c.details.as_ref()), older);
    let first_kept = context.entry_ids[cut].clone();
    // The summary is in hand: only now does the session change.
    if cancel.is_cancelled() {
        return Err(CompactError::Aborted);
    }
    let log = ctx.deps.log.as_ref();
    if let Some(id) = drop_last {
        let parent = lock(&ctx.shared)
            .tree
            .get(id)
            .and_then(|e| e.parent_id.clone());
        move_leaf(&ctx.shared, log, parent)
            .await
            .map_err(|e| CompactError::Failed(format!("cannot compact: {e}")))?;
    }
    let kept_tokens: u64 = context.messages[cut..].iter().map(estimate_tokens).sum();
    let summary_tokens = estimate_tokens(&keel_session_store::summary_message(&summary, 0));
    let tokens_after = kept_tokens + summary_tokens;
    let body = EntryBody::Compaction {
        summary: summary.clone(),
        first_kept_entry_id: first_kept.clone(),
        tokens_before,
        tokens_after: Some(tokens_after),
        details: serde_json::to_value(&details).ok(),
    };
    if let Err(e) = record(&ctx.shared, log, ctx.deps.clock.as_ref(), body).await {
        tracing::error!(error = %e, "writing the compaction entry failed");
    }
    rebuild(&mut lock(&ctx.shared));
    ctx.flush_log().await;
    Ok(CompactionResult {
        summary,
        first_kept_entry_id: first_kept,
        tokens_before,
        tokens_after,
        details,
    })
}

/// Streams the summarisation call and returns its text.
async fn summarise(
    provider: &dyn keel_llm::Provider,
    request: ModelRequest,
    cancel: &CancellationToken,
) -> Result<String, CompactError> {
    let failed = |e: keel_llm::Error| {
        if e.kind == ErrorKind::Cancelled {
            CompactError::Aborted
        } else {
            CompactError::Failed(format!("Compaction failed: {e}"))
        }
    };
    let opened = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Err(CompactError::Aborted),
        r = provider.stream(request, cancel.clone()) => r,
    };
    let mut stream = opened.map_err(failed)?;
    let mut builder = MessageBuilder::new(AssistantMessage {
        content: Vec::new(),
        api: String::new(),
        provider: String::new(),
        model: String::new(),
        usage: Default::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        error_kind: None,
        timestamp: 0,
        response_id: None,
    });
    loop {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(CompactError::Aborted),
            item = stream.next() => item,
        };
        match item {
            Some(Ok(event)) => {
                builder.apply(event);
                if builder.finished {
                    break;
                }
            }
            Some(Err(e)) => return Err(failed(e)),
            None => {
                return Err(CompactError::Failed(
                    "Compaction failed: the model stream ended before the summary was complete"
                        .to_owned(),
                ));
            }
        }
    }
    builder.close();
    let summary = builder.message.text().trim().to_owned();
    if summary.is_empty() {
        return Err(CompactError::Failed(
            "Compaction failed: the model returned an empty summary".to_owned(),
        ));
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::ToolResultMessage;

    fn user(t: &str) -> Message {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(t)],
            timestamp: 0,
        })
    }

    fn call(t: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![
                ContentBlock::text(t),
                ContentBlock::ToolCall {
                    id: "c".into(),
                    name: "read".into(),
                    arguments: serde_json::json!({"path": "src/lib.rs"}),
                },
            ],
            api: "a".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Default::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            error_kind: None,
            timestamp: 0,
            response_id: None,
        })
    }

    fn result(t: &str) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: "c".into(),
            tool_name: "read".into(),
            content: vec![ContentBlock::text(t)],
            details: None,
            is_error: false,
            timestamp: 0,
        })
    }

    fn ctx(messages: Vec<Message>) -> Context {
        Context {
            entry_ids: (0..messages.len()).map(|i| format!("e{i}")).collect(),
            messages,
            compaction: None,
            fresh_from: 0,
        }
    }

    #[test]
    fn the_cut_is_never_before_a_tool_result() {
        let big = "x".repeat(400);
        // u a(call) t(big) t(big) a(call) t(big)
        let c = ctx(vec![
            user("start"),
            call("a"),
            result(&big),
            result(&big),
            call("b"),
            result(&big),
        ]);
        for budget in [1, 50, 100, 150, 200, 250, 300] {
            let cut = find_cut(&c, budget).unwrap();
            assert!(
                !matches!(c.messages[cut], Message::ToolResult(_)),
                "budget {budget}: cut at {cut}"
            );
            assert!(cut > 0);
        }
        // A small budget keeps the last call with its result.
        assert_eq!(find_cut(&c, 50), Some(4));
        // One turn that fits the budget is not cut.
        assert_eq!(find_cut(&c, 1000), None);
    }

    #[test]
    fn everything_fitting_keeps_the_last_turn_and_a_single_turn_cannot_be_cut() {
        let c = ctx(vec![
            user("a"),
            call("b"),
            result("c"),
            user("d"),
            call("e"),
        ]);
        assert_eq!(find_cut(&c, 1_000_000), Some(3));
        let single = ctx(vec![user("only")]);
        assert_eq!(find_cut(&single, 10), None);
        // After a compaction the summary itself is never "kept" alone.
        let mut after = ctx(vec![user("summary"), user("x")]);
        after.compaction = Some(keel_session_store::CompactionInfo {
            entry_id: "e0".into(),
            summary: "s".into(),
            first_kept_entry_id: "e1".into(),
            tokens_before: 1,
            details: None,
        });
        assert_eq!(find_cut(&after, 10), None);
    }

    #[test]
    fn the_prompt_carries_the_previous_summary_and_the_focus() {
        let p = prompt(
            Some("## Goal\nold"),
            &[user("hi"), call("looking"), result("fn main() {}")],
            Some("the parser"),
        );
        assert!(p.starts_with("<previous-summary>\n## Goal\nold\n</previous-summary>"));
        assert!(p.contains("[User]: hi\n[Assistant]: looking\n[Assistant tool calls]: read(path=\"src/lib.rs\")\n[Tool result]: fn main() {}\n</conversation>"), "{p}");
        assert!(p.ends_with("Additional focus: the parser"));
        let d = details(
            Some(&serde_json::json!({"readFiles": ["a"], "modifiedFiles": ["b"]})),
            &[call("x")],
        );
        assert_eq!(d.read_files, ["a", "src/lib.rs"]);
        assert_eq!(d.modified_files, ["b"]);
    }

    #[test]
    fn threshold_leaves_a_reserve() {
        let s = CompactionSettings::default();
        assert_eq!(s.threshold(200_000), 200_000 - 16_384);
        assert_eq!(s.threshold(1000), 750);
        assert_eq!(s.threshold(0), 0);
    }
}
