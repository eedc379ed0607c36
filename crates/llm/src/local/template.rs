//! Rendering a model's own chat template.
//!
//! A GGUF chat model carries its prompt format as a Jinja template
//! (`tokenizer.chat_template`). [`ChatTemplate`] renders it with
//! `minijinja` the way Hugging Face `transformers` does (`trim_blocks`,
//! `lstrip_blocks`, Python string methods, `raise_exception`, and a
//! `tojson` that prints like Python's `json.dumps`: `", "` and `": "`
//! separators, non-ASCII kept; tool descriptions cut to their first
//! sentence, [`first_sentence`]), from keel's history converted to the
//! OpenAI-style message list templates expect ([`template_messages`]):
//! `system`, `user`, `assistant` (with `tool_calls`, arguments as objects)
//! and `tool` messages. Thinking blocks are not replayed; images become a
//! short placeholder (the local models read text only). It does no I/O.

use keel_protocol::{AssistantMessage, ContentBlock, ToolSpec};
use minijinja::value::{Serde, ValueKind};
use minijinja::{Environment, Error as JinjaError, ErrorKind as JinjaErrorKind, Value as MjValue};
use serde_json::{Map, Value, json};

use crate::history::{Item, items, joined_text};

/// The name the template is stored under in its environment.
const NAME: &str = "chat";
/// Stands in for an image in a text-only prompt.
pub const IMAGE_PLACEHOLDER: &str = "[image omitted: this model reads text only]";

/// A compiled chat template.
pub struct ChatTemplate {
    env: Environment<'static>,
    bos_token: String,
    eos_token: String,
    /// Whether the template mentions `tools` at all.
    knows_tools: bool,
}

impl std::fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("knows_tools", &self.knows_tools)
            .finish_non_exhaustive()
    }
}

/// A template that failed to compile or render.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("chat template: {0}")]
pub struct TemplateError(pub String);

impl From<JinjaError> for TemplateError {
    fn from(e: JinjaError) -> Self {
        let mut msg = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            source = s.source();
        }
        TemplateError(msg)
    }
}

impl ChatTemplate {
    /// Compiles `source`; `bos_token` and `eos_token` are the model's
    /// special token texts (templates may print them).
    pub fn new(
        source: &str,
        bos_token: impl Into<String>,
        eos_token: impl Into<String>,
    ) -> Result<Self, TemplateError> {
        let mut env = Environment::new();
        let syntax = minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()?;
        env.set_syntax(syntax);
        env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
        env.add_filter("tojson", tojson);
        env.add_function("raise_exception", raise_exception);
        env.add_template_owned(NAME, source.to_owned())?;
        Ok(ChatTemplate {
            env,
            bos_token: bos_token.into(),
            eos_token: eos_token.into(),
            knows_tools: source.contains("tools"),
        })
    }

    /// Whether the template renders the offered tools (it mentions `tools`).
    pub fn knows_tools(&self) -> bool {
        self.knows_tools
    }

    /// The prompt for `messages` (see [`template_messages`]) and `tools`,
    /// ending with the assistant's turn opener when `add_generation_prompt`.
    pub fn render(
        &self,
        messages: &[Value],
        tools: &[ToolSpec],
        add_generation_prompt: bool,
    ) -> Result<String, TemplateError> {
        let template = self.env.get_template(NAME)?;
        let tools = if tools.is_empty() {
            MjValue::from(())
        } else {
            MjValue::from(tools.iter().map(tool_value).collect::<Vec<_>>())
        };
        let ctx = MjValue::from_pairs([
            ("messages", MjValue::from(Serde(messages))),
            ("tools", tools),
            (
                "add_generation_prompt",
                MjValue::from(add_generation_prompt),
            ),
            ("bos_token", MjValue::from(self.bos_token.as_str())),
            ("eos_token", MjValue::from(self.eos_token.as_str())),
        ]);
        Ok(template.render(ctx)?)
    }
}

