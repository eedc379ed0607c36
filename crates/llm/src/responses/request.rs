//! The request body of the OpenAI Responses dialect.
//!
//! This module owns the conversion of a [`ModelRequest`] into the JSON body
//! of `POST {base_url}/responses`. It does no I/O and knows nothing of the
//! response events.
//!
//! Wire format produced:
//!
//! ```json
//! {"model":"gpt-5","instructions":"You are keel.","store":false,"stream":true,
//!  "max_output_tokens":4096,
//!  "reasoning":{"effort":"medium","summary":"auto"},"include":["reasoning.encrypted_content"],
//!  "tool_choice":"auto","parallel_tool_calls":true,
//!  "tools":[{"type":"function","name":"bash","description":"…","parameters":{…},"strict":false}],
//!  "input":[
//!   {"type":"message","role":"user","content":[{"type":"input_text","text":"list files"},
//!     {"type":"input_image","image_url":"data:image/png;base64,iVBO…","detail":"auto"}]},
//!   {"type":"reasoning","summary":[{"type":"summary_text","text":"…"}],"encrypted_content":"gAAA…"},
//!   {"type":"message","role":"assistant","content":[{"type":"output_text","text":"Listing."}]},
//!   {"type":"function_call","call_id":"call_1","name":"bash","arguments":"{\"command\":\"ls\"}"},
//!   {"type":"function_call_output","call_id":"call_1","output":"Cargo.toml\nsrc"}]}
//! ```
//!
//! Conversion rules:
//! - the system prompt is `instructions` (omitted when empty);
//! - user messages are `input_text` / `input_image` parts (empty text
//!   dropped; a message with nothing left is skipped);
//! - an assistant message becomes, in block order: a `reasoning` item per
//!   thinking block whose signature holds one (only for messages from this
//!   dialect, provider and model; the stored item is replayed without its
//!   `id` and `status`, since nothing is stored server-side), an assistant
//!   `message` per run of text blocks, a `function_call` per tool call
//!   (arguments as a JSON *string*); other thinking blocks and images are
//!   not replayed;
//! - tool results are `function_call_output` items with their text; images
//!   in tool results are sent in one user message after the run of results
//!   (`Attached image(s) from tool result:`), since the output is text; the
//!   shared history rules add synthetic results for unanswered calls;
//! - `tools` (with `strict: false`, since the Responses API defaults to
//!   strict schemas), `tool_choice` and `parallel_tool_calls` only when there
//!   are tools; `max_output_tokens` only when set;
//! - `reasoning` (effort `minimal`/`low`/`medium`/`high`/`xhigh` from the
//!   thinking level, summary `auto`) and `include:
//!   ["reasoning.encrypted_content"]` only when thinking is not off. The
//!   level must already be clamped to what the model supports (see
//!   [`crate::catalog::effective_thinking`]); `off` sends no `reasoning`;
//! - with an output schema, `text: {"format": {"type": "json_schema",
//!   "name": "output", "schema", "strict": true}}`.

use keel_protocol::{AssistantMessage, ContentBlock, ThinkingLevel};
use serde_json::{Value, json};

use super::API;
use crate::ModelRequest;
use crate::history::{self, Image, Item, TOOL_IMAGES_TEXT};

/// The JSON body for `request` sent to provider `provider` (its name decides
/// whether reasoning items of earlier messages may be replayed).
pub fn build_request_body(request: &ModelRequest, provider: &str) -> Value {
    let mut body = json!({
        "model": request.model,
        "input": convert_input(request, provider),
        "store": false,
        "stream": true,
    });
    if !request.system_prompt.is_empty() {
        body["instructions"] = json!(request.system_prompt);
    }
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.parameters,
                    "strict": false,
                })
            })
            .collect();
        body["tools"] = Value::Array(tools);
        body["tool_choice"] = json!("auto");
        body["parallel_tool_calls"] = json!(true);
    }
    if let Some(max) = request.max_output_tokens {
        body["max_output_tokens"] = json!(max);
    }
    if let Some(effort) = reasoning_effort(request.thinking_level) {
        body["reasoning"] = json!({"effort": effort, "summary": "auto"});
        body["include"] = json!(["reasoning.encrypted_content"]);
    }
    if let Some(schema) = &request.output_schema {
        body["text"] = json!({"format": {
            "type": "json_schema",
            "name": crate::OUTPUT_SCHEMA_NAME,
            "schema": schema,
            "strict": true,
        }});
    }
    body
}

