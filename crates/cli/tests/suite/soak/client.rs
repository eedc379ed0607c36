//! The soak's clients: one per front-end, each a host that runs turns one
//! after another and keeps what it saw. An app-server client whose
//! front-end was killed starts it again, resumes its thread and waits for
//! the turn it had started; each incarnation is a connection of its own,
//! with its own transcript.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use keel_test_support::{KeelChild, KeelCommand, MockModelServer, MockResponse, tool_call};
use serde_json::{Value, json};

use super::{Rng, Shared};

/// How long one turn may take, chaos included, before it counts as never
/// ended.
const TURN_DEADLINE: Duration = Duration::from_secs(150);
/// How long a read waits for the next frame before it looks at the turn
/// again.
const READ_WAIT: Duration = Duration::from_secs(2);

/// A prompt a client sent and what became of it.
#[derive(Debug, Clone, Default)]
pub struct Sent {
    pub thread: String,
    pub tag: String,
    pub prompt: String,
    /// The front-end answered the request that sent it.
    pub acked: bool,
    pub turn_id: Option<String>,
    /// The call is held for approval (a command that deletes).
    pub held: bool,
    pub interrupted: bool,
    /// How its turn ended as the client saw it, if it did.
    pub ended: Option<String>,
    /// The decision's sender heard it was taken.
    pub decided: bool,
    /// Under chaos (else calm).
    pub chaos: bool,
    pub first_delta_ms: Option<f64>,
    /// Ends of other runs heard while this one ran (RPC `agent_end`).
    pub stray_ends: usize,
    pub decision_to_tool_ms: Option<f64>,
}

/// The marker a turn's command appends to, one line per run.
pub fn runs_file(tag: &str) -> String {
    format!("runs-{tag}.log")
}

/// Scripts the mock for turn `tag`: the prompt asks for one command (one
/// that deletes, so it is held, when `held`), its output gets the answer.
pub fn script(mock: &MockModelServer, tag: &str, held: bool) -> String {
    let prompt = format!("soak-{tag}-go");
    let marker = runs_file(tag);
    let command = if held {
        format!("rm -rf gone-{tag} && echo x >> {marker} && echo ran-{tag}-ok")
    } else {
        format!("echo x >> {marker} && echo ran-{tag}-ok")
    };
    mock.answer_when_last_says(
        prompt.clone(),
        MockResponse::tool_calls(vec![tool_call(
            &format!("c-{tag}"),
            "bash",
            json!({ "command": command }),
        )]),
    );
    mock.answer_when_last_says(
        format!("ran-{tag}-ok"),
        MockResponse::text(&format!("done {tag}")),
    );
    prompt
}

/// One connection's frames.
pub type Transcript = Vec<Value>;

/// A front-end process and the client's side of its connection.
pub struct Conn {
    child: KeelChild,
    next_id: i64,
    pub frames: Transcript,
    /// Frames read while waiting for an answer, for the turn to look at.
    backlog: VecDeque<Value>,
    /// The threads this connection started or resumed.
    loaded: std::collections::HashSet<String>,
}

impl Conn {
    async fn send(&mut self, v: Value) -> anyhow::Result<()> {
        self.child.send_line(&v.to_string()).await
    }

    /// The next frame, `None` when none came within [`READ_WAIT`].
    async fn read(&mut self) -> anyhow::Result<Option<Value>> {
        if let Some(v) = self.backlog.pop_front() {
            return Ok(Some(v));
        }
        self.read_new().await
    }

    async fn read_new(&mut self) -> anyhow::Result<Option<Value>> {
        let Some(line) = self.child.next_stdout(READ_WAIT).await? else {
            return Ok(None);
        };
        let v: Value = serde_json::from_str(&line)?;
        self.frames.push(v.clone());
        Ok(Some(v))
    }

