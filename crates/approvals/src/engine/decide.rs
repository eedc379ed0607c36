//! Deciding, cancelling and expiring requests.
//!
//! Owns [`ApprovalEngine::decide`] (approve, approve and always allow,
//! decline with a note, superseded by a new message), its compare-and-swap
//! on (id, revision) with "already decided" for a second, different decision
//! and the same answer for a repeat with the same idempotency key; cancelling
//! on abort; declining a session's waiting calls when the user sends a new
//! message; and expiry. Every change nudges local waiters. It must not know
//! about the agent loop or the wire.

use super::{ApprovalEngine, Decision};
use crate::class::Class;
use crate::error::{Error, Result};
use crate::rules::{NewRule, RuleScope};
use crate::store::{ApprovalRecord, ApprovedBy, DecisionUpdate, Delivery, RequestFilter, Status};

/// Who expiry is recorded as.
pub(crate) const EXPIRY: &str = "expiry";

impl ApprovalEngine {
    /// Applies a person's decision to a pending request and wakes its waiter.
    /// A second decision fails with [`Error::AlreadyDecided`], unless it is
    /// the same decision with the same idempotency key (then the stored row
    /// is returned again).
    pub async fn decide(
        &self,
        request_id: &str,
        decision: Decision,
        decider: &str,
        idempotency_key: Option<&str>,
    ) -> Result<ApprovalRecord> {
        let row = self.request(request_id).await?;
        let row = self.expire_if_due(row).await?;
        if !row.is_pending() {
            return repeated(&row, &decision, idempotency_key);
        }
        let now = self.now();
        let mut update = DecisionUpdate {
            status: Status::Approved,
            note: None,
            by_message: false,
            stop_turn: false,
            decided_by: Some(decider.to_owned()),
            approved_by: None,
            rule_id: None,
            idempotency_key: idempotency_key.map(str::to_owned),
            decided_at: now,
            audit: None,
        };
        let mut rule_to_add: Option<NewRule> = None;
        match &decision {
            Decision::Approve => update.approved_by = Some(ApprovedBy::User),
            Decision::ApproveAlways { scope, lifetime } => {
                if row.class == Class::Money {
                    return Err(Error::RuleRefused(
                        "money and deletes always ask; approve once instead".to_owned(),
                    ));
                }
                if !row.understood {
                    return Err(Error::RuleRefused(
                        "this call is not fully understood, so no rule can cover it; approve once instead"
                            .to_owned(),
                    ));
                }
                let (scope, operation): (RuleScope, Option<String>) = match (scope, &row.offer) {
                    (Some(s), _) => (s.clone(), row.operation.clone()),
                    (None, Some(offer)) => (offer.scope.clone(), offer.operation.clone()),
                    (None, None) => {
                        return Err(Error::RuleRefused(
                            "no always-allow can be offered for this call; give a scope or approve once"
                                .to_owned(),
                        ));
                    }
                };
                let new = NewRule {
                    workspace: row.workspace.clone(),
                    tool: row.tool.clone(),
                    operation,
                    scope,
                    lifetime: lifetime.clone(),
                    label: None,
                    created_from: Some(row.id.clone()),
                };
                crate::rules::validate(&new, Some(row.class))?;
                update.approved_by = Some(ApprovedBy::User);
                rule_to_add = Some(new);
            }
            Decision::Decline { note, stop_turn } => {
                update.status = Status::Declined;
                update.note = note.clone();
                update.stop_turn = *stop_turn;
            }
            Decision::Superseded { message } => {
                update.status = Status::Declined;
                update.note = Some(message.clone());
                update.by_message = true;
            }
        }
        // Save the rule first ("saves the rule, then allows"); it is valid
        // on its own even if the approval then loses a race.
        if let Some(new) = rule_to_add {
            let rule = self.add_rule_checked(new, Some(row.class), decider).await?;
            update.rule_id = Some(rule.id);
        }
        let detail = match &decision {
            Decision::Approve => "approved once".to_owned(),
            Decision::ApproveAlways { .. } => "approved and always allowed".to_owned(),
            Decision::Decline { note, .. } => match note {
                Some(n) => format!("declined: {n}"),
                None => "declined".to_owned(),
            },
            Decision::Superseded { .. } => "declined by a new message".to_owned(),
        };
        update.audit = Some(self.audit_of_update(&row, &update, detail));
        let decided = match self
            .inner
            .store
            .decide(&row.id, row.revision, update)
            .await?
        {
            Some(decided) => decided,
            None => {
                let now_row = self.request(request_id).await?;
                if now_row.is_pending() {
                    return Err(Error::Conflict {
                        id: row.id,
                        expected: row.revision,
                    });
                }
                return repeated(&now_row, &decision, idempotency_key);
            }
        };
        self.nudge();
        Ok(decided)
    }

    /// Marks a pending request cancelled (the turn was aborted). True when
    /// this call cancelled it.
    pub async fn cancel(&self, request_id: &str, decider: &str) -> Result<bool> {
        let row = self.request(request_id).await?;
        self.close(row, Status::Cancelled, decider).await
    }

