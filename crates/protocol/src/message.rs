//! Messages, content blocks, usage and tool data.
//!
//! Wire shape (JSON), for example an assistant message:
//!
//! ```json
//! {"role":"assistant","content":[{"type":"text","text":"hi"},
//!   {"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"ls"}}],
//!  "api":"openai-completions","provider":"openai","model":"gpt-4.1",
//!  "usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,
//!           "cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},
//!  "stopReason":"toolUse","timestamp":1795996727735}
//! ```

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use crate::tag_first::{self, TagFirst};

/// Milliseconds since the Unix epoch.
pub type TimestampMs = i64;

/// One block of message content. Read with the tag first when it is (see
/// [`tag_first`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ContentBlock {
    /// Plain text.
    Text { text: String },
    /// Model reasoning. `thinkingSignature` carries a provider's opaque
    /// signature or encrypted reasoning so it can be replayed across turns.
    Thinking {
        thinking: String,
        #[serde(
            rename = "thinkingSignature",
            default,
            skip_serializing_if = "Option::is_none"
        )]
        thinking_signature: Option<String>,
    },
    /// An image, base64-encoded.
    Image {
        data: String,
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A tool call requested by the model. `arguments` is the parsed JSON
    /// object (an empty object while it streams).
    ToolCall {
        id: String,
        name: String,
        arguments: Value,
    },
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }
}

/// The text blocks of `blocks` joined with `\n` (images, thinking and
/// tool calls left out).
pub fn joined_text(blocks: &[ContentBlock]) -> String {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The fields of each [`ContentBlock`] variant, as they deserialise.
mod block_fields {
    use serde::Deserialize;
    use serde_json::Value;

    #[derive(Deserialize)]
    pub struct Text {
        pub text: String,
    }

    #[derive(Deserialize)]
    pub struct Thinking {
        pub thinking: String,
        #[serde(rename = "thinkingSignature", default)]
        pub thinking_signature: Option<String>,
    }

    #[derive(Deserialize)]
    pub struct Image {
        pub data: String,
        #[serde(rename = "mimeType")]
        pub mime_type: String,
    }

    #[derive(Deserialize)]
    pub struct ToolCall {
        pub id: String,
        pub name: String,
        pub arguments: Value,
    }
}

impl TagFirst for ContentBlock {
    const TAG: &'static str = "type";
    const VARIANTS: &'static [&'static str] = &["text", "thinking", "image", "toolCall"];

    fn variant<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Option<Result<Self, D::Error>> {
        use block_fields as f;
        Some(match tag {
            "text" => f::Text::deserialize(rest).map(|v| ContentBlock::Text { text: v.text }),
            "thinking" => f::Thinking::deserialize(rest).map(|v| ContentBlock::Thinking {
                thinking: v.thinking,
                thinking_signature: v.thinking_signature,
            }),
            "image" => f::Image::deserialize(rest).map(|v| ContentBlock::Image {
                data: v.data,
                mime_type: v.mime_type,
            }),
            "toolCall" => f::ToolCall::deserialize(rest).map(|v| ContentBlock::ToolCall {
                id: v.id,
                name: v.name,
                arguments: v.arguments,
            }),
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tag_first::deserialize(d)
    }
}

/// An image attached to a prompt: `{"type":"image","data":"…","mimeType":"image/png"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageContent {
    #[serde(rename = "type", default = "image_type")]
    pub kind: String,
    pub data: String,
    #[serde(rename = "mimeType")]
    pub mime_type: String,
}

fn image_type() -> String {
    "image".to_owned()
}

impl From<ImageContent> for ContentBlock {
    fn from(img: ImageContent) -> Self {
        ContentBlock::Image {
            data: img.data,
            mime_type: img.mime_type,
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// Natural end of the answer.
    #[default]
    Stop,
    /// Output token limit reached.
    Length,
    /// The model asked for tools.
    ToolUse,
    /// The request failed; see `errorMessage`.
    Error,
    /// The user aborted.
    Aborted,
}

/// Cost in US dollars, split like [`Usage`].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
    pub total: f64,
}

/// Token usage of one model call.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    #[serde(default)]
    pub cost: Cost,
}

impl Usage {
    /// Adds `other` into `self`, tokens and cost.
    pub fn accumulate(&mut self, other: &Usage) {
        self.input += other.input;
        self.output += other.output;
        self.cache_read += other.cache_read;
        self.cache_write += other.cache_write;
        self.total_tokens += other.total_tokens;
        self.cost.input += other.cost.input;
        self.cost.output += other.cost.output;
        self.cost.cache_read += other.cost.cache_read;
        self.cost.cache_write += other.cost.cache_write;
        self.cost.total += other.cost.total;
    }
}

/// A message from the user (a prompt, a steering or follow-up message).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    pub content: Vec<ContentBlock>,
    pub timestamp: TimestampMs,
}

