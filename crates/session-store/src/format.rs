//! The on-disk session format: header and entry types, their JSON shapes, and
//! parsing/serialising of single lines.
//!
//! This module owns what one line of a session file looks like. It must not
//! know about files, tasks or directories (see `store`, `load` and `writer`),
//! nor any wire protocol: messages are stored as [`keel_protocol::Message`]
//! serialises them.
//!
//! # File format (version 1)
//!
//! A session file is append-only JSONL (one JSON object per line, `\n`
//! terminated, UTF-8). Line 1 is the header:
//!
//! ```json
//! {"type":"session","version":1,"id":"0198…(uuid v7)","timestamp":"2025-06-01T12:00:00.123Z","cwd":"/abs/workspace"}
//! ```
//!
//! `parentSession` (a path or id of the session this one was forked from) is
//! present only when set. Every following line is an entry:
//!
//! ```json
//! {"type":"message","id":"1a2b3c4d","parentId":null,"timestamp":"2025-06-01T12:00:01.000Z","message":{"role":"user",…}}
//! {"type":"model_change","id":"5e6f7a8b","parentId":"1a2b3c4d","timestamp":"…","provider":"openai","modelId":"gpt-4.1"}
//! {"type":"thinking_level_change","id":"…","parentId":"…","timestamp":"…","thinkingLevel":"high"}
//! {"type":"session_info","id":"…","parentId":"…","timestamp":"…","name":"refactor parser"}
//! {"type":"compaction","id":"…","parentId":"…","timestamp":"…","summary":"## Goal\n…","firstKeptEntryId":"1a2b3c4d","tokensBefore":125003,"tokensAfter":9120,"details":{"readFiles":[],"modifiedFiles":[]}}
//! ```
//!
//! A `branch` entry (`{"type":"branch",…,"parentId":"<entry continued
//! from>","fromId":"<the leaf left>"}`) records that the session went back
//! to an earlier point, so a reload continues there.
//!
//! An `approval` entry records how a tool call was let through or stopped,
//! written when that was decided (between the assistant message that made
//! the call and the call's result):
//!
//! ```json
//! {"type":"approval","id":"…","parentId":"…","timestamp":"…","toolCallId":"call_4","toolName":"bash","approvalId":"apr_…","class":"money","title":"keel wants to run `git push --force`","decision":"declined","decidedBy":"user","note":"not on main"}
//! ```
//!
//! `decision` is one of `approved` (a person allowed it once), `always` (a
//! person allowed it and saved a rule), `rule` (an always-allow rule let it
//! run; `ruleIds` names them), `declined`, `expired`, `cancelled`,
//! `drafted` (parked for later, unattended) or `denied` (refused without a
//! person, e.g. the check failed; `note` says why). `approvalId`, `class`,
//! `title`, `decidedBy`, `note` and `ruleIds` are present only when known.
//! It is not a message: the model never sees it.
//!
//! A `compaction` entry replaces, in the context sent to the model, every
//! message on its branch before `firstKeptEntryId` with its `summary` (see
//! [`crate::tree`]); the messages stay in the file.
//!
//! * `id` is 8 random lowercase hex digits, unique within the file.
//! * `parentId` links entries into a tree (`null` for a root). The active
//!   branch is the chain from the leaf back to a root; the leaf is the last
//!   entry of the file (a writer may move it to branch before appending).
//! * `timestamp` is RFC 3339 UTC with milliseconds.
//! * Entries of an unknown `type` are skipped on load (forward compatibility);
//!   their `id`/`parentId` still link the tree.
//! * A crash can only cut the last line; readers ignore a malformed last line.

use std::borrow::Cow;

use chrono::{DateTime, SecondsFormat, Utc};
use keel_protocol::{Message, ThinkingLevel};
use serde::{Deserialize, Serialize};

/// The format version this crate writes (and the newest it reads).
pub const FORMAT_VERSION: u32 = 1;

/// The `type` of the header line.
pub(crate) const HEADER_TYPE: &str = "session";

/// Entry `type`s this version understands (plus the header's).
const KNOWN_TYPES: [&str; 8] = [
    HEADER_TYPE,
    "message",
    "model_change",
    "thinking_level_change",
    "session_info",
    "compaction",
    "branch",
    "approval",
];