    /// Cancels every pending request of a session; returns their ids.
    pub async fn cancel_session(&self, session_id: &str, decider: &str) -> Result<Vec<String>> {
        let rows = self.session_pending(session_id, None).await?;
        let mut out = Vec::new();
        for row in rows {
            let id = row.id.clone();
            if self.close(row, Status::Cancelled, decider).await? {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// A new user message while calls wait: declines every call the
    /// session's turn waits on, with the message as the note. Returns the
    /// ids declined (drafts are left alone).
    pub async fn decline_waiting(
        &self,
        session_id: &str,
        message: &str,
        decider: &str,
    ) -> Result<Vec<String>> {
        let rows = self
            .session_pending(session_id, Some(Delivery::Wait))
            .await?;
        let mut out = Vec::new();
        for row in rows {
            let decision = Decision::Superseded {
                message: message.to_owned(),
            };
            match self.decide(&row.id, decision, decider, None).await {
                Ok(_) => out.push(row.id),
                Err(Error::AlreadyDecided { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Cancels every call of `session_id` that a turn waits on (an abort
    /// ended the turn) and settles each, since nothing waits on it any
    /// more. Returns the rows it cancelled; a row another process decided
    /// first is left alone, and a row that fails to cancel is logged and
    /// skipped so the others still are.
    pub async fn cancel_waiting(
        &self,
        session_id: &str,
        decider: &str,
    ) -> Result<Vec<ApprovalRecord>> {
        let rows = self
            .session_pending(session_id, Some(Delivery::Wait))
            .await?;
        let mut out = Vec::new();
        for row in rows {
            match self.cancel(&row.id, decider).await {
                Ok(true) => {
                    let _ = self
                        .settle(super::Resolution::Cancelled {
                            request_id: row.id.clone(),
                        })
                        .await;
                    out.push(row);
                }
                Ok(false) => {}
                Err(e) => {
                    tracing::error!(error = %e, id = %row.id, "cancelling a waiting call failed");
                }
            }
        }
        Ok(out)
    }

    /// Expires every pending request past its deadline; returns their ids.
    pub async fn expire_due(&self) -> Result<Vec<String>> {
        let rows = self
            .inner
            .store
            .list_requests(RequestFilter {
                status: Some(Status::Pending),
                ..Default::default()
            })
            .await?;
        let now = self.now();
        let mut out = Vec::new();
        for row in rows.into_iter().filter(|r| r.expires_at <= now) {
            let id = row.id.clone();
            if self.expire_if_due(row).await?.status == Status::Expired {
                out.push(id);
            }
        }
        Ok(out)
    }

    /// The row, expired first if it is pending past its deadline.
    pub(crate) async fn expire_if_due(&self, row: ApprovalRecord) -> Result<ApprovalRecord> {
        if !row.is_pending() || row.expires_at > self.now() {
            return Ok(row);
        }
        let id = row.id.clone();
        self.close(row, Status::Expired, EXPIRY).await?;
        self.request(&id).await
    }

    async fn session_pending(
        &self,
        session_id: &str,
        delivery: Option<Delivery>,
    ) -> Result<Vec<ApprovalRecord>> {
        self.inner
            .store
            .list_requests(RequestFilter {
                session_id: Some(session_id.to_owned()),
                status: Some(Status::Pending),
                delivery,
                ..Default::default()
            })
            .await
    }

    /// Moves a pending row to `status` (cancelled or expired) by CAS.
    async fn close(&self, row: ApprovalRecord, status: Status, decider: &str) -> Result<bool> {
        if !row.is_pending() {
            return Ok(false);
        }
        let mut update = DecisionUpdate {
            status,
            note: None,
            by_message: false,
            stop_turn: status == Status::Cancelled,
            decided_by: Some(decider.to_owned()),
            approved_by: None,
            rule_id: None,
            idempotency_key: None,
            decided_at: self.now(),
            audit: None,
        };
        let detail = match status {
            Status::Expired => "nobody answered in time".to_owned(),
            _ => "the run was stopped while the call waited".to_owned(),
        };
        update.audit = Some(self.audit_of_update(&row, &update, detail));
        match self
            .inner
            .store
            .decide(&row.id, row.revision, update)
            .await?
        {
            Some(_) => {
                self.nudge();
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

/// A decision on a row that is no longer pending: the same answer for the
/// same decision with the same idempotency key, else "already decided".
fn repeated(
    row: &ApprovalRecord,
    decision: &Decision,
    key: Option<&str>,
) -> Result<ApprovalRecord> {
    let same_kind = matches!(
        (decision, row.status),
        (
            Decision::Approve | Decision::ApproveAlways { .. },
            Status::Approved
        ) | (
            Decision::Decline { .. } | Decision::Superseded { .. },
            Status::Declined
        )
    );
    if same_kind && key.is_some() && key == row.idempotency_key.as_deref() {
        return Ok(row.clone());
    }
    Err(Error::AlreadyDecided {
        id: row.id.clone(),
        status: row.status.as_str().to_owned(),
        by: row.decided_by.clone(),
    })
}