/// A message produced by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    pub content: Vec<ContentBlock>,
    /// The wire dialect that produced it, e.g. `openai-completions`.
    pub api: String,
    pub provider: String,
    pub model: String,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default)]
    pub stop_reason: StopReason,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Typed error kind when `stopReason` is `error` (for example
    /// `unauthorized`, `rateLimitExceeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    pub timestamp: TimestampMs,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
}

impl AssistantMessage {
    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls, in order: `(id, name, arguments)`.
    pub fn tool_calls(&self) -> Vec<(&str, &str, &Value)> {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolCall {
                    id,
                    name,
                    arguments,
                } => Some((id.as_str(), name.as_str(), arguments)),
                _ => None,
            })
            .collect()
    }
}

/// The result of one tool call, as the model will see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    pub tool_call_id: String,
    pub tool_name: String,
    pub content: Vec<ContentBlock>,
    /// Structured details for hosts (a diff, an exit code); never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    pub is_error: bool,
    pub timestamp: TimestampMs,
}

/// One message of the conversation. Read with the role first when it is
/// (see [`tag_first`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role")]
pub enum Message {
    #[serde(rename = "user")]
    User(UserMessage),
    #[serde(rename = "assistant")]
    Assistant(AssistantMessage),
    #[serde(rename = "toolResult")]
    ToolResult(ToolResultMessage),
}

impl TagFirst for Message {
    const TAG: &'static str = "role";
    const VARIANTS: &'static [&'static str] = &["user", "assistant", "toolResult"];

    fn variant<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Option<Result<Self, D::Error>> {
        Some(match tag {
            "user" => UserMessage::deserialize(rest).map(Message::User),
            "assistant" => AssistantMessage::deserialize(rest).map(Message::Assistant),
            "toolResult" => ToolResultMessage::deserialize(rest).map(Message::ToolResult),
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        tag_first::deserialize(d)
    }
}

impl Message {
    pub fn timestamp(&self) -> TimestampMs {
        match self {
            Message::User(m) => m.timestamp,
            Message::Assistant(m) => m.timestamp,
            Message::ToolResult(m) => m.timestamp,
        }
    }

    pub fn role(&self) -> &'static str {
        match self {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult(_) => "toolResult",
        }
    }
}

/// What a tool advertises to the model: a name, a description and a JSON
/// Schema for its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// The output of a tool run (final or partial).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolResult {
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
}

impl ToolResult {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            details: None,
        }
    }
}

/// Reasoning effort requested from the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinkingLevel {
    #[default]
    Off,
    Minimal,
    Low,
    Medium,
    High,
    Xhigh,
}

