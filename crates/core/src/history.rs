//! The session's history in memory: the entry tree mirrored from the log,
//! context-size accounting and statistics.
//!
//! Every entry the loop writes goes through [`record`]: the log appends it
//! (and names it), then the tree mirror takes it, under one async lock so
//! the mirror's order is the file's. The context the model sees is the
//! tree's active branch with compactions applied
//! ([`keel_session_store::Context`]). The loop's own copy of those
//! messages ([`ModelContext`]) is made only when a model call or a new
//! message needs it: until then (a session just opened, however long) they
//! are read from the tree where they lie. Branching and compaction rebuild
//! it with [`rebuild`]. No I/O of its own: the log is a trait.

use std::borrow::Borrow;

use chrono::SecondsFormat;
use keel_protocol::{ContentBlock, Message, StopReason, Usage};
use keel_session_store::{ContextRefs, Entry, EntryBody, SessionTree};
use serde::Serialize;

use crate::deps::{Clock, SessionLog};
use crate::session::{SharedState, lock};
use crate::{Error, Result};

/// Rough tokens of a message (four characters a token; an image ~1200).
pub fn estimate_tokens(message: &Message) -> u64 {
    let blocks: &[ContentBlock] = match message {
        Message::User(m) => &m.content,
        Message::Assistant(m) => &m.content,
        Message::ToolResult(m) => &m.content,
    };
    let chars: usize = blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Thinking { thinking, .. } => thinking.len(),
            ContentBlock::Image { .. } => 4 * 1200,
            ContentBlock::ToolCall {
                name, arguments, ..
            } => name.len() + arguments.to_string().len(),
        })
        .sum();
    chars.div_ceil(4) as u64
}

/// Tokens of a context: the usage the provider reported for the last
/// answered call at or after `fresh_from` (input, output and cache), plus
/// an estimate for every message after it; an estimate of everything when
/// no such call exists (for example right after a compaction).
pub fn context_tokens<M: Borrow<Message>>(messages: &[M], fresh_from: usize) -> u64 {
    let last_answered =
        messages
            .iter()
            .enumerate()
            .skip(fresh_from)
            .rev()
            .find_map(|(i, m)| match m.borrow() {
                Message::Assistant(a)
                    if a.usage.total_tokens > 0
                        && !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) =>
                {
                    Some((i, a.usage))
                }
                _ => None,
            });
    let (base, rest) = match last_answered {
        Some((i, u)) => (
            u.input + u.output + u.cache_read + u.cache_write,
            &messages[i + 1..],
        ),
        None => (0, messages),
    };
    base + rest
        .iter()
        .map(|m| estimate_tokens(m.borrow()))
        .sum::<u64>()
}

/// The messages the model sees, kept beside the tree: copied out of the
/// tree's active branch only when the loop needs them as its own (a model
/// call, a message to append); until then they are read from the tree.
#[derive(Debug, Default)]
pub(crate) struct ModelContext {
    /// The copy, once made.
    built: Option<Vec<Message>>,
    /// Index in `built` of the first message written after the latest
    /// compaction (usage reported before it is stale).
    fresh_from: usize,
}

impl ModelContext {
    /// A context of `messages` of its own (a session without a tree).
    pub(crate) fn of(messages: Vec<Message>) -> Self {
        Self {
            built: Some(messages),
            fresh_from: 0,
        }
    }

    /// The context of a tree's active branch, read from the tree until the
    /// loop needs a copy.
    pub(crate) fn from_tree() -> Self {
        Self::default()
    }

    /// The messages as the loop's own, copied out of `tree` first if they
    /// are not yet.
    pub(crate) fn messages_mut(&mut self, tree: &SessionTree) -> &mut Vec<Message> {
        if self.built.is_none() {
            let (messages, fresh_from) = tree.context_messages();
            self.fresh_from = fresh_from;
            self.built = Some(messages);
        }
        self.built.get_or_insert_with(Vec::new)
    }

    /// The messages, read where they are (`tree`: the session's tree).
    pub(crate) fn view<'a>(&'a self, tree: &'a SessionTree) -> ContextView<'a> {
        match &self.built {
            Some(messages) => ContextView::Built {
                messages,
                fresh_from: self.fresh_from,
            },
            None => ContextView::Tree(tree.context_refs()),
        }
    }
}

/// The messages the model sees, borrowed: the loop's copy or the tree's
/// entries.
#[allow(clippy::large_enum_variant, reason = "short-lived, made for one read")]
pub(crate) enum ContextView<'a> {
    Built {
        messages: &'a [Message],
        fresh_from: usize,
    },
    Tree(ContextRefs<'a>),
}

