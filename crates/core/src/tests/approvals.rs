//! The loop with the approvals engine behind its gate ([`EngineGate`]): a
//! held call announces nothing before its row is stored and starts nothing
//! before it is decided; approvals run it once and record the outcome;
//! declines, new messages, stops and aborts; drafts; host classes; failing
//! closed. Every wait is bounded.

use std::path::PathBuf;

use keel_approvals::{
    ApprovalEngine, Class, Decision, EngineConfig, PendingRequest, Resolution, Status,
};

use super::*;

const HANG: Duration = Duration::from_secs(20);

async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(HANG, f)
        .await
        .expect("timed out: something hangs")
}

/// Records what the gate announced.
#[derive(Default)]
struct Recorder {
    requested: Mutex<Vec<PendingRequest>>,
    resolved: Mutex<Vec<Resolution>>,
    unattended: bool,
    host: Option<(&'static str, Option<Class>)>,
    refuse: Option<&'static str>,
}

#[async_trait::async_trait]
impl ApprovalFrontend for Recorder {
    async fn requested(&self, request: &PendingRequest) {
        self.requested.lock().unwrap().push(request.clone());
    }
    async fn resolved(&self, _request: &PendingRequest, resolution: &Resolution) {
        self.resolved.lock().unwrap().push(resolution.clone());
    }
    fn refuse(&self, call: &ToolCallInfo) -> Option<String> {
        self.refuse
            .filter(|t| *t == call.tool_name)
            .map(|t| format!("{t} is refused by the declaration"))
    }
    fn unattended(&self) -> bool {
        self.unattended
    }
    fn host_class(&self, tool: &str) -> Option<Option<Class>> {
        self.host.filter(|(t, _)| *t == tool).map(|(_, c)| c)
    }
}

struct Approvals {
    _dir: tempfile::TempDir,
    db: PathBuf,
    engine: ApprovalEngine,
    gate: Arc<EngineGate>,
    recorder: Arc<Recorder>,
}

impl Approvals {
    async fn new(recorder: Recorder) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keel.db");
        let engine = engine_on(&db).await;
        let gate = Arc::new(EngineGate::new(engine.clone(), "/ws"));
        let recorder = Arc::new(recorder);
        gate.set_frontend(recorder.clone());
        Self {
            _dir: dir,
            db,
            engine,
            gate,
            recorder,
        }
    }

    fn harness(&self, scripts: Vec<Script>, tools: Vec<Arc<dyn Tool>>) -> Harness {
        harness_with(scripts, tools, self.gate.clone(), |_| {})
    }

