//! The decision order, and what happens to a call announced again.
//!
//! Owns [`ApprovalEngine::gate_check`] (never fails: an error denies, but
//! an unreachable store is first waited for and the check run again under
//! the same request id, so a PostgreSQL restart holds a call instead of
//! denying it and never stores it twice),
//! [`ApprovalEngine::evaluate`] (read → rule → mode → held, else auto),
//! picking up the row of a call announced again after a restart (still
//! pending: held again; decided meanwhile: the decision is honoured once; an
//! approved call whose run was cut off: "may or may not have happened"),
//! [`ApprovalEngine::row_for_call`] for a turn resumed after a restart, and
//! [`ApprovalEngine::gate`], which checks and waits in one step. It must not
//! know about the agent loop.

use tokio_util::sync::CancellationToken;

use super::{ApprovalEngine, CallContext, GateOutcome, Resolution};
use crate::card::{PendingRequest, messages};
use crate::class::{Class, Classification, classify_judged};
use crate::error::Result;
use crate::mode::Mode;
use crate::places::Places;
use crate::rules;
use crate::store::{ApprovalRecord, ApprovedBy, Delivery, NewAudit, NewRequest, Status};

/// A new request id (time-ordered).
fn new_request_id() -> String {
    format!("apr_{}", uuid::Uuid::now_v7().simple())
}

impl ApprovalEngine {
    /// The gate: what to do with `call`. Never fails; any error denies the
    /// call (fail closed). A `Held` outcome is already stored, so it may be
    /// announced and waited on ([`wait`](Self::wait)).
    pub async fn gate_check(&self, call: &CallContext) -> GateOutcome {
        self.gate_check_in(call, None).await
    }

