//! Turning the local model's output into text and tool calls.
//!
//! [`OutputSplitter`] is fed the generated text piece by piece and says
//! what is plain text (to stream at once) and which
//! `<tool_call>{"name": …, "arguments": {…}}</tool_call>` blocks are calls
//! (Qwen's shape, which the grammar enforces). It holds back only what
//! could still turn into a tag, and trailing whitespace.
//!
//! When the grammar is off ([`OutputSplitter::new`] with `lenient`), it
//! also accepts the models' free-form habits at the end of the response:
//! a call written as fenced JSON (```` ```json {"name": …} ``` ````), as
//! bare JSON objects, with `parameters` for `arguments`, or with the
//! arguments as a JSON string. An answer that starts like JSON is held
//! back until the end so it is not streamed twice. Only calls of offered
//! tools whose arguments are a JSON object count. [`is_repeat`] spots a
//! model asking again for what it already has. It does no I/O.

use keel_protocol::Message;
use serde_json::Value;

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";

/// A tool call found in the output.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedCall {
    pub name: String,
    /// Always a JSON object.
    pub arguments: Value,
}

/// One piece of the output, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    Text(String),
    Call(ParsedCall),
}

/// Parses the body of a `<tool_call>` block (or any JSON call object):
/// `{"name": "…", "arguments": {…}}`. `arguments` may also be called
/// `parameters`, or be a string holding the JSON object; a missing one is
/// `{}`. `None` when it is not such an object or `name` is not in `tools`
/// (when `tools` is not empty).
pub fn parse_call(body: &str, tools: &[&str]) -> Option<ParsedCall> {
    let value: Value = serde_json::from_str(body.trim()).ok()?;
    call_from_value(value, tools)
}

fn call_from_value(value: Value, tools: &[&str]) -> Option<ParsedCall> {
    let Value::Object(mut map) = value else {
        return None;
    };
    let name = map.get("name")?.as_str()?.to_owned();
    if !tools.is_empty() && !tools.contains(&name.as_str()) {
        return None;
    }
    let args = map
        .remove("arguments")
        .or_else(|| map.remove("parameters"))
        .unwrap_or_else(|| Value::Object(Default::default()));
    let arguments = match args {
        Value::Object(_) => args,
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(v @ Value::Object(_)) => v,
            _ => return None,
        },
        _ => return None,
    };
    Some(ParsedCall { name, arguments })
}

/// Calls written the free-form way in `text`: fenced code blocks holding
/// call objects, or the whole text being one or more bare call objects.
pub fn lenient_calls(text: &str, tools: &[&str]) -> Vec<ParsedCall> {
    let mut calls = Vec::new();
    let trimmed = text.trim();
    if trimmed.starts_with('{') {
        calls.extend(
            json_values(trimmed)
                .into_iter()
                .filter_map(|v| call_from_value(v, tools)),
        );
        if !calls.is_empty() {
            return calls;
        }
    }
    for block in fenced_blocks(text) {
        calls.extend(
            json_values(block)
                .into_iter()
                .filter_map(|v| call_from_value(v, tools)),
        );
    }
    calls
}

/// The bodies of the ```` ``` ```` fenced blocks of `text` (the info
/// string, such as `json`, dropped).
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let body_start = after.find('\n').map_or(after.len(), |i| i + 1);
        let body = &after[body_start..];
        let Some(end) = body.find("```") else { break };
        out.push(&body[..end]);
        rest = &body[end + 3..];
    }
    out
}

/// The JSON values of `text` one after another, as far as they parse.
fn json_values(text: &str) -> Vec<Value> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<Value>()
        .map_while(Result::ok)
        .collect()
}

/// Tools that only look: running one changes nothing another call sees.
const LOOKING: &[&str] = &["read", "grep", "find", "ls"];

/// Whether `call` would go round in circles: since the last user message,
/// the same call (name and arguments) was made and only calls that look
/// (`read`, `grep`, `find`, `ls`) came after it, or it ran at least twice
/// and its last two runs returned the same result. A small model that
/// keeps asking for what it already has is looping.
pub fn is_repeat(call: &ParsedCall, messages: &[Message]) -> bool {
    let start = messages
        .iter()
        .rposition(|m| matches!(m, Message::User(_)))
        .map_or(0, |i| i + 1);
    let turn = &messages[start..];
    let same = |name: &str, args: &Value| name == call.name && *args == call.arguments;
    let made: Vec<(&str, &str, bool)> = turn
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.tool_calls()),
            _ => None,
        })
        .flatten()
        .map(|(id, name, args)| (id, name, same(name, args)))
        .collect();
    if let Some(last_same) = made.iter().rposition(|(_, _, s)| *s)
        && made[last_same + 1..]
            .iter()
            .all(|(_, name, _)| LOOKING.contains(name))
    {
        return true;
    }
    let calls: Vec<(&str, bool)> = made.iter().map(|(id, _, s)| (*id, *s)).collect();
    let results: Vec<String> = calls
        .iter()
        .filter(|(_, s)| *s)
        .filter_map(|(id, _)| {
            turn.iter().find_map(|m| match m {
                Message::ToolResult(r) if r.tool_call_id == *id => {
                    Some(crate::history::joined_text(&r.content))
                }
                _ => None,
            })
        })
        .collect();
    results.len() >= 2 && results[results.len() - 1] == results[results.len() - 2]
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Streaming text.
    Text,
    /// Inside `<tool_call>…`.
    Call,
    /// Lenient mode, the answer opened like JSON: everything waits for the end.
    HoldAll,
}

