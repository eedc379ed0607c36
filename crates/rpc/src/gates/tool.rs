//! `ask_host`: the tool through which the agent opens workflow gates.
//!
//! Owns the tool the model calls to ask the host a structured question:
//! it opens a gate (stage `deep-interview`, kind `question`) whose schema
//! comes from the call (`answer_schema`, or the `options`' values, or any
//! non-empty string), also offers the legacy extension UI dialog (`select`
//! over the options' labels, else `input`), and returns the accepted
//! answer. A dialog answer goes through the same validation as a
//! `workflow_gate_response`. Offered only when RPC mode is started with
//! the gate tool enabled.

use std::sync::Arc;
use std::time::Duration;

use keel_protocol::{ContentBlock, ToolResult};
use keel_tools::{Tool, ToolContext, ToolOutput};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{GateOption, GateSpec, Gates, schema};
use crate::ui::{Dialog, Notice, Ui, UiAnswer};
use crate::wire_errors::tool_text;

/// The tool's name.
pub(crate) const NAME: &str = "ask_host";

#[derive(Debug, Deserialize)]
struct Args {
    question: String,
    #[serde(default)]
    details: Option<String>,
    #[serde(default)]
    options: Vec<GateOption>,
    #[serde(default)]
    answer_schema: Option<Value>,
}

/// Asks the host through a workflow gate.
pub(crate) struct AskHost {
    pub gates: Arc<Gates>,
    pub ui: Arc<Ui>,
    /// How long to wait for an answer.
    pub wait: Duration,
}

fn failed(msg: String) -> keel_tools::Error {
    keel_tools::Error::Failed(msg)
}

#[async_trait::async_trait]
impl Tool for AskHost {
    fn name(&self) -> &str {
        NAME
    }