    async fn request(&mut self, method: &str, params: Value) -> anyhow::Result<Value> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"id": id, "method": method, "params": params}))
            .await?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            let Some(v) = self.read_new().await? else {
                continue;
            };
            if v["id"] == id && v.get("method").is_none() {
                return match v.get("result") {
                    Some(r) => Ok(r.clone()),
                    None => anyhow::bail!("{method} failed: {v}"),
                };
            }
            self.backlog.push_back(v);
        }
        anyhow::bail!("no answer to {method}")
    }
}

/// What starts a front-end of one machine.
#[derive(Clone)]
pub struct Machine {
    /// What the machine's processes are called in their log files.
    pub name: String,
    /// Where each process writes its log (one file per process).
    pub logs: std::path::PathBuf,
    pub bin: String,
    pub home: std::path::PathBuf,
    pub ws: std::path::PathBuf,
    pub url: String,
    pub temporal: String,
    pub base_url: String,
}

impl Machine {
    pub fn keel(&self) -> KeelCommand {
        self.keel_logged().0
    }

    /// `keel` logging to a file of its own, and that file.
    pub fn keel_logged(&self) -> (KeelCommand, std::path::PathBuf) {
        let file = self.log_file();
        let cmd = self
            .keel_quiet()
            .env("RUST_LOG", "keel=info,keel_core=info,keel_temporal=info")
            .env("KEEL_LOG_FILE", file.display().to_string());
        (cmd, file)
    }

    /// A log file of its own for the next process of this machine.
    fn log_file(&self) -> std::path::PathBuf {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        self.logs.join(format!("{}-{n}.log", self.name))
    }

    /// `keel` without a log file (the short-lived `keel approvals`).
    pub fn keel_quiet(&self) -> KeelCommand {
        KeelCommand::new(&self.bin)
            .home(&self.home)
            .cwd(&self.ws)
            .args(["--database", &self.url, "--temporal", &self.temporal])
            .timeout(Duration::from_secs(120))
    }

    async fn app_server(&self) -> anyhow::Result<Conn> {
        let child = self
            .keel()
            .args(["app-server", "--base-url", &self.base_url])
            .args(["--model", "mock-model"])
            .spawn()
            .await?;
        let mut conn = Conn {
            child,
            next_id: 0,
            frames: Vec::new(),
            backlog: VecDeque::new(),
            loaded: Default::default(),
        };
        conn.request(
            "initialize",
            json!({"clientInfo": {"name": "soak", "title": null, "version": "1.0.0"},
                   "capabilities": {"experimentalApi": false}}),
        )
        .await?;
        conn.send(json!({"method": "initialized"})).await?;
        Ok(conn)
    }

    /// `keel approvals approve` of the pending request for `call_id`, from
    /// a process of its own; whether it approved one.
    pub async fn approve_call(&self, call_id: &str) -> bool {
        let Ok(list) = self
            .keel()
            .args(["approvals", "list", "--json"])
            .run()
            .await
        else {
            return false;
        };
        let Ok(pending) = serde_json::from_str::<Value>(&list.stdout) else {
            return false;
        };
        let Some(id) = pending.as_array().and_then(|rows| {
            rows.iter()
                .find(|r| r["call_id"] == call_id)
                .and_then(|r| r["id"].as_str().map(str::to_owned))
        }) else {
            return false;
        };
        matches!(
            self.keel_quiet().args(["approvals", "approve", &id]).run().await,
            Ok(out) if out.code() == Some(0)
        )
    }
}

