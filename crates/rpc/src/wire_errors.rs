//! Every error text keel puts in a response frame, in one place.
//!
//! Owns the mapping from failures (bad input, refused commands, core and
//! broker errors) to the `error` member of `{"type":"response",
//! "success":false,…}`: a string for ordinary failures, an object with a
//! `code` for typed control-plane failures (workflow gates, unattended
//! mode). Handlers never format wire error text themselves.

use serde_json::{Value, json};

/// A command's failure as it goes on the wire.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WireError {
    /// `"error": "…"`.
    Text(String),
    /// `"error": {"code": …, …}`.
    Typed(Value),
}

impl WireError {
    pub fn to_value(&self) -> Value {
        match self {
            WireError::Text(t) => Value::String(t.clone()),
            WireError::Typed(v) => v.clone(),
        }
    }

    fn text(s: impl Into<String>) -> Self {
        WireError::Text(s.into())
    }
}

/// The `command` of a response to a line that was not a command.
pub(crate) const PARSE_COMMAND: &str = "parse";

pub(crate) fn unknown_command(name: &str) -> WireError {
    WireError::text(format!("Unknown command: {name}"))
}

pub(crate) fn parse_failed(detail: &str) -> WireError {
    WireError::text(format!("Failed to parse command: {detail}"))
}

pub(crate) fn frame_too_large(len: usize, max: usize) -> WireError {
    WireError::text(format!(
        "Failed to parse command: frame of {len} bytes exceeds the maximum frame size of {max} bytes"
    ))
}

pub(crate) fn response_too_large(command: &str, len: usize, max: usize) -> WireError {
    WireError::text(format!(
        "The {command} response is {len} bytes, over the limit of {max} bytes on one frame; nothing was written"
    ))
}

pub(crate) fn nothing_to_clone() -> WireError {
    WireError::text("Cannot clone session: no current entry selected")
}

pub(crate) fn invalid_params(command: &str, detail: &str) -> WireError {
    WireError::text(format!("Invalid {command} command: {detail}"))
}

pub(crate) fn not_supported(command: &str) -> WireError {
    WireError::text(format!(
        "{command} is not supported yet by keel (the command is known but not implemented)"
    ))
}

pub(crate) fn busy_needs_streaming_behavior() -> WireError {
    WireError::text(
        "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue \
         the message.",
    )
}

pub(crate) fn no_model(hint: &str) -> WireError {
    WireError::text(format!("Cannot prompt: {hint}"))
}

pub(crate) fn session_name_empty() -> WireError {
    WireError::text("Session name cannot be empty")
}

pub(crate) fn model_not_found(provider: &str, model_id: &str) -> WireError {
    WireError::text(format!("Model not found: {provider}/{model_id}"))
}

pub(crate) fn model_unavailable(provider: &str, model_id: &str, reason: &str) -> WireError {
    WireError::text(format!(
        "Model {provider}/{model_id} cannot be used: {reason}"
    ))
}

pub(crate) fn cannot_open_session(what: &str, reason: &str) -> WireError {
    WireError::text(format!("Cannot open session {what}: {reason}"))
}

pub(crate) fn session_failure(reason: &str) -> WireError {
    WireError::text(format!("Session error: {reason}"))
}

/// A core error while submitting to the session.
pub(crate) fn from_core(e: &keel_core::Error) -> WireError {
    match e {
        keel_core::Error::Busy => WireError::text(
            "Agent is already processing. Use steer or follow_up to queue messages, or wait for \
             completion.",
        ),
        keel_core::Error::Closed => WireError::text("Session is closed"),
        keel_core::Error::Log(m) => WireError::text(format!("Session log error: {m}")),
        keel_core::Error::Compaction(m) | keel_core::Error::InvalidEntry(m) => {
            WireError::text(m.clone())
        }
    }
}

pub(crate) fn nothing_to_export() -> WireError {
    WireError::text("Nothing to export yet - start a conversation first")
}

pub(crate) fn export_failed(path: &str, reason: &str) -> WireError {
    WireError::text(format!("Cannot write {path}: {reason}"))
}

pub(crate) fn host_tool_invalid(detail: &str) -> WireError {
    WireError::text(format!("Invalid host tool: {detail}"))
}

pub(crate) fn host_scheme_invalid(detail: &str) -> WireError {
    WireError::text(format!("Invalid host URI scheme: {detail}"))
}

pub(crate) fn todos_invalid(detail: &str) -> WireError {
    WireError::text(format!("Invalid todos: {detail}"))
}

pub(crate) fn invalid_reply(kind: &str, detail: &str) -> WireError {
    WireError::text(format!("Invalid {kind}: {detail}"))
}

/// A typed failure: `{"code": code, "message": message, …extra}`.
fn typed(code: &str, message: &str, extra: Value) -> WireError {
    let mut v = json!({"code": code, "message": message});
    if let (Some(obj), Value::Object(more)) = (v.as_object_mut(), extra) {
        obj.extend(more);
    }
    WireError::Typed(v)
}

