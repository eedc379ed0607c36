//! Parsing one inbound frame: a command for the worker, a host's reply to
//! one of keel's requests, or a line that only gets an error response.
//!
//! Owns the typed arguments of every method (field names as on the wire)
//! and the rules of the error model: a frame that is not a JSON object with
//! a string `type` is a `parse` error without `id`; an unknown `type` is an
//! `Unknown command` error that echoes the `id`; a known command with bad arguments
//! is an error that echoes the `id`. It does not execute anything.

use keel_protocol::{ImageContent, InterruptMode, QueueMode, ThinkingLevel, TodoPhase};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use crate::methods::{Dispatch, Method, lookup};
use crate::wire_errors::{self, PARSE_COMMAND, WireError};

/// What one line is.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// A command for the worker.
    Command(Envelope),
    /// A host's reply to a request keel made (no response frame).
    Reply(Reply),
    /// A line answered with an error only.
    Reject {
        id: Option<Box<WireId>>,
        command: String,
        error: WireError,
    },
}

/// A command's `id` exactly as the host sent it (raw JSON), so it is echoed
/// byte for byte: `1e5` stays `1e5`, a 30-digit number keeps every digit.
pub(crate) type WireId = serde_json::value::RawValue;

/// A parsed command with its echoable `id`.
#[derive(Debug)]
pub(crate) struct Envelope {
    pub id: Option<Box<WireId>>,
    pub name: &'static str,
    pub dispatch: Dispatch,
    pub command: Command,
}

