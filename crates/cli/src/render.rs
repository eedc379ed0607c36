//! Human-readable output of `keel exec`: assistant text to stdout as it
//! streams, tool activity to stderr in short lines, and a spinner on stderr
//! when it is a terminal. With `--json`, every event is one JSON line on
//! stdout instead. A retry is one line on stderr (`↻ retry 1/3 in 2.0s: …`);
//! text already printed by the failed attempt stays on stdout, and the line
//! says it is discarded.

use std::io::{IsTerminal, Write};

use keel_protocol::{AgentEvent, AssistantMessageEvent, ContentBlock, Message, ToolResult};
use serde_json::Value;

const SPINNER: &[char] = &['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Writes events for a person (or as JSON lines).
pub struct Renderer {
    json: bool,
    tty: bool,
    spinner_shown: bool,
    spinner_frame: usize,
    status: String,
    /// Whether the last byte written to stdout was a newline.
    at_line_start: bool,
    wrote_text: bool,
    /// Whether the assistant message in progress has printed text.
    message_text: bool,
}

impl Renderer {
    pub fn new(json: bool) -> Self {
        Self {
            json,
            tty: std::io::stderr().is_terminal(),
            spinner_shown: false,
            spinner_frame: 0,
            status: String::new(),
            at_line_start: true,
            wrote_text: false,
            message_text: false,
        }
    }

    pub fn event(&mut self, event: &AgentEvent) {
        if self.json {
            let mut out = std::io::stdout().lock();
            if let Ok(line) = serde_json::to_string(event) {
                let _ = writeln!(out, "{line}");
                let _ = out.flush();
            }
            return;
        }
        match event {
            AgentEvent::TurnStart => self.set_status("thinking"),
            AgentEvent::MessageUpdate {
                assistant_message_event,
            } => match assistant_message_event {
                AssistantMessageEvent::TextDelta { delta, .. } => self.text(delta),
                AssistantMessageEvent::ThinkingStart { .. } => self.set_status("thinking"),
                AssistantMessageEvent::ToolCallStart { name, .. } => {
                    self.set_status(&format!("preparing {name}"))
                }
                _ => {}
            },
            AgentEvent::ToolExecutionStart {
                tool_name, args, ..
            } => {
                self.end_text_line();
                self.line(&format!(
                    "→ {tool_name} {}",
                    summarize_args(tool_name, args)
                ));
                self.set_status(&format!("running {tool_name}"));
            }
            AgentEvent::ToolExecutionEnd {
                tool_name,
                result,
                is_error,
                ..
            } => {
                let mark = if *is_error { "✗" } else { "✓" };
                let summary = summarize_result(result);
                self.line(&format!("  {mark} {tool_name}{summary}"));
                self.set_status("thinking");
            }
            AgentEvent::MessageEnd {
                message: Message::Assistant(a),
            } => {
                // A failure's reason is printed once, by the caller, at exit.
                if a.stop_reason == keel_protocol::StopReason::Aborted {
                    self.end_text_line();
                    self.line("⏹ aborted");
                }
            }
            AgentEvent::AgentEnd { .. } => {
                self.clear_spinner();
                self.end_text_line();
            }
            AgentEvent::MessageStart {
                message: Message::Assistant(_),
            } => self.message_text = false,
            AgentEvent::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
                ..
            } => {
                self.end_text_line();
                let discarded = if self.message_text {
                    " (the partial answer above is discarded)"
                } else {
                    ""
                };
                self.line(&format!(
                    "↻ retry {attempt}/{max_attempts} in {:.1}s{discarded}: {}",
                    *delay_ms as f64 / 1000.0,
                    one_line(error_message, 160)
                ));
                self.set_status("waiting to retry");
            }
            AgentEvent::AutoCompactionStart { reason } => {
                self.end_text_line();
                self.line(&format!(
                    "⟳ compacting the conversation ({})",
                    reason.as_str()
                ));
                self.set_status("compacting");
            }
            AgentEvent::AutoCompactionEnd {
                result,
                aborted,
                error_message,
                ..
            } => {
                let text = match (result, error_message) {
                    (Some(r), _) => format!(
                        "✓ compacted: ~{} → ~{} tokens",
                        r.tokens_before, r.tokens_after
                    ),
                    (None, Some(e)) => format!("✗ compaction failed: {}", one_line(e, 160)),
                    (None, None) if *aborted => "✗ compaction aborted".to_owned(),
                    (None, None) => "✗ compaction did not complete".to_owned(),
                };
                self.line(&text);
                self.set_status("thinking");
            }
            AgentEvent::AgentStart
            | AgentEvent::AgentSettled
            | AgentEvent::TurnEnd { .. }
            | AgentEvent::MessageStart { .. }
            | AgentEvent::MessageEnd { .. }
            | AgentEvent::AutoRetryEnd { .. }
            | AgentEvent::ToolExecutionUpdate { .. }
            | AgentEvent::QueueUpdate { .. }
            | AgentEvent::SessionInfoChanged { .. }
            | AgentEvent::ThinkingLevelChanged { .. }
            | AgentEvent::ModelChanged { .. }
            | AgentEvent::TodoReminder { .. }
            | AgentEvent::TodoAutoClear => {}
        }
    }

    /// Advances the spinner (called on a timer).
    pub fn tick(&mut self) {
        if self.json || !self.tty || self.status.is_empty() {
            return;
        }
        self.spinner_frame = (self.spinner_frame + 1) % SPINNER.len();
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[2K{} {}",
            SPINNER[self.spinner_frame], self.status
        );
        let _ = err.flush();
        self.spinner_shown = true;
    }

    fn set_status(&mut self, status: &str) {
        status.clone_into(&mut self.status);
    }

    fn clear_spinner(&mut self) {
        if self.spinner_shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
            self.spinner_shown = false;
        }
    }

    fn text(&mut self, delta: &str) {
        self.clear_spinner();
        self.status.clear();
        let mut out = std::io::stdout().lock();
        let delta = crate::term::safe_if(out.is_terminal(), delta);
        let _ = out.write_all(delta.as_bytes());
        let _ = out.flush();
        self.at_line_start = delta.ends_with('\n');
        self.wrote_text = true;
        self.message_text = true;
    }

    fn end_text_line(&mut self) {
        if !self.at_line_start {
            let mut out = std::io::stdout().lock();
            let _ = out.write_all(b"\n");
            let _ = out.flush();
            self.at_line_start = true;
        }
    }

    fn line(&mut self, text: &str) {
        self.clear_spinner();
        let mut err = std::io::stderr().lock();
        let text = crate::term::safe_if(self.tty, text);
        let _ = writeln!(err, "{text}");
        let _ = err.flush();
    }
}

