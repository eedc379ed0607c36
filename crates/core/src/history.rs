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

use chrono::SecondsFormat;
use keel_protocol::{Message, Usage};
use keel_session_store::{Entry, EntryBody};
use serde::Serialize;

use crate::context::ModelContext;
use crate::deps::{Clock, SessionLog};
use crate::state::{SharedState, lock};
use crate::{Error, Result};

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
pub(crate) fn rebuild(s: &mut crate::state::Shared) {
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
    use crate::context::context_tokens;
    use keel_protocol::{AssistantMessage, ContentBlock, StopReason, UserMessage};

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