impl ThinkingLevel {
    pub const ALL: [ThinkingLevel; 6] = [
        ThinkingLevel::Off,
        ThinkingLevel::Minimal,
        ThinkingLevel::Low,
        ThinkingLevel::Medium,
        ThinkingLevel::High,
        ThinkingLevel::Xhigh,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ThinkingLevel::Off => "off",
            ThinkingLevel::Minimal => "minimal",
            ThinkingLevel::Low => "low",
            ThinkingLevel::Medium => "medium",
            ThinkingLevel::High => "high",
            ThinkingLevel::Xhigh => "xhigh",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tags_are_read_first_or_anywhere_with_the_same_result() {
        let first = r#"{"role":"assistant","content":[{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}},{"type":"thinking","thinking":"hm","thinkingSignature":"s"}],"api":"a","provider":"p","model":"m","timestamp":1}"#;
        let last = r#"{"content":[{"id":"c1","name":"bash","arguments":{"command":"ls"},"type":"toolCall"},{"thinking":"hm","thinkingSignature":"s","type":"thinking"}],"api":"a","provider":"p","model":"m","timestamp":1,"role":"assistant"}"#;
        let a: Message = serde_json::from_str(first).unwrap();
        let b: Message = serde_json::from_str(last).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.role(), "assistant");
        // Both read back what they wrote.
        let again: Message = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        assert_eq!(again, a);
        // From a JSON value too (not only from text).
        let v: Message = serde_json::from_value(serde_json::from_str(last).unwrap()).unwrap();
        assert_eq!(v, a);
    }

    #[test]
    fn bad_tags_fail_as_the_derived_code_did() {
        let unknown = serde_json::from_str::<Message>(r#"{"role":"system","content":[]}"#)
            .unwrap_err()
            .to_string();
        assert!(
            unknown.contains(
                "unknown variant `system`, expected one of `user`, `assistant`, `toolResult`"
            ),
            "{unknown}"
        );
        let missing = serde_json::from_str::<ContentBlock>(r#"{"text":"x"}"#)
            .unwrap_err()
            .to_string();
        assert!(missing.contains("missing field `type`"), "{missing}");
        let field = serde_json::from_str::<Message>(r#"{"role":"user","timestamp":1}"#)
            .unwrap_err()
            .to_string();
        assert!(field.contains("missing field `content`"), "{field}");
        assert!(serde_json::from_str::<ContentBlock>(r#"{"type":7,"text":"x"}"#).is_err());
        assert!(serde_json::from_str::<Message>(r#"[1]"#).is_err());
    }

    #[test]
    fn assistant_message_round_trips_in_pi_shape() {
        let wire = json!({
            "role":"assistant",
            "content":[{"type":"text","text":"hi"},
                {"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"ls"}}],
            "api":"openai-completions","provider":"mock","model":"m",
            "usage":{"input":1,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":3,
                "cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}},
            "stopReason":"toolUse","timestamp":5
        });
        let msg: Message = serde_json::from_value(wire.clone()).unwrap();
        let Message::Assistant(a) = &msg else {
            panic!("not assistant")
        };
        assert_eq!(a.text(), "hi");
        assert_eq!(a.tool_calls().len(), 1);
        assert_eq!(a.stop_reason, StopReason::ToolUse);
        assert_eq!(serde_json::to_value(&msg).unwrap(), wire);
    }

    #[test]
    fn tool_result_and_thinking_shapes() {
        let tr = Message::ToolResult(ToolResultMessage {
            tool_call_id: "c1".into(),
            tool_name: "bash".into(),
            content: vec![ContentBlock::Thinking {
                thinking: "t".into(),
                thinking_signature: None,
            }],
            details: None,
            is_error: false,
            timestamp: 1,
        });
        let v = serde_json::to_value(&tr).unwrap();
        assert_eq!(v["role"], "toolResult");
        assert_eq!(v["toolCallId"], "c1");
        assert_eq!(v["isError"], false);
        assert_eq!(v["content"][0], json!({"type":"thinking","thinking":"t"}));
    }

    #[test]
    fn thinking_levels_parse() {
        let l: ThinkingLevel = serde_json::from_str("\"xhigh\"").unwrap();
        assert_eq!(l, ThinkingLevel::Xhigh);
        assert!(serde_json::from_str::<ThinkingLevel>("\"huge\"").is_err());
    }
}