/// The app-server client of `machine`: `threads` threads, a turn at a
/// time on each in turn, until `shared.stop`; returns what it sent and
/// every connection's transcript.
pub async fn app_server_client(
    name: String,
    machine: Machine,
    mock: Arc<MockModelServer>,
    shared: Arc<Shared>,
    threads: usize,
    seed: u64,
) -> (Vec<Sent>, Vec<Transcript>) {
    let mut rng = Rng::new(seed);
    let mut sent = Vec::new();
    let mut transcripts = Vec::new();
    let mut conn = connect(&name, &machine, &shared).await;
    let mut ids = Vec::new();
    for _ in 0..threads {
        let started = conn
            .request(
                "thread/start",
                json!({"cwd": machine.ws.display().to_string(), "approvalPolicy": "on-request"}),
            )
            .await;
        match started {
            Ok(r) => {
                let id = r["thread"]["id"].as_str().unwrap_or_default().to_owned();
                conn.loaded.insert(id.clone());
                ids.push(id);
            }
            Err(e) => panic!("{name}: thread/start before any chaos failed: {e:#}"),
        }
    }
    let mut k = 0usize;
    while !shared.stop.load(Ordering::SeqCst) {
        let thread = ids[k % ids.len()].clone();
        let tag = format!("{name}t{}k{k}", k % ids.len());
        let held = rng.below(3) == 0;
        let interrupt = !held && rng.below(8) == 0;
        let prompt = script(&mock, &tag, held);
        let mut s = Sent {
            thread: thread.clone(),
            tag: tag.clone(),
            prompt: prompt.clone(),
            held,
            interrupted: interrupt,
            chaos: shared.chaos.load(Ordering::SeqCst),
            ..Sent::default()
        };
        run_turn(
            &name,
            &machine,
            &shared,
            &mut conn,
            &mut transcripts,
            &mut s,
            &mut rng,
        )
        .await;
        sent.push(s);
        k += 1;
    }
    transcripts.push(std::mem::take(&mut conn.frames));
    let _ = conn.child.signal("TERM").await;
    let _ = conn.child.wait().await;
    (sent, transcripts)
}