/// Typed failures of the workflow gate broker.
pub(crate) mod gate {
    use serde_json::{Value, json};

    use super::{WireError, typed};

    pub fn invalid_stage(stage: &str, stages: &[&str], gate_id: Option<&str>) -> WireError {
        let mut extra = json!({"stage": stage});
        if let Some(id) = gate_id {
            extra["gate_id"] = json!(id);
        }
        typed(
            "invalid_workflow_stage",
            &format!(
                "stage {stage:?} is not one of {} (team is reserved)",
                stages.join(", ")
            ),
            extra,
        )
    }

    pub fn invalid_kind(kind: &str, kinds: &[&str]) -> WireError {
        typed(
            "invalid_workflow_gate_kind",
            &format!("kind {kind:?} is not one of {}", kinds.join(", ")),
            json!({"kind": kind}),
        )
    }

    pub fn invalid_schema(detail: &str, supported: &[&str]) -> WireError {
        typed(
            "invalid_workflow_gate_schema",
            detail,
            json!({"supported": supported}),
        )
    }

    pub fn unknown(gate_id: &str) -> WireError {
        typed(
            "unknown_gate",
            &format!("no workflow gate {gate_id}"),
            json!({"gate_id": gate_id}),
        )
    }

    pub fn already_resolved(gate_id: &str, resolution: &Value) -> WireError {
        typed(
            "already_resolved",
            &format!("workflow gate {gate_id} was already answered"),
            json!({"gate_id": gate_id, "resolution": resolution}),
        )
    }

    pub fn idempotency_conflict(gate_id: &str, key: &str) -> WireError {
        typed(
            "idempotency_conflict",
            &format!("idempotency key {key:?} was used with a different answer"),
            json!({"gate_id": gate_id, "idempotency_key": key}),
        )
    }
}

/// Typed failures of unattended mode.
pub(crate) mod unattended {
    use serde_json::{Value, json};

    use super::{WireError, typed};

    pub fn already() -> WireError {
        typed(
            "already_unattended",
            "unattended mode is already negotiated for this process",
            json!({}),
        )
    }

    pub fn refused(problems: &[String]) -> WireError {
        typed(
            "unattended_refused",
            "a complete declaration (actor, budget with max_tokens, max_tool_calls, \
             max_wall_time_ms and max_cost_usd, scopes, action_allowlist) is required",
            json!({"problems": problems}),
        )
    }

    pub fn scope_denied(command: &str, scope: &str) -> WireError {
        typed(
            "scope_denied",
            &format!("{command} needs the {scope} scope, which was not declared"),
            json!({"command": command, "scope": scope}),
        )
    }

    pub fn action_denied(tool: &str, action: &str) -> WireError {
        typed(
            "action_denied",
            &format!("{tool} needs the {action} action, which is not in the allowlist"),
            json!({"tool": tool, "action": action}),
        )
    }

    pub fn budget_exhausted(which: &str, used: Value, limit: Value) -> WireError {
        typed(
            "budget_exhausted",
            &format!("the unattended budget {which} is used up"),
            json!({"budget": which, "used": used, "limit": limit}),
        )
    }
}

/// Texts of failures reported inside tool results (the model reads these).
pub(crate) mod tool_text {
    pub fn host_gone() -> String {
        "The host closed its input before answering".to_owned()
    }
    pub fn host_timeout(what: &str, secs: f64) -> String {
        format!("The host did not answer {what} within {secs} seconds")
    }
    pub fn host_error(what: &str, detail: &str) -> String {
        format!("The host reported an error for {what}: {detail}")
    }
    pub fn gate_not_opened(error: &super::WireError) -> String {
        format!("cannot open the gate: {}", error.to_value())
    }
    pub fn gate_dropped() -> String {
        "the gate was dropped".to_owned()
    }
    pub fn gate_timeout(secs: f64, gate_id: &str) -> String {
        format!("The host did not answer within {secs} seconds (gate {gate_id} stays open)")
    }
    pub fn gate_answer_misfit(gate_id: &str) -> String {
        format!(
            "That answer does not fit the question; answer gate {gate_id} with workflow_gate_response"
        )
    }
    pub fn unattended_refusal(error: &super::WireError) -> String {
        format!("Refused in unattended mode: {}", error.to_value())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_and_typed_errors() {
        assert_eq!(
            unknown_command("nope").to_value(),
            json!("Unknown command: nope")
        );
        assert_eq!(
            gate::unknown("g").to_value(),
            json!({"code":"unknown_gate","message":"no workflow gate g","gate_id":"g"})
        );
        assert_eq!(
            unattended::scope_denied("bash", "bash").to_value()["code"],
            "scope_denied"
        );
    }
}
