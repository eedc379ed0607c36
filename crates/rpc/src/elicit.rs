//! An MCP server's questions (elicitation), put to the host as extension UI
//! dialogs.
//!
//! Owns [`UiAsker`], the [`Asker`] of RPC sessions. A form of one property
//! becomes the dialog that fits it: a boolean a `confirm` (confirmed is
//! `true`), a string with choices a `select` (the choices' titles shown,
//! their values sent), any other string or number an `input`; any other
//! form an `editor` prefilled with the form's defaults as a JSON object
//! (keys left `null` are not given). Cancelled or timed out is `cancel`; an
//! answer that does not fit is a `decline`. A session the unattended
//! control plane runs has nobody to ask: the question is declined. It
//! must not know MCP: the question arrives as keel-tools' [`Question`].

use std::sync::Arc;

use keel_tools::{Answer, Asker, Question};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::ui::{Dialog, Ui, UiAnswer};
use crate::unattended::Unattended;

/// Asks the host through extension UI dialogs.
pub(crate) struct UiAsker {
    pub ui: Arc<Ui>,
    pub unattended: Arc<Unattended>,
}

/// How the one dialog reads back into the form.
#[derive(Debug, Clone, PartialEq)]
enum Shape {
    /// `confirm` → `{name: confirmed}`.
    Confirm(String),
    /// `select` → `{name: value of the chosen title}`.
    Select(String, Vec<(String, Value)>),
    /// `input` → `{name: text, or the number it spells}`.
    Input(String, String),
    /// `editor` → the JSON object typed.
    Editor,
}

#[async_trait::async_trait]
impl Asker for UiAsker {
    async fn ask(&self, call_id: &str, question: Question) -> Answer {
        if self.unattended.active() {
            tracing::info!(
                call = call_id,
                "an unattended session: the MCP server's question is declined"
            );
            return Answer::Decline;
        }
        let (dialog, fields, shape) = dialog_for(&question);
        // The dialog runs on its own so that it is withdrawn (`cancel`)
        // even when the call that asked ends first.
        let cancel = CancellationToken::new();
        let _withdraw = cancel.clone().drop_guard();
        let ui = self.ui.clone();
        let answer = tokio::spawn(async move { ui.dialog(dialog, fields, None, cancel).await });
        match answer.await {
            Ok(a) => read_back(&shape, a),
            Err(_) => Answer::Cancel,
        }
    }
}

/// The dialog a question is shown as.
fn dialog_for(q: &Question) -> (Dialog, Map<String, Value>, Shape) {
    let title = format!("{} asks: {}", q.from, q.message);
    let properties = q.schema.get("properties").and_then(Value::as_object);
    let mut fields = Map::new();
    fields.insert("title".to_owned(), json!(title));
    if let Some(props) = properties
        && props.len() == 1
        && let Some((name, p)) = props.iter().next()
    {
        let kind = p.get("type").and_then(Value::as_str).unwrap_or_default();
        if kind == "boolean" {
            fields.insert("message".to_owned(), json!(label(name, p)));
            return (Dialog::Confirm, fields, Shape::Confirm(name.clone()));
        }
        if let Some(choices) = choices(p) {
            let titles: Vec<&String> = choices.iter().map(|(t, _)| t).collect();
            fields.insert("options".to_owned(), json!(titles));
            return (Dialog::Select, fields, Shape::Select(name.clone(), choices));
        }
        if matches!(kind, "string" | "number" | "integer") {
            fields.insert("placeholder".to_owned(), json!(label(name, p)));
            return (
                Dialog::Input,
                fields,
                Shape::Input(name.clone(), kind.to_owned()),
            );
        }
    }
    let prefill: Map<String, Value> = properties
        .into_iter()
        .flatten()
        .map(|(name, p)| {
            (
                name.clone(),
                p.get("default").cloned().unwrap_or(Value::Null),
            )
        })
        .collect();
    let prefill = serde_json::to_string_pretty(&prefill).unwrap_or_else(|_| "{}".to_owned());
    fields.insert("prefill".to_owned(), json!(prefill));
    (Dialog::Editor, fields, Shape::Editor)
}

/// A property's `title`, else its name, with its description.
fn label(name: &str, p: &Value) -> String {
    let title = p.get("title").and_then(Value::as_str).unwrap_or(name);
    match p.get("description").and_then(Value::as_str) {
        Some(d) => format!("{title}: {d}"),
        None => title.to_owned(),
    }
}

/// A string property's choices as `(title shown, value sent)`: `oneOf`
/// consts, or `enum` (titled by `enumNames` when given).
fn choices(p: &Value) -> Option<Vec<(String, Value)>> {
    if let Some(one_of) = p.get("oneOf").and_then(Value::as_array) {
        return Some(
            one_of
                .iter()
                .filter_map(|o| {
                    let value = o.get("const")?.clone();
                    let title = o
                        .get("title")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| value.as_str().unwrap_or_default().to_owned());
                    Some((title, value))
                })
                .collect(),
        );
    }
    let values = p.get("enum").and_then(Value::as_array)?;
    let names = p.get("enumNames").and_then(Value::as_array);
    Some(
        values
            .iter()
            .enumerate()
            .map(|(i, v)| {
                let title = names
                    .and_then(|n| n.get(i))
                    .and_then(Value::as_str)
                    .or(v.as_str())
                    .unwrap_or_default()
                    .to_owned();
                (title, v.clone())
            })
            .collect(),
    )
}