/// Splits streamed output into [`Piece`]s (see the module docs).
#[derive(Debug)]
pub struct OutputSplitter {
    tools: Vec<String>,
    lenient: bool,
    state: State,
    /// Text not yet given out.
    buf: String,
    /// All text given out as [`Piece::Text`] (lenient mode scans it at the end).
    emitted: String,
    /// Whether anything but whitespace has been seen.
    started: bool,
    calls: usize,
}

impl OutputSplitter {
    pub fn new(tools: &[String], lenient: bool) -> Self {
        OutputSplitter {
            tools: tools.to_vec(),
            lenient,
            state: State::Text,
            buf: String::new(),
            emitted: String::new(),
            started: false,
            calls: 0,
        }
    }

    /// How many calls were given out so far.
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// Feeds the next piece of output.
    pub fn push(&mut self, piece: &str) -> Vec<Piece> {
        self.buf.push_str(piece);
        let mut out = Vec::new();
        loop {
            match self.state {
                State::HoldAll => return out,
                State::Text => {
                    if !self.started {
                        let t = self.buf.trim_start();
                        if t.is_empty() {
                            return out;
                        }
                        if self.lenient && t.len() < 3 && "```".starts_with(t) {
                            return out;
                        }
                        self.started = true;
                        if self.lenient && (t.starts_with('{') || t.starts_with("```")) {
                            self.state = State::HoldAll;
                            return out;
                        }
                    }
                    if let Some(at) = self.buf.find(OPEN) {
                        let before = self.buf[..at].trim_end().to_owned();
                        self.text(&mut out, before);
                        self.buf.drain(..at + OPEN.len());
                        self.state = State::Call;
                        continue;
                    }
                    // Keep what could still become `<tool_call>` and
                    // trailing whitespace; give out the rest.
                    let keep = self.holdback();
                    let ready: String = self.buf.drain(..self.buf.len() - keep).collect();
                    self.text(&mut out, ready);
                    return out;
                }
                State::Call => {
                    let Some(at) = self.buf.find(CLOSE) else {
                        return out;
                    };
                    let body: String = self.buf.drain(..at + CLOSE.len()).collect();
                    let body = &body[..at];
                    match parse_call(body, &self.tool_names()) {
                        Some(call) => {
                            self.calls += 1;
                            out.push(Piece::Call(call));
                        }
                        None => {
                            let raw = format!("{OPEN}{body}{CLOSE}");
                            self.text(&mut out, raw);
                        }
                    }
                    // The newline between calls belongs to the format.
                    let rest = self.buf.trim_start().len();
                    self.buf.drain(..self.buf.len() - rest);
                    self.state = State::Text;
                }
            }
        }
    }

    /// The end of the output: whatever is held back.
    pub fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.buf);
        match self.state {
            State::Text => {
                let rest = rest.trim_end().to_owned();
                self.text(&mut out, rest);
                if self.lenient && self.calls == 0 {
                    let found = lenient_calls(&self.emitted, &self.tool_names());
                    self.calls += found.len();
                    out.extend(found.into_iter().map(Piece::Call));
                }
            }
            State::Call => {
                // Cut off inside a call (the token limit): keep it as text.
                let raw = format!("{OPEN}{rest}");
                self.text(&mut out, raw.trim_end().to_owned());
            }
            State::HoldAll if rest.contains(OPEN) => {
                let mut strict = OutputSplitter::new(&self.tools, false);
                let mut pieces = strict.push(&rest);
                pieces.extend(strict.finish());
                self.calls += strict.calls;
                for p in pieces {
                    match p {
                        Piece::Text(t) => self.text(&mut out, t),
                        call => out.push(call),
                    }
                }
            }
            State::HoldAll => {
                let found = lenient_calls(&rest, &self.tool_names());
                if found.is_empty() {
                    self.text(&mut out, rest.trim().to_owned());
                } else {
                    self.calls += found.len();
                    out.extend(found.into_iter().map(Piece::Call));
                }
            }
        }
        self.state = State::Text;
        out
    }

    fn tool_names(&self) -> Vec<&str> {
        self.tools.iter().map(String::as_str).collect()
    }

    fn text(&mut self, out: &mut Vec<Piece>, text: String) {
        if text.is_empty() {
            return;
        }
        self.emitted.push_str(&text);
        match out.last_mut() {
            Some(Piece::Text(t)) => t.push_str(&text),
            _ => out.push(Piece::Text(text)),
        }
    }

    /// How many bytes at the end of `buf` must wait: a suffix that is a
    /// prefix of `<tool_call>`, and whitespace before it.
    fn holdback(&self) -> usize {
        let b = self.buf.as_str();
        let mut keep = 0;
        for n in (1..OPEN.len()).rev() {
            if b.len() >= n
                && b.is_char_boundary(b.len() - n)
                && OPEN.starts_with(&b[b.len() - n..])
            {
                keep = n;
                break;
            }
        }
        let before = &b[..b.len() - keep];
        keep + (before.len() - before.trim_end().len())
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