impl ContextView<'_> {
    /// Runs `f` on the messages and `fresh_from`.
    fn with<R>(&self, f: impl FnOnce(&[&Message], usize) -> R) -> R {
        match self {
            ContextView::Built {
                messages,
                fresh_from,
            } => f(&messages.iter().collect::<Vec<_>>(), *fresh_from),
            ContextView::Tree(refs) => match &refs.summary {
                None => f(&refs.messages, refs.fresh_from),
                Some(summary) => {
                    let all: Vec<&Message> = std::iter::once(summary)
                        .chain(refs.messages.iter().copied())
                        .collect();
                    f(&all, refs.fresh_from)
                }
            },
        }
    }

    pub(crate) fn len(&self) -> usize {
        match self {
            ContextView::Built { messages, .. } => messages.len(),
            ContextView::Tree(refs) => refs.len(),
        }
    }

    /// [`context_tokens`] of the messages.
    pub(crate) fn tokens(&self) -> u64 {
        match self {
            ContextView::Built {
                messages,
                fresh_from,
            } => context_tokens(messages, *fresh_from),
            ContextView::Tree(_) => self.with(|m, fresh_from| context_tokens(m, fresh_from)),
        }
    }

    /// The turn a crash or kill cut off (see [`crate::resume`]).
    pub(crate) fn interrupted(&self) -> Option<crate::resume::Interrupted> {
        match self {
            ContextView::Built { messages, .. } => crate::resume::interrupted(messages),
            ContextView::Tree(_) => self.with(|m, _| crate::resume::interrupted(m)),
        }
    }

    /// A copy of the messages.
    pub(crate) fn to_vec(&self) -> Vec<Message> {
        match self {
            ContextView::Built { messages, .. } => messages.to_vec(),
            ContextView::Tree(refs) => {
                let mut all = Vec::with_capacity(refs.len());
                all.extend(refs.summary.iter().cloned());
                all.extend(refs.messages.iter().map(|m| (*m).clone()));
                all
            }
        }
    }

    /// The text of the last assistant message.
    pub(crate) fn last_assistant_text(&self) -> Option<String> {
        let text = |m: &Message| match m {
            Message::Assistant(a) => Some(a.text()),
            Message::User(_) | Message::ToolResult(_) => None,
        };
        match self {
            ContextView::Built { messages, .. } => messages.iter().rev().find_map(text),
            ContextView::Tree(refs) => refs
                .messages
                .iter()
                .rev()
                .find_map(|m| text(m))
                .or_else(|| refs.summary.as_ref().and_then(text)),
        }
    }
}

/// `contextUsage`: how full the model's window is.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextUsage {
    pub tokens: u64,
    pub context_window: u64,
    /// 0–100.
    pub percent: f64,
}

impl ContextUsage {
    pub fn new(tokens: u64, context_window: u64) -> Self {
        let percent = if context_window == 0 {
            0.0
        } else {
            tokens as f64 * 100.0 / context_window as f64
        };
        Self {
            tokens,
            context_window,
            percent,
        }
    }
}

/// Token totals of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenTotals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total: u64,
}

/// What `get_session_stats` reports.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStats {
    /// Messages on the active branch (compacted ones included), by role.
    pub user_messages: usize,
    pub assistant_messages: usize,
    pub tool_calls: usize,
    pub tool_results: usize,
    pub total_messages: usize,
    /// Tokens of every model call of the session, on every branch.
    pub tokens: TokenTotals,
    /// What those calls cost, in US dollars (from the catalogue's prices).
    pub cost: f64,
    /// Compactions on the active branch.
    pub compactions: usize,
    /// Messages the model sees now (after compactions).
    pub context_messages: usize,
    pub context_usage: ContextUsage,
}

