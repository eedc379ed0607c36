//! `keel app-server` end to end over stdio (and, in [`network`], over
//! WebSocket and unix sockets): the real binary against the mock model. [`AppServer`] drives one child: it reads stdout frames in
//! order, validates each against the Codex JSON Schema ([`schema`]), keeps
//! them, and waits for responses and notifications, every wait bounded by
//! [`WAIT`].

mod approvals;
mod fork_compact;
mod fs_command;
mod generate;
mod handshake;
mod net;
mod network;
mod replay;
mod schema;
mod threads;
mod turns;

use std::collections::HashMap;
use std::time::Duration;

use keel_test_support::{KeelChild, KeelCommand, KeelOutput};
use serde_json::{Value, json};

use super::Env;
use schema::{Profile, Schemas};

/// Longest wait for any one frame.
pub const WAIT: Duration = Duration::from_secs(20);

impl Env {
    /// `keel app-server` pointed at the mock, in the workspace, with its own home.
    pub fn app_server_cmd(&self) -> KeelCommand {
        self.keel().args([
            "app-server",
            "--base-url",
            &self.mock.base_url(),
            "--model",
            "mock-model",
        ])
    }

    /// Starts the app-server (not initialized).
    pub async fn app_server(&self, extra: &[&str]) -> AppServer {
        AppServer::start(self.app_server_cmd().args(extra.iter().copied())).await
    }

    /// Starts the app-server and completes the handshake.
    pub async fn initialized(&self, experimental: bool) -> AppServer {
        let mut s = self.app_server(&[]).await;
        s.initialize(experimental).await;
        s
    }
}

/// One running `keel app-server`.
pub struct AppServer {
    pub child: KeelChild,
    /// Every frame read so far, in order.
    pub frames: Vec<Value>,
    next_id: i64,
    /// id (as JSON) → method of the requests sent.
    sent: HashMap<String, String>,
    schemas: Schemas,
    /// Indexes of frames [`AppServer::notification`] returned.
    taken: std::collections::HashSet<usize>,
}

impl AppServer {
    pub async fn start(cmd: KeelCommand) -> AppServer {
        AppServer {
            child: cmd.spawn().await.unwrap(),
            frames: Vec::new(),
            next_id: 0,
            sent: HashMap::new(),
            schemas: Schemas::new(Profile::Stable),
            taken: Default::default(),
        }
    }

    /// `initialize` + `initialized`.
    pub async fn initialize(&mut self, experimental: bool) -> Value {
        self.initialize_with(json!({"experimentalApi": experimental}))
            .await
    }

    pub async fn initialize_with(&mut self, capabilities: Value) -> Value {
        if capabilities["experimentalApi"] == true {
            self.schemas = Schemas::new(Profile::Experimental);
        }
        let r = self
            .call(
                "initialize",
                json!({"clientInfo": {"name": "keel_tests", "title": null, "version": "1.0.0"},
                       "capabilities": capabilities}),
            )
            .await;
        assert!(r.get("result").is_some(), "initialize failed: {r}");
        self.notify("initialized", None).await;
        r
    }

    /// The next stdout frame, validated against the schema.
    pub async fn next(&mut self) -> Value {
        let line = self.child.wait_for_stdout(WAIT, |_| true).await.unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"));
        let method = self.sent.get(&v["id"].to_string()).cloned();
        let is_response = v.get("method").is_none();
        if let Err(e) = self
            .schemas
            .validate(&v, if is_response { method.as_deref() } else { None })
        {
            panic!("frame violates the Codex schema: {e}\nframe: {v}");
        }
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

    /// The first notification `method` not returned before: one already
    /// read (while waiting for something else), else the next to come.
    pub async fn notification(&mut self, method: &str) -> Value {
        let is = |f: &Value| f["method"] == method && f.get("id").is_none();
        if let Some(i) =
            (0..self.frames.len()).find(|i| !self.taken.contains(i) && is(&self.frames[*i]))
        {
            self.taken.insert(i);
            return self.frames[i].clone();
        }
        let v = self.wait_for(method, is).await;
        self.taken.insert(self.frames.len() - 1);
        v
    }

    pub async fn send(&mut self, v: Value) {
        self.child.send_line(&v.to_string()).await.unwrap();
    }

    /// Sends a raw request line whose response is expected for `method`.
    pub async fn send_raw_request(&mut self, id: Value, method: &str, line: &str) {
        self.sent.insert(id.to_string(), method.to_owned());
        self.send_raw(line).await;
    }

    pub async fn send_raw(&mut self, line: &str) {
        self.child.send_line(line).await.unwrap();
    }

    pub async fn notify(&mut self, method: &str, params: Option<Value>) {
        let mut v = json!({"method": method});
        if let Some(p) = params {
            v["params"] = p;
        }
        self.send(v).await;
    }

    /// Sends a request with a fresh integer id; returns the id.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.request_with_id(id.clone(), method, Some(params)).await;
        id
    }

