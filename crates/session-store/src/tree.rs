//! The entry tree in memory and the context it gives the model.
//!
//! This module owns [`SessionTree`] (every entry of a session, its
//! `id`/`parentId` links and the leaf), the walk from the leaf to a root
//! (the active branch) and [`Context`]: the messages the model sees on a
//! branch. It is pure data — no files, no tasks — so the agent loop can keep
//! a mirror of the file and branch or compact without I/O.
//!
//! # Context rules
//!
//! Without a `compaction` entry on the branch the context is every message on
//! it, in order. With one, the latest one wins: the context is its summary
//! (as one user message, [`summary_message`]), then the messages on the
//! branch from its `firstKeptEntryId` up to the compaction, then the
//! messages after it. Earlier compaction entries on the branch are skipped
//! (the latest summary includes what they said).

use std::collections::HashMap;

use keel_protocol::{ContentBlock, Message, UserMessage};
use serde_json::Value;

use crate::format::{Entry, EntryBody, random_entry_id};
use crate::ids::IdMap;

/// What the model reads in place of the summarised conversation; the
/// summary follows, then [`SUMMARY_SUFFIX`].
pub const SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
/// Closes [`SUMMARY_PREFIX`].
pub const SUMMARY_SUFFIX: &str = "\n</summary>";

/// The user message that carries a compaction summary to the model.
pub fn summary_message(summary: &str, timestamp: i64) -> Message {
    Message::User(UserMessage {
        content: vec![ContentBlock::text(format!(
            "{SUMMARY_PREFIX}{summary}{SUMMARY_SUFFIX}"
        ))],
        timestamp,
    })
}

/// The latest compaction on a branch, as the context uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionInfo {
    pub entry_id: String,
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub details: Option<Value>,
}

/// The messages the model sees on one branch.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Context {
    pub messages: Vec<Message>,
    /// The entry of each message (for the summary: the compaction entry).
    pub entry_ids: Vec<String>,
    /// The compaction whose summary is `messages[0]`, if any.
    pub compaction: Option<CompactionInfo>,
    /// Index of the first message written after that compaction: reported
    /// token usage of earlier messages describes a context that no longer
    /// exists.
    pub fresh_from: usize,
}

/// Milliseconds since the epoch of an RFC 3339 timestamp (0 if invalid).
fn timestamp_ms(ts: &str) -> i64 {
    chrono::DateTime::parse_from_rfc3339(ts)
        .map(|t| t.timestamp_millis())
        .unwrap_or(0)
}

/// The context of a branch (root first).
pub fn context_of(branch: &[&Entry]) -> Context {
    build_context(branch)
}

/// The messages the model sees on a branch (root first) and the index of
/// the first one written after the latest compaction: [`context_of`]
/// without the entry ids, for callers that only send the messages.
pub fn context_messages_of(branch: &[&Entry]) -> (Vec<Message>, usize) {
    let refs = context_refs_of(branch);
    let mut messages = Vec::with_capacity(refs.len());
    messages.extend(refs.summary);
    messages.extend(refs.messages.into_iter().cloned());
    (messages, refs.fresh_from)
}

/// The messages the model sees on a branch, borrowed from the entries (the
/// compaction summary, made for the context, is the one owned message).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextRefs<'a> {
    /// The latest compaction's summary: the context's first message.
    pub summary: Option<Message>,
    /// The messages after the summary, in order.
    pub messages: Vec<&'a Message>,
    /// As [`Context::fresh_from`] (the summary counts as a message).
    pub fresh_from: usize,
}

impl ContextRefs<'_> {
    /// How many messages the context has, the summary included.
    pub fn len(&self) -> usize {
        usize::from(self.summary.is_some()) + self.messages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`context_messages_of`] without copying the messages.
pub fn context_refs_of<'a>(branch: &[&'a Entry]) -> ContextRefs<'a> {
    let message = |e: &&'a Entry| match &e.body {
        EntryBody::Message { message } => Some(message),
        _ => None,
    };
    let latest = branch
        .iter()
        .rposition(|e| matches!(e.body, EntryBody::Compaction { .. }));
    let Some(at) = latest else {
        return ContextRefs {
            summary: None,
            messages: branch.iter().filter_map(message).collect(),
            fresh_from: 0,
        };
    };
    let entry = branch[at];
    let EntryBody::Compaction {
        summary,
        first_kept_entry_id,
        ..
    } = &entry.body
    else {
        return ContextRefs::default();
    };
    let start = branch[..at]
        .iter()
        .position(|e| &e.id == first_kept_entry_id)
        .unwrap_or(at);
    let mut messages: Vec<&Message> = branch[start..at].iter().filter_map(message).collect();
    let fresh_from = 1 + messages.len();
    messages.extend(branch[at + 1..].iter().filter_map(message));
    ContextRefs {
        summary: Some(summary_message(summary, timestamp_ms(&entry.timestamp))),
        messages,
        fresh_from,
    }
}