/// `"steer"` or `"followUp"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) enum StreamingBehavior {
    #[serde(rename = "steer")]
    Steer,
    #[serde(rename = "followUp")]
    FollowUp,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PromptArgs {
    pub message: String,
    #[serde(default)]
    pub images: Vec<ImageContent>,
    #[serde(default)]
    pub streaming_behavior: Option<StreamingBehavior>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct MessageArgs {
    pub message: String,
    #[serde(default)]
    pub images: Vec<ImageContent>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct NewSessionArgs {
    #[serde(default)]
    pub parent_session: Option<String>,
}

/// What `get_state.include` may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub(crate) enum Include {
    #[serde(rename = "tools")]
    Tools,
    #[serde(rename = "dumpTools")]
    DumpTools,
    #[serde(rename = "systemPrompt")]
    SystemPrompt,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct GetStateArgs {
    #[serde(default)]
    pub include: Vec<Include>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SetTodosArgs {
    pub phases: Vec<TodoPhase>,
}

/// One tool in `set_host_tools`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct HostToolDef {
    pub name: String,
    #[serde(default)]
    pub label: Option<String>,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub parameters: Option<Value>,
    /// The approval class keel gives the tool's calls: `read`, `write`,
    /// `send` or `money` (undeclared: from `annotations`, else send).
    #[serde(default, rename = "approvalClass")]
    pub approval_class: Option<String>,
    /// MCP-style hints, used when no `approvalClass` is given.
    #[serde(default)]
    pub annotations: Option<ToolAnnotations>,
}

/// MCP tool annotations that decide an approval class.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ToolAnnotations {
    #[serde(default)]
    pub read_only_hint: Option<bool>,
    #[serde(default)]
    pub destructive_hint: Option<bool>,
    #[serde(default)]
    pub open_world_hint: Option<bool>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SetHostToolsArgs {
    pub tools: Vec<HostToolDef>,
}

/// One scheme in `set_host_uri_schemes`.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct SchemeDef {
    pub scheme: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub writable: bool,
    #[serde(default)]
    pub immutable: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SetHostUriSchemesArgs {
    pub schemes: Vec<SchemeDef>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct GateResponseArgs {
    pub gate_id: String,
    pub answer: Value,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SetModelArgs {
    pub provider: String,
    pub model_id: String,
}

/// `set_mcp_servers`: `{"servers": {"NAME": {…config.toml's keys…}}}`.
#[derive(Debug, Deserialize)]
pub(crate) struct SetMcpServersArgs {
    pub servers: serde_json::Value,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SetAutoRetryArgs {
    pub enabled: bool,
}

/// `compact`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CompactArgs {
    #[serde(default)]
    pub custom_instructions: Option<String>,
}

/// `export_html`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExportHtmlArgs {
    #[serde(default)]
    pub output_path: Option<String>,
}

/// `branch` and `fork`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BranchArgs {
    pub entry_id: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ThinkingArgs {
    pub level: ThinkingLevel,
}

#[derive(Debug, Deserialize)]
pub(crate) struct QueueModeArgs {
    pub mode: QueueMode,
}

#[derive(Debug, Deserialize)]
pub(crate) struct InterruptModeArgs {
    pub mode: InterruptMode,
}

#[derive(Debug, Deserialize)]
pub(crate) struct BashArgs {
    pub command: String,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct SwitchSessionArgs {
    pub session_path: String,
    /// The last `log_seq` the host saw of the session (a host that
    /// reconnects): its turns' frames resume after it.
    #[serde(default)]
    pub after_log_seq: Option<u64>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct SessionNameArgs {
    pub name: String,
}

#[derive(Debug, Deserialize)]
pub(crate) struct NegotiateArgs {
    #[serde(default)]
    pub declaration: Option<Value>,
}

/// `approval_response`: a decision on a held call.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ApprovalResponseArgs {
    pub request_id: String,
    pub decision: ApprovalDecisionKind,
    #[serde(default)]
    pub note: Option<String>,
    /// For `approve_always`: what the rule covers (default: the offer).
    #[serde(default)]
    pub scope: Option<keel_core::keel_approvals::RuleScope>,
    /// For `approve_always`: `permanent` (default) or `session`.
    #[serde(default)]
    pub lifetime: Option<RuleLifetime>,
    /// For `decline`: end the turn instead of letting the model go on.
    #[serde(default)]
    pub stop_turn: bool,
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ApprovalDecisionKind {
    Approve,
    ApproveAlways,
    Decline,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RuleLifetime {
    #[default]
    Permanent,
    Session,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct PendingApprovalsArgs {
    /// Every workspace's pending requests, not only this one's.
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ApprovalModeArgs {
    pub mode: keel_core::keel_approvals::Mode,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AddApprovalRuleArgs {
    pub tool: String,
    #[serde(default)]
    pub operation: Option<String>,
    pub scope: keel_core::keel_approvals::RuleScope,
    #[serde(default)]
    pub lifetime: RuleLifetime,
    #[serde(default)]
    pub label: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RemoveApprovalRuleArgs {
    pub rule_id: String,
}

/// A command with its typed arguments.
#[derive(Debug)]
pub(crate) enum Command {
    Prompt(PromptArgs),
    Steer(MessageArgs),
    FollowUp(MessageArgs),
    Abort,
    AbortAndPrompt(MessageArgs),
    NewSession(NewSessionArgs),
    GetState(GetStateArgs),
    SetTodos(SetTodosArgs),
    SetHostTools(SetHostToolsArgs),
    SetMcpServers(SetMcpServersArgs),
    SetHostUriSchemes(SetHostUriSchemesArgs),
    WorkflowGateResponse(GateResponseArgs),
    SetModel(SetModelArgs),
    SetAutoRetry(SetAutoRetryArgs),
    AbortRetry,
    Compact(CompactArgs),
    SetAutoCompaction(SetAutoRetryArgs),
    ExportHtml(ExportHtmlArgs),
    Branch(BranchArgs),
    GetBranchMessages,
    Fork(BranchArgs),
    Clone,
    GetCommands,
    GetAvailableThinkingLevels,
    CycleModel,
    GetAvailableModels,
    SetThinkingLevel(ThinkingArgs),
    CycleThinkingLevel,
    SetSteeringMode(QueueModeArgs),
    SetFollowUpMode(QueueModeArgs),
    SetInterruptMode(InterruptModeArgs),
    Bash(BashArgs),
    AbortBash,
    GetSessionStats,
    SwitchSession(SwitchSessionArgs),
    GetLastAssistantText,
    SetSessionName(SessionNameArgs),
    GetMessages,
    NegotiateUnattended(NegotiateArgs),
    ApprovalResponse(ApprovalResponseArgs),
    GetPendingApprovals(PendingApprovalsArgs),
    GetApprovalMode,
    SetApprovalMode(ApprovalModeArgs),
    ListApprovalRules,
    AddApprovalRule(AddApprovalRuleArgs),
    RemoveApprovalRule(RemoveApprovalRuleArgs),
    /// A known command keel does not implement yet.
    NotSupported,
}

/// `extension_ui_response`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UiResponse {
    pub id: String,
    #[serde(default)]
    pub value: Option<Value>,
    #[serde(default)]
    pub confirmed: Option<bool>,
    #[serde(default)]
    pub cancelled: bool,
    #[serde(default)]
    pub timed_out: bool,
}

/// `{content, details?}` as a host sends it.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct HostResult {
    #[serde(default)]
    pub content: Vec<keel_protocol::ContentBlock>,
    #[serde(default)]
    pub details: Option<Value>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HostToolUpdate {
    pub id: String,
    pub partial_result: HostResult,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HostToolResult {
    pub id: String,
    pub result: HostResult,
    #[serde(default)]
    pub is_error: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct HostUriResult {
    pub id: String,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub content_type: Option<String>,
    #[serde(default)]
    pub notes: Vec<String>,
    #[serde(default)]
    pub immutable: bool,
    #[serde(default)]
    pub is_error: bool,
    #[serde(default)]
    pub error: Option<String>,
}

/// A host's reply.
#[derive(Debug)]
pub(crate) enum Reply {
    Ui(UiResponse),
    ToolUpdate(HostToolUpdate),
    ToolResult(HostToolResult),
    UriResult(HostUriResult),
}

/// Parses one frame.
pub(crate) fn parse(bytes: &[u8]) -> Inbound {
    // A key given twice is refused (which one would win is not something a
    // host should have to guess).
    let (obj, raw_id) = match keel_jsonl::parse_object(bytes) {
        Ok(object) => (object.members, object.raw_id),
        Err(keel_jsonl::ObjectError::NotObject { .. }) => {
            return reject_parse("expected a JSON object");
        }
        Err(e) => return reject_parse(&e.to_string()),
    };
    let Some(kind) = obj.get("type").and_then(Value::as_str) else {
        return reject_parse("missing string field \"type\"");
    };
    let id = raw_id.filter(|_| obj.get("id").is_some_and(|v| !v.is_null()));
    let Some(info) = lookup(kind) else {
        // The id is echoed: a client matches responses by id, and one it
        // cannot match is a hang (pi's RpcClient waits 30 s for it).
        return Inbound::Reject {
            id,
            command: kind.to_owned(),
            error: wire_errors::unknown_command(kind),
        };
    };
    if info.dispatch == Dispatch::Reply {
        return match parse_reply(info.method, obj) {
            Ok(reply) => Inbound::Reply(reply),
            Err(detail) => Inbound::Reject {
                id: None,
                command: info.name.to_owned(),
                error: wire_errors::invalid_reply(info.name, &detail),
            },
        };
    }
    match parse_command(info.method, info.dispatch, obj) {
        Ok(command) => Inbound::Command(Envelope {
            id,
            name: info.name,
            dispatch: info.dispatch,
            command,
        }),
        Err(detail) => Inbound::Reject {
            id,
            command: info.name.to_owned(),
            error: wire_errors::invalid_params(info.name, &detail),
        },
    }
}

fn reject_parse(detail: &str) -> Inbound {
    Inbound::Reject {
        id: None,
        command: PARSE_COMMAND.to_owned(),
        error: wire_errors::parse_failed(detail),
    }
}

fn args<T: DeserializeOwned>(obj: Map<String, Value>) -> Result<T, String> {
    serde_path_to_error::deserialize(Value::Object(obj)).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." || path.is_empty() {
            inner.to_string()
        } else {
            format!("field `{path}`: {inner}")
        }
    })
}

fn parse_command(
    method: Method,
    dispatch: Dispatch,
    obj: Map<String, Value>,
) -> Result<Command, String> {
    if dispatch == Dispatch::NotSupported {
        return Ok(Command::NotSupported);
    }
    Ok(match method {
        Method::Prompt => Command::Prompt(args(obj)?),
        Method::Steer => Command::Steer(args(obj)?),
        Method::FollowUp => Command::FollowUp(args(obj)?),
        Method::Abort => Command::Abort,
        Method::AbortAndPrompt => Command::AbortAndPrompt(args(obj)?),
        Method::NewSession => Command::NewSession(args(obj)?),
        Method::GetState => Command::GetState(args(obj)?),
        Method::SetTodos => Command::SetTodos(args(obj)?),
        Method::SetHostTools => Command::SetHostTools(args(obj)?),
        Method::SetMcpServers => Command::SetMcpServers(args(obj)?),
        Method::SetHostUriSchemes => Command::SetHostUriSchemes(args(obj)?),
        Method::WorkflowGateResponse => {
            if !obj.contains_key("answer") {
                return Err("missing field `answer`".to_owned());
            }
            Command::WorkflowGateResponse(args(obj)?)
        }
        Method::SetModel => Command::SetModel(args(obj)?),
        Method::SetAutoRetry => Command::SetAutoRetry(args(obj)?),
        Method::AbortRetry => Command::AbortRetry,
        Method::CycleModel => Command::CycleModel,
        Method::GetAvailableModels => Command::GetAvailableModels,
        Method::SetThinkingLevel => Command::SetThinkingLevel(args(obj)?),
        Method::CycleThinkingLevel => Command::CycleThinkingLevel,
        Method::SetSteeringMode => Command::SetSteeringMode(args(obj)?),
        Method::SetFollowUpMode => Command::SetFollowUpMode(args(obj)?),
        Method::SetInterruptMode => Command::SetInterruptMode(args(obj)?),
        Method::Bash => Command::Bash(args(obj)?),
        Method::AbortBash => Command::AbortBash,
        Method::GetSessionStats => Command::GetSessionStats,
        Method::SwitchSession => Command::SwitchSession(args(obj)?),
        Method::GetLastAssistantText => Command::GetLastAssistantText,
        Method::SetSessionName => Command::SetSessionName(args(obj)?),
        Method::GetMessages => Command::GetMessages,
        Method::NegotiateUnattended => Command::NegotiateUnattended(args(obj)?),
        Method::ApprovalResponse => Command::ApprovalResponse(args(obj)?),
        Method::GetPendingApprovals => Command::GetPendingApprovals(args(obj)?),
        Method::GetApprovalMode => Command::GetApprovalMode,
        Method::SetApprovalMode => Command::SetApprovalMode(args(obj)?),
        Method::ListApprovalRules => Command::ListApprovalRules,
        Method::AddApprovalRule => Command::AddApprovalRule(args(obj)?),
        Method::RemoveApprovalRule => Command::RemoveApprovalRule(args(obj)?),
        Method::Compact => Command::Compact(args(obj)?),
        Method::SetAutoCompaction => Command::SetAutoCompaction(args(obj)?),
        Method::ExportHtml => Command::ExportHtml(args(obj)?),
        Method::Branch => Command::Branch(args(obj)?),
        Method::GetBranchMessages | Method::GetForkMessages => Command::GetBranchMessages,
        Method::Fork => Command::Fork(args(obj)?),
        Method::Clone => Command::Clone,
        Method::GetCommands => Command::GetCommands,
        Method::GetAvailableThinkingLevels => Command::GetAvailableThinkingLevels,
        Method::ExtensionUiResponse
        | Method::HostToolUpdate
        | Method::HostToolResult
        | Method::HostUriResult => return Err("a reply frame is not a command".to_owned()),
    })
}

fn parse_reply(method: Method, obj: Map<String, Value>) -> Result<Reply, String> {
    match method {
        Method::ExtensionUiResponse => Ok(Reply::Ui(args(obj)?)),
        Method::HostToolUpdate => Ok(Reply::ToolUpdate(args(obj)?)),
        Method::HostToolResult => Ok(Reply::ToolResult(args(obj)?)),
        Method::HostUriResult => Ok(Reply::UriResult(args(obj)?)),
        _ => Err("not a reply frame".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reject(line: &str) -> (Option<Value>, String, String) {
        match parse(line.as_bytes()) {
            Inbound::Reject { id, command, error } => (
                id.map(|raw| serde_json::from_str(raw.get()).unwrap()),
                command,
                error.to_value().as_str().unwrap_or_default().to_owned(),
            ),
            other => panic!("expected a rejection for {line}: {other:?}"),
        }
    }

    #[test]
    fn error_model() {
        let (id, cmd, err) = reject("{not json");
        assert_eq!((id, cmd.as_str()), (None, "parse"));
        assert!(err.starts_with("Failed to parse command: "), "{err}");
        assert_eq!(reject("[1,2]").1, "parse");
        assert_eq!(reject(r#"{"id":"a","type":5}"#).0, None);
        let (id, cmd, err) = reject(r#"{"id":"a","type":"frobnicate"}"#);
        assert_eq!(id, Some(Value::from("a")));
        assert_eq!(cmd, "frobnicate");
        assert_eq!(err, "Unknown command: frobnicate");
        let (id, cmd, err) = reject(r#"{"id":7,"type":"prompt","message":5}"#);
        assert_eq!(id, Some(Value::from(7)));
        assert_eq!(cmd, "prompt");
        assert!(err.contains("field `message`"), "{err}");
        let (_, _, err) = reject(r#"{"type":"set_steering_mode","mode":"sometimes"}"#);
        assert!(
            err.starts_with("Invalid set_steering_mode command: "),
            "{err}"
        );
        let (_, _, err) = reject(r#"{"type":"workflow_gate_response","gate_id":"g"}"#);
        assert!(err.contains("answer"), "{err}");
    }

    #[test]
    fn commands_and_replies() {
        let Inbound::Command(env) =
            parse(br#"{"id":"p1","type":"prompt","message":"hi","streamingBehavior":"followUp"}"#)
        else {
            panic!()
        };
        assert_eq!(
            env.id.map(|r| r.get().to_owned()).as_deref(),
            Some("\"p1\"")
        );
        let Command::Prompt(p) = env.command else {
            panic!()
        };
        assert_eq!(p.streaming_behavior, Some(StreamingBehavior::FollowUp));
        assert!(matches!(
            parse(br#"{"type":"compact","customInstructions":"tests"}"#),
            Inbound::Command(Envelope {
                command: Command::Compact(CompactArgs {
                    custom_instructions: Some(_)
                }),
                ..
            })
        ));
        let (_, cmd, err) = reject(r#"{"type":"branch"}"#);
        assert_eq!(cmd, "branch");
        assert!(err.contains("entryId"), "{err}");
        assert!(matches!(
            parse(
                br#"{"type":"host_tool_result","id":"h","result":{"content":[]},"isError":true}"#
            ),
            Inbound::Reply(Reply::ToolResult(HostToolResult { is_error: true, .. }))
        ));
        let (_, cmd, _) = reject(r#"{"type":"host_tool_result"}"#);
        assert_eq!(cmd, "host_tool_result");
    }
}
