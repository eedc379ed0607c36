//! `keel --mode rpc` end to end: the real binary against the mock model.
//!
//! [`Rpc`] drives one child: it reads stdout frames in order (keeping every
//! frame it saw), sends commands, and waits for responses and events, every
//! wait bounded by [`WAIT`].

mod bash;
mod compaction;
mod conformance;
mod events;
mod fuzz;
mod gates;
pub(crate) mod host;
mod lifecycle;
mod prompt;
mod queues;
mod session;
mod state;
mod todos;
mod unattended;

use std::time::Duration;

use keel_test_support::{KeelChild, KeelCommand, KeelOutput};
use serde_json::{Value, json};

use super::Env;

/// Longest wait for any one frame.
pub const WAIT: Duration = Duration::from_secs(20);

impl Env {
    /// `keel --mode rpc` pointed at the mock, in the workspace, with its own home.
    pub fn rpc_cmd(&self) -> KeelCommand {
        self.keel().args([
            "--mode",
            "rpc",
            "--base-url",
            &self.mock.base_url(),
            "--model",
            "mock-model",
        ])
    }

    /// Starts RPC mode with extra arguments and waits for the ready frame.
    pub async fn rpc(&self, extra: &[&str]) -> Rpc {
        Rpc::start(self.rpc_cmd().args(extra.iter().copied())).await
    }
}

/// One running `keel --mode rpc`.
pub struct Rpc {
    pub child: KeelChild,
    /// Every frame read so far, in order.
    pub frames: Vec<Value>,
    /// Indices in `frames` of responses `response` already returned.
    taken: Vec<usize>,
    next_id: u64,
}

/// The inner event of an event frame (canonical or flat), if it is one.
pub fn event(frame: &Value) -> Option<&Value> {
    if frame["type"] == "event" {
        return Some(&frame["payload"]["event"]);
    }
    let t = frame["type"].as_str()?;
    let flat_non_events = [
        "ready",
        "response",
        "host_tool_call",
        "host_tool_cancel",
        "host_uri_request",
        "host_uri_cancel",
        "extension_ui_request",
        "workflow_gate",
        "approval_request",
        "approval_resolved",
    ];
    (!flat_non_events.contains(&t)).then_some(frame)
}

pub fn event_type(frame: &Value) -> Option<&str> {
    event(frame).and_then(|e| e["type"].as_str())
}

impl Rpc {
    pub async fn start(cmd: KeelCommand) -> Rpc {
        let child = cmd.spawn().await.unwrap();
        let mut rpc = Rpc {
            child,
            frames: Vec::new(),
            taken: Vec::new(),
            next_id: 0,
        };
        let ready = rpc.next().await;
        assert_eq!(ready["type"], "ready", "the first frame must be ready");
        rpc
    }

    /// The next stdout frame.
    pub async fn next(&mut self) -> Value {
        let line = self.child.wait_for_stdout(WAIT, |_| true).await.unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        self.frames.push(v.clone());
        v
    }

    /// Reads frames until one satisfies `pred`.
    pub async fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {what} within {WAIT:?}; frames: {:#?}",
                self.frames
            );
            let v = self.next().await;
            if pred(&v) {
                return v;
            }
        }
    }

    pub async fn send(&mut self, v: Value) {
        self.child.send_line(&v.to_string()).await.unwrap();
    }

    pub async fn send_raw(&mut self, line: &str) {
        self.child.send_line(line).await.unwrap();
    }

    /// A fresh request id.
    pub fn id(&mut self) -> String {
        self.next_id += 1;
        format!("req_{}", self.next_id)
    }

    /// Waits for the response with `id`.
    pub async fn response(&mut self, id: &str) -> Value {
        let is_it = |f: &Value| f["type"] == "response" && f["id"] == id;
        // A response can arrive while the test waits for another one (an
        // `abort` answered after the `compact` it ended), so one already
        // read and not yet returned is the answer.
        let seen =
            (0..self.frames.len()).find(|i| !self.taken.contains(i) && is_it(&self.frames[*i]));
        if let Some(i) = seen {
            self.taken.push(i);
            return self.frames[i].clone();
        }
        let r = self.wait_for(&format!("response {id}"), is_it).await;
        self.taken.push(self.frames.len() - 1);
        r
    }

    /// Sends `cmd` with a fresh id and returns its response.
    pub async fn call(&mut self, mut cmd: Value) -> Value {
        let id = self.id();
        cmd["id"] = json!(id);
        self.send(cmd).await;
        self.response(&id).await
    }

    /// Sends `cmd`, asserts success and returns `data`.
    pub async fn ok(&mut self, cmd: Value) -> Value {
        let r = self.call(cmd.clone()).await;
        assert_eq!(r["success"], true, "{cmd} failed: {r}");
        r.get("data").cloned().unwrap_or(Value::Null)
    }

    /// Waits for an event of `event_type`; returns the inner event.
    pub async fn event(&mut self, ty: &str) -> Value {
        let f = self
            .wait_for(&format!("event {ty}"), |f| event_type(f) == Some(ty))
            .await;
        event(&f).cloned().unwrap_or(Value::Null)
    }

    /// The event of type `ty` a command wrote before its response (the last
    /// frame read), after the previous response.
    pub fn announced(&self, ty: &str) -> Value {
        let (last, before) = self.frames.split_last().expect("a response was read");
        assert_eq!(last["type"], "response", "{last}");
        before
            .iter()
            .rev()
            .take_while(|f| f["type"] != "response")
            .filter_map(event)
            .find(|e| e["type"] == ty)
            .cloned()
            .unwrap_or_else(|| panic!("no {ty} before the response: {:#?}", self.frames))
    }

    /// Sends a prompt and waits for its terminal `agent_end`.
    pub async fn prompt_and_wait(&mut self, text: &str) -> Value {
        let r = self.call(json!({"type":"prompt","message":text})).await;
        assert_eq!(r["success"], true, "{r}");
        self.event("agent_end").await
    }

    /// The inner events seen so far, in order.
    pub fn events(&self) -> Vec<&Value> {
        self.frames.iter().filter_map(event).collect()
    }

    pub fn event_types(&self) -> Vec<&str> {
        self.frames.iter().filter_map(event_type).collect()
    }

    /// Closes stdin and waits for the exit, reading the remaining frames.
    pub async fn finish(mut self) -> (KeelOutput, Vec<Value>) {
        self.child.close_stdin();
        let out = self.child.wait().await.unwrap();
        let mut frames = self.frames;
        let seen = frames.len();
        let all: Vec<Value> = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // `wait` returns every line read, including the ones already parsed.
        frames.extend(all.into_iter().skip(seen));
        (out, frames)
    }
}
