//! Entries as HTML: messages, thinking, tool calls with their results,
//! approvals, compactions, setting changes, and the branches that forked
//! off the active one.
//!
//! Everything that came from the model, the tools or the user is escaped
//! (text) or rendered through [`crate::markdown`], which escapes raw HTML.

use std::collections::{HashMap, HashSet};

use keel_protocol::{AssistantMessage, ContentBlock, Message, StopReason, ToolResultMessage};
use keel_session_store::{ApprovalEntry, Entry, EntryBody, SessionTree};
use serde_json::Value;

use crate::approval;
use crate::highlight::{diff, escape, highlight, lang_of_path, looks_like_diff};
use crate::markdown;

/// Lines of a tool output shown before the rest is folded.
const FOLD_LINES: usize = 24;
/// Characters shown before a long output is folded.
const FOLD_CHARS: usize = 4000;
/// How deep forks of forks are drawn.
const MAX_FORK_DEPTH: usize = 4;

/// Renders the entries of a tree.
pub struct Renderer<'a> {
    tree: &'a SessionTree,
    children: HashMap<&'a str, Vec<&'a Entry>>,
    roots: Vec<&'a Entry>,
    results: HashMap<&'a str, &'a ToolResultMessage>,
    /// The latest `approval` entry of each tool call.
    approvals: HashMap<&'a str, &'a ApprovalEntry>,
    /// Tool calls some assistant message makes.
    calls: HashSet<&'a str>,
    /// Entries summarised by the latest compaction of the active branch.
    compacted: HashSet<&'a str>,
}

impl<'a> Renderer<'a> {
    pub fn new(tree: &'a SessionTree) -> Self {
        let mut children: HashMap<&str, Vec<&Entry>> = HashMap::new();
        let mut roots = Vec::new();
        let mut results = HashMap::new();
        let mut approvals = HashMap::new();
        let mut calls = HashSet::new();
        for e in tree.entries() {
            match e.parent_id.as_deref() {
                Some(p) if tree.get(p).is_some() => children.entry(p).or_default().push(e),
                _ => roots.push(e),
            }
            match &e.body {
                EntryBody::Message {
                    message: Message::ToolResult(r),
                } => {
                    results.insert(r.tool_call_id.as_str(), r);
                }
                EntryBody::Message {
                    message: Message::Assistant(a),
                } => calls.extend(a.tool_calls().into_iter().map(|(id, _, _)| id)),
                EntryBody::Approval(a) => {
                    approvals.insert(a.tool_call_id.as_str(), a);
                }
                _ => {}
            }
        }
        let branch = tree.branch();
        let mut compacted = HashSet::new();
        if let Some(at) = branch
            .iter()
            .rposition(|e| matches!(e.body, EntryBody::Compaction { .. }))
            && let EntryBody::Compaction {
                first_kept_entry_id,
                ..
            } = &branch[at].body
            && let Some(kept) = branch.iter().position(|e| &e.id == first_kept_entry_id)
        {
            compacted = branch[..kept.min(at)]
                .iter()
                .map(|e| e.id.as_str())
                .collect();
        }
        Self {
            tree,
            children,
            roots,
            results,
            approvals,
            calls,
            compacted,
        }
    }

    /// The active branch, with the forks that leave it.
    pub fn active(&self, out: &mut String) {
        let branch = self.tree.branch();
        let on_branch: HashSet<&str> = branch.iter().map(|e| e.id.as_str()).collect();
        for root in &self.roots {
            if !on_branch.contains(root.id.as_str()) {
                self.fork(out, root, 0);
            }
        }
        for e in &branch {
            self.entry(out, e);
            for child in self.children.get(e.id.as_str()).into_iter().flatten() {
                if !on_branch.contains(child.id.as_str()) {
                    self.fork(out, child, 0);
                }
            }
        }
    }

    /// Entries from `start` along its newest descendants, folded.
    fn fork(&self, out: &mut String, start: &'a Entry, depth: usize) {
        let mut path = vec![start];
        let mut current = start;
        while let Some(next) = self
            .children
            .get(current.id.as_str())
            .and_then(|c| c.last())
        {
            path.push(next);
            current = next;
        }
        let first_text = path
            .iter()
            .find_map(|e| match &e.body {
                EntryBody::Message {
                    message: Message::User(u),
                } => Some(keel_session_store::user_text(u)),
                _ => None,
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "<details class=\"fork\"><summary>⑂ Another branch from here: “{}” · {} entries</summary>",
            escape(&shorten(&first_text, 80)),
            path.len()
        ));
        for e in &path {
            self.entry(out, e);
            if depth < MAX_FORK_DEPTH {
                let siblings = self.children.get(e.id.as_str());
                for child in siblings.into_iter().flatten() {
                    let last = siblings.and_then(|s| s.last()).map(|l| l.id.as_str());
                    if Some(child.id.as_str()) != last {
                        self.fork(out, child, depth + 1);
                    }
                }
            }
        }
        out.push_str("</details>");
    }

