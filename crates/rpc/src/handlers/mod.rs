//! Command handlers, one module per resource.
//!
//! [`Server::dispatch`] is the one `match` from a parsed [`Command`] to its
//! handler: `prompt` (prompting and queues), `state` (state, messages,
//! stats, todos), `settings` (queue modes, thinking, models), `session`
//! (new, switch, name), `tree` (compaction, branches, HTML export), `bash`
//! (the background shell), and the
//! sub-protocol brokers' commands. Handlers return an [`Answer`]; they do
//! not frame responses themselves except where the protocol asks for an
//! immediate acknowledgement.

mod approvals;
pub(crate) mod bash;
mod gates;
mod host_tools;
mod host_uris;
mod mcp;
mod prompt;
mod session;
mod settings;
mod state;
mod tree;

use crate::command::WireId;

use crate::command::Command;
use crate::server::{Answer, Server};
use crate::wire_errors;

impl Server {
    pub(crate) async fn dispatch(
        &mut self,
        id: Option<&WireId>,
        name: &'static str,
        command: Command,
    ) -> Answer {
        match command {
            Command::Prompt(args) => self.prompt(id, args).await,
            Command::Steer(args) => self.queue_message(id, name, args, true).await,
            Command::FollowUp(args) => self.queue_message(id, name, args, false).await,
            Command::Abort => {
                self.abort_and_wait().await;
                Answer::Data(None)
            }
            Command::AbortAndPrompt(args) => self.abort_and_prompt(id, args).await,
            Command::NewSession(args) => self.new_session(args).await.into(),
            Command::GetState(args) => self.get_state(&args).into(),
            Command::SetTodos(args) => self.set_todos(args).await.into(),
            Command::SetHostTools(args) => self.set_host_tools_then_resume(id, args).await,
            Command::SetHostUriSchemes(args) => self.set_host_uri_schemes(args).into(),
            Command::WorkflowGateResponse(args) => self.workflow_gate_response(args).await.into(),
            Command::SetModel(args) => self.set_model(&args.provider, &args.model_id).await.into(),
            Command::SetMcpServers(args) => self.set_mcp_servers(args).await.into(),
            Command::SetAutoRetry(args) => {
                self.handle().set_auto_retry(args.enabled);
                Answer::Data(None)
            }
            Command::AbortRetry => {
                self.handle().abort_retry();
                Answer::Data(None)
            }
            Command::Compact(args) => self.compact(id, args).await,
            Command::SetAutoCompaction(args) => {
                self.handle().set_auto_compaction(args.enabled);
                Answer::Data(None)
            }
            Command::ExportHtml(args) => self.export_html(args).await.into(),
            Command::Branch(args) => self.branch(&args.entry_id).await.into(),
            Command::GetBranchMessages => self.get_branch_messages().into(),
            Command::Fork(args) => self.fork(&args.entry_id).await.into(),
            Command::Clone => self.clone_session().await.into(),
            Command::GetCommands => Ok(Some(serde_json::json!({"commands": []}))).into(),
            Command::GetAvailableThinkingLevels => self.get_available_thinking_levels().into(),
            Command::CycleModel => self.cycle_model().await.into(),
            Command::GetAvailableModels => self.get_available_models().into(),
            Command::SetThinkingLevel(args) => self.set_thinking_level(args.level).await.into(),
            Command::CycleThinkingLevel => self.cycle_thinking_level().await.into(),
            Command::SetSteeringMode(args) => self
                .apply(keel_protocol::Op::SetSteeringMode { mode: args.mode })
                .await
                .into(),
            Command::SetFollowUpMode(args) => self
                .apply(keel_protocol::Op::SetFollowUpMode { mode: args.mode })
                .await
                .into(),
            Command::SetInterruptMode(args) => self
                .apply(keel_protocol::Op::SetInterruptMode { mode: args.mode })
                .await
                .into(),
            Command::Bash(args) => self.bash(id, args),
            Command::AbortBash => self.abort_bash(id, name).await,
            Command::GetSessionStats => self.get_session_stats().into(),
            Command::SwitchSession(args) => {
                self.switch_session(id, &args.session_path, args.after_log_seq)
                    .await
            }
            Command::GetLastAssistantText => self.get_last_assistant_text().into(),
            Command::SetSessionName(args) => self.set_session_name(&args.name).await.into(),
            Command::GetMessages => self.get_messages().into(),
            Command::NegotiateUnattended(args) => {
                match self.brokers.unattended.negotiate(args.declaration.as_ref()) {
                    Ok(data) => {
                        self.refresh_tools();
                        Answer::Data(Some(data))
                    }
                    Err(e) => Answer::Failed(e),
                }
            }
            Command::ApprovalResponse(args) => self.approval_response(args).await.into(),
            Command::GetPendingApprovals(args) => self.get_pending_approvals(&args).await.into(),
            Command::GetApprovalMode => self.get_approval_mode().await.into(),
            Command::SetApprovalMode(args) => self.set_approval_mode(args.mode).await.into(),
            Command::ListApprovalRules => self.list_approval_rules().await.into(),
            Command::AddApprovalRule(args) => self.add_approval_rule(args).await.into(),
            Command::RemoveApprovalRule(args) => {
                self.remove_approval_rule(&args.rule_id).await.into()
            }
            Command::NotSupported => Answer::Failed(wire_errors::not_supported(name)),
        }
    }
}