/// Line 1 of a session file, serialised with `"type":"session"` (checked on
/// deserialisation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename = "session",
    rename_all = "camelCase",
    try_from = "HeaderRepr"
)]
pub struct SessionHeader {
    pub version: u32,
    /// A UUID v7 (time-ordered).
    pub id: String,
    /// Creation time, RFC 3339 UTC with milliseconds.
    pub timestamp: String,
    /// Absolute workspace directory the session ran in.
    pub cwd: String,
    /// Path or id of the session this one was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_session: Option<String>,
}

/// What a header line deserialises through, so its `type` can be checked
/// (serde does not check a struct's tag).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeaderRepr {
    #[serde(rename = "type")]
    kind: String,
    version: u32,
    id: String,
    timestamp: String,
    cwd: String,
    #[serde(default)]
    parent_session: Option<String>,
}

impl TryFrom<HeaderRepr> for SessionHeader {
    type Error = String;

    fn try_from(repr: HeaderRepr) -> Result<Self, String> {
        if repr.kind != HEADER_TYPE {
            return Err(format!(
                "expected \"type\":\"{HEADER_TYPE}\", found \"{}\"",
                repr.kind
            ));
        }
        Ok(SessionHeader {
            version: repr.version,
            id: repr.id,
            timestamp: repr.timestamp,
            cwd: repr.cwd,
            parent_session: repr.parent_session,
        })
    }
}

/// One entry line: common fields plus a `type`-tagged body.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    /// 8 lowercase hex digits, unique within the file.
    pub id: String,
    /// The entry this one follows; `None` for a root.
    #[serde(default)]
    pub parent_id: Option<String>,
    /// RFC 3339 UTC with milliseconds.
    pub timestamp: String,
    #[serde(flatten)]
    pub body: EntryBody,
}

/// How a tool call's approval ended, as an `approval` entry records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// A person allowed it once.
    Approved,
    /// A person allowed it and saved an always-allow rule.
    Always,
    /// An always-allow rule let it run without asking.
    Rule,
    /// A person declined it (`note`: why).
    Declined,
    /// Nobody answered in time; it did not run.
    Expired,
    /// The run was aborted while it waited; it did not run.
    Cancelled,
    /// Parked as a draft for a person to send later; it did not run.
    Drafted,
    /// Refused without a person (the check failed, the host refused it).
    Denied,
    /// A decision this version does not know (written by a newer keel).
    #[serde(other)]
    Unknown,
}

impl ApprovalDecision {
    /// The wire name (`approved`, `always`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::Approved => "approved",
            ApprovalDecision::Always => "always",
            ApprovalDecision::Rule => "rule",
            ApprovalDecision::Declined => "declined",
            ApprovalDecision::Expired => "expired",
            ApprovalDecision::Cancelled => "cancelled",
            ApprovalDecision::Drafted => "drafted",
            ApprovalDecision::Denied => "denied",
            ApprovalDecision::Unknown => "unknown",
        }
    }

    /// Whether the call was let through.
    pub fn ran(self) -> bool {
        match self {
            ApprovalDecision::Approved | ApprovalDecision::Always | ApprovalDecision::Rule => true,
            ApprovalDecision::Declined
            | ApprovalDecision::Expired
            | ApprovalDecision::Cancelled
            | ApprovalDecision::Drafted
            | ApprovalDecision::Denied
            | ApprovalDecision::Unknown => false,
        }
    }
}

/// The fields of an `approval` entry: how one tool call was decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalEntry {
    /// The call, as the assistant message names it.
    pub tool_call_id: String,
    pub tool_name: String,
    /// The stored approval request, when one was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_id: Option<String>,
    /// `read`, `write`, `send` or `money`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// What the person was asked ("keel wants to run `…`").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    pub decision: ApprovalDecision,
    /// Who decided (`user`, `abort`, a client's name, `rule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// The decliner's note, or why it was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The always-allow rules that let it run, or the rule "always" saved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rule_ids: Vec<String>,
}