    fn entry(&self, out: &mut String, e: &Entry) {
        let compacted = self.compacted.contains(e.id.as_str());
        match &e.body {
            EntryBody::Message { message } => match message {
                Message::User(u) => {
                    open_entry(out, e, "msg user", compacted);
                    role(out, "You", None, &e.timestamp, compacted);
                    out.push_str("<div class=\"md\">");
                    blocks(out, &u.content);
                    out.push_str("</div></section>");
                }
                Message::Assistant(a) => {
                    open_entry(out, e, "msg assistant", compacted);
                    role(out, "Assistant", Some(&a.model), &e.timestamp, compacted);
                    self.assistant(out, a);
                    out.push_str("</section>");
                }
                Message::ToolResult(r) => {
                    // Shown with its call; an orphan result stands alone.
                    if !self.calls.contains(r.tool_call_id.as_str()) {
                        open_entry(out, e, "msg", compacted);
                        role(out, "Tool result", None, &e.timestamp, compacted);
                        tool_output(out, r, true);
                        out.push_str("</section>");
                    }
                }
            },
            // Shown with its call; one whose call is not in the file stands
            // alone.
            EntryBody::Approval(a) => {
                if !self.calls.contains(a.tool_call_id.as_str()) {
                    out.push_str("<div class=\"entry event\">");
                    approval::render(out, a);
                    out.push_str("</div>");
                }
            }
            EntryBody::ModelChange { provider, model_id } => {
                event(out, &format!("Model: {provider}/{model_id}"))
            }
            EntryBody::ThinkingLevelChange { thinking_level } => {
                let level = serde_json::to_value(thinking_level)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_owned))
                    .unwrap_or_default();
                event(out, &format!("Thinking level: {level}"))
            }
            EntryBody::Branch { .. } => event(out, "⑂ Went back to an earlier point"),
            EntryBody::SessionInfo { name } => match name {
                Some(n) => event(out, &format!("Session named “{n}”")),
                None => event(out, "Session name cleared"),
            },
            EntryBody::Compaction {
                summary,
                tokens_before,
                tokens_after,
                details,
                ..
            } => {
                out.push_str(&format!(
                    "<section class=\"entry compaction\" id=\"e-{}\"><div class=\"badge\">⟳ Context compacted",
                    escape(&e.id)
                ));
                match tokens_after {
                    Some(after) => out.push_str(&format!(
                        " · ~{} → ~{} tokens",
                        thousands(*tokens_before),
                        thousands(*after)
                    )),
                    None => {
                        out.push_str(&format!(" · ~{} tokens before", thousands(*tokens_before)))
                    }
                }
                out.push_str("</div>");
                out.push_str(
                    "<details><summary>Summary the model continued from</summary><div class=\"md\">",
                );
                out.push_str(&markdown::render(summary));
                out.push_str("</div>");
                if let Some(files) = details.as_ref().and_then(files_line) {
                    out.push_str(&format!("<div class=\"usage\">{}</div>", escape(&files)));
                }
                out.push_str("</details></section>");
            }
        }
    }

    fn assistant(&self, out: &mut String, a: &AssistantMessage) {
        for block in &a.content {
            match block {
                ContentBlock::Text { text } => {
                    out.push_str("<div class=\"md\">");
                    out.push_str(&markdown::render(text));
                    out.push_str("</div>");
                }
                ContentBlock::Thinking { thinking, .. } => {
                    if thinking.trim().is_empty() {
                        continue;
                    }
                    out.push_str(
                        "<details class=\"thinking\"><summary>Thinking</summary><div class=\"md\">",
                    );
                    out.push_str(&markdown::render(thinking));
                    out.push_str("</div></details>");
                }
                ContentBlock::Image { data, mime_type } => image(out, mime_type, data),
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => self.tool_call(out, id, name, arguments),
            }
        }
        match a.stop_reason {
            StopReason::Error => out.push_str(&format!(
                "<div class=\"error-box\">✗ {}</div>",
                escape(
                    a.error_message
                        .as_deref()
                        .unwrap_or("The model call failed")
                )
            )),
            StopReason::Aborted => out.push_str("<div class=\"error-box\">■ Aborted</div>"),
            StopReason::Stop | StopReason::Length | StopReason::ToolUse => {}
        }
        let u = &a.usage;
        if u.total_tokens > 0 || u.input + u.output > 0 {
            let mut line = format!("in {} · out {}", thousands(u.input), thousands(u.output));
            if u.cache_read + u.cache_write > 0 {
                line.push_str(&format!(
                    " · cache read {} / write {}",
                    thousands(u.cache_read),
                    thousands(u.cache_write)
                ));
            }
            if u.cost.total > 0.0 {
                line.push_str(&format!(" · ${:.4}", u.cost.total));
            }
            out.push_str(&format!("<div class=\"usage\">{}</div>", escape(&line)));
        }
    }

    fn tool_call(&self, out: &mut String, id: &str, name: &str, args: &Value) {
        let result = self.results.get(id).copied();
        let (status, class) = match result {
            Some(r) if r.is_error => ("<span class=\"status err\">✗</span>", "tool err"),
            Some(_) => ("<span class=\"status ok\">✓</span>", "tool"),
            None => ("<span class=\"status wait\">…</span>", "tool"),
        };
        out.push_str(&format!(
            "<div class=\"{class}\"><div class=\"tool-head\"><span class=\"tool-name mono\">{}</span><span class=\"tool-summary mono\">{}</span>{status}</div><div class=\"tool-body\">",
            escape(name),
            escape(&shorten(&summary_of(name, args), 120))
        ));
        tool_args(out, name, args);
        let decided = self.approvals.get(id).copied();
        if let Some(a) = decided {
            approval::render(out, a);
        }
        match result {
            Some(r) => tool_output(out, r, decided.is_none()),
            None => out.push_str("<div class=\"usage\">No result was recorded.</div>"),
        }
        out.push_str("</div></div>");
    }
}