/// A front-end for the client `name`, started again until one answers.
async fn connect(name: &str, machine: &Machine, shared: &Shared) -> Conn {
    loop {
        match machine.app_server().await {
            Ok(conn) => {
                if let Some(pid) = conn.child.pid() {
                    shared.set_pid(name, pid);
                }
                return conn;
            }
            Err(e) => {
                eprintln!("[soak] {name}: front-end did not start: {e:#}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    }
}

/// Sends `s`'s prompt and follows its turn to the end, through dead
/// front-ends.
async fn run_turn(
    name: &str,
    machine: &Machine,
    shared: &Shared,
    conn: &mut Conn,
    transcripts: &mut Vec<Transcript>,
    s: &mut Sent,
    rng: &mut Rng,
) {
    let deadline = Instant::now() + TURN_DEADLINE;
    // A front-end started again knows the thread once it is resumed.
    while !conn.loaded.contains(&s.thread) && Instant::now() < deadline {
        match conn
            .request("thread/resume", json!({"threadId": s.thread}))
            .await
        {
            Ok(_) => {
                conn.loaded.insert(s.thread.clone());
            }
            Err(_) => reconnect(name, machine, shared, conn, transcripts).await,
        }
    }
    let t0 = Instant::now();
    let started = conn
        .request(
            "turn/start",
            json!({"threadId": s.thread, "input": [{"type": "text", "text": s.prompt}]}),
        )
        .await;
    match started {
        Ok(r) => {
            s.acked = true;
            s.turn_id = r["turn"]["id"].as_str().map(str::to_owned);
        }
        Err(e) => {
            eprintln!("[soak] {name}: turn/start of {} failed: {e:#}", s.tag);
            reconnect(name, machine, shared, conn, transcripts).await;
            // Whether it was stored is for the checker; the turn, if it
            // started, is awaited through the history below.
        }
    }
    if s.interrupted
        && let Some(turn) = &s.turn_id
    {
        let _ = conn
            .request(
                "turn/interrupt",
                json!({"threadId": s.thread, "turnId": turn}),
            )
            .await;
    }
    let mut decided_at: Option<Instant> = None;
    let mut resumed = s.turn_id.is_none();
    while Instant::now() < deadline {
        if resumed {
            resumed = false;
            match conn
                .request("thread/resume", json!({"threadId": s.thread}))
                .await
            {
                Ok(r) => {
                    conn.loaded.insert(s.thread.clone());
                    if let Some(status) = ended_in_history(&r, s) {
                        s.ended = Some(status);
                        return;
                    }
                }
                Err(_) => {
                    reconnect(name, machine, shared, conn, transcripts).await;
                    resumed = true;
                    continue;
                }
            }
        }
        let frame = match conn.read().await {
            Ok(Some(f)) => f,
            Ok(None) => continue,
            Err(_) => {
                reconnect(name, machine, shared, conn, transcripts).await;
                resumed = true;
                continue;
            }
        };
        let method = frame["method"].as_str().unwrap_or_default();
        let for_turn = s.turn_id.is_some() && frame["params"]["turnId"] == json!(s.turn_id);
        match method {
            "item/agentMessage/delta" if for_turn && s.first_delta_ms.is_none() => {
                s.first_delta_ms = Some(t0.elapsed().as_secs_f64() * 1000.0);
            }
            "item/started"
                if for_turn
                    && frame["params"]["item"]["type"] == "commandExecution"
                    && s.decision_to_tool_ms.is_none() =>
            {
                if let Some(at) = decided_at {
                    s.decision_to_tool_ms = Some(at.elapsed().as_secs_f64() * 1000.0);
                }
            }
            "item/commandExecution/requestApproval"
                if frame["params"]["threadId"] == json!(s.thread) =>
            {
                let call = frame["params"]["itemId"].as_str().unwrap_or_default();
                // Half the time another process decides (`keel approvals`).
                let by_cli = rng.below(2) == 0 && machine.approve_call(call).await;
                if by_cli {
                    s.decided = true;
                } else {
                    let answered = conn
                        .send(json!({"id": frame["id"].clone(), "result": {"decision": "accept"}}))
                        .await;
                    s.decided |= answered.is_ok();
                }
                decided_at.get_or_insert_with(Instant::now);
                if s.turn_id.is_none() {
                    s.turn_id = frame["params"]["turnId"].as_str().map(str::to_owned);
                }
            }
            "turn/started"
                if s.turn_id.is_none() && frame["params"]["threadId"] == json!(s.thread) =>
            {
                s.turn_id = frame["params"]["turn"]["id"].as_str().map(str::to_owned);
            }
            "turn/completed"
                if s.turn_id.is_some() && frame["params"]["turn"]["id"] == json!(s.turn_id) =>
            {
                s.ended = frame["params"]["turn"]["status"]
                    .as_str()
                    .map(str::to_owned);
                return;
            }
            _ => {}
        }
    }
    eprintln!("[soak] {name}: turn {} never ended", s.tag);
}

/// How the turn of `s` ended according to a `thread/resume` answer, when
/// its prompt is in a turn that is not in progress.
fn ended_in_history(resumed: &Value, s: &mut Sent) -> Option<String> {
    let turns = resumed["thread"]["turns"].as_array()?;
    let turn = turns.iter().find(|t| {
        t["items"].as_array().is_some_and(|items| {
            items
                .iter()
                .any(|i| i["type"] == "userMessage" && i["content"].to_string().contains(&s.prompt))
        })
    })?;
    if s.turn_id.is_none() {
        s.turn_id = turn["id"].as_str().map(str::to_owned);
    }
    match turn["status"].as_str() {
        Some("inProgress") | None => None,
        Some(status) => Some(status.to_owned()),
    }
}

/// Keeps the dead connection's transcript and connects again.
async fn reconnect(
    name: &str,
    machine: &Machine,
    shared: &Shared,
    conn: &mut Conn,
    transcripts: &mut Vec<Transcript>,
) {
    let mut fresh = connect(name, machine, shared).await;
    std::mem::swap(conn, &mut fresh);
    transcripts.push(std::mem::take(&mut fresh.frames));
    let _ = fresh.child.signal("KILL").await;
    let _ = fresh.child.wait().await;
}
