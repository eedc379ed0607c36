//! Builds the assistant message from the model's normalised event stream and
//! derives the `message_update` deltas hosts see.
//!
//! Text and thinking deltas extend the current block of their kind; a change
//! of kind closes the open block (`*_end`) and opens a new one. Tool calls are
//! keyed by the provider's call index; their argument JSON is accumulated and
//! parsed when the call's block closes.

use std::collections::HashMap;

use keel_llm::ModelEvent;
use keel_protocol::{AssistantMessage, AssistantMessageEvent, ContentBlock, StopReason};
use serde_json::Value;

/// Accumulates one assistant message.
#[derive(Debug)]
pub struct MessageBuilder {
    pub message: AssistantMessage,
    /// Index of the open block in `message.content`.
    open: Option<usize>,
    /// Provider call index → content index.
    tool_index: HashMap<u32, usize>,
    /// Content index → raw argument JSON so far.
    raw_args: HashMap<usize, String>,
    /// Tool call id → why its arguments could not be parsed.
    pub invalid_args: HashMap<String, String>,
    pub finished: bool,
}

impl MessageBuilder {
    pub fn new(message: AssistantMessage) -> Self {
        Self {
            message,
            open: None,
            tool_index: HashMap::new(),
            raw_args: HashMap::new(),
            invalid_args: HashMap::new(),
            finished: false,
        }
    }

    /// Applies one model event; returns the deltas to announce.
    pub fn apply(&mut self, event: ModelEvent) -> Vec<AssistantMessageEvent> {
        let mut out = Vec::new();
        match event {
            ModelEvent::Start { response_id } => {
                if response_id.is_some() {
                    self.message.response_id = response_id;
                }
            }
            ModelEvent::TextDelta(delta) => {
                if delta.is_empty() {
                    return out;
                }
                let index = match self.open_block() {
                    Some((i, ContentBlock::Text { .. })) => i,
                    _ => {
                        self.close_open(&mut out);
                        let i = self.push(ContentBlock::text(""));
                        out.push(AssistantMessageEvent::TextStart { content_index: i });
                        i
                    }
                };
                if let Some(ContentBlock::Text { text }) = self.message.content.get_mut(index) {
                    text.push_str(&delta);
                }
                out.push(AssistantMessageEvent::TextDelta {
                    content_index: index,
                    delta,
                });
            }
            ModelEvent::ThinkingDelta { delta, signature } => {
                let index = match self.open_block() {
                    Some((i, ContentBlock::Thinking { .. })) => i,
                    _ => {
                        self.close_open(&mut out);
                        let i = self.push(ContentBlock::Thinking {
                            thinking: String::new(),
                            thinking_signature: None,
                        });
                        out.push(AssistantMessageEvent::ThinkingStart { content_index: i });
                        i
                    }
                };
                if let Some(ContentBlock::Thinking {
                    thinking,
                    thinking_signature,
                }) = self.message.content.get_mut(index)
                {
                    thinking.push_str(&delta);
                    if signature.is_some() {
                        *thinking_signature = signature;
                    }
                }
                if !delta.is_empty() {
                    out.push(AssistantMessageEvent::ThinkingDelta {
                        content_index: index,
                        delta,
                    });
                }
            }
            ModelEvent::ToolCallStart { index, id, name } => {
                self.close_open(&mut out);
                let i = self.push(ContentBlock::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: Value::Object(Default::default()),
                });
                self.tool_index.insert(index, i);
                self.raw_args.insert(i, String::new());
                out.push(AssistantMessageEvent::ToolCallStart {
                    content_index: i,
                    id,
                    name,
                });
            }
            ModelEvent::ToolCallDelta { index, delta } => {
                let Some(&i) = self.tool_index.get(&index) else {
                    tracing::warn!(index, "tool call delta for an unknown call index");
                    return out;
                };
                if self.open != Some(i) {
                    // Deltas of an earlier call after another block opened: keep
                    // accumulating; the call is closed again at finish.
                    self.close_open(&mut out);
                    self.open = Some(i);
                }
                if let Some(raw) = self.raw_args.get_mut(&i) {
                    raw.push_str(&delta);
                }
                out.push(AssistantMessageEvent::ToolCallDelta {
                    content_index: i,
                    delta,
                });
            }
            ModelEvent::Usage(usage) => self.message.usage = usage,
            ModelEvent::Finish { stop_reason } => {
                self.close_open(&mut out);
                self.message.stop_reason = stop_reason;
                // A server that reports tool calls with finish_reason "stop".
                if stop_reason == StopReason::Stop && !self.message.tool_calls().is_empty() {
                    self.message.stop_reason = StopReason::ToolUse;
                }
                self.finished = true;
            }
        }
        out
    }

    /// Closes whatever block is open (used on finish, error and abort).
    pub fn close(&mut self) -> Vec<AssistantMessageEvent> {
        let mut out = Vec::new();
        self.close_open(&mut out);
        out
    }

    fn open_block(&self) -> Option<(usize, &ContentBlock)> {
        let i = self.open?;
        self.message.content.get(i).map(|b| (i, b))
    }

    fn push(&mut self, block: ContentBlock) -> usize {
        self.message.content.push(block);
        let i = self.message.content.len() - 1;
        self.open = Some(i);
        i
    }

    fn close_open(&mut self, out: &mut Vec<AssistantMessageEvent>) {
        let Some(i) = self.open.take() else {
            return;
        };
        let Some(block) = self.message.content.get_mut(i) else {
            return;
        };
        match block {
            ContentBlock::Text { text } => out.push(AssistantMessageEvent::TextEnd {
                content_index: i,
                content: text.clone(),
            }),
            ContentBlock::Thinking { thinking, .. } => {
                out.push(AssistantMessageEvent::ThinkingEnd {
                    content_index: i,
                    content: thinking.clone(),
                })
            }
            ContentBlock::ToolCall { id, arguments, .. } => {
                let raw = self.raw_args.get(&i).map(String::as_str).unwrap_or("");
                match parse_arguments(raw) {
                    Ok(v) => *arguments = v,
                    Err(e) => {
                        self.invalid_args.insert(id.clone(), e);
                    }
                }
                out.push(AssistantMessageEvent::ToolCallEnd {
                    content_index: i,
                    tool_call: block.clone(),
                });
            }
            ContentBlock::Image { .. } => {}
        }
    }
}