/// A tool in the OpenAI function format templates expect, keys in that
/// format's order (`type`, `function`: `name`, `description`, `parameters`),
/// the description cut to its first sentence.
fn tool_value(tool: &ToolSpec) -> MjValue {
    let function = MjValue::from_pairs([
        ("name", MjValue::from(tool.name.as_str())),
        (
            "description",
            MjValue::from(first_sentence(&tool.description)),
        ),
        ("parameters", schema_value(&tool.parameters)),
    ]);
    MjValue::from_pairs([("type", MjValue::from("function")), ("function", function)])
}

/// The first sentence of `text`: up to the first `.` followed by
/// whitespace (or the end) outside parentheses. Tool descriptions are
/// long; a small local model pays for every token of the prompt (about 75
/// tokens a second on two cores) and makes little use of the details.
pub fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    let mut depth = 0i32;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            '.' if depth <= 0 => match chars.peek() {
                None => return text,
                Some((_, next)) if next.is_whitespace() => return &text[..=i],
                _ => {}
            },
            '\n' if depth <= 0 && text[i..].starts_with("\n\n") => return text[..i].trim_end(),
            _ => {}
        }
    }
    text
}

/// A JSON Schema as a template value with `type` and `description` first in
/// every schema object, as tool schemas are usually written (keel's come
/// with sorted keys); property names keep their order.
fn schema_value(schema: &Value) -> MjValue {
    let Value::Object(map) = schema else {
        return MjValue::from(Serde(schema));
    };
    let rank = |k: &str| match k {
        "type" => 0,
        "description" => 1,
        _ => 2,
    };
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort_by_key(|k| rank(k));
    MjValue::from_pairs(keys.into_iter().map(|k| {
        let v = &map[k];
        let value = match (k.as_str(), v) {
            ("properties" | "$defs" | "definitions", Value::Object(props)) => MjValue::from_pairs(
                props
                    .iter()
                    .map(|(name, s)| (name.as_str(), schema_value(s))),
            ),
            ("items" | "additionalProperties" | "not", Value::Object(_)) => schema_value(v),
            ("anyOf" | "oneOf" | "allOf" | "prefixItems", Value::Array(list)) => {
                MjValue::from(list.iter().map(schema_value).collect::<Vec<_>>())
            }
            _ => MjValue::from(Serde(v)),
        };
        (k.as_str(), value)
    }))
}

/// Where the facts of one run start in keel's system prompt: the date and
/// the workspace, its last lines (keel-core's `prompt` puts them there).
pub const RUN_FACTS: &str = "\nCurrent date: ";

/// `system` as what stays the same from run to run, and the facts of this
/// run ([`RUN_FACTS`] to the end), when it has them.
pub fn split_run_facts(system: &str) -> (&str, Option<&str>) {
    match system.rfind(RUN_FACTS) {
        Some(at) => (&system[..at], Some(system[at..].trim_start_matches('\n'))),
        None => (system, None),
    }
}

/// [`template_messages`] with the run's facts ([`split_run_facts`]) as a
/// system turn of their own after the first: the prompt up to them (the
/// system prompt and the tools) is then the same in every workspace and on
/// every day, so a saved evaluation of it serves them all. `None` when
/// `system` has no such facts.
pub fn template_messages_split(
    system: &str,
    messages: &[keel_protocol::Message],
) -> Option<Vec<Value>> {
    let (stable, facts) = split_run_facts(system);
    let facts = facts?;
    let mut out = template_messages(stable, messages);
    let at = usize::from(!stable.is_empty());
    out.insert(at, json!({"role": "system", "content": facts}));
    Some(out)
}

/// keel's history as the OpenAI-style list chat templates expect, with
/// `system` first when it is not empty.
pub fn template_messages(system: &str, messages: &[keel_protocol::Message]) -> Vec<Value> {
    let mut out = Vec::new();
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system}));
    }
    for item in items(messages) {
        match item {
            Item::User(blocks) => {
                out.push(json!({"role": "user", "content": user_text(blocks)}));
            }
            Item::Assistant(a) => out.push(assistant_json(a)),
            Item::ToolResults(results) => {
                for r in results {
                    let mut text = r.text_or_placeholder().to_owned();
                    if !r.images.is_empty() && !text.contains(IMAGE_PLACEHOLDER) {
                        text.push('\n');
                        text.push_str(IMAGE_PLACEHOLDER);
                    }
                    out.push(json!({
                        "role": "tool",
                        "tool_call_id": r.call_id,
                        "content": text,
                    }));
                }
            }
        }
    }
    out
}