    /// Waits until the gate has announced `n` requests; returns the last.
    async fn announced(&self, n: usize) -> PendingRequest {
        within(async {
            loop {
                if let Some(r) = self.recorder.requested.lock().unwrap().get(n - 1) {
                    return r.clone();
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
    }
}

async fn engine_on(db: &std::path::Path) -> ApprovalEngine {
    ApprovalEngine::open_sqlite_with(
        db,
        Arc::new(keel_approvals::SystemClock),
        EngineConfig {
            poll_interval: Duration::from_millis(20),
            ..EngineConfig::default()
        },
    )
    .await
    .unwrap()
}

/// The events that arrive within a short while (none may be missing
/// later: this only looks at what has happened so far).
async fn drain(h: &mut Harness) -> Vec<AgentEvent> {
    let mut out = Vec::new();
    while let Ok(Some(ev)) =
        tokio::time::timeout(Duration::from_millis(200), h.session.next_event()).await
    {
        out.push(ev);
    }
    out
}

fn bash(id: &str, command: &str) -> Script {
    calls(&[(id, "bash", json!({ "command": command }))])
}

fn last_request_text(h: &Harness) -> String {
    let reqs = h.provider.requests();
    serde_json::to_string(&reqs.last().unwrap().messages).unwrap()
}

#[tokio::test]
async fn a_held_call_starts_nothing_until_another_process_approves_it() {
    let a = Approvals::new(Recorder::default()).await;
    let tool = FakeTool::new("bash", false);
    let mut h = a.harness(
        vec![bash("c1", "cargo publish"), text("published")],
        vec![tool.clone()],
    );
    h.prompt("publish").await;
    let request = a.announced(1).await;
    assert_eq!(request.call_id, "c1");
    assert_eq!(request.title, "keel wants to run `cargo publish`");
    // Stored before it was announced, and the assistant message that made
    // the call was flushed to the log first.
    assert_eq!(
        a.engine.request(&request.id).await.unwrap().status,
        Status::Pending
    );
    assert_eq!(h.log.flushed_len(), h.log.entries().len());
    let before = drain(&mut h).await;
    assert!(
        !types(&before).contains(&"tool_execution_start"),
        "{:?}",
        types(&before)
    );
    assert_eq!(tool.call_count(), 0);

    // "keel approvals approve" from another process on the same file.
    let cli = engine_on(&a.db).await;
    cli.decide(&request.id, Decision::Approve, "cli", None)
        .await
        .unwrap();
    let evs = within(h.run_to_end()).await;
    assert!(types(&evs).contains(&"tool_execution_start"));
    assert_eq!(tool.call_count(), 1);
    let row = a.engine.request(&request.id).await.unwrap();
    assert!(row.finished_at.is_some(), "the outcome is recorded");
    assert!(row.outcome.unwrap().contains("bash ran with"));
    assert!(matches!(
        a.recorder.resolved.lock().unwrap()[0],
        Resolution::Approved { .. }
    ));
}

#[tokio::test]
async fn reads_run_unasked_and_a_decline_note_reaches_the_model() {
    let a = Approvals::new(Recorder::default()).await;
    let tool = FakeTool::new("bash", false);
    let mut h = a.harness(
        vec![
            bash("c1", "ls"),
            bash("c2", "rm -rf target"),
            text("understood"),
        ],
        vec![tool.clone()],
    );
    h.prompt("clean").await;
    let request = a.announced(1).await;
    assert_eq!(request.call_id, "c2");
    assert_eq!(request.class, Class::Money);
    assert!(request.always.is_none(), "money never offers always-allow");
    a.engine
        .decide(
            &request.id,
            Decision::Decline {
                note: Some("keep target, use cargo clean".into()),
                stop_turn: false,
            },
            "test",
            None,
        )
        .await
        .unwrap();
    let evs = within(h.run_to_end()).await;
    assert_eq!(tool.call_count(), 1, "only `ls` ran");
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    let results = tool_results(messages);
    assert!(!results[0].2);
    assert_eq!(
        results[1],
        (
            "c2".to_owned(),
            "The user declined this; nothing happened. Their note: keep target, use cargo clean"
                .to_owned(),
            true
        )
    );
    assert!(last_request_text(&h).contains("use cargo clean"));
}

#[tokio::test]
async fn a_steering_message_declines_the_waiting_call_and_becomes_its_note() {
    let a = Approvals::new(Recorder::default()).await;
    let tool = FakeTool::new("bash", false);
    let mut h = a.harness(
        vec![bash("c1", "cargo publish"), text("ok, not publishing")],
        vec![tool.clone()],
    );
    h.prompt("publish").await;
    a.announced(1).await;
    h.session
        .submit(Op::Steer(UserInput::text("wait, bump the version first")))
        .await
        .unwrap();
    let evs = within(h.run_to_end()).await;
    assert_eq!(tool.call_count(), 0);
    assert!(!types(&evs).contains(&"queue_update"), "not queued");
    let text = last_request_text(&h);
    assert!(text.contains("instead of answering"), "{text}");
    assert!(text.contains("bump the version first"));
    // Only one user message: the steer became the note, not a message.
    let reqs = h.provider.requests();
    let users = reqs
        .last()
        .unwrap()
        .messages
        .iter()
        .filter(|m| matches!(m, Message::User(_)))
        .count();
    assert_eq!(users, 1);
}

#[tokio::test]
async fn decline_and_stop_ends_the_run_after_the_call() {
    let a = Approvals::new(Recorder::default()).await;
    let tool = FakeTool::new("bash", false);
    let mut h = a.harness(
        vec![calls(&[
            ("c1", "bash", json!({"command": "cargo publish"})),
            ("c2", "bash", json!({"command": "ls"})),
        ])],
        vec![tool.clone()],
    );
    h.prompt("publish").await;
    let request = a.announced(1).await;
    a.engine
        .decide(
            &request.id,
            Decision::Decline {
                note: None,
                stop_turn: true,
            },
            "test",
            None,
        )
        .await
        .unwrap();
    let evs = within(h.run_to_end()).await;
    assert_eq!(tool.call_count(), 0, "the rest of the message did not run");
    assert_eq!(h.provider.requests().len(), 1, "no further model call");
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    let results = tool_results(messages);
    assert!(results[0].1.contains("Don't try to get the same outcome"));
    assert_eq!(results[1].1, crate::tool_exec::ABORTED_TEXT);
}

#[tokio::test]
async fn abort_cancels_the_waiting_request() {
    let a = Approvals::new(Recorder::default()).await;
    let tool = FakeTool::new("bash", false);
    let mut h = a.harness(vec![bash("c1", "cargo publish")], vec![tool.clone()]);
    h.prompt("publish").await;
    let request = a.announced(1).await;
    h.session.submit(Op::Abort).await.unwrap();
    within(h.run_to_end()).await;
    assert_eq!(tool.call_count(), 0);
    assert_eq!(
        a.engine.request(&request.id).await.unwrap().status,
        Status::Cancelled
    );
    assert!(a.engine.pending(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_shutdown_leaves_the_request_pending_for_the_next_process() {
    let a = Approvals::new(Recorder::default()).await;
    let tool = FakeTool::new("bash", false);
    let h = a.harness(vec![bash("c1", "cargo publish")], vec![tool.clone()]);
    h.prompt("publish").await;
    let request = a.announced(1).await;
    within(h.session.shutdown()).await;
    let pending = engine_on(&a.db).await.pending(None).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, request.id);
}

#[tokio::test]
async fn unattended_calls_become_drafts_and_their_outcome_is_told_next_run() {
    let a = Approvals::new(Recorder {
        unattended: true,
        ..Recorder::default()
    })
    .await;
    let tool = FakeTool::new("bash", false);
    let mut h = a.harness(
        vec![
            bash("c1", "cargo publish"),
            text("moving on"),
            text("noted"),
        ],
        vec![tool.clone()],
    );
    h.prompt("publish").await;
    let evs = within(h.run_to_end()).await;
    assert_eq!(tool.call_count(), 0);
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    assert!(
        tool_results(messages)[0]
            .1
            .starts_with("Held for approval as draft")
    );
    let draft = a.announced(1).await;
    assert_eq!(draft.delivery, keel_approvals::Delivery::Draft);

    // A person declines the draft; the agent hears it on its next run.
    a.engine
        .decide(
            &draft.id,
            Decision::Decline {
                note: Some("not on a Friday".into()),
                stop_turn: false,
            },
            "test",
            None,
        )
        .await
        .unwrap();
    h.prompt("anything new?").await;
    within(h.run_to_end()).await;
    let text = last_request_text(&h);
    assert!(text.contains(DRAFT_NOTE_PREFIX), "{text}");
    assert!(text.contains("not on a Friday"));
    // Told once.
    assert!(a.gate.take_notes("s1").await.is_empty());
}

/// A session that never called a tool has no drafts: its text turns do
/// not wait for the approvals store (here one that never opens). Its first
/// tool call does, and is denied once the store is found missing.
#[tokio::test]
async fn text_turns_do_not_wait_for_the_approvals_store() {
    let (opened_tx, opened_rx) = tokio::sync::oneshot::channel::<()>();
    let gate = Arc::new(EngineGate::lazy(async move {
        let _ = opened_rx.await;
        Err("the store was never there".to_owned())
    }));
    let tool = FakeTool::new("bash", false);
    let mut h = harness_with(
        vec![text("hello"), text("again"), bash("c1", "ls"), text("done")],
        vec![tool.clone()],
        gate,
        |_| {},
    );
    h.prompt("hi").await;
    within(h.run_to_end()).await;
    h.prompt("hi again").await;
    within(h.run_to_end()).await;
    assert_eq!(h.provider.requests().len(), 2);

    h.prompt("list").await;
    // The model was asked; its call waits for the store, which is not
    // there: denied once the opening gives up.
    within(async {
        while h.provider.requests().len() < 3 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(h.provider.requests().len(), 3);
    opened_tx.send(()).unwrap();
    let evs = within(h.run_to_end()).await;
    assert_eq!(tool.call_count(), 0);
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    assert!(
        tool_results(messages)[0].1.contains("never there"),
        "{messages:?}"
    );
}

#[tokio::test]
async fn host_tools_use_their_declared_class_and_refusals_come_first() {
    let a = Approvals::new(Recorder {
        host: Some(("lookup", Some(Class::Read))),
        refuse: Some("write"),
        ..Recorder::default()
    })
    .await;
    let lookup = FakeTool::new("lookup", false);
    let deploy = FakeTool::new("deploy", false);
    let write = FakeTool::new("write", false);
    let mut h = a.harness(
        vec![
            calls(&[
                ("c1", "lookup", json!({})),
                ("c2", "write", json!({"path": "a.txt", "content": "x"})),
            ]),
            calls(&[("c3", "deploy", json!({}))]),
            text("done"),
        ],
        vec![lookup.clone(), deploy.clone(), write.clone()],
    );
    h.prompt("go").await;
    // `deploy` is unknown to the table: send, held.
    let request = a.announced(1).await;
    assert_eq!(request.call_id, "c3");
    assert_eq!(request.class, Class::Send);
    a.engine
        .decide(&request.id, Decision::Approve, "test", None)
        .await
        .unwrap();
    let evs = within(h.run_to_end()).await;
    assert_eq!(
        (lookup.call_count(), write.call_count(), deploy.call_count()),
        (1, 0, 1)
    );
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(
        tool_results(messages)[1].1,
        "write is refused by the declaration"
    );
}

#[tokio::test]
async fn without_an_engine_every_call_is_denied_with_the_reason() {
    let gate = Arc::new(EngineGate::unavailable("the disk is full", "/ws"));
    let tool = FakeTool::new("read", false);
    let mut h = harness_with(
        vec![calls(&[("c1", "read", json!({"path": "a"}))]), text("ok")],
        vec![tool.clone()],
        gate.clone(),
        |_| {},
    );
    assert_eq!(gate.engine().unwrap_err(), "the disk is full");
    h.prompt("read").await;
    let evs = within(h.run_to_end()).await;
    assert_eq!(tool.call_count(), 0);
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(
        tool_results(messages)[0].1,
        "The approval check failed, so this call did not run: the disk is full"
    );
}

/// What the gate told the process's durable waits, in order.
#[derive(Default)]
struct DurableLog(Mutex<Vec<(&'static str, String)>>);

impl crate::DurableWaits for DurableLog {
    fn waiting(&self, request_id: &str, session_id: &str) {
        assert!(!session_id.is_empty());
        self.0
            .lock()
            .unwrap()
            .push(("waiting", request_id.to_owned()));
    }
    fn ended(&self, request_id: &str) {
        self.0
            .lock()
            .unwrap()
            .push(("ended", request_id.to_owned()));
    }
}

/// The process's durable waits for these tests (registered once; other
/// tests' requests show up in it too, so each test looks at its own ids).
fn durable_log() -> Arc<DurableLog> {
    static LOG: std::sync::OnceLock<Arc<DurableLog>> = std::sync::OnceLock::new();
    LOG.get_or_init(|| {
        let log = Arc::new(DurableLog::default());
        assert!(crate::set_durable_waits(log.clone()));
        log
    })
    .clone()
}

fn durable_of(log: &DurableLog, id: &str) -> Vec<&'static str> {
    log.0
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, r)| r == id)
        .map(|(what, _)| *what)
        .collect()
}

#[tokio::test]
async fn each_wait_is_handed_to_the_durable_waits_and_told_when_it_ends() {
    let log = durable_log();
    let a = Approvals::new(Recorder::default()).await;
    let tool = FakeTool::new("bash", false);
    let mut h = a.harness(
        vec![
            bash("c1", "cargo publish"),
            bash("c2", "cargo publish --dry-run=false"),
        ],
        vec![tool.clone()],
    );
    h.prompt("publish").await;
    // Decided elsewhere: the wait started durably, then ended here.
    let first = a.announced(1).await;
    within(async {
        while durable_of(&log, &first.id).is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert_eq!(durable_of(&log, &first.id), ["waiting"]);
    engine_on(&a.db)
        .await
        .decide(&first.id, Decision::Approve, "cli", None)
        .await
        .unwrap();
    // Aborted while waiting: the durable wait hears that it ended too.
    let second = a.announced(2).await;
    h.session.submit(Op::Abort).await.unwrap();
    within(h.run_to_end()).await;
    assert_eq!(durable_of(&log, &first.id), ["waiting", "ended"]);
    assert_eq!(durable_of(&log, &second.id), ["waiting", "ended"]);
    assert_eq!(
        a.engine.request(&second.id).await.unwrap().status,
        Status::Cancelled
    );
}

#[tokio::test]
async fn an_opening_gate_opens_in_the_background_once_warmed_with_the_process_mode() {
    let home = tempfile::tempdir().unwrap();
    let gate = Arc::new(EngineGate::opening(
        home.path(),
        "/ws",
        Some(keel_approvals::Mode::Everything),
    ));
    assert!(gate.engine().is_err(), "opened before anyone asked");
    assert!(!home.path().join("keel.db").exists());
    gate.warm();
    // Nobody awaits it: the store opens on its own.
    within(async {
        while gate.engine().is_err() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    assert!(home.path().join("keel.db").exists());
    let engine = gate.engine().unwrap();
    assert_eq!(
        engine.effective_mode("/ws").await.unwrap(),
        keel_approvals::Mode::Everything
    );
    // Warming again, or an open gate, does nothing.
    gate.warm();
    assert!(gate.opened().await.is_ok());
}
