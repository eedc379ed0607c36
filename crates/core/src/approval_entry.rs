//! What the session file records about a tool call's approval.
//!
//! Owns [`describe`]: given a call and the gate's final decision about it,
//! it reads the approvals engine's row (a held call) or audit trail (a call
//! an always-allow rule let through) and builds the `approval` entry the
//! loop appends to the session ([`keel_session_store::ApprovalEntry`]).
//! Calls nothing decided (a read, or a mode that does not ask) get no
//! entry. It reads only; it must not decide anything nor know about any
//! front end or wire format.

use keel_approvals::{
    ApprovalEngine, ApprovalRecord, ApprovedBy, AuditFilter, Delivery, PendingRequest, Status,
};
use keel_session_store::{ApprovalDecision, ApprovalEntry, EntryBody};

use crate::ctx::RunCtx;
use crate::deps::{GateDecision, ToolCallInfo};

/// How many audit lines of a call are read to find its latest verdict.
const AUDIT_LOOKBACK: usize = 16;

/// The `approval` entry for `call`, which the gate decided as `decision`
/// (what `check`, or `wait` for a held call, returned); `None` when no
/// person, rule or refusal decided it.
pub async fn describe(
    engine: &ApprovalEngine,
    call: &ToolCallInfo,
    decision: &GateDecision,
) -> Option<ApprovalEntry> {
    match decision {
        GateDecision::Approved { approval_id } => {
            let row = engine.request(approval_id).await.ok()?;
            Some(from_row(call, &row, None))
        }
        GateDecision::Held { .. } => None,
        GateDecision::Allow | GateDecision::Covered => by_rule(engine, call).await,
        GateDecision::Deny { message, .. } => {
            let row = engine
                .store()
                .latest_for_call(&call.session_id, &call.call_id)
                .await
                .ok()
                .flatten()
                .filter(|r| r.tool == call.tool_name && r.args == call.args);
            match row {
                // Still waiting (the process is shutting down): nothing
                // was decided yet.
                Some(r) if r.status == Status::Pending && r.delivery == Delivery::Wait => None,
                Some(r) => Some(from_row(call, &r, Some(message))),
                None => Some(ApprovalEntry {
                    tool_call_id: call.call_id.clone(),
                    tool_name: call.tool_name.clone(),
                    approval_id: None,
                    class: None,
                    title: None,
                    decision: ApprovalDecision::Denied,
                    decided_by: None,
                    note: Some(message.clone()),
                    rule_ids: Vec::new(),
                }),
            }
        }
    }
}

/// Asks the gate what to record about the decided `call` and appends it
/// to the session as an `approval` entry (after the assistant message that
/// made the call, before its result). Writing is best effort: a failure is
/// logged and the call goes on.
pub(crate) async fn record(ctx: &RunCtx, call: &ToolCallInfo, decision: &GateDecision) {
    let Some(entry) = ctx.deps.gate.outcome(call, decision).await else {
        return;
    };
    let body = EntryBody::Approval(entry);
    let (log, clock) = (ctx.deps.log.as_ref(), ctx.deps.clock.as_ref());
    if let Err(e) = crate::history::record(&ctx.shared, log, clock, body).await {
        tracing::error!(error = %e, call_id = %call.call_id, "recording the approval in the session failed");
    }
}

/// The entry of a call with a stored request. `refusal`: the text the
/// model read when the call did not run.
fn from_row(call: &ToolCallInfo, row: &ApprovalRecord, refusal: Option<&String>) -> ApprovalEntry {
    let decision = match (row.status, row.delivery) {
        (Status::Approved, _) if refusal.is_some() => ApprovalDecision::Denied,
        (Status::Approved, _) if row.rule_id.is_some() => ApprovalDecision::Always,
        (Status::Approved, _) => ApprovalDecision::Approved,
        (Status::Declined, _) => ApprovalDecision::Declined,
        (Status::Expired, _) => ApprovalDecision::Expired,
        (Status::Cancelled, _) => ApprovalDecision::Cancelled,
        (Status::Pending, Delivery::Draft) => ApprovalDecision::Drafted,
        (Status::Pending, Delivery::Wait) => ApprovalDecision::Denied,
    };
    let note = match decision {
        ApprovalDecision::Declined => row.note.clone(),
        ApprovalDecision::Denied => refusal.cloned(),
        ApprovalDecision::Approved
        | ApprovalDecision::Always
        | ApprovalDecision::Rule
        | ApprovalDecision::Expired
        | ApprovalDecision::Cancelled
        | ApprovalDecision::Drafted
        | ApprovalDecision::Unknown => None,
    };
    ApprovalEntry {
        tool_call_id: call.call_id.clone(),
        tool_name: call.tool_name.clone(),
        approval_id: Some(row.id.clone()),
        class: Some(row.class.as_str().to_owned()),
        title: Some(PendingRequest::from_record(row).title),
        decision,
        decided_by: row.decided_by.clone(),
        note,
        rule_ids: row.rule_id.iter().cloned().collect(),
    }
}