    /// [`gate_check`](Self::gate_check) under `mode` instead of the
    /// workspace's effective mode when `mode` is given (a front end with
    /// its own per-session policy, such as the app-server's
    /// `approvalPolicy`). Nothing is stored about the mode.
    ///
    /// A store that cannot be reached (a PostgreSQL server restarting) is
    /// waited for, the check run again for up to [`keel_pg::RECONNECT_WINDOW`]
    /// before the call is denied; a request stored by an earlier try is
    /// found again (it is keyed by its id and by the call), never stored
    /// twice.
    pub async fn gate_check_in(&self, call: &CallContext, mode: Option<Mode>) -> GateOutcome {
        let request_id = new_request_id();
        let mut retry = keel_pg::Retry::new("approvals");
        let checked = loop {
            match self.evaluate_as(call, mode, &request_id).await {
                Err(e) if e.is_unavailable() => {
                    tracing::warn!(error = %e, call_id = %call.call_id, "the approvals store is unreachable; checking again");
                    if !retry.wait_if(true).await {
                        break Err(e);
                    }
                }
                checked => break checked,
            }
        };
        match checked {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::error!(error = %e, call_id = %call.call_id, "approval check failed; denying");
                self.audit_best_effort(NewAudit {
                    at: self.now(),
                    workspace: call.workspace.clone(),
                    session_id: Some(call.session_id.clone()),
                    call_id: Some(call.call_id.clone()),
                    tool: Some(call.tool_name.clone()),
                    outcome: "failed_closed".to_owned(),
                    detail: e.to_string(),
                    ..Default::default()
                })
                .await;
                GateOutcome::Deny {
                    message: messages::check_failed(&e.to_string()),
                    request_id: None,
                    stop_turn: false,
                }
            }
        }
    }

    /// Check, and when held, wait for the decision: the outcome is never
    /// `Held`. This is what an agent's approval gate calls. `cancel` ends
    /// the wait and marks the request cancelled.
    pub async fn gate(&self, call: &CallContext, cancel: &CancellationToken) -> GateOutcome {
        match self.gate_check(call).await {
            GateOutcome::Held { request } => match self.wait(&request.id, cancel).await {
                Ok(resolution) => self.settle(resolution).await,
                Err(e) => GateOutcome::Deny {
                    message: messages::check_failed(&e.to_string()),
                    request_id: Some(request.id),
                    stop_turn: false,
                },
            },
            other => other,
        }
    }

    /// Turns a finished wait into an outcome, consuming the decision: an
    /// approval is claimed once (a second claimant is told the call may or
    /// may not have happened), anything else is marked handed over.
    pub async fn settle(&self, resolution: Resolution) -> GateOutcome {
        let id = resolution.request_id().to_owned();
        match resolution {
            Resolution::Approved { rule_id, .. } => match self.claim(&id).await {
                Ok(true) => GateOutcome::Allow {
                    approved_by: ApprovedBy::User,
                    rule_ids: rule_id.into_iter().collect(),
                    request_id: Some(id),
                },
                Ok(false) => GateOutcome::Deny {
                    message: messages::maybe_ran(),
                    request_id: Some(id),
                    stop_turn: false,
                },
                Err(e) => GateOutcome::Deny {
                    message: messages::check_failed(&e.to_string()),
                    request_id: Some(id),
                    stop_turn: false,
                },
            },
            other => {
                if let Err(e) = self.inner.store.consume(&id, self.now()).await {
                    tracing::warn!(error = %e, "marking an approval consumed failed");
                }
                let stop_turn = matches!(
                    other,
                    Resolution::Cancelled { .. }
                        | Resolution::Declined {
                            stop_turn: true,
                            ..
                        }
                );
                GateOutcome::Deny {
                    message: other.message_for_model().unwrap_or_default(),
                    request_id: Some(id),
                    stop_turn,
                }
            }
        }
    }

    /// Claims an approved request for running: true exactly once.
    pub async fn claim(&self, request_id: &str) -> Result<bool> {
        let claimed = self.inner.store.consume(request_id, self.now()).await?;
        if claimed && let Some(r) = self.inner.store.get_request(request_id).await? {
            let entry = self.audit_for(
                &r,
                "claimed",
                "the approved call is about to run".to_owned(),
            );
            self.audit_best_effort(entry).await;
        }
        Ok(claimed)
    }

    /// Records that an approved (claimed) call finished, with what the
    /// model saw. A call announced again after this is a new request.
    pub async fn finish(
        &self,
        request_id: &str,
        outcome: Option<String>,
        is_error: bool,
    ) -> Result<()> {
        if self
            .inner
            .store
            .finish(request_id, self.now(), outcome, is_error)
            .await?
            && let Some(r) = self.inner.store.get_request(request_id).await?
        {
            let entry = self.audit_for(
                &r,
                "finished",
                if is_error {
                    "finished with an error"
                } else {
                    "finished"
                }
                .to_owned(),
            );
            self.audit_best_effort(entry).await;
        }
        Ok(())
    }

    /// The decision order, failing with an error instead of denying.
    pub async fn evaluate(&self, call: &CallContext) -> Result<GateOutcome> {
        self.evaluate_in(call, None).await
    }

    /// The decision order under `mode` (the effective mode when `None`).
    pub async fn evaluate_in(&self, call: &CallContext, mode: Option<Mode>) -> Result<GateOutcome> {
        self.evaluate_as(call, mode, &new_request_id()).await
    }

    /// [`evaluate_in`](Self::evaluate_in), storing a held call under
    /// `request_id` (the same on every try of one check).
    async fn evaluate_as(
        &self,
        call: &CallContext,
        mode: Option<Mode>,
        request_id: &str,
    ) -> Result<GateOutcome> {
        let places = Places::new(&call.cwd).protecting(&self.inner.config.protected);
        let c = classify_judged(
            &call.tool_name,
            &call.args,
            call.origin,
            &places,
            call.write_target.as_deref(),
        );
        let digest = call.digest();
        if let Some(row) = self
            .inner
            .store
            .latest_for_call(&call.session_id, &call.call_id)
            .await?
            && row.digest == digest
            && row.workspace == call.workspace
            && let Some(outcome) = self.resume(row).await?
        {
            return Ok(outcome);
        }

        // 1. Read runs.
        if c.class == Class::Read {
            self.audit_eval(
                call,
                &c,
                None,
                "allowed",
                Some(ApprovedBy::Auto),
                Vec::new(),
                None,
            )
            .await?;
            return Ok(allow_auto());
        }
        let mode = match mode {
            Some(mode) => mode,
            None => self.effective_mode(&call.workspace).await?,
        };

        // 2. A matching always-allow rule runs (never for money).
        if c.class != Class::Money {
            let rules = self.inner.store.list_rules(Some(&call.workspace)).await?;
            if let Some(cov) = rules::coverage(&rules, &c, &call.session_id)
                && !mode.asks(cov.residual)
            {
                self.inner
                    .store
                    .touch_rules(&cov.rule_ids, self.now())
                    .await?;
                self.audit_eval(
                    call,
                    &c,
                    Some(mode),
                    "allowed",
                    Some(ApprovedBy::Rule),
                    cov.rule_ids.clone(),
                    None,
                )
                .await?;
                return Ok(GateOutcome::Allow {
                    approved_by: ApprovedBy::Rule,
                    rule_ids: cov.rule_ids,
                    request_id: None,
                });
            }
        }

        // 3. The mode asks for the class: held (stored before anyone hears).
        // A change beyond the workspace is held whatever the mode.
        if mode.asks(c.class) || c.escapes {
            let now = self.now();
            let ttl = i64::try_from(self.inner.config.ttl(c.class).as_millis()).unwrap_or(i64::MAX);
            let delivery = if call.unattended {
                Delivery::Draft
            } else {
                Delivery::Wait
            };
            let row = self
                .inner
                .store
                .insert_request(NewRequest {
                    id: request_id.to_owned(),
                    workspace: call.workspace.clone(),
                    session_id: call.session_id.clone(),
                    call_id: call.call_id.clone(),
                    tool: call.tool_name.clone(),
                    operation: c.operation.clone(),
                    args: call.args.clone(),
                    digest,
                    class: c.class,
                    reason: c.reason.clone(),
                    understood: c.understood,
                    offer: rules::suggest(&c),
                    delivery,
                    created_at: now,
                    expires_at: now.saturating_add(ttl),
                })
                .await?;
            let outcome = if call.unattended { "drafted" } else { "held" };
            self.audit_eval(
                call,
                &c,
                Some(mode),
                outcome,
                None,
                Vec::new(),
                Some(row.id.clone()),
            )
            .await?;
            return Ok(held(&row));
        }

        // 4. Otherwise it runs.
        self.audit_eval(
            call,
            &c,
            Some(mode),
            "allowed",
            Some(ApprovedBy::Auto),
            Vec::new(),
            None,
        )
        .await?;
        Ok(allow_auto())
    }

    /// The stored request of `call` (same session, call id, tool and
    /// arguments, workspace), if any: what a turn resumed after a restart
    /// looks at before it decides whether the call may run again.
    pub async fn row_for_call(&self, call: &CallContext) -> Result<Option<ApprovalRecord>> {
        let digest = call.digest();
        Ok(self
            .inner
            .store
            .latest_for_call(&call.session_id, &call.call_id)
            .await?
            .filter(|row| row.digest == digest && row.workspace == call.workspace))
    }

    /// A call announced again that already has a row. `None`: treat it as
    /// a new request (its earlier row is fully used up).
    async fn resume(&self, row: ApprovalRecord) -> Result<Option<GateOutcome>> {
        let row = self.expire_if_due(row).await?;
        let outcome = match row.status {
            Status::Pending => held(&row),
            Status::Approved if row.consumed_at.is_none() => {
                self.settle(Resolution::Approved {
                    request_id: row.id.clone(),
                    rule_id: row.rule_id.clone(),
                })
                .await
            }
            Status::Approved if row.finished_at.is_none() => {
                // Claimed before a crash, never finished: do not run it twice.
                self.finish(&row.id, Some(messages::maybe_ran()), true)
                    .await?;
                let entry =
                    self.audit_for(&row, "maybe_ran", "claimed but never finished".to_owned());
                self.audit_best_effort(entry).await;
                GateOutcome::Deny {
                    message: messages::maybe_ran(),
                    request_id: Some(row.id),
                    stop_turn: false,
                }
            }
            Status::Approved => return Ok(None),
            _ if row.consumed_at.is_none() => match Resolution::from_record(&row) {
                Some(resolution) => self.settle(resolution).await,
                None => return Ok(None),
            },
            _ => return Ok(None),
        };
        Ok(Some(outcome))
    }

    #[allow(clippy::too_many_arguments)]
    async fn audit_eval(
        &self,
        call: &CallContext,
        c: &Classification,
        mode: Option<Mode>,
        outcome: &str,
        approved_by: Option<ApprovedBy>,
        rule_ids: Vec<String>,
        request_id: Option<String>,
    ) -> Result<()> {
        self.inner
            .store
            .append_audit(NewAudit {
                at: self.now(),
                workspace: call.workspace.clone(),
                session_id: Some(call.session_id.clone()),
                call_id: Some(call.call_id.clone()),
                request_id,
                tool: Some(call.tool_name.clone()),
                class: Some(c.class),
                mode,
                outcome: outcome.to_owned(),
                approved_by,
                rule_ids,
                decider: None,
                detail: c.reason.clone(),
            })
            .await
    }
}

fn allow_auto() -> GateOutcome {
    GateOutcome::Allow {
        approved_by: ApprovedBy::Auto,
        rule_ids: Vec::new(),
        request_id: None,
    }
}

fn held(row: &ApprovalRecord) -> GateOutcome {
    let request = PendingRequest::from_record(row);
    match row.delivery {
        Delivery::Wait => GateOutcome::Held { request },
        Delivery::Draft => GateOutcome::Drafted {
            message: messages::drafted(&row.id),
            request,
        },
    }
}
