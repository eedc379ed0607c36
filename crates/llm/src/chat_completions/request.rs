//! The request body of the Chat Completions dialect.
//!
//! This module owns the conversion of a [`ModelRequest`] (keel's messages,
//! tool specs, thinking level) into the JSON body of
//! `POST {base_url}/chat/completions`. It does no I/O and knows nothing of
//! the response format.
//!
//! Wire format produced:
//!
//! ```json
//! {"model":"gpt-4.1","stream":true,"stream_options":{"include_usage":true},
//!  "max_tokens":4096,"reasoning_effort":"medium",
//!  "messages":[
//!   {"role":"system","content":"You are keel."},
//!   {"role":"user","content":"list files"},
//!   {"role":"user","content":[{"type":"text","text":"what is this?"},
//!     {"type":"image_url","image_url":{"url":"data:image/png;base64,iVBO…"}}]},
//!   {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
//!     "function":{"name":"bash","arguments":"{\"command\":\"ls\"}"}}]},
//!   {"role":"tool","tool_call_id":"call_1","content":"Cargo.toml\nsrc"}],
//!  "tools":[{"type":"function","function":{"name":"bash","description":"…","parameters":{…}}}]}
//! ```
//!
//! Conversion rules:
//! - the system prompt goes first, as `developer` when the server supports
//!   that role, else `system`; an empty prompt is omitted;
//! - user text blocks are joined with `\n` into a string; a user message
//!   with images becomes content parts with `image_url` data URLs;
//! - assistant text blocks are concatenated; thinking blocks are not
//!   replayed; tool calls carry their arguments as a JSON *string*; an
//!   assistant message with neither text nor tool calls is skipped (this
//!   covers errored/aborted messages with no content);
//! - tool results become `role: tool` messages with their text; images in
//!   tool results are sent in one user message after the run of tool
//!   results (`Attached image(s) from tool result:` + image parts), since the
//!   `tool` role only takes text;
//! - a tool call that has no result before the next non-tool message gets a
//!   synthetic `No result provided` result, so the server accepts the
//!   history, and a result that answers no open call is dropped (the
//!   shared history rules);
//! - `tools` is omitted when empty; `max_tokens` only when set;
//!   `reasoning_effort` (`low`/`medium`/`high`; minimal→low, xhigh→high)
//!   only when thinking is not off and the server supports it.

use keel_protocol::{AssistantMessage, ContentBlock, Message, ThinkingLevel};
use serde::Serialize;
use serde_json::{Value, json};

use super::ChatCompletionsConfig;
use crate::ModelRequest;
use crate::history::{self, Image, Item, TOOL_IMAGES_TEXT};

pub use crate::history::MISSING_RESULT_TEXT;

/// The JSON body for `request` on a server configured as `config`.
pub fn build_request_body(request: &ModelRequest, config: &ChatCompletionsConfig) -> Value {
    // Serialising these plain structs cannot fail.
    serde_json::to_value(request_body(request, config)).unwrap_or_default()
}

/// The body as it is sent: it borrows the model and the tool schemas (the
/// bulk of a request early in a conversation) from `request`, so they are
/// written straight into the request instead of being copied into a JSON
/// tree first. [`build_request_body`] is the same body as a tree.
pub(crate) fn request_body<'a>(
    request: &'a ModelRequest,
    config: &ChatCompletionsConfig,
) -> RequestBody<'a> {
    RequestBody {
        model: &request.model,
        messages: convert_messages(
            &request.system_prompt,
            &request.messages,
            config.supports_developer_role,
        ),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools: request
            .tools
            .iter()
            .map(|t| ToolDef {
                kind: "function",
                function: FunctionDef {
                    name: &t.name,
                    description: &t.description,
                    parameters: &t.parameters,
                },
            })
            .collect(),
        max_tokens: request.max_output_tokens,
        reasoning_effort: if config.supports_reasoning_effort {
            reasoning_effort(request.thinking_level)
        } else {
            None
        },
        response_format: request.output_schema.as_ref().map(|schema| {
            serde_json::json!({"type": "json_schema", "json_schema": {
                "name": crate::OUTPUT_SCHEMA_NAME,
                "schema": schema,
                "strict": true,
            }})
        }),
    }
}

/// See [`request_body`].
#[derive(Debug, Serialize)]
pub(crate) struct RequestBody<'a> {
    model: &'a str,
    messages: Vec<Value>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolDef<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    /// `{"type":"json_schema","json_schema":{"name","schema","strict"}}`
    /// with an output schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
}

#[derive(Debug, Serialize)]
struct StreamOptions {
    include_usage: bool,
}

/// `{"type":"function","function":{"name","description","parameters"}}`.
#[derive(Debug, Serialize)]
struct ToolDef<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDef<'a>,
}