/// The `reasoning.effort` value for a thinking level (`None` when off).
pub fn reasoning_effort(level: ThinkingLevel) -> Option<&'static str> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal => Some("minimal"),
        ThinkingLevel::Low => Some("low"),
        ThinkingLevel::Medium => Some("medium"),
        ThinkingLevel::High => Some("high"),
        ThinkingLevel::Xhigh => Some("xhigh"),
    }
}

fn convert_input(request: &ModelRequest, provider: &str) -> Vec<Value> {
    let mut out = Vec::new();
    for item in history::items(&request.messages) {
        match item {
            Item::User(blocks) => {
                let parts = user_parts(blocks);
                if !parts.is_empty() {
                    out.push(json!({"type": "message", "role": "user", "content": parts}));
                }
            }
            Item::Assistant(message) => {
                let replay = history::same_model(message, API, provider, &request.model);
                assistant_items(message, replay, &mut out);
            }
            Item::ToolResults(run) => {
                let mut images = Vec::new();
                for result in &run {
                    out.push(json!({
                        "type": "function_call_output",
                        "call_id": result.call_id,
                        "output": result.text_or_placeholder(),
                    }));
                    images.extend(result.images.iter().map(image_part));
                }
                if !images.is_empty() {
                    let mut parts = vec![json!({"type": "input_text", "text": TOOL_IMAGES_TEXT})];
                    parts.append(&mut images);
                    out.push(json!({"type": "message", "role": "user", "content": parts}));
                }
            }
        }
    }
    out
}

fn image_part(image: &Image<'_>) -> Value {
    json!({"type": "input_image", "image_url": image.data_url(), "detail": "auto"})
}

fn user_parts(blocks: &[ContentBlock]) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } if !text.is_empty() => {
                Some(json!({"type": "input_text", "text": text}))
            }
            ContentBlock::Image { data, mime_type } => Some(image_part(&Image { mime_type, data })),
            _ => None,
        })
        .collect()
}

fn assistant_items(message: &AssistantMessage, replay_reasoning: bool, out: &mut Vec<Value>) {
    let mut text = String::new();
    let flush = |text: &mut String, out: &mut Vec<Value>| {
        if !text.is_empty() {
            out.push(json!({
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": std::mem::take(text)}],
            }));
        }
    };
    for block in &message.content {
        match block {
            ContentBlock::Text { text: t } => text.push_str(t),
            ContentBlock::Thinking {
                thinking_signature: Some(signature),
                ..
            } if replay_reasoning => {
                if let Some(item) = reasoning_item(signature) {
                    flush(&mut text, out);
                    out.push(item);
                }
            }
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => {
                flush(&mut text, out);
                out.push(json!({
                    "type": "function_call",
                    "call_id": id,
                    "name": name,
                    "arguments": history::arguments_string(arguments),
                }));
            }
            ContentBlock::Thinking { .. } | ContentBlock::Image { .. } => {}
        }
    }
    flush(&mut text, out);
}