/// [`context_of`].
fn build_context(branch: &[&Entry]) -> Context {
    let mut ctx = Context::default();
    let push = |ctx: &mut Context, e: &Entry| {
        if let EntryBody::Message { message } = &e.body {
            ctx.messages.push(message.clone());
            ctx.entry_ids.push(e.id.clone());
        }
    };
    let latest = branch
        .iter()
        .rposition(|e| matches!(e.body, EntryBody::Compaction { .. }));
    let Some(at) = latest else {
        ctx.messages.reserve(branch.len());
        for e in branch {
            push(&mut ctx, e);
        }
        return ctx;
    };
    let entry = branch[at];
    let EntryBody::Compaction {
        summary,
        first_kept_entry_id,
        tokens_before,
        details,
        ..
    } = &entry.body
    else {
        return ctx;
    };
    ctx.messages
        .push(summary_message(summary, timestamp_ms(&entry.timestamp)));
    ctx.entry_ids.push(entry.id.clone());
    let start = branch[..at]
        .iter()
        .position(|e| &e.id == first_kept_entry_id)
        .unwrap_or(at);
    for e in &branch[start..at] {
        push(&mut ctx, e);
    }
    ctx.fresh_from = ctx.messages.len();
    for e in &branch[at + 1..] {
        push(&mut ctx, e);
    }
    ctx.compaction = Some(CompactionInfo {
        entry_id: entry.id.clone(),
        summary: summary.clone(),
        first_kept_entry_id: first_kept_entry_id.clone(),
        tokens_before: *tokens_before,
        details: details.clone(),
    });
    ctx
}

/// Whether `entry` is an assistant message that calls tools.
fn calls_tools(entry: &Entry) -> bool {
    match &entry.body {
        EntryBody::Message {
            message: Message::Assistant(a),
        } => a
            .content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall { .. })),
        _ => false,
    }
}

/// Every entry of a session, linked into a tree, and the leaf.
#[derive(Debug, Clone, Default)]
pub struct SessionTree {
    entries: Vec<Entry>,
    /// Entry id → position in `entries`.
    index: IdMap<usize>,
    /// Entries of unknown types: id → parentId, so the tree stays linked.
    skipped: HashMap<String, Option<String>>,
    leaf: Option<String>,
    /// `entries[..linear]` is one chain from a root, in order (each entry
    /// follows the one before it, ids unique): the branch to any of them
    /// is known without a walk.
    linear: usize,
    /// Some entry is an assistant message that calls tools.
    tool_calls: bool,
}

