//! One run of the session as Claude Code's stream-json messages: keel's
//! events in, the frames to write out (`stream_event` partials, one
//! `assistant` message per content block, `user` tool results, retries),
//! and the run's `result` at its end. It counts the run's model calls
//! (`--max-turns`), tokens and time. No I/O.

use std::collections::HashMap;
use std::time::Instant;

use keel_protocol::{
    AgentEvent, AssistantMessageEvent, ContentBlock, Message, StopReason, ToolResultMessage, Usage,
};
use serde_json::{Value, json};

use super::wire::{self, Ending, Summary, claude_name};

/// What the driver must do besides writing frames.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `--max-turns` is reached: stop the run.
    Stop,
    /// A tool finished: call the PostToolUse hooks (keel's tool name, the
    /// call's arguments, its result).
    ToolDone {
        call_id: String,
        tool: String,
        args: Value,
        result: ToolResultMessage,
    },
}

/// The run being shown.
pub struct RunView {
    session_id: String,
    partials: bool,
    max_turns: Option<u32>,
    started: Instant,
    call_started: Option<Instant>,
    api_ms: u64,
    turns: u32,
    usage: Usage,
    message_id: String,
    model: String,
    /// The calls the model made, by id: `(tool, arguments)`.
    calls: HashMap<String, (String, Value)>,
    hit_max_turns: bool,
    /// The SDK interrupted the run.
    pub interrupted: bool,
}

impl RunView {
    pub fn new(session_id: &str, model: &str, partials: bool, max_turns: Option<u32>) -> Self {
        Self {
            session_id: session_id.to_owned(),
            partials,
            max_turns,
            started: Instant::now(),
            call_started: None,
            api_ms: 0,
            turns: 0,
            usage: Usage::default(),
            message_id: new_message_id(),
            model: model.to_owned(),
            calls: HashMap::new(),
            hit_max_turns: false,
            interrupted: false,
        }
    }

    fn stream(&self, event: Value) -> Value {
        wire::stream_event(event, &self.session_id)
    }

