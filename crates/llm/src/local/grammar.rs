//! GBNF grammars that make the local model's tool calls always parse.
//!
//! [`tool_grammar`] turns the offered tools' JSON Schemas into a llama.cpp
//! GBNF grammar whose sentences are either plain text or one call in
//! Qwen's shape:
//!
//! ```text
//! <tool_call>
//! {"name": "write", "arguments": {"path": "a.py", "content": "print(1)"}}
//! </tool_call>
//! ```
//!
//! with `name` one of the offered tools and `arguments` valid against that
//! tool's schema. Text may not open with `<`, `{` or a backtick and may
//! not hold a code fence (three backticks): a small model that may write
//! code only through the tools uses them. JSON is laid out exactly as the chat template's `tojson`
//! prints it (`", "` and `": "`, no other whitespace), so a call the model
//! made re-renders to the same text on the next turn and the KV cache stays
//! valid. Supported schema keywords: `type` (one or a list), `properties` +
//! `required` (properties in the schema's order, as `tojson` prints them
//! back; optional ones optional; no others), `items`, `minItems` (0 or 1+), `enum`, `const`, `anyOf`/`oneOf`,
//! a one-element `allOf`; anything else (or nesting deeper than
//! [`MAX_DEPTH`]) accepts any JSON value of the right type. It does no I/O.

use std::collections::BTreeSet;

use keel_protocol::ToolSpec;
use serde_json::Value;

use super::template::python_json;

/// Schemas nested deeper than this accept any JSON value.
pub const MAX_DEPTH: usize = 8;

/// What the grammar lets the model say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GrammarMode {
    /// Plain text, or a tool call (the default).
    #[default]
    Auto,
    /// A tool call, nothing else.
    Required,
    /// `Required` for the answer to a user message, `Auto` after tool
    /// results: act on every request first, then report.
    #[serde(rename = "call-first")]
    CallFirst,
    /// No grammar: the model writes freely; tool calls in `<tool_call>`
    /// tags, fenced JSON or bare JSON are recognised afterwards.
    Off,
}

impl std::str::FromStr for GrammarMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(GrammarMode::Auto),
            "required" => Ok(GrammarMode::Required),
            "call-first" | "call_first" => Ok(GrammarMode::CallFirst),
            "off" | "none" => Ok(GrammarMode::Off),
            other => Err(format!(
                "unknown grammar mode {other:?}: use auto, call-first, required or off"
            )),
        }
    }
}

/// Shared rules every grammar may use.
const BASE_RULES: &str = r#"string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,15})? ([eE] [-+]? [0-9]{1,3})?
boolean ::= "true" | "false"
null ::= "null"
value ::= object | array | string | number | boolean | null
object ::= "{" ( string ": " value ( ", " string ": " value )* )? "}"
array ::= "[" ( value ( ", " value )* )? "]"
"#;

/// The grammar for `tools` in `mode`, or `None` when there is nothing to
/// constrain (no tools, or [`GrammarMode::Off`]). `after_user` says whether
/// the model answers a user message (rather than tool results), for
/// [`GrammarMode::CallFirst`].
pub fn tool_grammar(tools: &[ToolSpec], mode: GrammarMode, after_user: bool) -> Option<String> {
    if tools.is_empty() || mode == GrammarMode::Off {
        return None;
    }
    let required = match mode {
        GrammarMode::Required => true,
        GrammarMode::CallFirst => after_user,
        _ => false,
    };
    let mut b = Builder::default();
    let mut calls = Vec::new();
    for (i, tool) in tools.iter().enumerate() {
        let args = b.expr(&tool.parameters, &format!("t{i}"), 0);
        let head = format!(
            "<tool_call>\n{{\"name\": {}, \"arguments\": ",
            json_string(&tool.name)
        );
        calls.push(format!("{} {args} {}", lit(&head), lit("}\n</tool_call>")));
    }
    let mut out = String::new();
    if required {
        out.push_str("root ::= calls\n");
    } else {
        out.push_str("root ::= calls | text\n");
    }
    // One call per answer: small models that may chain calls invent the
    // results of the first in the next (reading files that do not exist).
    out.push_str("calls ::= call\n");
    out.push_str(&format!("call ::= {}\n", calls.join(" | ")));
    out.push_str(TEXT_RULES);
    out.push_str(BASE_RULES);
    for (name, body) in &b.rules {
        out.push_str(&format!("{name} ::= {body}\n"));
    }
    Some(out)
}

/// A grammar that allows text only (the same text as in
/// [`GrammarMode::Auto`]): used to make a looping model answer instead.
pub fn text_grammar() -> String {
    let mut out = String::from("root ::= text\n");
    out.push_str(TEXT_RULES);
    out
}

/// Text may not open like a call or bare JSON, and holds no code fence (at
/// most two backticks in a row): code goes into files through the tools,
/// which is what small models otherwise fail to do.
const TEXT_RULES: &str = "text ::= [^<`{ \\t\\r\\n] tchar* ( \"`\" | \"``\" )?\ntchar ::= [^`] | \"`\" [^`] | \"``\" [^`]\n";

#[derive(Default)]
struct Builder {
    rules: Vec<(String, String)>,
    names: BTreeSet<String>,
}

impl Builder {
    /// Adds a rule under a unique name derived from `hint`; returns the name.
    fn rule(&mut self, hint: &str, body: String) -> String {
        let base: String = hint
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let mut name = base.clone();
        let mut n = 1;
        while self.names.contains(&name) || is_reserved(&name) {
            name = format!("{base}-{n}");
            n += 1;
        }
        self.names.insert(name.clone());
        self.rules.push((name.clone(), body));
        name
    }