    pub async fn request_with_id(&mut self, id: Value, method: &str, params: Option<Value>) {
        self.sent.insert(id.to_string(), method.to_owned());
        let mut v = json!({"id": id, "method": method});
        if let Some(p) = params {
            v["params"] = p;
        }
        self.send(v).await;
    }

    /// Waits for the response (or error) to `id`.
    /// One already read (a response can overtake the one a test waits
    /// for: a command's result before the `terminate` that ended it) and
    /// not returned before is the answer.
    pub async fn response(&mut self, id: &Value) -> Value {
        let is = |f: &Value| &f["id"] == id && f.get("method").is_none();
        if let Some(i) =
            (0..self.frames.len()).find(|i| !self.taken.contains(i) && is(&self.frames[*i]))
        {
            self.taken.insert(i);
            return self.frames[i].clone();
        }
        let v = self.wait_for(&format!("response {id}"), is).await;
        self.taken.insert(self.frames.len() - 1);
        v
    }

    /// Sends a request and returns its response frame.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(&id).await
    }

    /// Sends a request, asserts success and returns `result`.
    pub async fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// Sends a request, asserts failure and returns `error`.
    pub async fn err(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        assert!(r.get("result").is_none(), "{method} should fail: {r}");
        r["error"].clone()
    }

    /// `thread/start` in the workspace; returns the thread id.
    pub async fn start_thread(&mut self, ws: &std::path::Path, policy: &str) -> String {
        let r = self
            .ok(
                "thread/start",
                json!({"cwd": ws.display().to_string(), "approvalPolicy": policy}),
            )
            .await;
        r["thread"]["id"].as_str().unwrap().to_owned()
    }

    /// `turn/start` with one text input; returns the turn id.
    pub async fn start_turn(&mut self, thread: &str, text: &str) -> String {
        let r = self
            .ok(
                "turn/start",
                json!({"threadId": thread, "input": [{"type": "text", "text": text}]}),
            )
            .await;
        assert_eq!(r["turn"]["status"], "inProgress");
        r["turn"]["id"].as_str().unwrap().to_owned()
    }

    /// Waits for `turn/completed` of `turn`, answering approval requests
    /// with `decision`; returns the completed turn.
    pub async fn finish_turn(&mut self, turn: &str, decision: &str) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "turn {turn} did not end"
            );
            let f = self.next().await;
            if f.get("id").is_some() && f.get("method").is_some() {
                let id = f["id"].clone();
                self.send(json!({"id": id, "result": {"decision": decision}}))
                    .await;
                continue;
            }
            if f["method"] == "turn/completed" && f["params"]["turn"]["id"] == turn {
                return f["params"]["turn"].clone();
            }
        }
    }

    /// Methods of the notifications and server requests seen so far.
    pub fn methods(&self) -> Vec<String> {
        self.frames
            .iter()
            .filter_map(|f| f["method"].as_str().map(str::to_owned))
            .collect()
    }

    /// The notifications `method` seen so far.
    pub fn seen(&self, method: &str) -> Vec<Value> {
        self.frames
            .iter()
            .filter(|f| f["method"] == method)
            .cloned()
            .collect()
    }

    /// Closes stdin and waits for the exit.
    pub async fn close(mut self) -> KeelOutput {
        self.child.close_stdin();
        let out = self.child.wait().await.unwrap();
        for line in out.stdout.lines().filter(|l| !l.trim().is_empty()) {
            let v: Value = serde_json::from_str(line).unwrap();
            let method = self.sent.get(&v["id"].to_string()).cloned();
            let is_response = v.get("method").is_none();
            if let Err(e) = self
                .schemas
                .validate(&v, if is_response { method.as_deref() } else { None })
            {
                panic!("frame violates the Codex schema: {e}\nframe: {v}");
            }
        }
        out
    }
}