#[derive(Debug, Serialize)]
struct FunctionDef<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// The `reasoning_effort` value for a thinking level (`None` when off).
pub fn reasoning_effort(level: ThinkingLevel) -> Option<&'static str> {
    match level {
        ThinkingLevel::Off => None,
        ThinkingLevel::Minimal | ThinkingLevel::Low => Some("low"),
        ThinkingLevel::Medium => Some("medium"),
        ThinkingLevel::High | ThinkingLevel::Xhigh => Some("high"),
    }
}

/// Builds the `messages` array.
fn convert_messages(system_prompt: &str, messages: &[Message], developer_role: bool) -> Vec<Value> {
    let mut out = Vec::new();
    if !system_prompt.is_empty() {
        let role = if developer_role {
            "developer"
        } else {
            "system"
        };
        out.push(json!({"role": role, "content": system_prompt}));
    }
    for item in history::items(messages) {
        match item {
            Item::User(blocks) => {
                if let Some(content) = user_content(blocks) {
                    out.push(json!({"role": "user", "content": content}));
                }
            }
            Item::Assistant(assistant) => out.extend(assistant_message(assistant)),
            Item::ToolResults(run) => {
                let mut images = Vec::new();
                for result in &run {
                    out.push(json!({
                        "role": "tool",
                        "tool_call_id": result.call_id,
                        "content": result.text_or_placeholder(),
                    }));
                    images.extend(result.images.iter().map(image_part));
                }
                if !images.is_empty() {
                    let mut parts = vec![json!({"type": "text", "text": TOOL_IMAGES_TEXT})];
                    parts.append(&mut images);
                    out.push(json!({"role": "user", "content": parts}));
                }
            }
        }
    }
    out
}

/// An assistant message, or `None` when it has neither text nor tool calls.
fn assistant_message(message: &AssistantMessage) -> Option<Value> {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in &message.content {
        match block {
            ContentBlock::Text { text: t } => text.push_str(t),
            ContentBlock::ToolCall {
                id,
                name,
                arguments,
            } => tool_calls.push(json!({
                "id": id,
                "type": "function",
                "function": {"name": name, "arguments": history::arguments_string(arguments)},
            })),
            ContentBlock::Thinking { .. } | ContentBlock::Image { .. } => {}
        }
    }
    if text.is_empty() && tool_calls.is_empty() {
        return None;
    }
    let mut msg = json!({
        "role": "assistant",
        "content": if text.is_empty() { Value::Null } else { Value::String(text) },
    });
    if !tool_calls.is_empty() {
        msg["tool_calls"] = Value::Array(tool_calls);
    }
    Some(msg)
}

fn image_part(image: &Image<'_>) -> Value {
    json!({"type": "image_url", "image_url": {"url": image.data_url()}})
}