fn user_text(blocks: &[ContentBlock]) -> String {
    let mut parts: Vec<String> = Vec::new();
    for b in blocks {
        match b {
            ContentBlock::Text { text } => parts.push(text.clone()),
            ContentBlock::Image { .. } => parts.push(IMAGE_PLACEHOLDER.to_owned()),
            _ => {}
        }
    }
    parts.join("\n")
}

fn assistant_json(a: &AssistantMessage) -> Value {
    let content = joined_text(&a.content);
    let calls: Vec<Value> = a
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => Some(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": arguments},
            })),
            _ => None,
        })
        .collect();
    let mut m = Map::new();
    m.insert("role".into(), "assistant".into());
    m.insert("content".into(), content.into());
    if !calls.is_empty() {
        m.insert("tool_calls".into(), Value::Array(calls));
    }
    Value::Object(m)
}

/// `tojson` as Python's `json.dumps(value, ensure_ascii=False, indent=…)`.
fn tojson(value: MjValue, kwargs: minijinja::value::Kwargs) -> Result<MjValue, JinjaError> {
    let indent: Option<usize> = kwargs.get("indent")?;
    let _: Option<bool> = kwargs.get("ensure_ascii")?;
    let _: Option<bool> = kwargs.get("sort_keys")?;
    kwargs.assert_all_used()?;
    let mut out = String::new();
    write_value(&mut out, &value, indent, 0)?;
    Ok(MjValue::from_safe_string(out))
}

fn raise_exception(message: String) -> Result<MjValue, JinjaError> {
    Err(JinjaError::new(JinjaErrorKind::InvalidOperation, message))
}

/// Writes a template value as Python's `json.dumps` would, keeping the
/// order of its maps.
fn write_value(
    out: &mut String,
    value: &MjValue,
    indent: Option<usize>,
    level: usize,
) -> Result<(), JinjaError> {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    let sep = if indent.is_some() { "," } else { ", " };
    match value.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<MjValue> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                newline(out, level + 1);
                write_value(out, v, indent, level + 1)?;
            }
            newline(out, level);
            out.push(']');
        }
        ValueKind::Map => {
            let keys: Vec<MjValue> = value.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                newline(out, level + 1);
                let key = k.as_str().map_or_else(|| k.to_string(), str::to_owned);
                out.push_str(&Value::String(key).to_string());
                out.push_str(": ");
                write_value(out, &value.get_item(k)?, indent, level + 1)?;
            }
            newline(out, level);
            out.push('}');
        }
        _ => {
            let json = serde_json::to_value(value).map_err(|e| {
                JinjaError::new(
                    JinjaErrorKind::InvalidOperation,
                    format!("tojson: cannot serialise: {e}"),
                )
            })?;
            out.push_str(&python_json(&json));
        }
    }
    Ok(())
}

/// `value` printed like Python's `json.dumps(value, ensure_ascii=False)`.
pub fn python_json(value: &Value) -> String {
    let mut out = String::new();
    write_json(&mut out, value, None, 0);
    out
}

/// Like [`python_json`] with `indent=n`.
pub fn python_json_indented(value: &Value, indent: usize) -> String {
    let mut out = String::new();
    write_json(&mut out, value, Some(indent), 0);
    out
}

fn write_json(out: &mut String, value: &Value, indent: Option<usize>, level: usize) {
    let newline = |out: &mut String, level: usize| {
        if let Some(n) = indent {
            out.push('\n');
            out.push_str(&" ".repeat(n * level));
        }
    };
    let sep = if indent.is_some() { "," } else { ", " };
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                newline(out, level + 1);
                write_json(out, v, indent, level + 1);
            }
            newline(out, level);
            out.push(']');
        }
        Value::Object(map) if !map.is_empty() => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(sep);
                }
                newline(out, level + 1);
                out.push_str(&Value::String(k.clone()).to_string());
                out.push_str(": ");
                write_json(out, v, indent, level + 1);
            }
            newline(out, level);
            out.push('}');
        }
        // Scalars, `[]` and `{}` print the same as serde_json's compact form.
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
#[path = "template_tests.rs"]
mod tests;
