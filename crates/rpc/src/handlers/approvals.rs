//! The commands of the `approvals` sub-protocol (the `impl Server` half;
//! the types and the broker live in `crate::approvals`).

use crate::approvals::DECIDER;
use crate::approvals::RequestView;
use crate::approvals::RpcApprovals;
use crate::approvals::engine_error;
use crate::approvals::mode_json;
use crate::approvals::record_json;
use crate::approvals::rule_json;
use crate::approvals::view;
use crate::command::{
    AddApprovalRuleArgs, ApprovalDecisionKind, ApprovalResponseArgs, PendingApprovalsArgs,
    RuleLifetime,
};
use crate::server::Server;
use crate::wire_errors::WireError;
use keel_core::keel_approvals::{
    ApprovalEngine, Decision, Delivery, Lifetime, Mode, NewRule, Status,
};
use keel_tools::{ToolContext, noop_updates};
use serde_json::{Value, json};
use std::sync::Arc;

impl Server {
    fn approvals(&self) -> Result<Arc<RpcApprovals>, WireError> {
        self.brokers
            .approvals
            .clone()
            .ok_or_else(|| WireError::Text("Approvals are not enabled in this process".to_owned()))
    }

    pub(crate) async fn approval_response(
        &mut self,
        args: ApprovalResponseArgs,
    ) -> Result<Option<Value>, WireError> {
        let approvals = self.approvals()?;
        let engine = approvals.engine().await?;
        let row = engine
            .request(&args.request_id)
            .await
            .map_err(engine_error)?;
        let decision = match args.decision {
            ApprovalDecisionKind::Approve => Decision::Approve,
            ApprovalDecisionKind::ApproveAlways => Decision::ApproveAlways {
                scope: args.scope,
                lifetime: match args.lifetime.unwrap_or_default() {
                    RuleLifetime::Permanent => Lifetime::Permanent,
                    RuleLifetime::Session => Lifetime::Session {
                        session_id: row.session_id.clone(),
                    },
                },
            },
            ApprovalDecisionKind::Decline => Decision::Decline {
                note: args.note.filter(|n| !n.trim().is_empty()),
                stop_turn: args.stop_turn,
            },
        };
        let decided = engine
            .decide(
                &args.request_id,
                decision,
                DECIDER,
                args.idempotency_key.as_deref(),
            )
            .await
            .map_err(engine_error)?;
        let mut data = record_json(&decided);
        if decided.delivery == Delivery::Draft && decided.status == Status::Approved {
            // Sending a draft runs it now; the agent hears the outcome on
            // its next turn in that session.
            data["sending"] = json!(self.send_draft(engine.clone(), &decided.id));
        }
        Ok(Some(data))
    }

    /// Claims an approved draft and runs it in the background with the
    /// session's tools. False when it cannot be claimed.
    fn send_draft(&self, engine: ApprovalEngine, id: &str) -> bool {
        let tools = self.handle().tools();
        let (fs, process) = self.handle().backends();
        let snapshot = self.handle().snapshot();
        let scratch = self.handle().scratch_dir();
        let id = id.to_owned();
        let ctx = ToolContext {
            call_id: String::new(),
            cwd: snapshot.cwd.clone(),
            fs,
            process,
            cancel: tokio_util::sync::CancellationToken::new(),
            updates: noop_updates(),
            scratch_dir: scratch,
            write_target: None,
            sandbox: self.handle().sandbox_spec(),
            asker: None,
        };
        tokio::spawn(async move {
            if let Err(e) = keel_core::send_draft(&engine, &id, &tools, ctx).await {
                tracing::warn!(error = %e, "cannot send the draft");
            }
        });
        true
    }

    pub(crate) async fn get_pending_approvals(
        &self,
        args: &PendingApprovalsArgs,
    ) -> Result<Option<Value>, WireError> {
        let approvals = self.approvals()?;
        let engine = approvals.engine().await?;
        let workspace = (!args.all).then(|| approvals.gate.workspace());
        let pending = engine.pending(workspace).await.map_err(engine_error)?;
        let list: Vec<RequestView<'_>> = pending.iter().map(view).collect();
        Ok(Some(json!({ "approvals": list })))
    }

    pub(crate) async fn get_approval_mode(&self) -> Result<Option<Value>, WireError> {
        let approvals = self.approvals()?;
        let engine = approvals.engine().await?;
        let workspace = approvals.gate.workspace();
        let stored = engine
            .store()
            .get_mode(workspace)
            .await
            .map_err(engine_error)?;
        let (mode, source) = match (engine.mode_override(), stored) {
            (Some(m), _) => (m, "flag"),
            (None, Some(m)) => (m, "stored"),
            (None, None) => (Mode::default(), "default"),
        };
        Ok(Some(mode_json(mode, source, workspace)))
    }

    pub(crate) async fn set_approval_mode(&self, mode: Mode) -> Result<Option<Value>, WireError> {
        let approvals = self.approvals()?;
        let engine = approvals.engine().await?;
        let workspace = approvals.gate.workspace();
        engine
            .set_mode(workspace, mode, DECIDER)
            .await
            .map_err(engine_error)?;
        // The host's choice replaces `--approval-mode` for this process.
        engine.set_mode_override(None);
        Ok(Some(mode_json(mode, "stored", workspace)))
    }

    pub(crate) async fn list_approval_rules(&self) -> Result<Option<Value>, WireError> {
        let approvals = self.approvals()?;
        let engine = approvals.engine().await?;
        let rules = engine
            .rules(Some(approvals.gate.workspace()))
            .await
            .map_err(engine_error)?;
        let list: Vec<Value> = rules.iter().map(rule_json).collect();
        Ok(Some(json!({ "rules": list })))
    }

    pub(crate) async fn add_approval_rule(
        &self,
        args: AddApprovalRuleArgs,
    ) -> Result<Option<Value>, WireError> {
        let approvals = self.approvals()?;
        let engine = approvals.engine().await?;
        let rule = engine
            .add_rule(NewRule {
                workspace: approvals.gate.workspace().to_owned(),
                tool: args.tool,
                operation: args.operation,
                scope: args.scope,
                lifetime: match args.lifetime {
                    RuleLifetime::Permanent => Lifetime::Permanent,
                    RuleLifetime::Session => Lifetime::Session {
                        session_id: self.handle().snapshot().session_id,
                    },
                },
                label: args.label,
                created_from: None,
            })
            .await
            .map_err(engine_error)?;
        Ok(Some(rule_json(&rule)))
    }

    pub(crate) async fn remove_approval_rule(
        &self,
        rule_id: &str,
    ) -> Result<Option<Value>, WireError> {
        let approvals = self.approvals()?;
        let engine = approvals.engine().await?;
        let rule = engine
            .remove_rule(rule_id, DECIDER)
            .await
            .map_err(engine_error)?;
        Ok(Some(rule_json(&rule)))
    }
}
