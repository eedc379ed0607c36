//! A keel session as one self-contained HTML page.
//!
//! This crate owns the HTML export (`export_html` in RPC mode, `keel
//! sessions export --html`): a header with the session's title, model(s),
//! workspace, message counts, token totals and cost; then the active branch
//! (user and assistant messages with Markdown rendered and code
//! highlighted, thinking folded, each tool call with its arguments and
//! result, diffs coloured, long output folded, approval outcomes,
//! compactions marked and the messages they summarised dimmed, setting
//! changes), with the branches that forked off it folded where they left.
//!
//! The page needs nothing from the network: CSS and the one small script
//! (theme toggle, expand/collapse all) are inline, fonts are the system's,
//! images are `data:` URLs, and a strict Content Security Policy allows
//! only that script (by hash). Everything from the model, tools or user is
//! escaped; Markdown's raw HTML is shown as text. It reads entries only
//! (no files, no wire protocol).

mod approval;
mod highlight;
mod markdown;
mod page;
mod render;

use std::path::Path;

use keel_protocol::{Message, Usage};
use keel_session_store::{EntryBody, LoadedSession, SessionTree};

use highlight::escape;
use render::{Renderer, short_time, shorten, thousands};

pub use page::{csp, script_hash};

/// What the header says about a session besides its entries.
#[derive(Debug, Clone, Default)]
pub struct ExportMeta<'a> {
    pub session_id: &'a str,
    pub name: Option<&'a str>,
    pub cwd: &'a str,
    /// RFC 3339.
    pub created: Option<&'a str>,
    pub file: Option<&'a Path>,
    pub parent_session: Option<&'a str>,
}

/// The default file name of an export: `keel-session-<id>.html`.
pub fn default_file_name(session_id: &str) -> String {
    let safe: String = session_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("keel-session-{safe}.html")
}

/// The page of a loaded session file.
pub fn render_loaded(loaded: &LoadedSession) -> String {
    let name = loaded.name();
    let meta = ExportMeta {
        session_id: &loaded.header.id,
        name: name.as_deref(),
        cwd: &loaded.header.cwd,
        created: Some(&loaded.header.timestamp),
        file: Some(&loaded.path),
        parent_session: loaded.header.parent_session.as_deref(),
    };
    render_html(&meta, &loaded.tree())
}

/// Whether the active branch has any message.
pub fn has_messages(tree: &SessionTree) -> bool {
    tree.branch()
        .iter()
        .any(|e| matches!(e.body, EntryBody::Message { .. }))
}

