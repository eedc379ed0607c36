//! The soak's RPC client: one session on the RPC front-end, a prompt at a
//! time, its held calls decided by an `approval_response` or by
//! `keel approvals approve` from another process. This front-end is not
//! killed (its host is the process that would die with it); the workers,
//! PostgreSQL and Temporal under its turns are.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use keel_test_support::{KeelChild, MockModelServer};
use serde_json::{Value, json};

use super::client::{Machine, Sent, Transcript, script};
use super::{Rng, Shared};
use crate::suite::rpc::event_type;

const TURN_DEADLINE: Duration = Duration::from_secs(150);

/// Runs prompts until `shared.stop`; what it sent and its transcript.
pub async fn rpc_client(
    machine: Machine,
    mock: Arc<MockModelServer>,
    shared: Arc<Shared>,
    seed: u64,
) -> (Vec<Sent>, Vec<Transcript>) {
    let mut rng = Rng::new(seed);
    let mut child = machine
        .keel()
        .args(["--mode", "rpc", "--base-url", &machine.base_url])
        .args(["--model", "mock-model"])
        .spawn()
        .await
        .unwrap();
    let mut frames: Transcript = Vec::new();
    let mut sent = Vec::new();
    let mut session = String::new();
    let mut k = 0usize;
    while !shared.stop.load(Ordering::SeqCst) {
        let tag = format!("rpck{k}");
        let held = rng.below(3) == 0;
        let prompt = script(&mock, &tag, held);
        let mut s = Sent {
            tag: tag.clone(),
            prompt: prompt.clone(),
            held,
            chaos: shared.chaos.load(Ordering::SeqCst),
            ..Sent::default()
        };
        let t0 = Instant::now();
        let id = format!("p{k}");
        let line = json!({"id": id, "type": "prompt", "message": prompt}).to_string();
        if child.send_line(&line).await.is_err() {
            break;
        }
        let deadline = Instant::now() + TURN_DEADLINE;
        let mut decided_at = None;
        while Instant::now() < deadline {
            let Ok(next) = child.next_stdout(Duration::from_secs(2)).await else {
                break;
            };
            let Some(line) = next else { continue };
            let Ok(frame) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            frames.push(frame.clone());
            if frame["type"] == "response" && frame["id"] == id.as_str() {
                s.acked = frame["success"] == true;
                continue;
            }
            if frame["type"] == "approval_request" {
                if session.is_empty() {
                    session = frame["sessionId"].as_str().unwrap_or_default().to_owned();
                }
                let request = frame["id"].as_str().unwrap_or_default().to_owned();
                let by_cli = rng.below(2) == 0
                    && matches!(
                        machine.keel_quiet().args(["approvals", "approve", &request]).run().await,
                        Ok(out) if out.code() == Some(0)
                    );
                if !by_cli {
                    let answer = json!({"type": "approval_response", "requestId": request,
                                        "decision": "approve"});
                    let _ = child.send_line(&answer.to_string()).await;
                }
                s.decided = true;
                decided_at = Some(Instant::now());
                continue;
            }
            match event_type(&frame) {
                Some("message_update")
                    if s.first_delta_ms.is_none() && line.contains("text_delta") =>
                {
                    s.first_delta_ms = Some(t0.elapsed().as_secs_f64() * 1000.0);
                }
                Some("tool_execution_start") => {
                    if let (Some(at), None) = (decided_at, s.decision_to_tool_ms) {
                        s.decision_to_tool_ms = Some(at.elapsed().as_secs_f64() * 1000.0);
                    }
                }
                Some("agent_end") => {
                    // Failed or interrupted when its last answer says so.
                    let event = crate::suite::rpc::event(&frame)
                        .cloned()
                        .unwrap_or_default();
                    if !event["messages"].to_string().contains(&prompt) {
                        // The end of another run: a repeat the host must
                        // not get.
                        s.stray_ends += 1;
                        continue;
                    }
                    let last = event["messages"]
                        .as_array()
                        .and_then(|m| m.iter().rev().find(|m| m["role"] == "assistant"))
                        .map(|m| m["stopReason"].as_str().unwrap_or_default().to_owned());
                    s.ended = Some(
                        match last.as_deref() {
                            Some("error") => "failed",
                            Some("aborted") => "interrupted",
                            _ => "completed",
                        }
                        .to_owned(),
                    );
                    break;
                }
                _ => {}
            }
        }
        sent.push(s);
        k += 1;
    }
    if session.is_empty() {
        session = session_of(&mut child).await.unwrap_or_default();
    }
    for s in &mut sent {
        s.thread = session.clone();
    }
    child.close_stdin();
    let _ = child.wait().await;
    (sent, vec![frames])
}

/// The session id `get_state` names.
async fn session_of(child: &mut KeelChild) -> Option<String> {
    let line = json!({"id": "state", "type": "get_state"}).to_string();
    child.send_line(&line).await.ok()?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let line = match child.next_stdout(Duration::from_secs(2)).await {
            Ok(Some(line)) => line,
            Ok(None) => continue,
            Err(_) => return None,
        };
        let frame: Value = serde_json::from_str(&line).ok()?;
        if frame["id"] == "state" {
            return frame["data"]["sessionId"].as_str().map(str::to_owned);
        }
    }
    None
}