/// The form's content from how the dialog ended.
fn read_back(shape: &Shape, answer: UiAnswer) -> Answer {
    let one = |name: &str, v: Value| Answer::Accept(json!({ name: v }));
    match (shape, answer) {
        (_, UiAnswer::Cancelled { .. }) => Answer::Cancel,
        (Shape::Confirm(name), UiAnswer::Confirmed(yes)) => one(name, json!(yes)),
        (Shape::Select(name, choices), UiAnswer::Value(Value::String(title))) => {
            match choices.iter().find(|(t, _)| *t == title) {
                Some((_, value)) => one(name, value.clone()),
                None => Answer::Decline,
            }
        }
        (Shape::Input(name, kind), UiAnswer::Value(Value::String(text))) => match kind.as_str() {
            "integer" => text
                .trim()
                .parse::<i64>()
                .map_or(Answer::Decline, |n| one(name, json!(n))),
            "number" => text
                .trim()
                .parse::<f64>()
                .map_or(Answer::Decline, |n| one(name, json!(n))),
            _ => one(name, json!(text)),
        },
        (Shape::Editor, UiAnswer::Value(Value::String(text))) => {
            match serde_json::from_str::<Value>(&text) {
                Ok(Value::Object(given)) => Answer::Accept(Value::Object(
                    given.into_iter().filter(|(_, v)| !v.is_null()).collect(),
                )),
                _ => Answer::Decline,
            }
        }
        _ => Answer::Decline,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question(schema: Value) -> Question {
        Question {
            from: "deployer".into(),
            message: "Go?".into(),
            schema,
        }
    }

    #[test]
    fn one_boolean_is_a_confirm() {
        let q = question(
            json!({"type": "object", "properties": {"proceed": {"type": "boolean", "title": "Proceed"}}}),
        );
        let (dialog, fields, shape) = dialog_for(&q);
        assert_eq!(dialog, Dialog::Confirm);
        assert_eq!(fields["title"], "deployer asks: Go?");
        assert_eq!(fields["message"], "Proceed");
        assert_eq!(
            read_back(&shape, UiAnswer::Confirmed(false)),
            Answer::Accept(json!({"proceed": false}))
        );
        assert_eq!(
            read_back(&shape, UiAnswer::Cancelled { timed_out: true }),
            Answer::Cancel
        );
    }

    #[test]
    fn choices_are_a_select_that_sends_the_value() {
        let q = question(
            json!({"type": "object", "properties": {"env": {"type": "string",
            "oneOf": [{"const": "stg", "title": "Staging"}, {"const": "prd", "title": "Production"}]}}}),
        );
        let (dialog, fields, shape) = dialog_for(&q);
        assert_eq!(dialog, Dialog::Select);
        assert_eq!(fields["options"], json!(["Staging", "Production"]));
        assert_eq!(
            read_back(&shape, UiAnswer::Value(json!("Production"))),
            Answer::Accept(json!({"env": "prd"}))
        );
        assert_eq!(
            read_back(&shape, UiAnswer::Value(json!("Elsewhere"))),
            Answer::Decline
        );
        let q = question(
            json!({"type": "object", "properties": {"env": {"type": "string", "enum": ["a", "b"]}}}),
        );
        let (_, fields, shape) = dialog_for(&q);
        assert_eq!(fields["options"], json!(["a", "b"]));
        assert_eq!(
            read_back(&shape, UiAnswer::Value(json!("b"))),
            Answer::Accept(json!({"env": "b"}))
        );
    }

    #[test]
    fn one_number_is_an_input_read_as_a_number() {
        let q = question(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        let (dialog, _, shape) = dialog_for(&q);
        assert_eq!(dialog, Dialog::Input);
        assert_eq!(
            read_back(&shape, UiAnswer::Value(json!(" 42 "))),
            Answer::Accept(json!({"n": 42}))
        );
        assert_eq!(
            read_back(&shape, UiAnswer::Value(json!("many"))),
            Answer::Decline
        );
    }

    #[test]
    fn a_larger_form_is_an_editor_of_json() {
        let q = question(json!({"type": "object", "properties": {
            "proceed": {"type": "boolean"}, "target": {"type": "string", "default": "staging"}}}));
        let (dialog, fields, shape) = dialog_for(&q);
        assert_eq!(dialog, Dialog::Editor);
        let prefill: Value = serde_json::from_str(fields["prefill"].as_str().unwrap()).unwrap();
        assert_eq!(prefill, json!({"proceed": null, "target": "staging"}));
        assert_eq!(
            read_back(
                &shape,
                UiAnswer::Value(json!("{\"proceed\": true, \"target\": null}"))
            ),
            Answer::Accept(json!({"proceed": true}))
        );
        assert_eq!(
            read_back(&shape, UiAnswer::Value(json!("yes"))),
            Answer::Decline
        );
    }
}