fn open_entry(out: &mut String, e: &Entry, class: &str, compacted: bool) {
    out.push_str(&format!(
        "<section class=\"entry {class}{}\" id=\"e-{}\">",
        if compacted { " compacted" } else { "" },
        escape(&e.id)
    ));
}

fn role(out: &mut String, who: &str, model: Option<&str>, timestamp: &str, compacted: bool) {
    out.push_str(&format!(
        "<div class=\"role\"><span class=\"who\">{}</span>",
        escape(who)
    ));
    if let Some(m) = model.filter(|m| !m.is_empty()) {
        out.push_str(&format!("<span>{}</span>", escape(m)));
    }
    if compacted {
        out.push_str("<span class=\"compacted-note\">summarised</span>");
    }
    out.push_str(&format!(
        "<time datetime=\"{}\">{}</time></div>",
        escape(timestamp),
        escape(&short_time(timestamp))
    ));
}

fn event(out: &mut String, text: &str) {
    out.push_str(&format!(
        "<div class=\"entry event\"><span>{}</span></div>",
        escape(text)
    ));
}

fn blocks(out: &mut String, content: &[ContentBlock]) {
    for b in content {
        match b {
            ContentBlock::Text { text } => out.push_str(&markdown::render(text)),
            ContentBlock::Image { data, mime_type } => image(out, mime_type, data),
            ContentBlock::Thinking { thinking, .. } => out.push_str(&markdown::render(thinking)),
            ContentBlock::ToolCall { name, .. } => {
                out.push_str(&format!("<p><code>{}</code></p>", escape(name)))
            }
        }
    }
}

fn image(out: &mut String, mime: &str, data: &str) {
    let ok_mime = matches!(
        mime,
        "image/png" | "image/jpeg" | "image/gif" | "image/webp"
    );
    let ok_data = data
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='));
    if ok_mime && ok_data {
        out.push_str(&format!(
            "<img class=\"image\" alt=\"image\" src=\"data:{mime};base64,{data}\">"
        ));
    } else {
        out.push_str("<p class=\"usage\">[image]</p>");
    }
}

/// One line saying what a call does.
fn summary_of(name: &str, args: &Value) -> String {
    let s = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    match name {
        "bash" => s("command").lines().next().unwrap_or("").to_owned(),
        "read" | "write" | "edit" | "ls" => s("path"),
        "grep" | "find" => format!("{} {}", s("pattern"), s("path")).trim().to_owned(),
        _ => args.to_string(),
    }
}

