//! The conversation history as every dialect needs it before conversion.
//!
//! This module owns the dialect-independent rules for replaying keel's
//! message history to a model server: tool results are grouped into runs
//! that answer the preceding assistant message's calls; a call left without
//! a result (an aborted turn) gets a synthetic error result
//! ([`MISSING_RESULT_TEXT`]) at the end of its run, so servers accept the
//! history; a result that answers no open call is dropped. It also owns the
//! small value conversions the request builders share (argument JSON, data
//! URLs, joined text, whether a reasoning signature may be replayed).
//!
//! It must not know any dialect's JSON: the `request` module of each dialect
//! walks the [`Item`]s produced here.

use keel_protocol::{AssistantMessage, ContentBlock, Message};
use serde_json::Value;

/// The text of the synthetic result sent for a tool call without a result.
pub const MISSING_RESULT_TEXT: &str = "No result provided";
/// The text sent for a tool result that holds images only.
pub(crate) const IMAGE_ONLY_RESULT_TEXT: &str = "(see attached image)";
/// Introduces the images of tool results re-sent in a user message (for
/// dialects whose tool results carry text only).
pub(crate) const TOOL_IMAGES_TEXT: &str = "Attached image(s) from tool result:";

/// An image to send: `(mime_type, base64 data)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Image<'a> {
    pub mime_type: &'a str,
    pub data: &'a str,
}

impl Image<'_> {
    /// `data:<mime>;base64,<data>`.
    pub(crate) fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime_type, self.data)
    }
}

/// One tool result, ready to send.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolOutput<'a> {
    pub call_id: &'a str,
    /// The text blocks joined with `\n` (may be empty).
    pub text: String,
    pub images: Vec<Image<'a>>,
    pub is_error: bool,
}

impl ToolOutput<'_> {
    /// `text`, or [`IMAGE_ONLY_RESULT_TEXT`] when it is empty but images
    /// came with it.
    pub(crate) fn text_or_placeholder(&self) -> &str {
        if self.text.is_empty() && !self.images.is_empty() {
            IMAGE_ONLY_RESULT_TEXT
        } else {
            &self.text
        }
    }
}

/// One step of the history.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Item<'a> {
    User(&'a [ContentBlock]),
    Assistant(&'a AssistantMessage),
    /// The results answering the previous assistant message's tool calls,
    /// in arrival order, then synthetic results for the unanswered ones.
    ToolResults(Vec<ToolOutput<'a>>),
}

/// Groups `messages` into [`Item`]s (see the module docs).
pub(crate) fn items(messages: &[Message]) -> Vec<Item<'_>> {
    let mut out = Vec::new();
    let mut open: Vec<&str> = Vec::new();
    let mut run: Vec<ToolOutput<'_>> = Vec::new();
    for message in messages {
        match message {
            Message::ToolResult(result) => {
                let Some(at) = open.iter().position(|id| *id == result.tool_call_id) else {
                    tracing::debug!(
                        call_id = %result.tool_call_id,
                        "dropping a tool result that answers no open call"
                    );
                    continue;
                };
                open.remove(at);
                run.push(ToolOutput {
                    call_id: &result.tool_call_id,
                    text: joined_text(&result.content),
                    images: images(&result.content),
                    is_error: result.is_error,
                });
            }
            Message::User(user) => {
                close_run(&mut out, &mut open, &mut run);
                out.push(Item::User(&user.content));
            }
            Message::Assistant(assistant) => {
                close_run(&mut out, &mut open, &mut run);
                open = assistant
                    .tool_calls()
                    .into_iter()
                    .map(|(id, ..)| id)
                    .collect();
                out.push(Item::Assistant(assistant));
            }
        }
    }
    close_run(&mut out, &mut open, &mut run);
    out
}

fn close_run<'a>(out: &mut Vec<Item<'a>>, open: &mut Vec<&'a str>, run: &mut Vec<ToolOutput<'a>>) {
    for call_id in open.drain(..) {
        run.push(ToolOutput {
            call_id,
            text: MISSING_RESULT_TEXT.to_owned(),
            images: Vec::new(),
            is_error: true,
        });
    }
    if !run.is_empty() {
        out.push(Item::ToolResults(std::mem::take(run)));
    }
}

pub(crate) use keel_protocol::joined_text;

/// The images of `blocks`, in order.
pub(crate) fn images(blocks: &[ContentBlock]) -> Vec<Image<'_>> {
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Image { data, mime_type } => Some(Image { mime_type, data }),
            _ => None,
        })
        .collect()
}

