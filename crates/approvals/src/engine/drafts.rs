//! Drafts: held calls of unattended runs.
//!
//! Owns sending a draft (approve it), claiming an approved draft to run it
//! exactly once (the caller runs the tool, then [`ApprovalEngine::finish`]),
//! and collecting the outcomes the agent hears on its next turn in that
//! session (each told once). It must not run tools itself or know the agent
//! loop.

use serde::{Deserialize, Serialize};

use super::{ApprovalEngine, Decision, Resolution};
use crate::error::{Error, Result};
use crate::store::{ApprovalRecord, Delivery, RequestFilter, Status};

/// What happened to a draft, worded for the agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftOutcome {
    pub request_id: String,
    pub call_id: String,
    pub tool: String,
    pub status: Status,
    pub message: String,
}

impl ApprovalEngine {
    /// A person sends a draft: it is approved, to be claimed and run.
    pub async fn send_draft(&self, request_id: &str, decider: &str) -> Result<ApprovalRecord> {
        let row = self.request(request_id).await?;
        if row.delivery != Delivery::Draft {
            return Err(Error::NotClaimable {
                id: row.id,
                reason: "it is not a draft; its turn waits for the decision".to_owned(),
            });
        }
        self.decide(
            request_id,
            Decision::Approve,
            decider,
            Some(&format!("send:{request_id}")),
        )
        .await
    }

    /// Claims an approved draft for running, exactly once. The caller runs
    /// the call (tool and args are in the record), then calls
    /// [`finish`](ApprovalEngine::finish) with what it produced.
    pub async fn claim_draft(&self, request_id: &str) -> Result<ApprovalRecord> {
        let row = self.request(request_id).await?;
        let refuse = |reason: &str| Error::NotClaimable {
            id: request_id.to_owned(),
            reason: reason.to_owned(),
        };
        if row.delivery != Delivery::Draft {
            return Err(refuse("it is not a draft"));
        }
        if row.status != Status::Approved {
            return Err(refuse(&format!("it is {}", row.status)));
        }
        if !self.claim(request_id).await? {
            return Err(refuse("it was already claimed"));
        }
        self.request(request_id).await
    }

    /// Outcomes of this session's drafts not yet told to the agent: sent
    /// and finished, declined, expired or cancelled. Each is returned once.
    pub async fn take_draft_outcomes(&self, session_id: &str) -> Result<Vec<DraftOutcome>> {
        // The common case, checked with one small query: nothing to tell.
        if !self.inner.store.has_unreported_drafts(session_id).await? {
            return Ok(Vec::new());
        }
        self.expire_due().await?;
        let rows = self
            .inner
            .store
            .list_requests(RequestFilter {
                session_id: Some(session_id.to_owned()),
                delivery: Some(Delivery::Draft),
                ..Default::default()
            })
            .await?;
        let mut out = Vec::new();
        for row in rows.into_iter().rev() {
            if row.reported_at.is_some() {
                continue;
            }
            let head = format!(
                "Your held call `{}` ({}, draft {})",
                row.tool, row.call_id, row.id
            );
            let message = match row.status {
                Status::Pending => continue,
                Status::Approved if row.finished_at.is_none() => continue,
                Status::Approved => {
                    let result = row.outcome.as_deref().unwrap_or("(no output)");
                    let how = if row.outcome_is_error {
                        "ran and failed"
                    } else {
                        "ran"
                    };
                    format!("{head} was sent by the user and {how}. Result: {result}")
                }
                _ => match Resolution::from_record(&row).and_then(|r| r.message_for_model()) {
                    Some(m) => format!("{head} did not run. {m}"),
                    None => continue,
                },
            };
            out.push(DraftOutcome {
                request_id: row.id.clone(),
                call_id: row.call_id.clone(),
                tool: row.tool.clone(),
                status: row.status,
                message,
            });
        }
        let ids: Vec<String> = out.iter().map(|o| o.request_id.clone()).collect();
        if !ids.is_empty() {
            self.inner.store.mark_reported(&ids, self.now()).await?;
        }
        Ok(out)
    }
}