    /// The frames for `event`, and what else it asks for.
    pub fn frames(&mut self, event: &AgentEvent) -> (Vec<Value>, Option<Action>) {
        let mut out = Vec::new();
        let mut action = None;
        match event {
            AgentEvent::TurnStart => {
                self.call_started = Some(Instant::now());
                self.message_id = new_message_id();
            }
            AgentEvent::MessageStart {
                message: Message::Assistant(a),
            } if self.partials => {
                self.model.clone_from(&a.model);
                out.push(self.stream(json!({
                    "type": "message_start",
                    "message": {
                        "id": self.message_id,
                        "type": "message",
                        "role": "assistant",
                        "model": a.model,
                        "content": [],
                        "stop_reason": null,
                        "stop_sequence": null,
                        "usage": {"input_tokens": 0, "output_tokens": 0},
                    },
                })));
            }
            AgentEvent::MessageUpdate {
                assistant_message_event: e,
            } if self.partials => out.push(self.stream(partial(e))),
            AgentEvent::MessageEnd {
                message: Message::Assistant(a),
            } => {
                if let Some(t) = self.call_started.take() {
                    self.api_ms += u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX);
                }
                self.turns += 1;
                self.usage.accumulate(&a.usage);
                self.model.clone_from(&a.model);
                for b in &a.content {
                    if let ContentBlock::ToolCall {
                        id,
                        name,
                        arguments,
                    } = b
                    {
                        self.calls
                            .insert(id.clone(), (name.clone(), arguments.clone()));
                    }
                }
                if self.partials {
                    out.push(self.stream(json!({
                        "type": "message_delta",
                        "delta": {"stop_reason": wire::stop_reason(a.stop_reason), "stop_sequence": null},
                        "usage": {"output_tokens": a.usage.output},
                    })));
                    out.push(self.stream(json!({"type": "message_stop"})));
                }
                out.extend(wire::assistant_frames(
                    a,
                    &self.message_id,
                    &self.session_id,
                ));
                if a.stop_reason == StopReason::ToolUse
                    && self.max_turns.is_some_and(|max| self.turns >= max)
                {
                    self.hit_max_turns = true;
                    action = Some(Action::Stop);
                }
            }
            AgentEvent::MessageEnd {
                message: Message::ToolResult(r),
            } => {
                out.push(wire::tool_result_frame(r, &self.session_id));
                if let Some((tool, args)) = self.calls.get(&r.tool_call_id) {
                    action = Some(Action::ToolDone {
                        call_id: r.tool_call_id.clone(),
                        tool: tool.clone(),
                        args: args.clone(),
                        result: r.clone(),
                    });
                }
            }
            AgentEvent::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
                ..
            } => out.push(json!({
                "type": "system",
                "subtype": "api_retry",
                "attempt": attempt,
                "max_retries": max_attempts,
                "retry_delay_ms": delay_ms,
                "error_status": null,
                "error": error_message,
                "session_id": self.session_id,
                "uuid": wire::uuid(),
            })),
            _ => {}
        }
        (out, action)
    }

    /// The run's `result`, from the messages its `agent_end` carried.
    pub fn result(
        &self,
        messages: &[Message],
        context: (u64, u64),
        total_cost_usd: f64,
        denials: Vec<Value>,
        schema: bool,
    ) -> Value {
        let last = messages.iter().rev().find_map(|m| match m {
            Message::Assistant(a) => Some(a),
            _ => None,
        });
        let text = last.map(|a| a.text()).unwrap_or_default();
        let (ending, errors) = if self.hit_max_turns {
            let max = self.max_turns.unwrap_or_default();
            (
                Ending::MaxTurns,
                vec![format!("Reached maximum number of turns ({max})")],
            )
        } else if self.interrupted || last.is_some_and(|a| a.stop_reason == StopReason::Aborted) {
            (Ending::Error, vec!["Request was interrupted".to_owned()])
        } else if let Some(a) = last.filter(|a| a.stop_reason == StopReason::Error) {
            let why = a
                .error_message
                .clone()
                .unwrap_or_else(|| "the model call failed".to_owned());
            (Ending::Error, vec![why])
        } else {
            (Ending::Success, Vec::new())
        };
        let structured_output = (schema && ending == Ending::Success)
            .then(|| serde_json::from_str::<Value>(text.trim()).ok())
            .flatten();
        wire::result(&Summary {
            ending,
            text: &text,
            errors,
            session_id: &self.session_id,
            model: &self.model,
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            duration_api_ms: self.api_ms,
            num_turns: self.turns,
            stop_reason: last.and_then(|a| wire::stop_reason(a.stop_reason)),
            usage: &self.usage,
            total_cost_usd,
            context_window: context.0,
            max_output_tokens: context.1,
            denials,
            structured_output,
        })
    }

    /// This run's cost so far.
    pub fn cost(&self) -> f64 {
        self.usage.cost.total
    }
}

fn new_message_id() -> String {
    format!("msg_{}", wire::uuid().replace('-', ""))
}