/// The reasoning item stored in a thinking signature, ready to replay, or
/// `None` when the signature is not one.
fn reasoning_item(signature: &str) -> Option<Value> {
    let mut item: Value = serde_json::from_str(signature).ok()?;
    let object = item.as_object_mut()?;
    if object.get("type").and_then(Value::as_str) != Some("reasoning") {
        return None;
    }
    object.remove("id");
    object.remove("status");
    Some(item)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{Message, StopReason, ToolResultMessage, ToolSpec, Usage, UserMessage};

    fn user(content: Vec<ContentBlock>) -> Message {
        Message::User(UserMessage {
            content,
            timestamp: 0,
        })
    }

    fn assistant(content: Vec<ContentBlock>, api: &str, model: &str) -> Message {
        Message::Assistant(AssistantMessage {
            content,
            api: api.into(),
            provider: "openai".into(),
            model: model.into(),
            usage: Usage::default(),
            stop_reason: StopReason::ToolUse,
            error_message: None,
            error_kind: None,
            timestamp: 0,
            response_id: None,
        })
    }

    fn result(id: &str, content: Vec<ContentBlock>) -> Message {
        Message::ToolResult(ToolResultMessage {
            tool_call_id: id.into(),
            tool_name: "bash".into(),
            content,
            details: None,
            is_error: false,
            timestamp: 0,
        })
    }

    fn image() -> ContentBlock {
        ContentBlock::Image {
            data: "AAAA".into(),
            mime_type: "image/png".into(),
        }
    }

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "gpt-5".into(),
            system_prompt: "You are keel.".into(),
            messages,
            tools: Vec::new(),
            thinking_level: ThinkingLevel::Off,
            max_output_tokens: None,
            output_schema: None,
        }
    }

    const SIGNATURE: &str = r#"{"type":"reasoning","id":"rs_1","status":"completed","summary":[{"type":"summary_text","text":"Plan"}],"encrypted_content":"gAAAA"}"#;

    #[test]
    fn an_output_schema_is_a_strict_json_schema_text_format() {
        let mut r = request(vec![user(vec![ContentBlock::text("hi")])]);
        let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}}});
        r.output_schema = Some(schema.clone());
        let body = build_request_body(&r, "openai");
        assert_eq!(
            body["text"],
            json!({"format": {"type": "json_schema", "name": "output", "schema": schema, "strict": true}})
        );
    }

    #[test]
    fn minimal_body() {
        let body = build_request_body(
            &request(vec![user(vec![ContentBlock::text("hi")])]),
            "openai",
        );
        assert_eq!(
            body,
            json!({
                "model": "gpt-5",
                "instructions": "You are keel.",
                "input": [{"type": "message", "role": "user",
                    "content": [{"type": "input_text", "text": "hi"}]}],
                "store": false,
                "stream": true,
            })
        );
    }

    #[test]
    fn tools_reasoning_and_limits() {
        let mut req = request(vec![user(vec![ContentBlock::text("hi")])]);
        req.system_prompt = String::new();
        req.tools = vec![ToolSpec {
            name: "bash".into(),
            description: "Run".into(),
            parameters: json!({"type": "object"}),
        }];
        req.max_output_tokens = Some(2048);
        req.thinking_level = ThinkingLevel::Xhigh;
        let body = build_request_body(&req, "openai");
        assert!(body.get("instructions").is_none());
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "name": "bash", "description": "Run",
                "parameters": {"type": "object"}, "strict": false}])
        );
        assert_eq!(body["tool_choice"], "auto");
        assert_eq!(body["parallel_tool_calls"], true);
        assert_eq!(body["max_output_tokens"], 2048);
        assert_eq!(
            body["reasoning"],
            json!({"effort": "xhigh", "summary": "auto"})
        );
        assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
        let efforts: Vec<_> = ThinkingLevel::ALL
            .iter()
            .map(|l| reasoning_effort(*l))
            .collect();
        assert_eq!(
            efforts,
            [
                None,
                Some("minimal"),
                Some("low"),
                Some("medium"),
                Some("high"),
                Some("xhigh")
            ]
        );
    }

    #[test]
    fn history_with_reasoning_tool_calls_results_and_images() {
        let messages = vec![
            user(vec![
                ContentBlock::text("look"),
                ContentBlock::text(""),
                image(),
            ]),
            assistant(
                vec![
                    ContentBlock::Thinking {
                        thinking: "Plan".into(),
                        thinking_signature: Some(SIGNATURE.into()),
                    },
                    ContentBlock::text("Look"),
                    ContentBlock::text("ing."),
                    ContentBlock::ToolCall {
                        id: "call_1".into(),
                        name: "bash".into(),
                        arguments: json!({"command": "ls"}),
                    },
                    ContentBlock::ToolCall {
                        id: "call_2".into(),
                        name: "read".into(),
                        arguments: json!("{\"path\":"),
                    },
                ],
                API,
                "gpt-5",
            ),
            result("call_1", vec![ContentBlock::text("a\nb")]),
            result("call_2", vec![image()]),
            assistant(vec![ContentBlock::text("Done.")], API, "gpt-5"),
        ];
        let body = build_request_body(&request(messages), "openai");
        assert_eq!(
            body["input"],
            json!([
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "look"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
                ]},
                {"type": "reasoning", "summary": [{"type": "summary_text", "text": "Plan"}],
                    "encrypted_content": "gAAAA"},
                {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Looking."}]},
                {"type": "function_call", "call_id": "call_1", "name": "bash",
                    "arguments": "{\"command\":\"ls\"}"},
                {"type": "function_call", "call_id": "call_2", "name": "read",
                    "arguments": "{\"path\":"},
                {"type": "function_call_output", "call_id": "call_1", "output": "a\nb"},
                {"type": "function_call_output", "call_id": "call_2", "output": "(see attached image)"},
                {"type": "message", "role": "user", "content": [
                    {"type": "input_text", "text": "Attached image(s) from tool result:"},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "auto"},
                ]},
                {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": "Done."}]},
            ])
        );
    }

    #[test]
    fn foreign_or_unsigned_reasoning_is_not_replayed() {
        let thinking = |sig: Option<&str>| ContentBlock::Thinking {
            thinking: "t".into(),
            thinking_signature: sig.map(str::to_owned),
        };
        let messages = vec![
            // Another model, another dialect, no signature, a non-item signature.
            assistant(
                vec![thinking(Some(SIGNATURE)), ContentBlock::text("a")],
                API,
                "o3",
            ),
            assistant(
                vec![thinking(Some(SIGNATURE)), ContentBlock::text("b")],
                "anthropic-messages",
                "gpt-5",
            ),
            assistant(vec![thinking(None), ContentBlock::text("c")], API, "gpt-5"),
            assistant(
                vec![thinking(Some("EqQBCkYIB")), ContentBlock::text("d")],
                API,
                "gpt-5",
            ),
            // Nothing left to send: skipped.
            assistant(vec![thinking(None)], API, "gpt-5"),
        ];
        let body = build_request_body(&request(messages), "openai");
        let types: Vec<&str> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["message", "message", "message", "message"]);
        // Same dialect and model but another provider name: not replayed.
        let messages = vec![assistant(vec![thinking(Some(SIGNATURE))], API, "gpt-5")];
        let body = build_request_body(&request(messages), "azure");
        assert_eq!(body["input"], json!([]));
    }

    #[test]
    fn unanswered_calls_get_synthetic_outputs() {
        let messages = vec![
            assistant(
                vec![ContentBlock::ToolCall {
                    id: "c9".into(),
                    name: "bash".into(),
                    arguments: json!({}),
                }],
                API,
                "gpt-5",
            ),
            user(vec![ContentBlock::text("never mind")]),
        ];
        let body = build_request_body(&request(messages), "openai");
        assert_eq!(
            body["input"][1],
            json!({"type": "function_call_output", "call_id": "c9", "output": "No result provided"})
        );
        assert_eq!(body["input"][2]["role"], "user");
    }
}
