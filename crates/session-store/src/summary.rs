//! What a session listing shows of a file's entry lines: how many are
//! messages, the first user message's text, the last name.
//!
//! Owns [`Facts`], built one line at a time, so the disk store can stream
//! a file into it and the database store can keep it up to date as lines
//! are appended (and list thousands of sessions without reading them).
//! Malformed lines count for nothing. It must not know where lines live.

use std::borrow::Cow;

use keel_protocol::{ContentBlock, Message};
use serde::Deserialize;

use crate::format::{EntryBody, ParsedLine, parse_entry_line};
use crate::load::is_blank;

/// `first_message` is cut to this many characters (plus `…`).
pub const FIRST_MESSAGE_MAX_CHARS: usize = 100;

/// The listing's facts of some entry lines, in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Facts {
    /// Message entries (all branches).
    pub messages: usize,
    /// The display text of the first user message with text.
    pub first_message: Option<String>,
    /// `Some` once a `session_info` line was seen: the last one's name.
    pub name: Option<Option<String>>,
}

/// The fields of a line the facts need; everything else is skipped unparsed.
#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, borrow)]
    message: Option<RoleProbe<'a>>,
}

#[derive(Deserialize)]
struct RoleProbe<'a> {
    #[serde(borrow)]
    role: Cow<'a, str>,
}

impl Facts {
    /// The facts of `lines` (entry lines, no header).
    pub(crate) fn of<'a>(lines: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut facts = Self::default();
        for line in lines {
            facts.add(line);
        }
        facts
    }

    /// Takes in the next entry line (without its line end).
    pub(crate) fn add(&mut self, line: &[u8]) {
        if is_blank(line) {
            return;
        }
        let Ok(probe) = serde_json::from_slice::<Probe>(line) else {
            return;
        };
        match probe.kind.as_ref() {
            "message" => {
                self.messages += 1;
                let is_user = probe.message.is_some_and(|m| m.role == "user");
                if is_user && self.first_message.is_none() {
                    self.first_message = first_user_text(line);
                }
            }
            "session_info" => self.name = Some(probe.name),
            _ => {}
        }
    }
}

/// The display text of a user message line, if it has any text.
fn first_user_text(line: &[u8]) -> Option<String> {
    let Ok(ParsedLine::Entry(entry)) = parse_entry_line(line) else {
        return None;
    };
    let EntryBody::Message {
        message: Message::User(user),
    } = entry.body
    else {
        return None;
    };
    let mut words = Vec::new();
    for block in &user.content {
        if let ContentBlock::Text { text } = block {
            words.extend(text.split_whitespace());
        }
    }
    if words.is_empty() {
        return None;
    }
    let text = words.join(" ");
    match text.char_indices().nth(FIRST_MESSAGE_MAX_CHARS) {
        Some((cut, _)) => Some(format!("{}…", &text[..cut])),
        None => Some(text),
    }
}