/// A one-line summary of a tool's arguments.
pub fn summarize_args(tool: &str, args: &Value) -> String {
    let pick = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
    let s = match tool {
        "bash" => pick("command"),
        "read" | "write" | "edit" | "ls" => pick("path"),
        "grep" => pick("pattern").map(|p| match pick("path") {
            Some(path) => format!("{p} in {path}"),
            None => p,
        }),
        "find" => pick("pattern"),
        _ => None,
    }
    .unwrap_or_else(|| args.to_string());
    one_line(&s, 100)
}

fn summarize_result(result: &ToolResult) -> String {
    let text = result
        .content
        .iter()
        .find_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .unwrap_or("");
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    if last.is_empty() {
        String::new()
    } else {
        format!(": {}", one_line(last, 100))
    }
}

fn one_line(s: &str, max: usize) -> String {
    let first = s.lines().next().unwrap_or("");
    let more = s.lines().nth(1).is_some();
    let mut out: String = first.chars().take(max).collect();
    if more || first.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn summaries_are_one_short_line() {
        assert_eq!(
            summarize_args("bash", &json!({"command":"echo a\necho b"})),
            "echo a…"
        );
        assert_eq!(
            summarize_args("grep", &json!({"pattern":"fn","path":"src"})),
            "fn in src"
        );
        assert_eq!(summarize_args("other", &json!({"x":1})), "{\"x\":1}");
        let r = ToolResult::text("line1\nCommand exited with code 2\n");
        assert_eq!(summarize_result(&r), ": Command exited with code 2");
    }
}