/// What an entry records. Serialised flattened into the entry, tagged by
/// `type` (`message`, `model_change`, `thinking_level_change`, `session_info`,
/// `compaction`, `branch`, `approval`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
#[allow(
    clippy::large_enum_variant,
    reason = "messages are by far the most common entry; boxing them would only add an allocation"
)]
pub enum EntryBody {
    /// A conversation message (user, assistant or tool result).
    Message { message: Message },
    /// The model was switched.
    ModelChange { provider: String, model_id: String },
    /// The reasoning effort was changed.
    ThinkingLevelChange { thinking_level: ThinkingLevel },
    /// The session was (re)named; `null` clears the name.
    SessionInfo {
        #[serde(default)]
        name: Option<String>,
    },
    /// The conversation before `first_kept_entry_id` (on this branch) was
    /// summarised: the model sees `summary` in its place from here on.
    Compaction {
        summary: String,
        first_kept_entry_id: String,
        /// Estimated context tokens before the compaction.
        tokens_before: u64,
        /// Estimated context tokens right after it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_after: Option<u64>,
        /// What the summarised part did (`readFiles`, `modifiedFiles`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<serde_json::Value>,
    },
    /// The session went back to this entry's parent (branching); `from_id`
    /// is the leaf it left.
    Branch {
        #[serde(default)]
        from_id: Option<String>,
    },
    /// How a tool call's approval ended (not a message: the model never
    /// sees it).
    Approval(ApprovalEntry),
}

impl EntryBody {
    /// The `type` tag of this body.
    pub fn kind(&self) -> &'static str {
        match self {
            EntryBody::Message { .. } => "message",
            EntryBody::ModelChange { .. } => "model_change",
            EntryBody::ThinkingLevelChange { .. } => "thinking_level_change",
            EntryBody::SessionInfo { .. } => "session_info",
            EntryBody::Compaction { .. } => "compaction",
            EntryBody::Branch { .. } => "branch",
            EntryBody::Approval(_) => "approval",
        }
    }
}

/// Borrowed mirror of [`Entry`] that serialises with `type` first, so lines
/// read naturally: `{"type":…,"id":…,"parentId":…,"timestamp":…,…}`.
#[derive(Serialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
enum EntryRef<'a> {
    Message {
        id: &'a str,
        parent_id: Option<&'a str>,
        timestamp: &'a str,
        message: &'a Message,
    },
    ModelChange {
        id: &'a str,
        parent_id: Option<&'a str>,
        timestamp: &'a str,
        provider: &'a str,
        model_id: &'a str,
    },
    ThinkingLevelChange {
        id: &'a str,
        parent_id: Option<&'a str>,
        timestamp: &'a str,
        thinking_level: ThinkingLevel,
    },
    SessionInfo {
        id: &'a str,
        parent_id: Option<&'a str>,
        timestamp: &'a str,
        name: Option<&'a str>,
    },
    Compaction {
        id: &'a str,
        parent_id: Option<&'a str>,
        timestamp: &'a str,
        summary: &'a str,
        first_kept_entry_id: &'a str,
        tokens_before: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        tokens_after: Option<u64>,
        #[serde(skip_serializing_if = "Option::is_none")]
        details: Option<&'a serde_json::Value>,
    },
    Branch {
        id: &'a str,
        parent_id: Option<&'a str>,
        timestamp: &'a str,
        from_id: Option<&'a str>,
    },
    Approval {
        id: &'a str,
        parent_id: Option<&'a str>,
        timestamp: &'a str,
        #[serde(flatten)]
        approval: &'a ApprovalEntry,
    },
}

