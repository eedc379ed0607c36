//! Questions a running tool puts to the person behind its session.
//!
//! Owns [`Asker`], the one way a tool reaches whoever drives the session
//! for an answer that is not an approval: an MCP server's form question
//! (elicitation) while one of its tools runs. The front end that opened
//! the session implements it (an app-server client, a Claude SDK host);
//! a session nobody attends has none, and the tool answers on its own
//! (an MCP server's question is declined). It must not know how the
//! question travels or who answers it.

use serde_json::Value;

/// A question, in the words and shape of whoever asks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// Who asks (an MCP server's name).
    pub from: String,
    /// What to show the person.
    pub message: String,
    /// The JSON Schema the answer must meet (MCP's `requestedSchema`: an
    /// object of flat, primitive properties).
    pub schema: Value,
}

/// What the person answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// They answered: `content` is an object meeting the question's schema.
    Accept(Value),
    /// They said no.
    Decline,
    /// They dismissed the question (or nobody could answer it).
    Cancel,
}

impl Answer {
    /// An answer in MCP's `ElicitResult` shape (`{action, content?}`, as
    /// hosts send it back); `None` when it is not one. An `accept`
    /// without content is an empty form.
    pub fn from_result(result: &Value) -> Option<Answer> {
        match result.get("action")?.as_str()? {
            "accept" => Some(Answer::Accept(
                result
                    .get("content")
                    .cloned()
                    .unwrap_or_else(|| Value::Object(Default::default())),
            )),
            "decline" => Some(Answer::Decline),
            "cancel" => Some(Answer::Cancel),
            _ => None,
        }
    }

    /// MCP's `action`.
    pub fn action(&self) -> &'static str {
        match self {
            Answer::Accept(_) => "accept",
            Answer::Decline => "decline",
            Answer::Cancel => "cancel",
        }
    }
}

/// Asks the person behind a session. The future is dropped when the
/// tool's call ends first (aborted, timed out): an implementation then
/// withdraws the question it put out.
#[async_trait::async_trait]
pub trait Asker: Send + Sync {
    /// Asks `question` on behalf of the model's call `call_id`.
    async fn ask(&self, call_id: &str, question: Question) -> Answer;
}

/// Whether `content` meets `schema`, as far as MCP's form questions go:
/// an object, every `required` property present, each present property
/// of its declared `type` (and one of its `enum` values when it has one).
/// The message says what is wrong.
pub fn check_answer(schema: &Value, content: &Value) -> Result<(), String> {
    let Some(given) = content.as_object() else {
        return Err("the answer must be an object".to_owned());
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !given.contains_key(name) {
            return Err(format!("`{name}` is required"));
        }
    }
    for (name, value) in given {
        let Some(spec) = properties.and_then(|p| p.get(name)) else {
            return Err(format!("`{name}` was not asked for"));
        };
        let fits = match spec.get("type").and_then(Value::as_str) {
            Some("string") => value.is_string(),
            Some("boolean") => value.is_boolean(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("number") => value.is_number(),
            Some("array") => value.is_array(),
            _ => true,
        };
        if !fits {
            return Err(format!("`{name}` is not of the type asked for"));
        }
        if let Some(options) = spec.get("enum").and_then(Value::as_array)
            && !options.contains(value)
        {
            return Err(format!("`{name}` is not one of the choices"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "proceed": {"type": "boolean"},
                "env": {"type": "string", "enum": ["staging", "prod"]},
                "count": {"type": "integer"}
            },
            "required": ["proceed"]
        })
    }

    #[test]
    fn mcp_results_are_read() {
        assert_eq!(
            Answer::from_result(&json!({"action": "accept", "content": {"proceed": true}})),
            Some(Answer::Accept(json!({"proceed": true})))
        );
        assert_eq!(
            Answer::from_result(&json!({"action": "accept"})),
            Some(Answer::Accept(json!({})))
        );
        assert_eq!(
            Answer::from_result(&json!({"action": "cancel"})),
            Some(Answer::Cancel)
        );
        assert_eq!(
            Answer::from_result(&json!({"action": "decline"})),
            Some(Answer::Decline)
        );
        assert_eq!(Answer::from_result(&json!({"action": "maybe"})), None);
        assert_eq!(Answer::from_result(&json!(null)), None);
    }

    #[test]
    fn an_answer_that_fits_passes() {
        assert_eq!(check_answer(&schema(), &json!({"proceed": true})), Ok(()));
        assert_eq!(
            check_answer(
                &schema(),
                &json!({"proceed": false, "env": "prod", "count": 3})
            ),
            Ok(())
        );
    }

    #[test]
    fn an_answer_that_does_not_fit_is_named() {
        let s = schema();
        assert_eq!(
            check_answer(&s, &json!({"env": "prod"})),
            Err("`proceed` is required".to_owned())
        );
        assert_eq!(
            check_answer(&s, &json!({"proceed": "yes"})),
            Err("`proceed` is not of the type asked for".to_owned())
        );
        assert_eq!(
            check_answer(&s, &json!({"proceed": true, "env": "dev"})),
            Err("`env` is not one of the choices".to_owned())
        );
        assert_eq!(
            check_answer(&s, &json!({"proceed": true, "token": "x"})),
            Err("`token` was not asked for".to_owned())
        );
        assert_eq!(
            check_answer(&s, &json!("yes")),
            Err("the answer must be an object".to_owned())
        );
        assert_eq!(
            check_answer(&s, &json!({"proceed": true, "count": 1.5})),
            Err("`count` is not of the type asked for".to_owned())
        );
    }
}