fn tool_args(out: &mut String, name: &str, args: &Value) {
    let s = |k: &str| args.get(k).and_then(Value::as_str);
    match (name, s("command"), s("path"), s("content")) {
        ("bash", Some(cmd), _, _) => {
            out.push_str("<div class=\"label\">command</div>");
            folded(out, &format!("$ {cmd}"), "sh");
        }
        ("write", _, Some(path), Some(content)) => {
            out.push_str(&format!(
                "<div class=\"label\">content of {}</div>",
                escape(path)
            ));
            folded(out, content, lang_of_path(path));
        }
        ("edit", _, Some(_), _) => {
            let edits = args.get("edits").and_then(Value::as_array);
            let mut text = String::new();
            for e in edits.into_iter().flatten() {
                let old = e.get("oldText").and_then(Value::as_str).unwrap_or("");
                let new = e.get("newText").and_then(Value::as_str).unwrap_or("");
                text.push_str("@@ edit @@\n");
                for l in old.lines() {
                    text.push_str(&format!("-{l}\n"));
                }
                for l in new.lines() {
                    text.push_str(&format!("+{l}\n"));
                }
            }
            if !text.is_empty() {
                out.push_str("<div class=\"label\">edits</div>");
                folded(out, &text, "diff");
            }
        }
        ("read" | "ls" | "grep" | "find", _, _, _) => {
            if args.as_object().is_some_and(|m| m.len() > 1) {
                out.push_str("<div class=\"label\">arguments</div>");
                folded(out, &pretty(args), "json");
            }
        }
        _ => {
            out.push_str("<div class=\"label\">arguments</div>");
            folded(out, &pretty(args), "json");
        }
    }
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// The result of a call; `guess_approval`: say what approval outcome the
/// result text reports (no `approval` entry tells it).
fn tool_output(out: &mut String, r: &ToolResultMessage, guess_approval: bool) {
    let text = keel_protocol::joined_text(&r.content);
    if guess_approval && let Some(note) = approval::from_result(r, &text) {
        out.push_str(&format!(
            "<div class=\"approval\">⚖ {}</div>",
            escape(&note)
        ));
    }
    let detail_diff = r
        .details
        .as_ref()
        .and_then(|d| d.get("diff"))
        .and_then(Value::as_str);
    out.push_str(&format!(
        "<div class=\"label\">{}</div>",
        if r.is_error { "error" } else { "result" }
    ));
    match detail_diff {
        Some(d) if !d.is_empty() => {
            folded(out, &text, "");
            folded(out, d, "diff");
        }
        _ if looks_like_diff(&text) => folded(out, &text, "diff"),
        _ if text.is_empty() => out.push_str("<div class=\"usage\">(no output)</div>"),
        _ => folded(out, &text, ""),
    }
    for b in &r.content {
        if let ContentBlock::Image { data, mime_type } = b {
            image(out, mime_type, data);
        }
    }
}

/// A code block; long text shows its head and folds the rest.
fn folded(out: &mut String, text: &str, lang: &str) {
    let render = |t: &str| {
        if lang == "diff" {
            diff(t)
        } else {
            highlight(t, lang)
        }
    };
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let head_len = if lines.len() > FOLD_LINES {
        lines[..FOLD_LINES].iter().map(|l| l.len()).sum()
    } else if text.len() > FOLD_CHARS {
        let mut cut = FOLD_CHARS;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        cut
    } else {
        text.len()
    };
    let (head, rest) = text.split_at(head_len);
    out.push_str(&format!(
        "<pre class=\"code\"><code>{}</code></pre>",
        render(head.trim_end_matches('\n'))
    ));
    if !rest.is_empty() {
        let more = rest.lines().count();
        out.push_str(&format!(
            "<details class=\"more\"><summary>Show {} more line{}</summary><pre class=\"code\"><code>{}</code></pre></details>",
            more,
            if more == 1 { "" } else { "s" },
            render(rest.trim_end_matches('\n'))
        ));
    }
}

fn files_line(details: &Value) -> Option<String> {
    let list = |k: &str| -> Vec<String> {
        details
            .get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (read, modified) = (list("readFiles"), list("modifiedFiles"));
    if read.is_empty() && modified.is_empty() {
        return None;
    }
    Some(format!(
        "Read: {} · Modified: {}",
        if read.is_empty() {
            "—".to_owned()
        } else {
            read.join(", ")
        },
        if modified.is_empty() {
            "—".to_owned()
        } else {
            modified.join(", ")
        }
    ))
}

/// `text` cut to `max` characters (plus `…`), on one line.
pub fn shorten(text: &str, max: usize) -> String {
    let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &one[..at]),
        None => one,
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `2025-06-01T12:00:01.000Z` → `2025-06-01 12:00`.
pub fn short_time(ts: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(ts)
        .map(|t| t.format("%Y-%m-%d %H:%M").to_string())
        .unwrap_or_else(|_| ts.to_owned())
}