/// Parses streamed tool arguments; empty means `{}`.
fn parse_arguments(raw: &str) -> Result<Value, String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(trimmed) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(other) => Err(format!("arguments must be a JSON object, got {other}")),
        Err(e) => Err(format!("arguments are not valid JSON ({e}): {trimmed}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn builder() -> MessageBuilder {
        MessageBuilder::new(AssistantMessage {
            content: vec![],
            api: "t".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: keel_protocol::Usage::default(),
            stop_reason: StopReason::Stop,
            error_message: None,
            error_kind: None,
            timestamp: 0,
            response_id: None,
        })
    }

    fn kinds(evs: &[AssistantMessageEvent]) -> Vec<String> {
        evs.iter()
            .map(|e| {
                serde_json::to_value(e).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect()
    }

    #[test]
    fn thinking_then_text_then_tool_call() {
        let mut b = builder();
        let mut evs = vec![];
        for ev in [
            ModelEvent::ThinkingDelta {
                delta: "hm".into(),
                signature: None,
            },
            ModelEvent::TextDelta("Hel".into()),
            ModelEvent::TextDelta("lo".into()),
            ModelEvent::ToolCallStart {
                index: 0,
                id: "c1".into(),
                name: "bash".into(),
            },
            ModelEvent::ToolCallDelta {
                index: 0,
                delta: "{\"command\":".into(),
            },
            ModelEvent::ToolCallDelta {
                index: 0,
                delta: "\"ls\"}".into(),
            },
            ModelEvent::Finish {
                stop_reason: StopReason::ToolUse,
            },
        ] {
            evs.extend(b.apply(ev));
        }
        assert_eq!(
            kinds(&evs),
            vec![
                "thinking_start",
                "thinking_delta",
                "thinking_end",
                "text_start",
                "text_delta",
                "text_delta",
                "text_end",
                "toolcall_start",
                "toolcall_delta",
                "toolcall_delta",
                "toolcall_end"
            ]
        );
        assert_eq!(b.message.text(), "Hello");
        assert_eq!(b.message.tool_calls()[0].2, &json!({"command":"ls"}));
        assert!(b.finished);
    }

    #[test]
    fn invalid_arguments_are_recorded() {
        let mut b = builder();
        b.apply(ModelEvent::ToolCallStart {
            index: 0,
            id: "c1".into(),
            name: "bash".into(),
        });
        b.apply(ModelEvent::ToolCallDelta {
            index: 0,
            delta: "{\"command\": ".into(),
        });
        b.close();
        assert!(b.invalid_args["c1"].contains("not valid JSON"));
    }

    #[test]
    fn tool_calls_with_stop_become_tool_use() {
        let mut b = builder();
        b.apply(ModelEvent::ToolCallStart {
            index: 0,
            id: "c1".into(),
            name: "ls".into(),
        });
        b.apply(ModelEvent::Finish {
            stop_reason: StopReason::Stop,
        });
        assert_eq!(b.message.stop_reason, StopReason::ToolUse);
        assert_eq!(b.message.tool_calls()[0].2, &json!({}));
    }
}
