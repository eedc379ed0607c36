//! Server → client requests (approvals, an MCP server's questions) and the
//! answers to them.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::v2::CommandAction;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CommandExecutionRequestApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub started_at_ms: i64,
    pub reason: Option<String>,
    /// The command as one shell string.
    pub command: Option<String>,
    pub cwd: Option<String>,
    pub command_actions: Option<Vec<CommandAction>>,
    pub proposed_execpolicy_amendment: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeRequestApprovalParams {
    pub thread_id: String,
    pub turn_id: String,
    pub item_id: String,
    pub started_at_ms: i64,
    pub reason: Option<String>,
    pub grant_root: Option<String>,
}

/// `mcpServer/elicitation/request`: an MCP server asks the person behind
/// a thread a form question while one of its tools runs (keel asks only
/// in `form` mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerElicitationRequestParams {
    pub server_name: String,
    pub thread_id: String,
    /// The turn whose tool call the question came with.
    pub turn_id: Option<String>,
    pub message: String,
    /// Always `form`.
    pub mode: String,
    /// MCP's `requestedSchema`: an object of flat, primitive properties.
    pub requested_schema: Value,
}

/// What the person did with an MCP server's question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum McpServerElicitationAction {
    Accept,
    Decline,
    Cancel,
}

/// The answer to `mcpServer/elicitation/request`: `content` (an object
/// meeting the requested schema) with `accept`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerElicitationRequestResponse {
    pub action: McpServerElicitationAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<Value>,
}

/// A request keel sends. Serialises as `{"method", "params"}`; the broker
/// adds the id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "method", content = "params")]
pub enum ServerRequest {
    #[serde(rename = "item/commandExecution/requestApproval")]
    CommandExecutionRequestApproval(CommandExecutionRequestApprovalParams),
    #[serde(rename = "item/fileChange/requestApproval")]
    FileChangeRequestApproval(FileChangeRequestApprovalParams),
    #[serde(rename = "mcpServer/elicitation/request")]
    McpServerElicitationRequest(McpServerElicitationRequestParams),
}

impl ServerRequest {
    pub fn method(&self) -> &'static str {
        match self {
            ServerRequest::CommandExecutionRequestApproval(_) => {
                "item/commandExecution/requestApproval"
            }
            ServerRequest::FileChangeRequestApproval(_) => "item/fileChange/requestApproval",
            ServerRequest::McpServerElicitationRequest(_) => "mcpServer/elicitation/request",
        }
    }

    pub fn thread_id(&self) -> &str {
        match self {
            ServerRequest::CommandExecutionRequestApproval(p) => &p.thread_id,
            ServerRequest::FileChangeRequestApproval(p) => &p.thread_id,
            ServerRequest::McpServerElicitationRequest(p) => &p.thread_id,
        }
    }
}

/// A client's answer to an approval request. Command approvals may also
/// carry an execpolicy or network amendment (keel treats both as
/// `acceptForSession`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ApprovalDecision {
    Accept,
    AcceptForSession,
    AcceptWithExecpolicyAmendment { execpolicy_amendment: Vec<String> },
    ApplyNetworkPolicyAmendment { network_policy_amendment: Value },
    Decline,
    Cancel,
}

/// `{decision, note?}`; `note` is a keel extension: a reason given to the
/// model with a decline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalResponse {
    pub decision: ApprovalDecision,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions_parse() {
        let r: ApprovalResponse = serde_json::from_value(json!({"decision": "accept"})).unwrap();
        assert_eq!(r.decision, ApprovalDecision::Accept);
        let r: ApprovalResponse = serde_json::from_value(
            json!({"decision": {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}}),
        )
        .unwrap();
        assert!(matches!(
            r.decision,
            ApprovalDecision::AcceptWithExecpolicyAmendment { .. }
        ));
        let r: ApprovalResponse =
            serde_json::from_value(json!({"decision": "decline", "note": "not now"})).unwrap();
        assert_eq!(r.note.as_deref(), Some("not now"));
        assert!(serde_json::from_value::<ApprovalResponse>(json!({"decision": "maybe"})).is_err());
    }
}