/// Tool call arguments as the JSON string OpenAI dialects expect.
pub(crate) fn arguments_string(arguments: &Value) -> String {
    match arguments {
        // Arguments kept raw (unparseable JSON) are replayed as they came.
        Value::String(raw) => raw.clone(),
        Value::Null => "{}".to_owned(),
        other => other.to_string(),
    }
}

/// Tool call arguments as the JSON object Anthropic expects: raw strings are
/// parsed when they hold an object, anything else becomes `{}`.
pub(crate) fn arguments_object(arguments: &Value) -> Value {
    match arguments {
        Value::Object(_) => arguments.clone(),
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(parsed @ Value::Object(_)) => parsed,
            _ => Value::Object(Default::default()),
        },
        _ => Value::Object(Default::default()),
    }
}

/// Whether `message` was produced by this dialect, provider and model, so its
/// reasoning signatures / encrypted reasoning may be replayed (other servers
/// reject foreign ones).
pub(crate) fn same_model(
    message: &AssistantMessage,
    api: &str,
    provider: &str,
    model: &str,
) -> bool {
    message.api == api && message.provider == provider && message.model == model
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{StopReason, ToolResultMessage, Usage, UserMessage};
    use serde_json::json;

    fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: vec![ContentBlock::text(text)],
            timestamp: 0,
        })
    }

    fn assistant_calls(ids: &[&str]) -> Message {
        Message::Assistant(AssistantMessage {
            content: ids
                .iter()
                .map(|id| ContentBlock::ToolCall {
                    id: (*id).into(),
                    name: "bash".into(),
                    arguments: json!({}),
                })
                .collect(),
            api: "a".into(),
            provider: "p".into(),
            model: "m".into(),
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

    fn run_ids<'a>(item: &'a Item<'_>) -> Vec<(&'a str, &'a str)> {
        match item {
            Item::ToolResults(run) => run.iter().map(|r| (r.call_id, r.text.as_str())).collect(),
            other => panic!("not a run: {other:?}"),
        }
    }

    #[test]
    fn results_group_into_runs_with_synthetic_and_orphans_dropped() {
        let messages = vec![
            user("go"),
            assistant_calls(&["a", "b", "c"]),
            result("b", vec![ContentBlock::text("B")]),
            result("zzz", vec![ContentBlock::text("orphan")]),
            result(
                "a",
                vec![ContentBlock::text("A1"), ContentBlock::text("A2")],
            ),
            user("next"),
            assistant_calls(&["d"]),
        ];
        let items = items(&messages);
        assert_eq!(items.len(), 6);
        assert!(matches!(items[0], Item::User(_)));
        assert!(matches!(items[1], Item::Assistant(_)));
        assert_eq!(
            run_ids(&items[2]),
            [("b", "B"), ("a", "A1\nA2"), ("c", MISSING_RESULT_TEXT)]
        );
        assert!(matches!(items[3], Item::User(_)));
        assert_eq!(run_ids(&items[5]), [("d", MISSING_RESULT_TEXT)]);
        let Item::ToolResults(run) = &items[5] else {
            unreachable!()
        };
        assert!(run[0].is_error);
    }

    #[test]
    fn image_only_results_get_a_placeholder() {
        let messages = vec![
            assistant_calls(&["a"]),
            result(
                "a",
                vec![ContentBlock::Image {
                    data: "AAAA".into(),
                    mime_type: "image/png".into(),
                }],
            ),
        ];
        let items = items(&messages);
        let Item::ToolResults(run) = &items[1] else {
            panic!("{items:?}")
        };
        assert_eq!(run[0].text_or_placeholder(), IMAGE_ONLY_RESULT_TEXT);
        assert_eq!(run[0].images[0].data_url(), "data:image/png;base64,AAAA");
    }

    #[test]
    fn argument_forms() {
        assert_eq!(arguments_string(&json!({"a": 1})), r#"{"a":1}"#);
        assert_eq!(arguments_string(&json!("{\"raw")), "{\"raw");
        assert_eq!(arguments_string(&Value::Null), "{}");
        assert_eq!(arguments_object(&json!("{\"a\":2}")), json!({"a": 2}));
        assert_eq!(arguments_object(&json!("{broken")), json!({}));
        assert_eq!(arguments_object(&json!([1])), json!({}));
    }
}
