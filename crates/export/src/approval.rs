//! Approval outcomes as HTML: the line shown with a tool call saying how
//! it was let through or stopped.
//!
//! This module owns the wording of `approval` entries ("approved by you",
//! "declined: …", "allowed by rule …") and, for sessions written before
//! those entries existed, reading an outcome from the tool result itself.
//! Everything it prints is escaped; it must not know how entries are
//! found in the tree (`render`).

use keel_protocol::ToolResultMessage;
use keel_session_store::{ApprovalDecision, ApprovalEntry};
use serde_json::Value;

use crate::highlight::escape;

/// The person the session belongs to, as deciders name them.
fn by(decided_by: Option<&str>) -> String {
    match decided_by.map(str::trim).filter(|d| !d.is_empty()) {
        None | Some("user") => "you".to_owned(),
        Some(other) => other.to_owned(),
    }
}

/// One sentence for an `approval` entry.
pub fn sentence(a: &ApprovalEntry) -> String {
    let note = a.note.as_deref().map(str::trim).filter(|n| !n.is_empty());
    let rules = if a.rule_ids.is_empty() {
        String::new()
    } else {
        format!(" {}", a.rule_ids.join(", "))
    };
    match a.decision {
        ApprovalDecision::Approved => format!("approved by {}", by(a.decided_by.as_deref())),
        ApprovalDecision::Always => format!(
            "approved by {} and always allowed from now on (rule{rules})",
            by(a.decided_by.as_deref())
        ),
        ApprovalDecision::Rule => format!("allowed by rule{rules}"),
        ApprovalDecision::Declined => match note {
            Some(n) => format!("declined: “{n}”"),
            None => format!("declined by {}", by(a.decided_by.as_deref())),
        },
        ApprovalDecision::Expired => "expired: nobody answered in time; it did not run".to_owned(),
        ApprovalDecision::Cancelled => {
            "cancelled: the run was stopped while it waited; it did not run".to_owned()
        }
        ApprovalDecision::Drafted => {
            "held as a draft (no one was there to answer); it did not run".to_owned()
        }
        ApprovalDecision::Denied => match note {
            Some(n) => format!("denied: {n}"),
            None => "denied".to_owned(),
        },
        ApprovalDecision::Unknown => "decided (by a newer keel)".to_owned(),
    }
}

/// The approval line of a call from its `approval` entry.
pub fn render(out: &mut String, a: &ApprovalEntry) {
    let kind = if a.decision.ran() { "ok" } else { "stop" };
    out.push_str(&format!(
        "<div class=\"approval {kind}\" data-decision=\"{}\">⚖ Approval: {}",
        a.decision.as_str(),
        escape(&sentence(a))
    ));
    let mut facts = Vec::new();
    if let Some(class) = &a.class {
        facts.push(format!("class {class}"));
    }
    if let Some(title) = &a.title {
        facts.push(title.clone());
    }
    if let Some(id) = &a.approval_id {
        facts.push(id.clone());
    }
    if !facts.is_empty() {
        out.push_str(&format!(
            " <span class=\"approval-facts\">· {}</span>",
            escape(&facts.join(" · "))
        ));
    }
    out.push_str("</div>");
}

/// The approval outcome a result reports, for sessions without
/// `approval` entries.
pub fn from_result(r: &ToolResultMessage, text: &str) -> Option<String> {
    if let Some(a) = r.details.as_ref().and_then(|d| d.get("approval")) {
        let decision = a
            .get("decision")
            .or_else(|| a.get("status"))
            .and_then(Value::as_str)
            .unwrap_or("decided");
        let note = a.get("note").and_then(Value::as_str);
        return Some(match note {
            Some(n) => format!("Approval: {decision} — “{n}”"),
            None => format!("Approval: {decision}"),
        });
    }
    let patterns = [
        ("The user declined this", "declined"),
        ("The user did not answer in time", "expired"),
        ("waited for approval", "cancelled while waiting"),
        ("Held for approval as draft", "held as a draft"),
        ("is still undecided", "undecided"),
        ("The approval check failed", "check failed"),
        (
            "The user sent a message instead of answering",
            "superseded by a message",
        ),
    ];
    patterns
        .iter()
        .find(|(p, _)| text.contains(p))
        .map(|(_, what)| {
            let note = text
                .split_once("Their note: ")
                .or_else(|| text.split_once("Their message: "))
                .map(|(_, n)| format!(" — “{}”", n.trim()))
                .unwrap_or_default();
            format!("Approval: {what}{note}")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(decision: ApprovalDecision) -> ApprovalEntry {
        ApprovalEntry {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            approval_id: Some("apr_1".into()),
            class: Some("send".into()),
            title: Some("keel wants to run `<b>x</b>`".into()),
            decision,
            decided_by: Some("user".into()),
            note: None,
            rule_ids: Vec::new(),
        }
    }

    #[test]
    fn every_decision_reads_as_a_sentence() {
        assert_eq!(
            sentence(&entry(ApprovalDecision::Approved)),
            "approved by you"
        );
        let declined = ApprovalEntry {
            note: Some("not on main".into()),
            ..entry(ApprovalDecision::Declined)
        };
        assert_eq!(sentence(&declined), "declined: “not on main”");
        let rule = ApprovalEntry {
            rule_ids: vec!["rule_7".into()],
            decided_by: Some("rule".into()),
            ..entry(ApprovalDecision::Rule)
        };
        assert_eq!(sentence(&rule), "allowed by rule rule_7");
        let by_client = ApprovalEntry {
            decided_by: Some("ide".into()),
            ..entry(ApprovalDecision::Approved)
        };
        assert_eq!(sentence(&by_client), "approved by ide");
        for d in [
            ApprovalDecision::Always,
            ApprovalDecision::Expired,
            ApprovalDecision::Cancelled,
            ApprovalDecision::Drafted,
            ApprovalDecision::Denied,
            ApprovalDecision::Unknown,
        ] {
            assert!(!sentence(&entry(d)).is_empty());
        }
        let mut out = String::new();
        render(&mut out, &declined);
        assert!(out.contains("data-decision=\"declined\""), "{out}");
        assert!(out.contains("`&lt;b&gt;x&lt;/b&gt;`"), "{out}");
        assert!(!out.contains("<b>x"), "{out}");
    }
}