/// The entry of a call that ran without a request: one when an
/// always-allow rule let it through (the engine's latest verdict on it).
async fn by_rule(engine: &ApprovalEngine, call: &ToolCallInfo) -> Option<ApprovalEntry> {
    let lines = engine
        .store()
        .audit(AuditFilter {
            call_id: Some(call.call_id.clone()),
            limit: Some(AUDIT_LOOKBACK),
            ..Default::default()
        })
        .await
        .ok()?;
    let latest = lines
        .iter()
        .find(|l| l.entry.session_id.as_deref() == Some(call.session_id.as_str()))?;
    if latest.entry.outcome != "allowed" || latest.entry.approved_by != Some(ApprovedBy::Rule) {
        return None;
    }
    Some(ApprovalEntry {
        tool_call_id: call.call_id.clone(),
        tool_name: call.tool_name.clone(),
        approval_id: None,
        class: latest.entry.class.map(|c| c.as_str().to_owned()),
        title: Some(keel_approvals::card::title(
            &call.tool_name,
            None,
            &call.args,
        )),
        decision: ApprovalDecision::Rule,
        decided_by: Some("rule".to_owned()),
        note: None,
        rule_ids: latest.entry.rule_ids.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_approvals::{CallContext, Decision, GateOutcome, Lifetime};
    use serde_json::json;

    fn call(id: &str, command: &str) -> ToolCallInfo {
        ToolCallInfo {
            session_id: "s1".into(),
            call_id: id.into(),
            tool_name: "bash".into(),
            args: json!({ "command": command }),
            cwd: std::env::temp_dir(),
            write_target: None,
            hints: None,
        }
    }

    fn context(c: &ToolCallInfo) -> CallContext {
        CallContext {
            workspace: "w".into(),
            cwd: c.cwd.clone(),
            session_id: c.session_id.clone(),
            call_id: c.call_id.clone(),
            tool_name: c.tool_name.clone(),
            args: c.args.clone(),
            origin: Default::default(),
            unattended: false,
            write_target: None,
        }
    }

    async fn engine() -> (tempfile::TempDir, ApprovalEngine) {
        let dir = tempfile::tempdir().unwrap();
        let engine = ApprovalEngine::open_sqlite(dir.path().join("a.db"))
            .await
            .unwrap();
        (dir, engine)
    }

    fn held(outcome: GateOutcome) -> String {
        match outcome {
            GateOutcome::Held { request } => request.id,
            other => panic!("expected a held call, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_declined_call_records_the_decision_and_the_note() {
        let (_dir, engine) = engine().await;
        let c = call("c1", "git push --force");
        let id = held(engine.gate_check(&context(&c)).await);
        engine
            .decide(
                &id,
                Decision::Decline {
                    note: Some("not on main".into()),
                    stop_turn: false,
                },
                "user",
                None,
            )
            .await
            .unwrap();
        let never = tokio_util::sync::CancellationToken::new();
        let resolution = engine.wait(&id, &never).await.unwrap();
        let GateOutcome::Deny { message, .. } = engine.settle(resolution).await else {
            panic!("a declined call must not run")
        };
        let entry = describe(&engine, &c, &GateDecision::deny(message))
            .await
            .unwrap();
        assert_eq!(entry.decision, ApprovalDecision::Declined);
        assert_eq!(entry.note.as_deref(), Some("not on main"));
        assert_eq!(entry.decided_by.as_deref(), Some("user"));
        assert_eq!(entry.approval_id.as_deref(), Some(id.as_str()));
        assert!(entry.title.unwrap().contains("git push --force"));
        assert!(entry.class.is_some());
    }

    #[tokio::test]
    async fn approved_always_then_allowed_by_the_rule() {
        let (_dir, engine) = engine().await;
        let first = call("c1", "cargo publish --dry-run");
        let id = held(engine.gate_check(&context(&first)).await);
        engine
            .decide(
                &id,
                Decision::ApproveAlways {
                    scope: None,
                    lifetime: Lifetime::Permanent,
                },
                "user",
                None,
            )
            .await
            .unwrap();
        let never = tokio_util::sync::CancellationToken::new();
        let resolution = engine.wait(&id, &never).await.unwrap();
        assert!(matches!(
            engine.settle(resolution).await,
            GateOutcome::Allow { .. }
        ));
        let approved = GateDecision::Approved {
            approval_id: id.clone(),
        };
        let entry = describe(&engine, &first, &approved).await.unwrap();
        assert_eq!(entry.decision, ApprovalDecision::Always);
        assert_eq!(entry.rule_ids.len(), 1);

        let second = call("c2", "cargo publish --dry-run");
        assert!(matches!(
            engine.gate_check(&context(&second)).await,
            GateOutcome::Allow {
                approved_by: ApprovedBy::Rule,
                ..
            }
        ));
        let entry = describe(&engine, &second, &GateDecision::Allow)
            .await
            .unwrap();
        assert_eq!(entry.decision, ApprovalDecision::Rule);
        assert_eq!(entry.decided_by.as_deref(), Some("rule"));
        assert!(!entry.rule_ids.is_empty());
    }

    #[tokio::test]
    async fn calls_nothing_decided_get_no_entry() {
        let (_dir, engine) = engine().await;
        let read = ToolCallInfo {
            tool_name: "read".into(),
            args: json!({ "path": "a.txt" }),
            ..call("c1", "")
        };
        assert!(matches!(
            engine.gate_check(&context(&read)).await,
            GateOutcome::Allow {
                approved_by: ApprovedBy::Auto,
                ..
            }
        ));
        assert_eq!(describe(&engine, &read, &GateDecision::Allow).await, None);
        // A refusal without a request is recorded with its reason.
        let refused = describe(&engine, &read, &GateDecision::deny("no host"))
            .await
            .unwrap();
        assert_eq!(refused.decision, ApprovalDecision::Denied);
        assert_eq!(refused.note.as_deref(), Some("no host"));
    }
}