    fn description(&self) -> &str {
        "Ask the person or program driving you a question and wait for the answer. Use it when \
         you cannot proceed without a decision or information only they have. Give a one-line \
         question, optional details, and either options (the answer is one option's value) or \
         an answer_schema (a JSON Schema for a structured answer); without either the answer is \
         free text. Returns the answer as JSON."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "The question, in one line"},
                "details": {"type": "string", "description": "What the person needs to know to answer"},
                "options": {
                    "type": "array",
                    "description": "Choices, when the answer is one of a few values",
                    "items": {
                        "type": "object",
                        "properties": {
                            "value": {"type": "string"},
                            "label": {"type": "string"},
                            "description": {"type": "string"}
                        },
                        "required": ["value", "label"]
                    }
                },
                "answer_schema": {
                    "type": "object",
                    "description": "JSON Schema of a structured answer (keywords: type, enum, const, properties, required, additionalProperties, items, minLength, maxLength, minimum, maximum, title, description, oneOf, anyOf)"
                }
            },
            "required": ["question"]
        })
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        let args: Args = serde_json::from_value(args)
            .map_err(|e| keel_tools::Error::InvalidArguments(format!("{NAME}: {e}")))?;
        let answer_schema = match (&args.answer_schema, args.options.is_empty()) {
            (Some(s), _) => s.clone(),
            (None, false) => {
                json!({"type": "string", "enum": args.options.iter().map(|o| o.value.clone()).collect::<Vec<_>>()})
            }
            (None, true) => json!({"type": "string", "minLength": 1}),
        };
        let mut context = json!({"title": args.question});
        if let Some(d) = &args.details {
            context["prompt"] = json!(d);
        }
        let (gate_id, mut accepted) = self
            .gates
            .open(GateSpec {
                stage: "deep-interview".to_owned(),
                kind: "question".to_owned(),
                schema: answer_schema.clone(),
                options: args.options.clone(),
                context,
            })
            .await
            .map_err(|e| failed(tool_text::gate_not_opened(&e)))?;

        let mut fields = Map::new();
        fields.insert("title".to_owned(), json!(args.question));
        if let Some(d) = &args.details {
            fields.insert("message".to_owned(), json!(d));
        }
        let dialog = if !args.options.is_empty() {
            fields.insert(
                "options".to_owned(),
                json!(
                    args.options
                        .iter()
                        .map(|o| o.label.clone())
                        .collect::<Vec<_>>()
                ),
            );
            Dialog::Select
        } else if answer_schema["type"] == "boolean" {
            Dialog::Confirm
        } else if matches!(answer_schema["type"].as_str(), Some("object" | "array")) {
            let prefill = if answer_schema["type"] == "array" {
                "[]"
            } else {
                "{}"
            };
            fields.insert("prefill".to_owned(), json!(prefill));
            Dialog::Editor
        } else {
            Dialog::Input
        };
        self.ui
            .notice(
                Notice::SetStatus,
                status(Some(&format!("Waiting for your answer: {}", args.question))),
            )
            .await;
        let dialog_cancel = ctx.cancel.child_token();
        let ui = self.ui.clone();
        let wait = self.wait;
        let dialog_token = dialog_cancel.clone();
        let mut legacy = Some(Box::pin(async move {
            ui.dialog(dialog, fields, Some(wait), dialog_token).await
        }));
        let deadline = tokio::time::sleep(self.wait);
        tokio::pin!(deadline);
        let outcome = loop {
            tokio::select! {
                answer = &mut accepted => {
                    let Ok(answer) = answer else {
                        break Err(failed(tool_text::gate_dropped()));
                    };
                    break Ok(ToolOutput::success(ToolResult {
                        content: vec![ContentBlock::text(format!(
                            "The host answered: {}",
                            schema::canonical(&answer)
                        ))],
                        details: Some(json!({"gate_id": gate_id, "answer": answer})),
                    }));
                }
                ui_answer = async {
                    match legacy.as_mut() {
                        Some(d) => d.await,
                        None => std::future::pending().await,
                    }
                } => {
                    legacy = None;
                    if let Some(answer) = from_dialog(ui_answer, &args.options, &answer_schema) {
                        // Judged like a workflow_gate_response; an accepted
                        // answer arrives through `accepted`.
                        if let Ok(data) = self.gates.respond(&gate_id, &answer, None).await
                            && data["status"] == "rejected"
                        {
                            let mut f = Map::new();
                            f.insert(
                                "message".to_owned(),
                                json!(tool_text::gate_answer_misfit(&gate_id)),
                            );
                            f.insert("notifyType".to_owned(), json!("warning"));
                            self.ui.notice(Notice::Notify, f).await;
                        }
                    }
                }
                _ = ctx.cancel.cancelled() => {
                    self.gates.forget_waiter(&gate_id);
                    break Err(keel_tools::Error::Aborted);
                }
                _ = &mut deadline => {
                    self.gates.forget_waiter(&gate_id);
                    break Err(failed(tool_text::gate_timeout(self.wait.as_secs_f64(), &gate_id)));
                }
            }
        };
        // Whatever ended the wait, a dialog still open is withdrawn.
        dialog_cancel.cancel();
        if let Some(d) = legacy.take() {
            let _ = d.await;
        }
        self.ui.notice(Notice::SetStatus, status(None)).await;
        outcome
    }
}

/// `setStatus` fields for keel's status line (`None` clears it).
fn status(text: Option<&str>) -> Map<String, Value> {
    let mut f = Map::new();
    f.insert("statusKey".to_owned(), json!("keel"));
    f.insert("statusText".to_owned(), json!(text));
    f
}

/// The gate answer an extension UI answer stands for, if any.
fn from_dialog(answer: UiAnswer, options: &[GateOption], schema: &Value) -> Option<Value> {
    let raw = match answer {
        UiAnswer::Value(v) => v,
        UiAnswer::Confirmed(b) => Value::Bool(b),
        UiAnswer::Cancelled { .. } => return None,
    };
    if let Value::String(s) = &raw {
        if let Some(o) = options.iter().find(|o| o.label == *s || o.value == *s) {
            return Some(json!(o.value));
        }
        if schema["type"] != "string" && !options.is_empty() {
            return Some(raw);
        }
        if schema["type"] != "string"
            && let Ok(parsed) = serde_json::from_str::<Value>(s)
        {
            return Some(parsed);
        }
    }
    Some(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialog_answers_map_to_gate_answers() {
        let opts = vec![GateOption {
            value: "approve".into(),
            label: "Approve execution".into(),
            description: None,
        }];
        let s = json!({"type": "string"});
        assert_eq!(
            from_dialog(UiAnswer::Value(json!("Approve execution")), &opts, &s),
            Some(json!("approve"))
        );
        assert_eq!(
            from_dialog(
                UiAnswer::Value(json!("{\"a\":1}")),
                &[],
                &json!({"type": "object"})
            ),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            from_dialog(UiAnswer::Cancelled { timed_out: true }, &opts, &s),
            None
        );
    }
}