    /// A grammar expression matching JSON valid against `schema`.
    fn expr(&mut self, schema: &Value, hint: &str, depth: usize) -> String {
        let Value::Object(map) = schema else {
            return "value".to_owned();
        };
        if depth > MAX_DEPTH {
            return "value".to_owned();
        }
        if let Some(c) = map.get("const") {
            return lit(&python_json(c));
        }
        if let Some(Value::Array(values)) = map.get("enum")
            && !values.is_empty()
        {
            let alts: Vec<String> = values.iter().map(|v| lit(&python_json(v))).collect();
            return format!("( {} )", alts.join(" | "));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(Value::Array(options)) = map.get(key)
                && !options.is_empty()
            {
                let alts: Vec<String> = options
                    .iter()
                    .enumerate()
                    .map(|(i, o)| self.expr(o, &format!("{hint}-{i}"), depth + 1))
                    .collect();
                return format!("( {} )", alts.join(" | "));
            }
        }
        if let Some(Value::Array(all)) = map.get("allOf")
            && all.len() == 1
        {
            return self.expr(&all[0], hint, depth + 1);
        }
        match map.get("type") {
            Some(Value::String(t)) => self.typed(t, map, hint, depth),
            Some(Value::Array(types)) if !types.is_empty() => {
                let alts: Vec<String> = types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.typed(t, map, hint, depth))
                    .collect();
                if alts.is_empty() {
                    "value".to_owned()
                } else {
                    format!("( {} )", alts.join(" | "))
                }
            }
            _ if map.contains_key("properties") => self.typed("object", map, hint, depth),
            _ if map.contains_key("items") => self.typed("array", map, hint, depth),
            _ => "value".to_owned(),
        }
    }

    fn typed(
        &mut self,
        ty: &str,
        map: &serde_json::Map<String, Value>,
        hint: &str,
        depth: usize,
    ) -> String {
        match ty {
            "string" => "string".to_owned(),
            "integer" => "integer".to_owned(),
            "number" => "number".to_owned(),
            "boolean" => "boolean".to_owned(),
            "null" => "null".to_owned(),
            "array" => self.array(map, hint, depth),
            "object" => self.object(map, hint, depth),
            _ => "value".to_owned(),
        }
    }

    fn array(&mut self, map: &serde_json::Map<String, Value>, hint: &str, depth: usize) -> String {
        let Some(items) = map.get("items") else {
            return "array".to_owned();
        };
        let item = self.expr(items, &format!("{hint}-item"), depth + 1);
        let at_least_one = map
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > 0);
        let body = if at_least_one {
            format!("\"[\" {item} ( \", \" {item} )* \"]\"")
        } else {
            format!("\"[\" ( {item} ( \", \" {item} )* )? \"]\"")
        };
        self.rule(hint, body)
    }

    fn object(&mut self, map: &serde_json::Map<String, Value>, hint: &str, depth: usize) -> String {
        let Some(Value::Object(props)) = map.get("properties") else {
            return "object".to_owned();
        };
        let required: BTreeSet<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        // Properties in schema order (what `tojson` prints back), the
        // required ones mandatory, the others optional.
        let mut kvs = Vec::new();
        for (key, schema) in props {
            let value = self.expr(schema, &format!("{hint}-{key}"), depth + 1);
            let kv = format!("{} {value}", lit(&format!("{}: ", json_string(key))));
            kvs.push((kv, required.contains(key.as_str())));
        }
        let body = match kvs.iter().position(|(_, req)| *req) {
            Some(first) => {
                // Optional ones before the first required one carry their
                // comma after them; all later ones before them.
                let mut parts: Vec<String> = kvs[..first]
                    .iter()
                    .map(|(kv, _)| format!("( {kv} \", \" )?"))
                    .collect();
                parts.push(kvs[first].0.clone());
                for (kv, req) in &kvs[first + 1..] {
                    parts.push(if *req {
                        format!("\", \" {kv}")
                    } else {
                        format!("( \", \" {kv} )?")
                    });
                }
                format!("\"{{\" {} \"}}\"", parts.join(" "))
            }
            None if kvs.is_empty() => "\"{\" \"}\"".to_owned(),
            None => {
                // Any subsequence of the optional properties, in order.
                let alts: Vec<String> = (0..kvs.len())
                    .map(|i| {
                        let mut parts = vec![kvs[i].0.clone()];
                        parts.extend(
                            kvs[i + 1..]
                                .iter()
                                .map(|(kv, _)| format!("( \", \" {kv} )?")),
                        );
                        parts.join(" ")
                    })
                    .collect();
                format!("\"{{\" ( {} )? \"}}\"", alts.join(" | "))
            }
        };
        self.rule(hint, body)
    }
}

fn is_reserved(name: &str) -> bool {
    matches!(
        name,
        "root"
            | "calls"
            | "call"
            | "text"
            | "tchar"
            | "string"
            | "char"
            | "integer"
            | "number"
            | "boolean"
            | "null"
            | "value"
            | "object"
            | "array"
    )
}

/// `s` as a JSON string literal (quotes included).
fn json_string(s: &str) -> String {
    python_json(&Value::String(s.to_owned()))
}

/// `s` as a GBNF string literal.
pub(crate) fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02X}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
#[path = "grammar_tests.rs"]
mod tests;
