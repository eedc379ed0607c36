//! An MCP server's questions (elicitation), put to a thread's clients.
//!
//! Owns [`ThreadAsker`], the [`Asker`] of every app-server thread: while one
//! of the thread's MCP tool calls runs, its server's form question goes out
//! as `mcpServer/elicitation/request` to every connection subscribed to the
//! thread (the broker holds it; the first answer wins), the thread reports
//! `waitingOnUserInput`, and `serverRequest/resolved` follows whatever ends
//! it: an answer, the call ending first, or the last asked connection going
//! away (a cancel). A thread nobody is subscribed to declines at once.
//! Questions are not durable: they live as long as the call that asked.
//! It must not know MCP: the question arrives as keel-tools' [`Question`].

use std::sync::{Arc, Weak};

use keel_app_server_protocol::v2::{
    McpServerElicitationAction, McpServerElicitationRequestParams,
    McpServerElicitationRequestResponse, ServerRequest,
};
use keel_tools::{Answer, Asker, Question};
use serde_json::{Map, Value};

use crate::approvals::{announce_resolved, announce_status};
use crate::runtime::Runtime;
use crate::thread_state::LoadedThread;

/// Puts the questions of thread `thread_id`'s tools to its clients.
pub struct ThreadAsker {
    runtime: Weak<Runtime>,
    thread_id: String,
}

impl ThreadAsker {
    pub fn for_thread(runtime: &Arc<Runtime>, thread_id: &str) -> Arc<dyn Asker> {
        Arc::new(Self {
            runtime: Arc::downgrade(runtime),
            thread_id: thread_id.to_owned(),
        })
    }
}

#[async_trait::async_trait]
impl Asker for ThreadAsker {
    async fn ask(&self, call_id: &str, question: Question) -> Answer {
        let Some(runtime) = self.runtime.upgrade() else {
            return Answer::Cancel;
        };
        let thread = runtime.thread(&self.thread_id);
        let request =
            ServerRequest::McpServerElicitationRequest(McpServerElicitationRequestParams {
                server_name: question.from.clone(),
                thread_id: self.thread_id.clone(),
                turn_id: thread.as_ref().and_then(|t| t.active_turn_id()),
                message: question.message,
                mode: "form".to_owned(),
                requested_schema: codex_form(&question.schema),
            });
        let Some((id, reply)) = runtime.broker.ask(runtime.as_ref(), request).await else {
            tracing::info!(thread = %self.thread_id, call = call_id, server = %question.from, "nobody is subscribed to the thread: the MCP server's question is declined");
            return Answer::Decline;
        };
        let _open = Open::new(runtime.clone(), thread, id).await;
        match reply.await {
            Ok(Ok(result)) => {
                match serde_json::from_value::<McpServerElicitationRequestResponse>(result) {
                    Ok(r) => match r.action {
                        McpServerElicitationAction::Accept => {
                            Answer::Accept(r.content.unwrap_or_else(|| serde_json::json!({})))
                        }
                        McpServerElicitationAction::Decline => Answer::Decline,
                        McpServerElicitationAction::Cancel => Answer::Cancel,
                    },
                    Err(e) => {
                        tracing::warn!(%id, error = %e, "an answer to an MCP server's question that cannot be read: declined");
                        Answer::Decline
                    }
                }
            }
            Ok(Err(error)) => {
                tracing::info!(%id, message = %error.message, "the client refused the MCP server's question: declined");
                Answer::Decline
            }
            // Every connection asked went away.
            Err(_) => Answer::Cancel,
        }
    }
}

/// MCP's `requestedSchema` in the shape Codex's schema allows (each
/// object closed to other keys): a top-level `title` or `description`, and
/// keys a property's kind does not name, are left out.
fn codex_form(schema: &Value) -> Value {
    let keep = |v: &Value, keys: &[&str]| -> Map<String, Value> {
        v.as_object()
            .into_iter()
            .flatten()
            .filter(|(k, _)| keys.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    let mut form = keep(schema, &["$schema", "type", "required"]);
    let properties: Map<String, Value> = schema
        .get("properties")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(name, p)| {
            const COMMON: [&str; 4] = ["default", "description", "title", "type"];
            let own: &[&str] = match p.get("type").and_then(Value::as_str) {
                Some("number" | "integer") => &["maximum", "minimum"],
                Some("array") => &["items", "maxItems", "minItems"],
                Some("string") if p.get("enum").is_some() => &["enum", "enumNames"],
                Some("string") if p.get("oneOf").is_some() => &["oneOf"],
                Some("string") => &["format", "maxLength", "minLength"],
                _ => &[],
            };
            let keys: Vec<&str> = COMMON.iter().chain(own).copied().collect();
            (name.clone(), Value::Object(keep(p, &keys)))
        })
        .collect();
    form.insert("properties".to_owned(), Value::Object(properties));
    form.entry("type").or_insert_with(|| Value::from("object"));
    Value::Object(form)
}

/// A question on the wire: counted on the thread's status while open;
/// ended (and `serverRequest/resolved` announced) when dropped, however
/// the wait ends.
struct Open {
    runtime: Arc<Runtime>,
    thread: Option<Arc<LoadedThread>>,
    id: i64,
}

impl Open {
    async fn new(runtime: Arc<Runtime>, thread: Option<Arc<LoadedThread>>, id: i64) -> Self {
        if let Some(t) = &thread {
            if let Some(turn) = t.state().active.as_mut() {
                turn.waiting_on_input += 1;
            }
            announce_status(&runtime, t).await;
        }
        Self {
            runtime,
            thread,
            id,
        }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        if let Some(t) = &self.thread
            && let Some(turn) = t.state().active.as_mut()
        {
            turn.waiting_on_input = turn.waiting_on_input.saturating_sub(1);
        }
        let runtime = self.runtime.clone();
        let thread = self.thread.clone();
        let id = self.id;
        tokio::spawn(async move {
            if let Some(thread_id) = runtime.broker.end_question(id) {
                announce_resolved(&runtime, id, thread_id).await;
            }
            if let Some(t) = &thread {
                announce_status(&runtime, t).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_form_keeps_only_what_codex_allows() {
        let mcp = json!({
            "type": "object", "title": "Confirm", "description": "d",
            "properties": {
                "proceed": {"type": "boolean", "title": "Proceed", "format": "x"},
                "env": {"type": "string", "enum": ["a", "b"], "maxLength": 3},
                "n": {"type": "integer", "minimum": 1, "format": "int32"},
                "name": {"type": "string", "format": "email", "default": "a@b"}
            },
            "required": ["proceed"]
        });
        assert_eq!(
            codex_form(&mcp),
            json!({
                "type": "object",
                "properties": {
                    "proceed": {"type": "boolean", "title": "Proceed"},
                    "env": {"type": "string", "enum": ["a", "b"]},
                    "n": {"type": "integer", "minimum": 1},
                    "name": {"type": "string", "format": "email", "default": "a@b"}
                },
                "required": ["proceed"]
            })
        );
    }
}