impl Serialize for Entry {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let id = self.id.as_str();
        let parent_id = self.parent_id.as_deref();
        let timestamp = self.timestamp.as_str();
        let repr = match &self.body {
            EntryBody::Message { message } => EntryRef::Message {
                id,
                parent_id,
                timestamp,
                message,
            },
            EntryBody::ModelChange { provider, model_id } => EntryRef::ModelChange {
                id,
                parent_id,
                timestamp,
                provider,
                model_id,
            },
            EntryBody::ThinkingLevelChange { thinking_level } => EntryRef::ThinkingLevelChange {
                id,
                parent_id,
                timestamp,
                thinking_level: *thinking_level,
            },
            EntryBody::SessionInfo { name } => EntryRef::SessionInfo {
                id,
                parent_id,
                timestamp,
                name: name.as_deref(),
            },
            EntryBody::Compaction {
                summary,
                first_kept_entry_id,
                tokens_before,
                tokens_after,
                details,
            } => EntryRef::Compaction {
                id,
                parent_id,
                timestamp,
                summary,
                first_kept_entry_id,
                tokens_before: *tokens_before,
                tokens_after: *tokens_after,
                details: details.as_ref(),
            },
            EntryBody::Branch { from_id } => EntryRef::Branch {
                id,
                parent_id,
                timestamp,
                from_id: from_id.as_deref(),
            },
            EntryBody::Approval(approval) => EntryRef::Approval {
                id,
                parent_id,
                timestamp,
                approval,
            },
        };
        repr.serialize(serializer)
    }
}

/// One parsed entry line.
#[derive(Debug)]
#[allow(
    clippy::large_enum_variant,
    reason = "short-lived; almost every line is an entry"
)]
pub(crate) enum ParsedLine {
    Entry(Entry),
    /// A well-formed line of a `type` this version does not know.
    Unknown {
        kind: String,
        id: Option<String>,
        parent_id: Option<String>,
    },
}

/// The minimum read from a line that failed to parse as an [`Entry`], to tell
/// an unknown entry type from a malformed line.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    id: serde_json::Value,
    #[serde(default, rename = "parentId")]
    parent_id: serde_json::Value,
}

/// The `type` of a message line, as a one-variant enum so that any other
/// `type` fails [`MessageLine`] at once.
#[derive(Deserialize)]
enum MessageTag {
    #[serde(rename = "message")]
    Message,
}

/// A `message` entry read in one pass: the common line, parsed without the
/// buffering that [`Entry`]'s flattened, tagged body needs.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageLine {
    #[serde(rename = "type")]
    _kind: MessageTag,
    id: String,
    #[serde(default)]
    parent_id: Option<String>,
    timestamp: String,
    message: Message,
}

/// Parses an entry line (without its line terminator). `Err` carries a
/// human-readable reason.
pub(crate) fn parse_entry_line(line: &[u8]) -> Result<ParsedLine, String> {
    if let Ok(m) = serde_json::from_slice::<MessageLine>(line) {
        return Ok(ParsedLine::Entry(Entry {
            id: m.id,
            parent_id: m.parent_id,
            timestamp: m.timestamp,
            body: EntryBody::Message { message: m.message },
        }));
    }
    let err = match serde_json::from_slice::<Entry>(line) {
        Ok(entry) => return Ok(ParsedLine::Entry(entry)),
        Err(err) => err,
    };
    match serde_json::from_slice::<Probe>(line) {
        Ok(probe) if !KNOWN_TYPES.contains(&probe.kind.as_ref()) => Ok(ParsedLine::Unknown {
            kind: probe.kind.into_owned(),
            id: probe.id.as_str().map(str::to_owned),
            parent_id: probe.parent_id.as_str().map(str::to_owned),
        }),
        Ok(probe) if probe.kind == HEADER_TYPE => {
            Err("a session header may only appear on line 1".to_owned())
        }
        _ => Err(err.to_string()),
    }
}

/// Parses the header line (without its line terminator).
pub(crate) fn parse_header_line(line: &[u8]) -> Result<SessionHeader, String> {
    serde_json::from_slice::<SessionHeader>(line).map_err(|e| e.to_string())
}

/// Serialises `value` as one complete JSONL line (with the trailing `\n`).
pub(crate) fn to_line<T: Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut line = serde_json::to_vec(value)?;
    line.push(b'\n');
    Ok(line)
}