/// The page of `tree`.
pub fn render_html(meta: &ExportMeta<'_>, tree: &SessionTree) -> String {
    let branch = tree.branch();
    let title = meta
        .name
        .map(str::to_owned)
        .or_else(|| {
            branch.iter().find_map(|e| match &e.body {
                EntryBody::Message {
                    message: Message::User(u),
                } => Some(keel_session_store::user_text(u)),
                _ => None,
            })
        })
        .filter(|t| !t.trim().is_empty())
        .map(|t| shorten(&t, 120))
        .unwrap_or_else(|| format!("Session {}", meta.session_id));

    let mut models: Vec<String> = Vec::new();
    let mut usage = Usage::default();
    for e in tree.entries() {
        let model = match &e.body {
            EntryBody::ModelChange { provider, model_id } => Some(format!("{provider}/{model_id}")),
            EntryBody::Message {
                message: Message::Assistant(a),
            } => {
                usage.accumulate(&a.usage);
                (!a.model.is_empty()).then(|| format!("{}/{}", a.provider, a.model))
            }
            _ => None,
        };
        if let Some(m) = model
            && !models.contains(&m)
        {
            models.push(m);
        }
    }
    let (mut users, mut assistants, mut calls, mut compactions) = (0, 0, 0, 0);
    for e in &branch {
        match &e.body {
            EntryBody::Message {
                message: Message::User(_),
            } => users += 1,
            EntryBody::Message {
                message: Message::Assistant(a),
            } => {
                assistants += 1;
                calls += a.tool_calls().len();
            }
            EntryBody::Compaction { .. } => compactions += 1,
            _ => {}
        }
    }
    let leaves = tree
        .entries()
        .iter()
        .filter(|e| {
            !tree
                .entries()
                .iter()
                .any(|c| c.parent_id.as_deref() == Some(e.id.as_str()))
        })
        .count();

    let mut out = String::with_capacity(64 * 1024);
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\" data-theme=\"auto\"><head><meta charset=\"utf-8\">",
    );
    out.push_str(&format!(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{}\">",
        escape(&csp())
    ));
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">");
    out.push_str("<meta name=\"color-scheme\" content=\"light dark\">");
    out.push_str("<meta name=\"referrer\" content=\"no-referrer\">");
    out.push_str(&format!(
        "<title>{} — keel session</title><style>{}</style></head><body><div class=\"wrap\">",
        escape(&title),
        page::STYLE
    ));

    out.push_str(
        "<header class=\"top\"><div class=\"brand\">keel session</div><div class=\"title-row\">",
    );
    out.push_str(&format!("<h1>{}</h1>", escape(&title)));
    out.push_str("<div class=\"controls\"><button id=\"expand-all\" type=\"button\">Expand all</button><button id=\"collapse-all\" type=\"button\">Collapse all</button><button id=\"theme-toggle\" type=\"button\">Theme: auto</button></div></div>");
    out.push_str("<dl class=\"meta\">");
    let mut row = |k: &str, v: &str| {
        out.push_str(&format!("<dt>{}</dt><dd>{}</dd>", escape(k), escape(v)));
    };
    row(
        "Model",
        &if models.is_empty() {
            "—".to_owned()
        } else {
            models.join(", ")
        },
    );
    row("Workspace", meta.cwd);
    if let Some(c) = meta.created {
        row("Started", &short_time(c));
    }
    row("Session", meta.session_id);
    if let Some(f) = meta.file {
        row("File", &f.display().to_string());
    }
    if let Some(p) = meta.parent_session {
        row("Forked from", p);
    }
    out.push_str("</dl><div class=\"totals\">");
    let mut pill = |label: &str, value: String| {
        out.push_str(&format!(
            "<span class=\"pill\">{} <b>{}</b></span>",
            escape(label),
            escape(&value)
        ));
    };
    pill("messages", format!("{users} user · {assistants} assistant"));
    pill("tool calls", calls.to_string());
    pill("input", thousands(usage.input));
    pill("output", thousands(usage.output));
    if usage.cache_read + usage.cache_write > 0 {
        pill(
            "cache r/w",
            format!(
                "{} / {}",
                thousands(usage.cache_read),
                thousands(usage.cache_write)
            ),
        );
    }
    pill("cost", format!("${:.4}", usage.cost.total));
    if compactions > 0 {
        pill("compactions", compactions.to_string());
    }
    if leaves > 1 {
        pill("branches", leaves.to_string());
    }
    out.push_str("</div></header><main>");
    Renderer::new(tree).active(&mut out);
    out.push_str("</main><footer>Exported by keel · the active branch is shown; other branches are folded where they forked.</footer></div>");
    out.push_str(&format!(
        "<script>{}</script></body></html>\n",
        page::SCRIPT
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{
        AssistantMessage, ContentBlock, StopReason, ToolResultMessage, UserMessage,
    };
    use keel_session_store::Entry;

    fn entry(id: &str, parent: Option<&str>, body: EntryBody) -> Entry {
        Entry {
            id: id.into(),
            parent_id: parent.map(str::to_owned),
            timestamp: "2025-06-01T12:00:01.000Z".into(),
            body,
        }
    }

    fn user(t: &str) -> EntryBody {
        EntryBody::Message {
            message: Message::User(UserMessage {
                content: vec![ContentBlock::text(t)],
                timestamp: 0,
            }),
        }
    }

    #[test]
    fn the_page_escapes_injected_markup_and_allows_only_its_script() {
        let call = EntryBody::Message {
            message: Message::Assistant(AssistantMessage {
                content: vec![
                    ContentBlock::text("Running <img src=x onerror=alert(1)>"),
                    ContentBlock::ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        arguments: serde_json::json!({"command": "cat evil.html"}),
                    },
                ],
                api: "a".into(),
                provider: "mock".into(),
                model: "mock-model".into(),
                usage: Default::default(),
                stop_reason: StopReason::ToolUse,
                error_message: None,
                error_kind: None,
                timestamp: 0,
                response_id: None,
            }),
        };
        let result = EntryBody::Message {
            message: Message::ToolResult(ToolResultMessage {
                tool_call_id: "c1".into(),
                tool_name: "bash".into(),
                content: vec![ContentBlock::text("<script>window.pwned=1</script>")],
                details: None,
                is_error: false,
                timestamp: 0,
            }),
        };
        let tree = SessionTree::new(
            vec![
                entry("u1", None, user("hello </title><script>x()</script>")),
                entry("a1", Some("u1"), call),
                entry("t1", Some("a1"), result),
            ],
            Default::default(),
            Some("t1".into()),
        );
        let meta = ExportMeta {
            session_id: "s1",
            cwd: "/w",
            ..Default::default()
        };
        let html = render_html(&meta, &tree);
        assert_eq!(
            html.matches("<script>").count(),
            1,
            "only the page's script"
        );
        assert!(html.contains("&lt;script&gt;window.pwned=1&lt;/script&gt;"));
        assert!(!html.contains("<img src=x"));
        assert!(html.contains(&script_hash()));
        assert!(html.contains("default-src &#39;none&#39;"));
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(has_messages(&tree));
        assert_eq!(default_file_name("01a/b"), "keel-session-01a_b.html");
    }
}
