//! Turns: the `Turn` object, its status and error, user input, and the
//! `turn/start`, `turn/steer`, `turn/interrupt` pairs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::v2::{AskForApproval, SandboxPolicy, ThreadItem};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TurnStatus {
    Completed,
    Interrupted,
    Failed,
    InProgress,
}

/// How much of `items` a `Turn` carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TurnItemsView {
    NotLoaded,
    Summary,
    Full,
}

/// Typed error kind of a failed turn. Unit variants serialise as strings
/// (`"internalServerError"`), the others as one-key objects
/// (`{"responseTooManyFailedAttempts": {"httpStatusCode": 429}}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum CodexErrorInfo {
    ContextWindowExceeded,
    UsageLimitExceeded,
    RateLimitExceeded,
    ServerOverloaded,
    ModelNotFound,
    InternalServerError,
    Unauthorized,
    BadRequest,
    SandboxError,
    Other,
    HttpConnectionFailed { http_status_code: Option<u16> },
    ResponseStreamConnectionFailed { http_status_code: Option<u16> },
    ResponseStreamDisconnected { http_status_code: Option<u16> },
    ResponseTooManyFailedAttempts { http_status_code: Option<u16> },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnError {
    pub message: String,
    pub codex_error_info: Option<CodexErrorInfo>,
    #[serde(default)]
    pub additional_details: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    pub id: String,
    pub root_turn_id: Option<String>,
    pub items: Vec<ThreadItem>,
    pub items_view: TurnItemsView,
    pub status: TurnStatus,
    pub error: Option<TurnError>,
    /// Unix seconds.
    pub started_at: Option<i64>,
    /// Unix seconds.
    pub completed_at: Option<i64>,
    pub duration_ms: Option<i64>,
}

/// One piece of user input. `text_elements` keeps its snake_case name on
/// the wire, as in Codex.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserInput {
    Text {
        text: String,
        #[serde(default)]
        text_elements: Vec<Value>,
    },
    Image {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, rename = "fileId", skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<Value>,
    },
    LocalImage {
        path: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<Value>,
    },
    Audio {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
        #[serde(default, rename = "fileId", skip_serializing_if = "Option::is_none")]
        file_id: Option<String>,
    },
    LocalAudio {
        path: String,
    },
    Skill {
        name: String,
        path: String,
    },
    Mention {
        name: String,
        path: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartParams {
    pub thread_id: String,
    pub input: Vec<UserInput>,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub approval_policy: Option<AskForApproval>,
    #[serde(default)]
    pub sandbox_policy: Option<SandboxPolicy>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub effort: Option<String>,
    #[serde(default)]
    pub summary: Option<Value>,
    #[serde(default)]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub client_user_message_id: Option<String>,
    /// A permission profile of `permissionProfile/list` for this turn and
    /// the next ones (keel: an approval mode), instead of `approvalPolicy`.
    #[serde(default)]
    pub permissions: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnStartResponse {
    pub turn: Turn,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerParams {
    pub thread_id: String,
    pub expected_turn_id: String,
    pub input: Vec<UserInput>,
    #[serde(default)]
    pub client_user_message_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnSteerResponse {
    pub turn_id: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TurnInterruptParams {
    pub thread_id: String,
    pub turn_id: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_info_shapes() {
        assert_eq!(
            serde_json::to_value(CodexErrorInfo::InternalServerError).unwrap(),
            json!("internalServerError")
        );
        assert_eq!(
            serde_json::to_value(CodexErrorInfo::ResponseTooManyFailedAttempts {
                http_status_code: Some(429)
            })
            .unwrap(),
            json!({"responseTooManyFailedAttempts": {"httpStatusCode": 429}})
        );
    }

    #[test]
    fn user_input_keeps_text_elements_snake_case() {
        let i: UserInput = serde_json::from_value(json!({"type": "text", "text": "hi"})).unwrap();
        assert_eq!(
            serde_json::to_value(&i).unwrap(),
            json!({"type": "text", "text": "hi", "text_elements": []})
        );
        let e = serde_json::from_value::<TurnStartParams>(json!({"threadId": "t"})).unwrap_err();
        assert_eq!(e.to_string(), "missing field `input`");
    }
}
