//! The messages the model sees, and what can be read off them without any
//! state: token estimates and context size ([`estimate_tokens`],
//! [`context_tokens`]), the loop's lazily made copy of the tree's active
//! branch ([`ModelContext`]) and a borrowed view of either
//! ([`ContextView`]), and the turn a crash cut off ([`interrupted`]).
//! A leaf: it knows messages and the session tree, nothing of the loop.

use std::borrow::Borrow;
use std::collections::HashSet;

use keel_protocol::{AssistantMessage, ContentBlock, Message, StopReason};
use keel_session_store::{ContextRefs, SessionTree};
use serde_json::Value;

/// A tool call: id, tool name, arguments.
pub(crate) type Call = (String, String, Value);

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
    pub(crate) fn interrupted(&self) -> Option<Interrupted> {
        match self {
            ContextView::Built { messages, .. } => interrupted(messages),
            ContextView::Tree(_) => self.with(|m, _| interrupted(m)),
        }
    }

    /// Whether the model owes the branch an answer: it ends with a user
    /// message or a tool result.
    pub(crate) fn awaits_model(&self) -> bool {
        let last =
            |m: Option<&Message>| matches!(m, Some(Message::User(_) | Message::ToolResult(_)));
        match self {
            ContextView::Built { messages, .. } => last(messages.last()),
            // A summary alone is not a question.
            ContextView::Tree(refs) => last(refs.messages.last().copied()),
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