/// One partial of the answer as an Anthropic streaming event.
fn partial(e: &AssistantMessageEvent) -> Value {
    match e {
        AssistantMessageEvent::TextStart { content_index } => json!({
            "type": "content_block_start",
            "index": content_index,
            "content_block": {"type": "text", "text": ""},
        }),
        AssistantMessageEvent::TextDelta {
            content_index,
            delta,
        } => json!({
            "type": "content_block_delta",
            "index": content_index,
            "delta": {"type": "text_delta", "text": delta},
        }),
        AssistantMessageEvent::ThinkingStart { content_index } => json!({
            "type": "content_block_start",
            "index": content_index,
            "content_block": {"type": "thinking", "thinking": "", "signature": ""},
        }),
        AssistantMessageEvent::ThinkingDelta {
            content_index,
            delta,
        } => json!({
            "type": "content_block_delta",
            "index": content_index,
            "delta": {"type": "thinking_delta", "thinking": delta},
        }),
        AssistantMessageEvent::ToolCallStart {
            content_index,
            id,
            name,
        } => json!({
            "type": "content_block_start",
            "index": content_index,
            "content_block": {"type": "tool_use", "id": id, "name": claude_name(name), "input": {}},
        }),
        AssistantMessageEvent::ToolCallDelta {
            content_index,
            delta,
        } => json!({
            "type": "content_block_delta",
            "index": content_index,
            "delta": {"type": "input_json_delta", "partial_json": delta},
        }),
        AssistantMessageEvent::TextEnd { content_index, .. }
        | AssistantMessageEvent::ThinkingEnd { content_index, .. }
        | AssistantMessageEvent::ToolCallEnd { content_index, .. } => json!({
            "type": "content_block_stop",
            "index": content_index,
        }),
    }
}

#[cfg(test)]
mod tests {
    use keel_protocol::AssistantMessage;

    use super::*;

    fn answer(content: Vec<ContentBlock>, stop: StopReason) -> AssistantMessage {
        AssistantMessage {
            content,
            api: "anthropic-messages".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage {
                input: 7,
                output: 3,
                ..Usage::default()
            },
            stop_reason: stop,
            error_message: None,
            error_kind: None,
            timestamp: 0,
            response_id: None,
        }
    }

    #[test]
    fn partials_and_blocks_come_in_claude_codes_order_and_max_turns_stops() {
        let mut run = RunView::new("s", "m", true, Some(1));
        let call = ContentBlock::ToolCall {
            id: "c1".into(),
            name: "write".into(),
            arguments: json!({"path": "a", "content": "x"}),
        };
        let a = answer(vec![ContentBlock::text("ok"), call], StopReason::ToolUse);
        run.frames(&AgentEvent::TurnStart);
        let (start, _) = run.frames(&AgentEvent::MessageStart {
            message: Message::Assistant(a.clone()),
        });
        assert_eq!(start[0]["event"]["type"], "message_start");
        let (delta, _) = run.frames(&AgentEvent::MessageUpdate {
            assistant_message_event: AssistantMessageEvent::TextDelta {
                content_index: 0,
                delta: "o".into(),
            },
        });
        assert_eq!(delta[0]["event"]["delta"]["text"], "o");
        let (end, action) = run.frames(&AgentEvent::MessageEnd {
            message: Message::Assistant(a.clone()),
        });
        let kinds: Vec<&str> = end.iter().map(|f| f["type"].as_str().unwrap()).collect();
        assert_eq!(
            kinds,
            ["stream_event", "stream_event", "assistant", "assistant"]
        );
        assert_eq!(end[3]["message"]["content"][0]["name"], "Write");
        assert_eq!(end[3]["message"]["content"][0]["input"]["file_path"], "a");
        assert_eq!(end[2]["message"]["id"], end[3]["message"]["id"]);
        assert_eq!(action, Some(Action::Stop));
        let result = run.result(&[Message::Assistant(a)], (1, 1), 0.0, vec![], false);
        assert_eq!(result["subtype"], "error_max_turns");
        assert_eq!(result["num_turns"], 1);
        assert_eq!(result["usage"]["input_tokens"], 7);
    }

    #[test]
    fn structured_output_is_the_answer_read_as_json() {
        let run = RunView::new("s", "m", false, None);
        let a = answer(vec![ContentBlock::text("{\"n\": 2}")], StopReason::Stop);
        let result = run.result(&[Message::Assistant(a)], (1, 1), 0.5, vec![], true);
        assert_eq!(result["subtype"], "success");
        assert_eq!(result["structured_output"], json!({"n": 2}));
        assert_eq!(result["total_cost_usd"], 0.5);
    }
}