/// The statistics of a session whose state is `shared`.
pub(crate) fn stats(shared: &SharedState) -> SessionStats {
    let s = lock(shared);
    let (mut user, mut assistant, mut calls, mut results, mut compactions) = (0, 0, 0, 0, 0);
    for e in s.tree.branch() {
        match &e.body {
            EntryBody::Message { message } => match message {
                Message::User(_) => user += 1,
                Message::Assistant(a) => {
                    assistant += 1;
                    calls += a.tool_calls().len();
                }
                Message::ToolResult(_) => results += 1,
            },
            EntryBody::Compaction { .. } => compactions += 1,
            EntryBody::ModelChange { .. }
            | EntryBody::ThinkingLevelChange { .. }
            | EntryBody::SessionInfo { .. }
            | EntryBody::Branch { .. }
            | EntryBody::Approval(_) => {}
        }
    }
    let mut usage = Usage::default();
    for e in s.tree.entries() {
        if let EntryBody::Message {
            message: Message::Assistant(a),
        } = &e.body
        {
            usage.accumulate(&a.usage);
        }
    }
    let tokens = TokenTotals {
        input: usage.input,
        output: usage.output,
        cache_read: usage.cache_read,
        cache_write: usage.cache_write,
        total: usage.input + usage.output + usage.cache_read + usage.cache_write,
    };
    let context = s.context.view(&s.tree);
    SessionStats {
        user_messages: user,
        assistant_messages: assistant,
        tool_calls: calls,
        tool_results: results,
        total_messages: user + assistant + results,
        tokens,
        cost: usage.cost.total,
        compactions,
        context_messages: context.len(),
        context_usage: ContextUsage::new(context.tokens(), s.config.model.context_window),
    }
}

/// `timestamp` of entries the loop mints: RFC 3339 UTC with milliseconds.
fn rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Appends `body` to the log and the tree mirror; returns the entry. When
/// the log fails, the tree still takes the entry (so the conversation in
/// memory stays whole) and the error is returned.
pub(crate) async fn record(
    shared: &SharedState,
    log: &dyn SessionLog,
    clock: &dyn Clock,
    body: EntryBody,
) -> Result<Entry> {
    let gate = lock(shared).record_lock.clone();
    let _order = gate.lock().await;
    let written = log.append_entry(body.clone()).await;
    let mut s = lock(shared);
    let (entry, result) = match written {
        Ok(Some(entry)) => (entry, Ok(())),
        Ok(None) => (s.tree.mint(body, rfc3339(clock.now_ms())), Ok(())),
        Err(e) => (s.tree.mint(body, rfc3339(clock.now_ms())), Err(e)),
    };
    s.tree.push(entry.clone());
    result.map(|()| entry)
}

/// Moves the leaf of the log and the tree to `entry_id`, then rebuilds the
/// context.
pub(crate) async fn move_leaf(
    shared: &SharedState,
    log: &dyn SessionLog,
    entry_id: Option<String>,
) -> Result<()> {
    let gate = lock(shared).record_lock.clone();
    let _order = gate.lock().await;
    log.set_leaf(entry_id.clone()).await?;
    let mut s = lock(shared);
    s.tree.set_leaf(entry_id);
    rebuild(&mut s);
    Ok(())
}

/// Rebuilds the messages the model sees from the tree's active branch (a
/// copy is made again when the loop needs one).
pub(crate) fn rebuild(s: &mut crate::session::Shared) {
    s.context = ModelContext::from_tree();
}

/// The user message `entry_id` on the active branch, as the text to edit
/// and the entry to continue from (its parent).
pub(crate) fn branch_point(
    shared: &SharedState,
    entry_id: &str,
) -> Result<(String, Option<String>)> {
    let s = lock(shared);
    let invalid = || Error::InvalidEntry("Invalid entry ID for branching".to_owned());
    let entry = s.tree.get(entry_id).ok_or_else(invalid)?;
    match &entry.body {
        EntryBody::Message {
            message: Message::User(u),
        } => Ok((keel_session_store::user_text(u), entry.parent_id.clone())),
        _ => Err(invalid()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{AssistantMessage, UserMessage};

    fn user(t: &str) -> Message {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(t)],
            timestamp: 0,
        })
    }

    fn answered(input: u64) -> Message {
        Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::text("ok")],
            api: "a".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage {
                input,
                output: 10,
                total_tokens: input + 10,
                ..Usage::default()
            },
            stop_reason: StopReason::Stop,
            error_message: None,
            error_kind: None,
            timestamp: 0,
            response_id: None,
        })
    }

    #[test]
    fn usage_counts_reported_tokens_then_estimates() {
        let msgs = [user("hello"), answered(600), user("12345678")];
        assert_eq!(context_tokens(&msgs, 0), 612);
        let u = ContextUsage::new(612, 1000);
        assert!((u.percent - 61.2).abs() < 1e-9);
        assert_eq!(ContextUsage::new(5, 0).percent, 0.0);
        // Usage reported before a compaction is not trusted after it.
        assert_eq!(context_tokens(&msgs, 2), 2 + 1 + 2);
    }
}