/// `timestamp` format of headers and entries: RFC 3339 UTC, milliseconds.
pub(crate) fn rfc3339_ms(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// The current time as [`rfc3339_ms`].
pub(crate) fn now_rfc3339() -> String {
    rfc3339_ms(Utc::now())
}

/// A fresh random entry id: 8 lowercase hex digits.
pub fn random_entry_id() -> String {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    format!(
        "{:02x}{:02x}{:02x}{:02x}",
        bytes[0], bytes[1], bytes[2], bytes[3]
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{ContentBlock, UserMessage};
    use serde_json::json;

    fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(text)],
            timestamp: 7,
        })
    }

    #[test]
    fn header_shape_is_exact() {
        let header = SessionHeader {
            version: FORMAT_VERSION,
            id: "0198a".into(),
            timestamp: "2025-06-01T12:00:00.123Z".into(),
            cwd: "/w".into(),
            parent_session: None,
        };
        assert_eq!(
            serde_json::to_string(&header).unwrap(),
            r#"{"type":"session","version":1,"id":"0198a","timestamp":"2025-06-01T12:00:00.123Z","cwd":"/w"}"#
        );
        let forked = SessionHeader {
            parent_session: Some("abc".into()),
            ..header.clone()
        };
        let line = serde_json::to_string(&forked).unwrap();
        assert!(
            line.ends_with(r#","cwd":"/w","parentSession":"abc"}"#),
            "{line}"
        );
        assert_eq!(parse_header_line(line.as_bytes()).unwrap(), forked);
    }

    #[test]
    fn header_requires_session_type() {
        let bad = br#"{"type":"message","version":1,"id":"x","timestamp":"t","cwd":"/"}"#;
        assert!(parse_header_line(bad).is_err());
        assert!(parse_header_line(br#"{"version":1,"id":"x","timestamp":"t","cwd":"/"}"#).is_err());
    }

    #[test]
    fn entry_shapes_put_type_first() {
        let entry = Entry {
            id: "0a1b2c3d".into(),
            parent_id: None,
            timestamp: "2025-06-01T12:00:00.123Z".into(),
            body: EntryBody::Message {
                message: user("hi"),
            },
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert_eq!(
            line,
            r#"{"type":"message","id":"0a1b2c3d","parentId":null,"timestamp":"2025-06-01T12:00:00.123Z","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":7}}"#
        );
        let model = Entry {
            id: "1".into(),
            parent_id: Some("0a1b2c3d".into()),
            timestamp: "t".into(),
            body: EntryBody::ModelChange {
                provider: "openai".into(),
                model_id: "gpt".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&model).unwrap(),
            json!({"type":"model_change","id":"1","parentId":"0a1b2c3d","timestamp":"t",
                   "provider":"openai","modelId":"gpt"})
        );
        let level = Entry {
            body: EntryBody::ThinkingLevelChange {
                thinking_level: ThinkingLevel::High,
            },
            ..model.clone()
        };
        assert_eq!(
            serde_json::to_value(&level).unwrap()["thinkingLevel"],
            json!("high")
        );
        let info = Entry {
            body: EntryBody::SessionInfo { name: None },
            ..model.clone()
        };
        assert_eq!(serde_json::to_value(&info).unwrap()["name"], json!(null));
    }

    #[test]
    fn every_entry_type_round_trips() {
        let bodies = [
            EntryBody::Message {
                message: user("hello"),
            },
            EntryBody::ModelChange {
                provider: "p".into(),
                model_id: "m".into(),
            },
            EntryBody::ThinkingLevelChange {
                thinking_level: ThinkingLevel::Xhigh,
            },
            EntryBody::SessionInfo {
                name: Some("n".into()),
            },
            EntryBody::SessionInfo { name: None },
            EntryBody::Compaction {
                summary: "## Goal\nx".into(),
                first_kept_entry_id: "0a1b2c3d".into(),
                tokens_before: 1200,
                tokens_after: Some(300),
                details: Some(serde_json::json!({"readFiles": ["a.rs"], "modifiedFiles": []})),
            },
            EntryBody::Branch {
                from_id: Some("0a1b2c3d".into()),
            },
            EntryBody::Compaction {
                summary: "s".into(),
                first_kept_entry_id: "0a1b2c3d".into(),
                tokens_before: 5,
                tokens_after: None,
                details: None,
            },
            EntryBody::Approval(ApprovalEntry {
                tool_call_id: "call_1".into(),
                tool_name: "bash".into(),
                approval_id: Some("apr_1".into()),
                class: Some("send".into()),
                title: Some("keel wants to run `git push`".into()),
                decision: ApprovalDecision::Declined,
                decided_by: Some("user".into()),
                note: Some("not today".into()),
                rule_ids: Vec::new(),
            }),
            EntryBody::Approval(ApprovalEntry {
                tool_call_id: "call_2".into(),
                tool_name: "write".into(),
                approval_id: None,
                class: None,
                title: None,
                decision: ApprovalDecision::Rule,
                decided_by: Some("rule".into()),
                note: None,
                rule_ids: vec!["rule_1".into()],
            }),
        ];
        for body in bodies {
            let entry = Entry {
                id: random_entry_id(),
                parent_id: Some("00000000".into()),
                timestamp: now_rfc3339(),
                body,
            };
            let line = to_line(&entry).unwrap();
            assert_eq!(line.last(), Some(&b'\n'));
            let parsed = parse_entry_line(&line[..line.len() - 1]).unwrap();
            let ParsedLine::Entry(parsed) = parsed else {
                panic!("not an entry: {parsed:?}")
            };
            assert_eq!(parsed, entry);
        }
    }

    #[test]
    fn an_approval_line_has_the_documented_shape() {
        let entry = Entry {
            id: "0a1b2c3d".into(),
            parent_id: Some("00000000".into()),
            timestamp: "t".into(),
            body: EntryBody::Approval(ApprovalEntry {
                tool_call_id: "call_4".into(),
                tool_name: "bash".into(),
                approval_id: Some("apr_1".into()),
                class: Some("money".into()),
                title: None,
                decision: ApprovalDecision::Always,
                decided_by: Some("user".into()),
                note: None,
                rule_ids: vec!["r1".into()],
            }),
        };
        let line = serde_json::to_string(&entry).unwrap();
        assert_eq!(
            line,
            r#"{"type":"approval","id":"0a1b2c3d","parentId":"00000000","timestamp":"t","toolCallId":"call_4","toolName":"bash","approvalId":"apr_1","class":"money","decision":"always","decidedBy":"user","ruleIds":["r1"]}"#
        );
        // A decision from a newer keel still loads.
        let newer = br#"{"type":"approval","id":"a","parentId":null,"timestamp":"t","toolCallId":"c","toolName":"x","decision":"vetoed_by_committee"}"#;
        let ParsedLine::Entry(parsed) = parse_entry_line(newer).unwrap() else {
            panic!("not an entry")
        };
        assert!(matches!(
            parsed.body,
            EntryBody::Approval(ApprovalEntry {
                decision: ApprovalDecision::Unknown,
                ..
            })
        ));
        // A known type with a bad shape is still an error.
        assert!(parse_entry_line(br#"{"type":"approval","id":"a","timestamp":"t"}"#).is_err());
    }

    #[test]
    fn unknown_types_are_told_from_malformed_lines() {
        let unknown = br#"{"type":"branch_summary","id":"aa","parentId":"bb","summary":"x"}"#;
        match parse_entry_line(unknown).unwrap() {
            ParsedLine::Unknown {
                kind,
                id,
                parent_id,
            } => {
                assert_eq!(kind, "branch_summary");
                assert_eq!(id.as_deref(), Some("aa"));
                assert_eq!(parent_id.as_deref(), Some("bb"));
            }
            other => panic!("{other:?}"),
        }
        // Known type with a bad shape, broken JSON, no type, a second header.
        assert!(parse_entry_line(br#"{"type":"message","id":"a","timestamp":"t"}"#).is_err());
        assert!(parse_entry_line(br#"{"type":"message","id":"#).is_err());
        assert!(parse_entry_line(br#"{"id":"a"}"#).is_err());
        assert!(parse_entry_line(br#"[1,2]"#).is_err());
        let header = br#"{"type":"session","version":1,"id":"x","timestamp":"t","cwd":"/"}"#;
        assert!(parse_entry_line(header).is_err());
    }

    #[test]
    fn ids_and_timestamps_have_the_documented_shape() {
        let id = random_entry_id();
        assert_eq!(id.len(), 8);
        assert!(
            id.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        let at = DateTime::parse_from_rfc3339("2025-06-01T12:00:00.5+02:00")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(rfc3339_ms(at), "2025-06-01T10:00:00.500Z");
    }
}
