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

/// Every entry of a session, linked into a tree, and the leaf.
#[derive(Debug, Clone, Default)]
pub struct SessionTree {
    entries: Vec<Entry>,
    index: HashMap<String, usize>,
    /// Entries of unknown types: id → parentId, so the tree stays linked.
    skipped: HashMap<String, Option<String>>,
    leaf: Option<String>,
}

impl SessionTree {
    /// A tree of `entries` (file order) with its leaf.
    pub fn new(
        entries: Vec<Entry>,
        skipped: HashMap<String, Option<String>>,
        leaf: Option<String>,
    ) -> Self {
        let index = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.id.clone(), i))
            .collect();
        Self {
            entries,
            index,
            skipped,
            leaf,
        }
    }

    /// A tree of `entries` whose id index is already built (`index`: id →
    /// position in `entries`, the later entry for a duplicate id).
    pub(crate) fn indexed(
        entries: Vec<Entry>,
        index: HashMap<String, usize>,
        skipped: HashMap<String, Option<String>>,
        leaf: Option<String>,
    ) -> Self {
        Self {
            entries,
            index,
            skipped,
            leaf,
        }
    }

    /// Every entry, in the order they were added.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
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
        self.index.contains_key(id) || self.skipped.contains_key(id)
    }

    /// Adds an entry written elsewhere (its `parentId` as written) and
    /// moves the leaf to it.
    pub fn push(&mut self, entry: Entry) {
        self.leaf = Some(entry.id.clone());
        match self.index.get(&entry.id) {
            Some(i) => self.entries[*i] = entry,
            None => {
                self.index.insert(entry.id.clone(), self.entries.len());
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
    /// Most trees are linear (each entry follows the one before it), so the
    /// walk first tries the entry just before the current one and looks
    /// the id up only when a link points elsewhere (or ids repeat).
    pub fn branch_to(&self, id: Option<&str>) -> Vec<&Entry> {
        let limit = self.entries.len() + self.skipped.len();
        let mut chain = Vec::new();
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
    message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
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
        let tree = SessionTree::new(entries, HashMap::new(), Some("a2".into()));
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
        assert_eq!(ctx.compaction.as_ref().unwrap().summary, "S1");
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
