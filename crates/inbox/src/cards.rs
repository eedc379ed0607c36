//! The card of one held call, and the history line of a decided one.
//!
//! Owns rendering a [`PendingRequest`] as the approval card (title, class
//! pill, the argument lines with secrets already removed, for `write` and
//! `edit` the diff, the workspace, the session's name and the last thing
//! the agent said, the expiry, and the actions: Allow, Always allow with
//! the rule's scope in words (never for money), Decline with a note; Send
//! and Discard for drafts), and what a card needs from the session file
//! ([`CallContext`]). Everything shown is escaped. It must not decide
//! anything.

use std::fmt::Write as _;
use std::path::Path;

use keel_approvals::{ApprovalRecord, Delivery, PendingRequest};
use serde_json::Value;

use crate::html::{esc, until, when};

/// Most diff lines a card shows.
pub const MAX_DIFF_LINES: usize = 120;
/// Longest "last thing the agent said" a card shows, in characters.
pub const MAX_SAID_CHARS: usize = 400;

/// What the session adds to a card.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallContext {
    pub session_name: Option<String>,
    /// The agent's text in the message that made the call (or just before).
    pub said: Option<String>,
}

/// The card of `r`. `row` is the stored request (its arguments, for the
/// diff); `csrf` goes into every form.
pub fn card(
    r: &PendingRequest,
    row: &ApprovalRecord,
    ctx: &CallContext,
    csrf: &str,
    now: i64,
) -> String {
    let mut out = String::new();
    let id = esc(&r.id);
    let _ = write!(
        out,
        "<article class=\"card\" id=\"card-{id}\" data-id=\"{id}\">\
         <header><span class=\"pill class-{}\">{}</span>",
        esc(r.class.as_str()),
        esc(&r.class_label)
    );
    if r.delivery == Delivery::Draft {
        out.push_str("<span class=\"pill draft\">Draft</span>");
    }
    let _ = write!(out, "<h2>{}</h2></header>", esc(&r.title));
    let session = ctx
        .session_name
        .clone()
        .unwrap_or_else(|| format!("session {}", short(&r.session_id)));
    let _ = write!(
        out,
        "<p class=\"meta\"><span class=\"ws\">{}</span> · <span>{}</span> · \
         <span title=\"{}\">expires {}</span></p>",
        esc(&r.workspace),
        esc(&session),
        esc(&when(r.expires_at)),
        esc(&until(r.expires_at, now))
    );
    if let Some(said) = &ctx.said {
        let _ = write!(
            out,
            "<blockquote class=\"said\">{}</blockquote>",
            esc(&cut(said))
        );
    }
    if !r.arg_lines.is_empty() {
        let _ = write!(
            out,
            "<pre class=\"args\">{}</pre>",
            esc(&r.arg_lines.join("\n"))
        );
    }
    if let Some(diff) = diff_of(row) {
        out.push_str("<pre class=\"diff\">");
        for line in diff.lines() {
            let class = match line.chars().next() {
                Some('+') if !line.starts_with("+++") => "add",
                Some('-') if !line.starts_with("---") => "del",
                Some('@') => "hunk",
                _ => "ctx",
            };
            let _ = write!(out, "<span class=\"{class}\">{}</span>", esc(line));
        }
        out.push_str("</pre>");
    }
    let _ = write!(out, "<p class=\"reason\">{}</p>", esc(&r.reason));
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/requests/{id}/decide\" class=\"actions\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(csrf)
    );
    if r.delivery == Delivery::Draft {
        out.push_str(
            "<button type=\"submit\" name=\"action\" value=\"send\" class=\"allow\">Send</button>\
             <button type=\"submit\" name=\"action\" value=\"discard\">Discard</button>",
        );
    } else {
        out.push_str(
            "<button type=\"submit\" name=\"action\" value=\"approve\" class=\"allow\">Allow</button>",
        );
        if let Some(offer) = &r.always {
            let _ = write!(
                out,
                "<button type=\"submit\" name=\"action\" value=\"always\" \
                 aria-describedby=\"scope-{id}\">Always allow</button>\
                 <p class=\"scope\" id=\"scope-{id}\">Saves the rule: {}</p>",
                esc(&offer.label)
            );
        }
        out.push_str(
            "<div class=\"decline\"><input type=\"text\" name=\"note\" maxlength=\"2000\" \
             placeholder=\"Note for the agent (optional)\" aria-label=\"Note for the agent\">\
             <button type=\"submit\" name=\"action\" value=\"decline\">Decline</button></div>",
        );
    }
    out.push_str("</form></article>");
    out
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

fn cut(text: &str) -> String {
    if text.chars().count() <= MAX_SAID_CHARS {
        return text.to_owned();
    }
    let mut s: String = text.chars().take(MAX_SAID_CHARS - 1).collect();
    s.push('…');
    s
}

/// The diff a `write` or `edit` call would make, against the file as it is
/// now (`write`), or of its replacements (`edit`).
pub fn diff_of(row: &ApprovalRecord) -> Option<String> {
    let args = &row.args;
    let path = args.get("path").and_then(Value::as_str)?;
    let (old, new) = match row.tool.as_str() {
        "write" => {
            let content = args.get("content").and_then(Value::as_str)?;
            let full = Path::new(&row.workspace).join(path);
            let current = std::fs::read_to_string(&full).unwrap_or_default();
            (current, content.to_owned())
        }
        "edit" => {
            let pairs: Vec<(String, String)> = match args.get("edits").and_then(Value::as_array) {
                Some(edits) => edits
                    .iter()
                    .filter_map(|e| {
                        Some((
                            text_field(e, "oldText", "old_text")?,
                            text_field(e, "newText", "new_text")?,
                        ))
                    })
                    .collect(),
                None => vec![(
                    text_field(args, "oldText", "old_text")?,
                    text_field(args, "newText", "new_text")?,
                )],
            };
            let old = pairs
                .iter()
                .map(|p| p.0.as_str())
                .collect::<Vec<_>>()
                .join("\n…\n");
            let new = pairs
                .iter()
                .map(|p| p.1.as_str())
                .collect::<Vec<_>>()
                .join("\n…\n");
            (old, new)
        }
        _ => return None,
    };
    let diff = similar::TextDiff::from_lines(&old, &new)
        .unified_diff()
        .context_radius(3)
        .header(path, path)
        .to_string();
    let mut lines: Vec<&str> = diff.lines().collect();
    let more = lines.len().saturating_sub(MAX_DIFF_LINES);
    lines.truncate(MAX_DIFF_LINES);
    let mut text = lines.join("\n");
    if more > 0 {
        let _ = write!(text, "\n… {more} more lines");
    }
    Some(text)
}

fn text_field(v: &Value, a: &str, b: &str) -> Option<String> {
    v.get(a)
        .or_else(|| v.get(b))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// One line of the history: what was decided, by whom, when.
pub fn history_line(r: &ApprovalRecord) -> String {
    let status = format!("{:?}", r.status).to_lowercase();
    let by = r.decided_by.as_deref().unwrap_or("nobody");
    let at = r.decided_at.map(when).unwrap_or_default();
    let mut line = format!(
        "<li><span class=\"pill status-{}\">{}</span> {} <span class=\"meta\">by {} {}</span>",
        esc(&status),
        esc(&status),
        esc(&keel_approvals::card_title(
            &r.tool,
            r.operation.as_deref(),
            &r.args
        )),
        esc(by),
        esc(&at)
    );
    if let Some(note) = &r.note {
        let _ = write!(line, " <q>{}</q>", esc(note));
    }
    line.push_str("</li>");
    line
}
