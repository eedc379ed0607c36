//! The method table: every `type` keel accepts on stdin, and how it is
//! handled.
//!
//! This is the one place that lists the protocol's inbound vocabulary. The
//! parser ([`crate::command`]) looks names up here; the server dispatches on
//! [`Dispatch`]; `docs/rpc.md` documents the same list. It must not contain
//! handler logic.

/// How the server handles a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dispatch {
    /// A command, answered in input order, one at a time.
    Serial,
    /// A command that runs in the background (its response may come after
    /// later commands' responses).
    Background,
    /// A host's reply to a request keel made (no response frame).
    Reply,
    /// Known but not implemented yet: answered with `success:false`.
    NotSupported,
}

/// Every inbound method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Prompt,
    Steer,
    FollowUp,
    Abort,
    AbortAndPrompt,
    NewSession,
    GetState,
    SetTodos,
    SetHostTools,
    SetHostUriSchemes,
    WorkflowGateResponse,
    SetModel,
    CycleModel,
    GetAvailableModels,
    SetThinkingLevel,
    CycleThinkingLevel,
    SetSteeringMode,
    SetFollowUpMode,
    SetInterruptMode,
    Compact,
    SetAutoCompaction,
    SetAutoRetry,
    SetMcpServers,
    AbortRetry,
    Bash,
    AbortBash,
    GetSessionStats,
    ExportHtml,
    SwitchSession,
    Branch,
    GetBranchMessages,
    Fork,
    Clone,
    GetForkMessages,
    GetCommands,
    GetAvailableThinkingLevels,
    GetLastAssistantText,
    SetSessionName,
    GetMessages,
    NegotiateUnattended,
    ApprovalResponse,
    GetPendingApprovals,
    GetApprovalMode,
    SetApprovalMode,
    ListApprovalRules,
    AddApprovalRule,
    RemoveApprovalRule,
    ExtensionUiResponse,
    HostToolUpdate,
    HostToolResult,
    HostUriResult,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodInfo {
    /// The `type` on the wire.
    pub name: &'static str,
    pub method: Method,
    pub dispatch: Dispatch,
}

const fn row(name: &'static str, method: Method, dispatch: Dispatch) -> MethodInfo {
    MethodInfo {
        name,
        method,
        dispatch,
    }
}

use Dispatch::{Background, Reply, Serial};

/// The table.
pub const METHODS: &[MethodInfo] = &[
    row("prompt", Method::Prompt, Serial),
    row("steer", Method::Steer, Serial),
    row("follow_up", Method::FollowUp, Serial),
    row("abort", Method::Abort, Serial),
    row("abort_and_prompt", Method::AbortAndPrompt, Serial),
    row("new_session", Method::NewSession, Serial),
    row("get_state", Method::GetState, Serial),
    row("set_todos", Method::SetTodos, Serial),
    row("set_host_tools", Method::SetHostTools, Serial),
    row("set_mcp_servers", Method::SetMcpServers, Serial),
    row("set_host_uri_schemes", Method::SetHostUriSchemes, Serial),
    row(
        "workflow_gate_response",
        Method::WorkflowGateResponse,
        Serial,
    ),
    row("set_model", Method::SetModel, Serial),
    row("cycle_model", Method::CycleModel, Serial),
    row("get_available_models", Method::GetAvailableModels, Serial),
    row("set_thinking_level", Method::SetThinkingLevel, Serial),
    row("cycle_thinking_level", Method::CycleThinkingLevel, Serial),
    row("set_steering_mode", Method::SetSteeringMode, Serial),
    row("set_follow_up_mode", Method::SetFollowUpMode, Serial),
    row("set_interrupt_mode", Method::SetInterruptMode, Serial),
    row("compact", Method::Compact, Background),
    row("set_auto_compaction", Method::SetAutoCompaction, Serial),
    row("set_auto_retry", Method::SetAutoRetry, Serial),
    row("abort_retry", Method::AbortRetry, Serial),
    row("bash", Method::Bash, Background),
    row("abort_bash", Method::AbortBash, Serial),
    row("get_session_stats", Method::GetSessionStats, Serial),
    row("export_html", Method::ExportHtml, Serial),
    row("switch_session", Method::SwitchSession, Serial),
    row("branch", Method::Branch, Serial),
    row("get_branch_messages", Method::GetBranchMessages, Serial),
    // pi's names (its RpcClient and the ACP bridge call these).
    row("fork", Method::Fork, Serial),
    row("clone", Method::Clone, Serial),
    row("get_fork_messages", Method::GetForkMessages, Serial),
    row("get_commands", Method::GetCommands, Serial),
    row(
        "get_available_thinking_levels",
        Method::GetAvailableThinkingLevels,
        Serial,
    ),
    row(
        "get_last_assistant_text",
        Method::GetLastAssistantText,
        Serial,
    ),
    row("set_session_name", Method::SetSessionName, Serial),
    row("get_messages", Method::GetMessages, Serial),
    row("negotiate_unattended", Method::NegotiateUnattended, Serial),
    // Approvals (a keel extension, docs/rpc.md "Approvals").
    row("approval_response", Method::ApprovalResponse, Serial),
    row("get_pending_approvals", Method::GetPendingApprovals, Serial),
    row("get_approval_mode", Method::GetApprovalMode, Serial),
    row("set_approval_mode", Method::SetApprovalMode, Serial),
    row("list_approval_rules", Method::ListApprovalRules, Serial),
    row("add_approval_rule", Method::AddApprovalRule, Serial),
    row("remove_approval_rule", Method::RemoveApprovalRule, Serial),
    row("extension_ui_response", Method::ExtensionUiResponse, Reply),
    row("host_tool_update", Method::HostToolUpdate, Reply),
    row("host_tool_result", Method::HostToolResult, Reply),
    row("host_uri_result", Method::HostUriResult, Reply),
];

/// The row for a `type`, if keel knows it.
pub fn lookup(name: &str) -> Option<&'static MethodInfo> {
    METHODS.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_resolve() {
        for (i, m) in METHODS.iter().enumerate() {
            assert!(
                METHODS[i + 1..].iter().all(|o| o.name != m.name),
                "{}",
                m.name
            );
            assert_eq!(lookup(m.name), Some(m));
        }
        assert_eq!(lookup("frobnicate"), None);
        assert_eq!(lookup("bash").unwrap().dispatch, Dispatch::Background);
        assert_eq!(lookup("compact").unwrap().dispatch, Dispatch::Background);
        assert!(METHODS.iter().all(|m| m.dispatch != Dispatch::NotSupported));
    }
}
