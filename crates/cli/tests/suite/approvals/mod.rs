//! Approvals end to end: the real binary against the mock model, in RPC
//! mode (`rpc.rs`, `restart.rs`) and in `keel exec` with decisions from a
//! second `keel approvals` process (`exec.rs`), decline-and-stop, expiry
//! and several held calls in one message (`more.rs`), and on a real
//! PostgreSQL server (`postgres.rs`). Every wait is bounded.

mod exec;
mod more;
mod postgres;
mod restart;
mod rpc;
mod security;

use keel_test_support::{KeelChild, KeelOutput};
use serde_json::Value;

use super::Env;
use super::rpc::{Rpc, event};

/// The request id in a held call's stderr hint
/// (`… keel approvals approve apr_… …`).
pub fn id_in(line: &str) -> String {
    let start = line.find("keel approvals approve apr_").unwrap() + "keel approvals approve ".len();
    line[start..].split_whitespace().next().unwrap().to_owned()
}

impl Env {
    /// `keel exec --wait-approvals <args…>` started and holding a call:
    /// returns the process and the stderr line that says how to decide.
    pub async fn exec_held(&self, args: &[&str]) -> (KeelChild, String) {
        let mut child = self
            .exec()
            .arg("--wait-approvals")
            .args(args.iter().copied())
            .spawn()
            .await
            .unwrap();
        let hint = child
            .wait_for_stderr(super::rpc::WAIT, |l| {
                l.contains("keel approvals approve apr_")
            })
            .await
            .unwrap();
        (child, hint)
    }
    /// `keel approvals <args…> --json` in the workspace; must succeed.
    pub async fn approvals_json(&self, args: &[&str]) -> Value {
        let out = self.approvals_cmd(args, true).await;
        assert_eq!(
            out.code(),
            Some(0),
            "keel approvals {args:?}: {}",
            out.stderr
        );
        serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout))
    }

    /// Polls `keel approvals explain <call_id>` until it has an `outcome` line.
    pub async fn wait_for_audit(&self, call_id: &str, outcome: &str) {
        let deadline = tokio::time::Instant::now() + super::rpc::WAIT;
        loop {
            let lines = self.approvals_json(&["explain", call_id]).await;
            if lines
                .as_array()
                .is_some_and(|l| l.iter().any(|l| l["outcome"] == outcome))
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {outcome} audit line for {call_id}: {lines}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// `keel approvals <args…>` (with `--json` when asked).
    pub async fn approvals_cmd(&self, args: &[&str], json: bool) -> KeelOutput {
        let mut cmd = self.keel().arg("approvals").args(args.iter().copied());
        if json {
            cmd = cmd.arg("--json");
        }
        cmd.run().await.unwrap()
    }
}

impl Rpc {
    /// Waits for the next `approval_request` frame.
    pub async fn approval_request(&mut self) -> Value {
        self.wait_for("approval_request", |f| f["type"] == "approval_request")
            .await
    }

    /// Answers a request and returns the response's `data`.
    pub async fn decide(&mut self, request_id: &str, decision: &str, extra: Value) -> Value {
        let mut cmd = serde_json::json!({
            "type": "approval_response",
            "requestId": request_id,
            "decision": decision,
        });
        if let (Some(obj), Value::Object(more)) = (cmd.as_object_mut(), extra) {
            obj.extend(more);
        }
        self.ok(cmd).await
    }

    /// The first frame (seen already, or still to come) matching `pred`.
    pub async fn seen_or_wait(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(f) = self.frames.iter().find(|f| pred(f)) {
            return f.clone();
        }
        self.wait_for(what, pred).await
    }

    /// Whether a `tool_execution_start` for `call_id` was seen so far.
    pub fn started(&self, call_id: &str) -> bool {
        self.frames
            .iter()
            .filter_map(event)
            .any(|e| e["type"] == "tool_execution_start" && e["toolCallId"] == call_id)
    }

    /// The result text of the finished call `call_id`.
    pub async fn tool_end(&mut self, call_id: &str) -> Value {
        let f = self
            .wait_for(&format!("tool_execution_end {call_id}"), |f| {
                event(f).is_some_and(|e| {
                    e["type"] == "tool_execution_end" && e["toolCallId"] == call_id
                })
            })
            .await;
        event(&f).cloned().unwrap_or(Value::Null)
    }
}

/// The text of a tool result event.
pub fn result_text(end: &Value) -> String {
    end["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
