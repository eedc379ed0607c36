//! The ids of keel's workflows.
//!
//! Owns how a workflow id is derived from what keel already stores, so any
//! process that knows an approval id can address its wait without asking
//! anyone (the nudge after a decision, the reconcile loop).

/// The workflow that waits on approval request `request_id`.
pub fn approval_workflow_id(request_id: &str) -> String {
    format!("keel-approval-{request_id}")
}

/// The workflow of the turn running in session `session_id`: one at a
/// time per session, whichever front-end starts it.
pub fn turn_workflow_id(session_id: &str) -> String {
    format!("keel-turn-{session_id}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_approval_wait_is_named_after_its_request() {
        assert_eq!(
            super::approval_workflow_id("apr_0198"),
            "keel-approval-apr_0198"
        );
    }
}