impl SessionTree {
    /// A tree of `entries` (file order) with its leaf.
    pub fn new(
        entries: Vec<Entry>,
        skipped: HashMap<String, Option<String>>,
        leaf: Option<String>,
    ) -> Self {
        let mut index = IdMap::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            index.insert(&e.id, i);
        }
        let tool_calls = entries.iter().any(calls_tools);
        Self {
            entries,
            index,
            skipped,
            leaf,
            linear: 0,
            tool_calls,
        }
    }

    /// A tree of `entries` whose id index is already built (`index`: id →
    /// position in `entries`, the later entry for a duplicate id); the
    /// first `linear` entries are known to form one chain from a root, in
    /// order, with unique ids.
    pub(crate) fn indexed(
        entries: Vec<Entry>,
        index: IdMap<usize>,
        skipped: HashMap<String, Option<String>>,
        leaf: Option<String>,
        linear: usize,
    ) -> Self {
        let linear = linear.min(entries.len());
        let tool_calls = entries.iter().any(calls_tools);
        Self {
            entries,
            index,
            skipped,
            leaf,
            linear,
            tool_calls,
        }
    }

    /// Every entry, in the order they were added.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Whether any entry, on any branch, is an assistant message that
    /// calls tools (once one was added, even if it was replaced since). A
    /// session without one has had no call of its own held, so none of its
    /// drafts can wait for an answer.
    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls
    }

    /// The entry the next one will follow.
    pub fn leaf(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    /// The entry with this id.
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.index.get(id).map(|i| &self.entries[*i])
    }

    /// Whether an entry (of a known or unknown type) has this id.
    pub fn contains(&self, id: &str) -> bool {
        self.index.contains(id) || self.skipped.contains_key(id)
    }

    /// Adds an entry written elsewhere (its `parentId` as written) and
    /// moves the leaf to it.
    pub fn push(&mut self, entry: Entry) {
        self.leaf = Some(entry.id.clone());
        self.tool_calls |= calls_tools(&entry);
        match self.index.get(&entry.id) {
            Some(i) => {
                // The chain may break at the replaced entry.
                self.linear = self.linear.min(*i);
                self.entries[*i] = entry;
            }
            None => {
                let follows =
                    entry.parent_id.as_deref() == self.entries.last().map(|e| e.id.as_str());
                if follows
                    && self.linear == self.entries.len()
                    && !self.skipped.contains_key(&entry.id)
                {
                    self.linear += 1;
                }
                self.index.insert(&entry.id, self.entries.len());
                self.entries.push(entry);
            }
        }
    }

    /// A new entry after the leaf with a fresh id unique in this tree (for
    /// sessions whose log assigns no ids); not added yet.
    pub fn mint(&self, body: EntryBody, timestamp: String) -> Entry {
        let id = loop {
            let id = random_entry_id();
            if !self.contains(&id) {
                break id;
            }
        };
        Entry {
            id,
            parent_id: self.leaf.clone(),
            timestamp,
            body,
        }
    }

    /// Moves the leaf: the next entry follows `id` (`None`: a new root).
    /// An id the tree does not hold is accepted (an entry written before
    /// the tree was built); its branch is then empty.
    pub fn set_leaf(&mut self, id: Option<String>) {
        self.leaf = id;
    }

    /// The active branch: the chain from a root to the leaf, in order.
    pub fn branch(&self) -> Vec<&Entry> {
        self.branch_to(self.leaf.as_deref())
    }

    /// The chain from a root to `id`, in order.
    ///
    /// Most trees are linear (each entry follows the one before it): the
    /// branch to an entry of the known chain is its prefix. Otherwise the
    /// walk first tries the entry just before the current one and looks
    /// the id up only when a link points elsewhere (or ids repeat).
    pub fn branch_to(&self, id: Option<&str>) -> Vec<&Entry> {
        if let Some(i) = id.and_then(|id| self.index.get(id))
            && *i < self.linear
        {
            return self.entries[..=*i].iter().collect();
        }
        let limit = self.entries.len() + self.skipped.len();
        let mut chain = Vec::with_capacity(self.entries.len());
        let mut steps = 0usize;
        let mut current = id;
        let mut guess: Option<usize> = None;
        while let Some(id) = current {
            if steps > limit {
                tracing::warn!("cycle in session entry tree");
                break;
            }
            steps += 1;
            // The guess holds only if the index agrees (it names the later
            // of two entries with one id).
            let at = match guess.and_then(|i| self.entries.get(i).map(|e| (i, e))) {
                Some((i, e)) if e.id == id && self.index.len() == self.entries.len() => Some(i),
                _ => self.index.get(id).copied(),
            };
            if let Some(i) = at {
                let entry = &self.entries[i];
                chain.push(entry);
                current = entry.parent_id.as_deref();
                guess = i.checked_sub(1);
            } else if let Some(parent) = self.skipped.get(id) {
                current = parent.as_deref();
            } else {
                break;
            }
        }
        chain.reverse();
        chain
    }

    /// The context of the active branch.
    pub fn context(&self) -> Context {
        context_of(&self.branch())
    }

    /// The messages of the active branch's context and its `fresh_from`
    /// (see [`context_messages_of`]).
    pub fn context_messages(&self) -> (Vec<Message>, usize) {
        context_messages_of(&self.branch())
    }

    /// The active branch's context, borrowed (see [`context_refs_of`]).
    pub fn context_refs(&self) -> ContextRefs<'_> {
        context_refs_of(&self.branch())
    }

    /// The user messages on the active branch one can branch from:
    /// `(entry id, text)`.
    pub fn user_messages(&self) -> Vec<(String, String)> {
        self.branch()
            .into_iter()
            .filter_map(|e| match &e.body {
                EntryBody::Message {
                    message: Message::User(u),
                } => Some((e.id.clone(), user_text(u))),
                _ => None,
            })
            .collect()
    }
}