/// A user message's `content`: a string when it is text only, content parts
/// when it has images, `None` when it is empty.
fn user_content(blocks: &[ContentBlock]) -> Option<Value> {
    let images = history::images(blocks);
    if images.is_empty() {
        let text = history::joined_text(blocks);
        return (!text.is_empty()).then_some(Value::String(text));
    }
    let parts: Vec<Value> = blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(json!({"type": "text", "text": text})),
            ContentBlock::Image { data, mime_type } => Some(image_part(&Image { mime_type, data })),
            _ => None,
        })
        .collect();
    Some(Value::Array(parts))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{StopReason, ToolResultMessage, ToolSpec, Usage, UserMessage};

    fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(text)],
            timestamp: 0,
        })
    }

    fn assistant(content: Vec<ContentBlock>, stop_reason: StopReason) -> Message {
        Message::Assistant(AssistantMessage {
            content,
            api: "openai-completions".into(),
            provider: "mock".into(),
            model: "m".into(),
            usage: Usage::default(),
            stop_reason,
            error_message: None,
            error_kind: None,
            timestamp: 0,
            response_id: None,
        })
    }

    fn call(id: &str, args: Value) -> ContentBlock {
        ContentBlock::ToolCall {
            id: id.into(),
            name: "bash".into(),
            arguments: args,
        }
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
            model: "gpt-test".into(),
            system_prompt: "You are keel.".into(),
            messages,
            tools: Vec::new(),
            thinking_level: ThinkingLevel::Off,
            max_output_tokens: None,
            output_schema: None,
        }
    }

    fn config() -> ChatCompletionsConfig {
        ChatCompletionsConfig::new("test", "http://x/v1")
    }

    #[test]
    fn an_output_schema_is_a_json_schema_response_format() {
        let mut r = request(vec![user("hi")]);
        let schema = json!({"type": "object"});
        r.output_schema = Some(schema.clone());
        let body = build_request_body(&r, &config());
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema": {"name": "output", "schema": schema, "strict": true}})
        );
        assert!(
            build_request_body(&request(vec![user("hi")]), &config())
                .get("response_format")
                .is_none()
        );
    }

    #[test]
    fn minimal_body() {
        let body = build_request_body(&request(vec![user("hi")]), &config());
        assert_eq!(
            body,
            json!({
                "model": "gpt-test",
                "messages": [
                    {"role": "system", "content": "You are keel."},
                    {"role": "user", "content": "hi"},
                ],
                "stream": true,
                "stream_options": {"include_usage": true},
            })
        );
    }

    #[test]
    fn tools_max_tokens_reasoning_and_developer_role() {
        let mut req = request(vec![user("hi")]);
        req.tools = vec![ToolSpec {
            name: "bash".into(),
            description: "Run a command".into(),
            parameters: json!({"type": "object"}),
        }];
        req.max_output_tokens = Some(1024);
        req.thinking_level = ThinkingLevel::Xhigh;
        let mut cfg = config();
        // Not supported: no reasoning_effort, system role.
        let body = build_request_body(&req, &cfg);
        assert!(body.get("reasoning_effort").is_none());
        assert_eq!(body["messages"][0]["role"], "system");
        assert_eq!(body["max_tokens"], 1024);
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {
                "name": "bash", "description": "Run a command", "parameters": {"type": "object"}}}])
        );

        cfg.supports_reasoning_effort = true;
        cfg.supports_developer_role = true;
        let body = build_request_body(&req, &cfg);
        assert_eq!(body["reasoning_effort"], "high");
        assert_eq!(body["messages"][0]["role"], "developer");
        req.thinking_level = ThinkingLevel::Off;
        assert!(
            build_request_body(&req, &cfg)
                .get("reasoning_effort")
                .is_none()
        );

        let efforts: Vec<_> = ThinkingLevel::ALL
            .iter()
            .map(|l| reasoning_effort(*l))
            .collect();
        assert_eq!(
            efforts,
            [
                None,
                Some("low"),
                Some("low"),
                Some("medium"),
                Some("high"),
                Some("high")
            ]
        );
    }

    #[test]
    fn empty_system_prompt_and_tools_are_omitted() {
        let mut req = request(vec![user("hi")]);
        req.system_prompt = String::new();
        let body = build_request_body(&req, &config());
        assert_eq!(body["messages"], json!([{"role": "user", "content": "hi"}]));
        assert!(body.get("tools").is_none());
        assert!(body.get("max_tokens").is_none());
    }

    #[test]
    fn user_images_become_content_parts() {
        let msg = Message::User(UserMessage {
            content: vec![ContentBlock::text("what is this?"), image()],
            timestamp: 0,
        });
        let body = build_request_body(&request(vec![msg]), &config());
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ]})
        );
    }

    #[test]
    fn assistant_tool_calls_and_results() {
        let messages = vec![
            user("list"),
            assistant(
                vec![
                    ContentBlock::Thinking {
                        thinking: "let me see".into(),
                        thinking_signature: Some("sig".into()),
                    },
                    ContentBlock::text("Listing."),
                    call("call_1", json!({"command": "ls"})),
                ],
                StopReason::ToolUse,
            ),
            result("call_1", vec![ContentBlock::text("a\nb")]),
            assistant(vec![ContentBlock::text("Done.")], StopReason::Stop),
        ];
        let body = build_request_body(&request(messages), &config());
        assert_eq!(
            body["messages"],
            json!([
                {"role": "system", "content": "You are keel."},
                {"role": "user", "content": "list"},
                {"role": "assistant", "content": "Listing.", "tool_calls": [{
                    "id": "call_1", "type": "function",
                    "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a\nb"},
                {"role": "assistant", "content": "Done."},
            ])
        );
    }

    #[test]
    fn tool_result_images_follow_the_run_of_results() {
        let messages = vec![
            assistant(
                vec![call("c1", json!({})), call("c2", json!({}))],
                StopReason::ToolUse,
            ),
            result("c1", vec![image()]),
            result("c2", vec![ContentBlock::text("ok")]),
        ];
        let body = build_request_body(&request(messages), &config());
        let msgs = body["messages"].as_array().unwrap();
        assert_eq!(msgs[1]["content"], Value::Null);
        assert_eq!(
            msgs[2],
            json!({"role": "tool", "tool_call_id": "c1", "content": "(see attached image)"})
        );
        assert_eq!(msgs[3]["role"], "tool");
        assert_eq!(
            msgs[4],
            json!({"role": "user", "content": [
                {"type": "text", "text": "Attached image(s) from tool result:"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
            ]})
        );
        assert_eq!(msgs.len(), 5);
    }

    #[test]
    fn empty_errored_assistants_are_skipped_and_orphans_answered() {
        let messages = vec![
            user("one"),
            assistant(Vec::new(), StopReason::Error),
            assistant(vec![ContentBlock::text("")], StopReason::Aborted),
            user("two"),
            assistant(vec![call("c9", json!({"a": 1}))], StopReason::Aborted),
            user("three"),
        ];
        let body = build_request_body(&request(messages), &config());
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            ["system", "user", "user", "assistant", "tool", "user"]
        );
        assert_eq!(body["messages"][4]["content"], MISSING_RESULT_TEXT);
        assert_eq!(body["messages"][4]["tool_call_id"], "c9");
    }
}