/// The text blocks of a user message, joined with newlines.
pub fn user_text(message: &UserMessage) -> String {
    keel_protocol::joined_text(&message.content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{assistant, msg, text_of, tool_result, user};

    fn entry(id: &str, parent: Option<&str>, body: EntryBody) -> Entry {
        Entry {
            id: id.into(),
            parent_id: parent.map(str::to_owned),
            timestamp: "2025-01-01T00:00:01.000Z".into(),
            body,
        }
    }

    fn compaction(first_kept: &str, summary: &str) -> EntryBody {
        EntryBody::Compaction {
            summary: summary.into(),
            first_kept_entry_id: first_kept.into(),
            tokens_before: 100,
            tokens_after: Some(10),
            details: None,
        }
    }

    #[test]
    fn context_is_summary_then_kept_then_newer() {
        let entries = vec![
            entry("u1", None, msg(user("one"))),
            entry("a1", Some("u1"), msg(assistant("two"))),
            entry("t1", Some("a1"), msg(tool_result("three"))),
            entry("u2", Some("t1"), msg(user("four"))),
            entry("c1", Some("u2"), compaction("u2", "S1")),
            entry("a2", Some("c1"), msg(assistant("five"))),
        ];
        let mut tree = SessionTree::new(entries, HashMap::new(), Some("a2".into()));
        let ctx = tree.context();
        let texts: Vec<String> = ctx.messages.iter().map(text_of).collect();
        assert_eq!(
            texts,
            [
                format!("{SUMMARY_PREFIX}S1{SUMMARY_SUFFIX}"),
                "four".into(),
                "five".into()
            ]
        );
        assert_eq!(ctx.entry_ids, ["c1", "u2", "a2"]);
        assert_eq!(ctx.fresh_from, 2);
        // The same context without ids, and borrowed.
        assert_eq!(tree.context_messages(), (ctx.messages.clone(), 2));
        let refs = tree.context_refs();
        assert_eq!((refs.len(), refs.fresh_from), (3, 2));
        assert_eq!(refs.summary.as_ref(), Some(&ctx.messages[0]));
        assert_eq!(refs.messages, [&ctx.messages[1], &ctx.messages[2]]);
        tree.set_leaf(Some("u2".into()));
        let refs = tree.context_refs();
        assert_eq!(
            (refs.summary, refs.messages.len(), refs.fresh_from),
            (None, 4, 0)
        );
        assert_eq!(ctx.compaction.as_ref().unwrap().summary, "S1");
    }

    #[test]
    fn tool_calls_are_noticed_on_any_branch_loaded_or_pushed() {
        // The helper's assistant message calls `bash`; this one only talks.
        let talking = || {
            let Message::Assistant(mut a) = assistant("two") else {
                unreachable!()
            };
            a.content
                .retain(|b| !matches!(b, ContentBlock::ToolCall { .. }));
            Message::Assistant(a)
        };
        let calling = || assistant("let me look");
        let text_only = vec![
            entry("u1", None, msg(user("one"))),
            entry("a1", Some("u1"), msg(talking())),
        ];
        let mut tree = SessionTree::new(text_only.clone(), HashMap::new(), Some("a1".into()));
        assert!(!tree.has_tool_calls());
        tree.push(entry("a2", Some("u1"), msg(calling())));
        assert!(tree.has_tool_calls());
        // On a branch that is not the active one, from the file.
        let mut entries = text_only;
        entries.insert(1, entry("a0", Some("u1"), msg(calling())));
        let tree = SessionTree::new(entries, HashMap::new(), Some("a1".into()));
        assert!(tree.has_tool_calls());
    }

    #[test]
    fn a_second_compaction_replaces_the_first() {
        let entries = vec![
            entry("u1", None, msg(user("one"))),
            entry("u2", Some("u1"), msg(user("two"))),
            entry("c1", Some("u2"), compaction("u2", "S1")),
            entry("u3", Some("c1"), msg(user("three"))),
            entry("c2", Some("u3"), compaction("u2", "S2")),
            entry("u4", Some("c2"), msg(user("four"))),
        ];
        let tree = SessionTree::new(entries, HashMap::new(), Some("u4".into()));
        let ctx = tree.context();
        let texts: Vec<String> = ctx.messages.iter().map(text_of).collect();
        assert_eq!(
            texts,
            [
                format!("{SUMMARY_PREFIX}S2{SUMMARY_SUFFIX}"),
                "two".into(),
                "three".into(),
                "four".into()
            ]
        );
    }

    #[test]
    fn an_approval_entry_links_the_tree_but_is_not_a_message() {
        let approval = EntryBody::Approval(crate::ApprovalEntry {
            tool_call_id: "c".into(),
            tool_name: "bash".into(),
            approval_id: Some("apr_1".into()),
            class: Some("send".into()),
            title: None,
            decision: crate::ApprovalDecision::Approved,
            decided_by: Some("user".into()),
            note: None,
            rule_ids: Vec::new(),
        });
        let entries = vec![
            entry("u1", None, msg(user("run it"))),
            entry("a1", Some("u1"), msg(assistant("calling"))),
            entry("p1", Some("a1"), approval),
            entry("t1", Some("p1"), msg(tool_result("done"))),
            entry("c1", Some("t1"), compaction("a1", "S")),
        ];
        let tree = SessionTree::new(entries, HashMap::new(), Some("t1".into()));
        let ctx = tree.context();
        let texts: Vec<String> = ctx.messages.iter().map(text_of).collect();
        assert_eq!(texts, ["run it", "calling", "done"]);
        assert_eq!(ctx.entry_ids, ["u1", "a1", "t1"]);
        assert_eq!(tree.branch().len(), 4);
        // Compacted, the approval stays in the file but not in the context.
        let mut tree = tree;
        tree.set_leaf(Some("c1".into()));
        let texts: Vec<String> = tree.context().messages.iter().map(text_of).collect();
        assert_eq!(
            texts,
            [
                format!("{SUMMARY_PREFIX}S{SUMMARY_SUFFIX}"),
                "calling".into(),
                "done".into()
            ]
        );
    }

    /// A tree built from a linear load (the chain known) against the same
    /// entries walked link by link.
    fn both_ways(entries: &[Entry], leaf: &str) -> (SessionTree, SessionTree) {
        let walked = SessionTree::new(entries.to_vec(), HashMap::new(), Some(leaf.into()));
        let mut index = IdMap::with_capacity(entries.len());
        for (i, e) in entries.iter().enumerate() {
            index.insert(&e.id, i);
        }
        let known = SessionTree::indexed(
            entries.to_vec(),
            index,
            HashMap::new(),
            Some(leaf.into()),
            entries.len(),
        );
        (walked, known)
    }

    fn ids(branch: Vec<&Entry>) -> Vec<String> {
        branch.into_iter().map(|e| e.id.clone()).collect()
    }

    #[test]
    fn a_known_chain_gives_the_same_branches_as_the_walk_as_it_changes() {
        let entries = vec![
            entry("u1", None, msg(user("one"))),
            entry("a1", Some("u1"), msg(assistant("two"))),
            entry("u2", Some("a1"), msg(user("three"))),
            entry("a2", Some("u2"), msg(assistant("four"))),
        ];
        let (mut walked, mut known) = both_ways(&entries, "a2");
        let same = |w: &SessionTree, k: &SessionTree, to: Option<&str>| {
            assert_eq!(ids(w.branch_to(to)), ids(k.branch_to(to)), "{to:?}");
        };
        for to in [
            None,
            Some("u1"),
            Some("a1"),
            Some("u2"),
            Some("a2"),
            Some("x"),
        ] {
            same(&walked, &known, to);
        }
        assert_eq!(ids(known.branch()), ["u1", "a1", "u2", "a2"]);
        // Appending after the last entry extends the chain; a fork from the
        // middle and a replaced entry do not break the answers.
        let steps = [
            entry("u3", Some("a2"), msg(user("five"))),
            entry("f1", Some("a1"), msg(user("fork"))),
            entry("f2", Some("f1"), msg(assistant("fork answer"))),
            entry("u2", Some("f2"), msg(user("three again"))),
            entry("z1", Some("u3"), msg(user("after"))),
        ];
        for step in steps {
            walked.push(step.clone());
            known.push(step);
            for to in ["u1", "a1", "u2", "a2", "u3", "f1", "f2", "z1"] {
                same(&walked, &known, Some(to));
            }
        }
        assert_eq!(
            ids(known.branch_to(Some("a2"))),
            ["u1", "a1", "f1", "f2", "u2", "a2"]
        );
    }

    #[test]
    fn branching_moves_the_leaf_and_the_context_follows() {
        let mut tree = SessionTree::default();
        let root = tree.mint(msg(user("first")), "t".into());
        tree.push(root.clone());
        let a = tree.mint(msg(assistant("answer")), "t".into());
        tree.push(a.clone());
        let u2 = tree.mint(msg(user("second")), "t".into());
        tree.push(u2.clone());
        assert_eq!(tree.user_messages().len(), 2);
        tree.set_leaf(u2.parent_id.clone());
        assert_eq!(tree.context().messages.len(), 2);
        let u3 = tree.mint(msg(user("other")), "t".into());
        assert_eq!(u3.parent_id.as_deref(), Some(a.id.as_str()));
        tree.push(u3);
        let texts: Vec<String> = tree.context().messages.iter().map(text_of).collect();
        assert_eq!(texts, ["first", "answer", "other"]);
        assert_eq!(tree.entries().len(), 4);
        // An unknown leaf (written before the tree was built) is an empty branch.
        tree.set_leaf(Some("elsewhere".into()));
        assert!(tree.context().messages.is_empty());
    }
}
