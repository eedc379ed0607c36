//! Tests of the turn loop against a scripted provider and fake tools.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use keel_llm::{ErrorKind, ModelEvent, ModelRequest, ModelStream, Provider};
use keel_protocol::{
    AgentEvent, ContentBlock, InterruptMode, Message, Op, QueueMode, StopReason, ToolResult,
    UserInput,
};
use keel_session_store::EntryBody;
use keel_tools::{LocalFileSystem, LocalProcessRunner, Tool, ToolContext, ToolOutput};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::*;

/// One scripted model response.
enum Script {
    Events(Vec<ModelEvent>),
    /// Sends these events, then never finishes.
    Hang(Vec<ModelEvent>),
    Fail(keel_llm::Error),
}

#[derive(Default)]
struct ScriptedProvider {
    scripts: Mutex<VecDeque<Script>>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl ScriptedProvider {
    fn new(scripts: Vec<Script>) -> Arc<Self> {
        Arc::new(Self {
            scripts: Mutex::new(scripts.into()),
            requests: Mutex::default(),
        })
    }
    fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }
    fn api(&self) -> &str {
        "test"
    }
    async fn stream(
        &self,
        request: ModelRequest,
        _cancel: CancellationToken,
    ) -> keel_llm::Result<ModelStream> {
        self.requests.lock().unwrap().push(request);
        let script = self.scripts.lock().unwrap().pop_front();
        match script {
            Some(Script::Events(evs)) => Ok(futures::stream::iter(evs.into_iter().map(Ok)).boxed()),
            Some(Script::Hang(evs)) => Ok(futures::stream::iter(evs.into_iter().map(Ok))
                .chain(futures::stream::pending())
                .boxed()),
            Some(Script::Fail(e)) => Err(e),
            None => Err(model_error(ErrorKind::Other, "no script left")),
        }
    }
}

fn model_error(kind: ErrorKind, message: &str) -> keel_llm::Error {
    keel_llm::Error {
        kind,
        message: message.to_owned(),
        status: None,
        retry_after: None,
    }
}

fn text(t: &str) -> Script {
    Script::Events(vec![
        ModelEvent::Start {
            response_id: Some("r1".into()),
        },
        ModelEvent::TextDelta(t.into()),
        ModelEvent::Finish {
            stop_reason: StopReason::Stop,
        },
    ])
}

fn calls(list: &[(&str, &str, Value)]) -> Script {
    let mut evs = vec![ModelEvent::Start { response_id: None }];
    for (i, (id, name, args)) in list.iter().enumerate() {
        evs.push(ModelEvent::ToolCallStart {
            index: i as u32,
            id: (*id).into(),
            name: (*name).into(),
        });
        evs.push(ModelEvent::ToolCallDelta {
            index: i as u32,
            delta: args.to_string(),
        });
    }
    evs.push(ModelEvent::Finish {
        stop_reason: StopReason::ToolUse,
    });
    Script::Events(evs)
}

/// A tool that records its calls and waits for `gate` before finishing
/// (when `wait` is set), or until cancelled.
struct FakeTool {
    name: &'static str,
    wait: bool,
    started: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
    calls: Mutex<Vec<Value>>,
}

impl FakeTool {
    fn new(name: &'static str, wait: bool) -> Arc<Self> {
        Arc::new(Self {
            name,
            wait,
            started: Arc::default(),
            release: Arc::default(),
            calls: Mutex::default(),
        })
    }
    fn call_count(&self) -> usize {
        self.calls.lock().unwrap().len()
    }
}

#[async_trait::async_trait]
impl Tool for FakeTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "fake"
    }
    fn parameters(&self) -> Value {
        json!({"type":"object"})
    }
    async fn execute(&self, ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        self.calls.lock().unwrap().push(args.clone());
        (ctx.updates)(ToolResult::text("partial"));
        self.started.notify_one();
        if self.wait {
            tokio::select! {
                _ = self.release.notified() => {}
                _ = ctx.cancel.cancelled() => return Err(keel_tools::Error::Aborted),
            }
        }
        Ok(ToolOutput {
            result: ToolResult::text(format!("{} ran with {args}", self.name)),
            is_error: false,
        })
    }
}

struct DenyBash;

#[async_trait::async_trait]
impl ApprovalGate for DenyBash {
    async fn check(&self, call: &ToolCallInfo) -> GateDecision {
        if call.tool_name == "bash" {
            GateDecision::deny("denied by test gate")
        } else {
            GateDecision::Allow
        }
    }
}

struct Harness {
    session: Session,
    provider: Arc<ScriptedProvider>,
    log: Arc<MemoryLog>,
}

fn harness(scripts: Vec<Script>, tools: Vec<Arc<dyn Tool>>) -> Harness {
    harness_with(scripts, tools, Arc::new(AllowAll), |_| {})
}

fn harness_with(
    scripts: Vec<Script>,
    tools: Vec<Arc<dyn Tool>>,
    gate: Arc<dyn ApprovalGate>,
    tweak: impl FnOnce(&mut SessionConfig),
) -> Harness {
    harness_elsewhere(scripts, tools, gate, tweak, None, None)
}

fn harness_elsewhere(
    scripts: Vec<Script>,
    tools: Vec<Arc<dyn Tool>>,
    gate: Arc<dyn ApprovalGate>,
    tweak: impl FnOnce(&mut SessionConfig),
    elsewhere: Option<Arc<dyn crate::RunsElsewhere>>,
    fence: Option<Arc<dyn crate::RunFence>>,
) -> Harness {
    let provider = ScriptedProvider::new(scripts);
    let log = Arc::new(MemoryLog::default());
    let mut config = SessionConfig::new(
        "s1",
        std::env::temp_dir(),
        ModelInfo {
            id: "m".into(),
            provider: "scripted".into(),
            api: "test".into(),
            context_window: 1000,
            max_output_tokens: None,
            pricing: ModelPricing::default(),
            ..ModelInfo::default()
        },
    );
    // Retries have their own tests (`tests/retry.rs`); here a failure ends
    // the turn at once.
    config.retry = RetryPolicy::disabled();
    tweak(&mut config);
    let deps = SessionDeps {
        provider: provider.clone(),
        tools,
        fs: Arc::new(LocalFileSystem),
        process: Arc::new(LocalProcessRunner::default()),
        gate,
        clock: Arc::new(SystemClock),
        log: log.clone(),
        sandbox: None,
        elsewhere,
        fence,
        asker: None,
    };
    Harness {
        session: Session::spawn(config, deps),
        provider,
        log,
    }
}

impl Harness {
    async fn prompt(&self, text: &str) {
        self.session
            .submit(Op::Prompt(UserInput::text(text)))
            .await
            .unwrap();
    }

    /// Collects events until (and including) `agent_end`.
    async fn run_to_end(&mut self) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(10), self.session.next_event())
                .await
                .expect("timed out waiting for an event")
                .expect("session ended");
            let end = matches!(ev, AgentEvent::AgentEnd { .. });
            out.push(ev);
            if end {
                // Nothing is queued: the session settles right after.
                let settled =
                    tokio::time::timeout(Duration::from_secs(10), self.session.next_event())
                        .await
                        .expect("timed out waiting for agent_settled")
                        .expect("session ended");
                assert_eq!(settled, AgentEvent::AgentSettled);
                return out;
            }
        }
    }

    async fn wait_for(&mut self, pred: impl Fn(&AgentEvent) -> bool) -> Vec<AgentEvent> {
        let mut out = Vec::new();
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(10), self.session.next_event())
                .await
                .expect("timed out waiting for an event")
                .expect("session ended");
            let hit = pred(&ev);
            out.push(ev);
            if hit {
                return out;
            }
        }
    }
}

fn types(evs: &[AgentEvent]) -> Vec<&'static str> {
    evs.iter().map(AgentEvent::type_name).collect()
}

fn tool_results(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((
                r.tool_call_id.clone(),
                match &r.content[0] {
                    ContentBlock::Text { text } => text.clone(),
                    _ => String::new(),
                },
                r.is_error,
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn text_answer_event_order_and_log() {
    let mut h = harness(vec![text("Hello!")], vec![]);
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    assert_eq!(
        types(&evs),
        vec![
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_start",
            "message_update",
            "message_update",
            "message_update",
            "message_end",
            "turn_end",
            "agent_end"
        ]
    );
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    assert_eq!(messages.len(), 2);
    let Message::Assistant(a) = &messages[1] else {
        panic!()
    };
    assert_eq!(a.text(), "Hello!");
    assert_eq!(a.response_id.as_deref(), Some("r1"));
    // Both messages were logged and flushed before agent_end.
    assert_eq!(h.log.entries().len(), 2);
    assert_eq!(h.log.flushed_len(), 2);
    let req = &h.provider.requests()[0];
    assert!(req.system_prompt.contains("Current working directory"));
    assert!(!h.session.snapshot().is_streaming);
}

#[tokio::test]
async fn tool_calls_run_and_results_feed_the_next_call() {
    let tool = FakeTool::new("echo", false);
    let mut h = harness(
        vec![
            calls(&[
                ("c1", "echo", json!({"x":1})),
                ("c2", "echo", json!({"x":2})),
            ]),
            text("done"),
        ],
        vec![tool.clone()],
    );
    h.prompt("go").await;
    let evs = h.run_to_end().await;
    assert_eq!(tool.call_count(), 2);
    assert!(types(&evs).contains(&"tool_execution_update"));
    let msgs = h.session.messages();
    let results = tool_results(&msgs);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].1, "echo ran with {\"x\":1}");
    let reqs = h.provider.requests();
    assert_eq!(reqs.len(), 2);
    // The second model call sees the user message, the calls and both results.
    assert_eq!(reqs[1].messages.len(), 4);
    assert_eq!(h.log.flushed_len(), 5);
}

/// A run a later try replaced: nothing may run any more.
struct Replaced;

#[async_trait::async_trait]
impl crate::RunFence for Replaced {
    async fn check(&self) -> std::result::Result<(), String> {
        Err("another try of this turn took over".to_owned())
    }
}

#[tokio::test]
async fn a_call_the_gate_lets_through_does_not_run_when_the_fence_says_no() {
    let tool = FakeTool::new("echo", false);
    let mut h = harness_elsewhere(
        vec![calls(&[("c1", "echo", json!({}))]), text("never asked")],
        vec![tool.clone()],
        Arc::new(AllowAll),
        |_| {},
        None,
        Some(Arc::new(Replaced)),
    );
    h.prompt("go").await;
    let events = h.run_to_end().await;
    assert_eq!(tool.call_count(), 0);
    let end = events
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolExecutionEnd {
                result, is_error, ..
            } => Some((result.clone(), *is_error)),
            _ => None,
        })
        .expect("the call ends");
    assert!(end.1);
    assert!(format!("{:?}", end.0).contains("took over"), "{end:?}");
    // The run stopped there: the model was not asked again.
    assert_eq!(h.provider.requests().len(), 1);
}

#[tokio::test]
async fn unknown_tool_invalid_args_and_gate_denial_become_error_results() {
    let bash = FakeTool::new("bash", false);
    let mut evs = vec![ModelEvent::ToolCallStart {
        index: 0,
        id: "bad".into(),
        name: "bash".into(),
    }];
    evs.push(ModelEvent::ToolCallDelta {
        index: 0,
        delta: "{\"command\":".into(),
    });
    evs.push(ModelEvent::ToolCallStart {
        index: 1,
        id: "c2".into(),
        name: "nope".into(),
    });
    evs.push(ModelEvent::ToolCallStart {
        index: 2,
        id: "c3".into(),
        name: "bash".into(),
    });
    evs.push(ModelEvent::ToolCallDelta {
        index: 2,
        delta: "{}".into(),
    });
    evs.push(ModelEvent::Finish {
        stop_reason: StopReason::ToolUse,
    });
    let mut h = harness_with(
        vec![Script::Events(evs), text("ok")],
        vec![bash.clone()],
        Arc::new(DenyBash),
        |_| {},
    );
    h.prompt("go").await;
    h.run_to_end().await;
    let results = tool_results(&h.session.messages());
    assert!(results[0].1.starts_with("Invalid arguments for tool bash"));
    assert_eq!(results[1].1, "Tool nope not found");
    assert_eq!(results[2].1, "denied by test gate");
    assert!(results.iter().all(|r| r.2));
    assert_eq!(bash.call_count(), 0);
}

#[tokio::test]
async fn provider_error_ends_the_run_with_a_typed_error() {
    let mut h = harness(
        vec![Script::Fail(model_error(
            ErrorKind::Unauthorized,
            "HTTP 401: bad key",
        ))],
        vec![],
    );
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    let Message::Assistant(a) = &messages[1] else {
        panic!()
    };
    assert_eq!(a.stop_reason, StopReason::Error);
    assert_eq!(a.error_kind.as_deref(), Some("unauthorized"));
    assert!(a.error_message.as_deref().unwrap().contains("bad key"));
    // The session accepts the next prompt.
    assert!(!h.session.snapshot().is_streaming);
}

#[tokio::test]
async fn stream_ending_without_finish_is_an_error() {
    let mut h = harness(
        vec![Script::Events(vec![ModelEvent::TextDelta(
            "partial".into(),
        )])],
        vec![],
    );
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    let Message::Assistant(a) = &messages[1] else {
        panic!()
    };
    assert_eq!(a.stop_reason, StopReason::Error);
    assert_eq!(a.text(), "partial");
}

#[tokio::test]
async fn abort_mid_stream_keeps_the_partial_message_marked_aborted() {
    let mut h = harness(
        vec![Script::Hang(vec![
            ModelEvent::TextDelta("Hal".into()),
            ModelEvent::ToolCallStart {
                index: 0,
                id: "c1".into(),
                name: "bash".into(),
            },
        ])],
        vec![],
    );
    h.prompt("hi").await;
    h.wait_for(|e| {
        matches!(
            e,
            AgentEvent::MessageUpdate {
                assistant_message_event: keel_protocol::AssistantMessageEvent::ToolCallStart { .. }
            }
        )
    })
    .await;
    h.session.submit(Op::Abort).await.unwrap();
    let evs = h.run_to_end().await;
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    let Message::Assistant(a) = &messages[1] else {
        panic!()
    };
    assert_eq!(a.stop_reason, StopReason::Aborted);
    assert_eq!(a.text(), "Hal");
    // The tool call that never ran has an aborted result.
    let results = tool_results(messages);
    assert_eq!(
        results,
        vec![("c1".into(), "Tool execution was aborted".into(), true)]
    );
    assert_eq!(h.log.flushed_len(), 3);
}

#[tokio::test]
async fn abort_during_a_tool_cancels_it_and_answers_every_call() {
    let slow = FakeTool::new("slow", true);
    let mut h = harness(
        vec![calls(&[
            ("c1", "slow", json!({})),
            ("c2", "slow", json!({})),
        ])],
        vec![slow.clone()],
    );
    h.prompt("go").await;
    h.wait_for(|e| matches!(e, AgentEvent::ToolExecutionStart { .. }))
        .await;
    slow.started.notified().await;
    h.session.submit(Op::Abort).await.unwrap();
    let evs = h.run_to_end().await;
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    let results = tool_results(messages);
    assert_eq!(results.len(), 2);
    assert!(
        results
            .iter()
            .all(|r| r.1 == "Tool execution was aborted" && r.2)
    );
    assert_eq!(slow.call_count(), 1);
    assert_eq!(h.provider.requests().len(), 1);
}

#[tokio::test]
async fn steering_in_immediate_mode_skips_remaining_calls() {
    let slow = FakeTool::new("slow", true);
    let mut h = harness(
        vec![
            calls(&[("c1", "slow", json!({})), ("c2", "slow", json!({}))]),
            text("steered"),
        ],
        vec![slow.clone()],
    );
    h.prompt("go").await;
    slow.started.notified().await;
    h.session
        .submit(Op::Steer(UserInput::text("change course")))
        .await
        .unwrap();
    h.wait_for(|e| matches!(e, AgentEvent::QueueUpdate { steering, .. } if !steering.is_empty()))
        .await;
    slow.release.notify_one();
    h.run_to_end().await;
    let msgs = h.session.messages();
    let results = tool_results(&msgs);
    assert_eq!(results[1].1, "Skipped due to queued user message.");
    assert_eq!(slow.call_count(), 1);
    // The steering message reached the second model call.
    let reqs = h.provider.requests();
    let Message::User(u) = reqs[1].messages.last().unwrap() else {
        panic!()
    };
    assert_eq!(u.content[0], ContentBlock::text("change course"));
}

#[tokio::test]
async fn steering_in_wait_mode_lets_the_calls_finish() {
    let slow = FakeTool::new("slow", true);
    let mut h = harness_with(
        vec![
            calls(&[("c1", "slow", json!({})), ("c2", "slow", json!({}))]),
            text("steered"),
        ],
        vec![slow.clone()],
        Arc::new(AllowAll),
        |c| c.interrupt_mode = InterruptMode::Wait,
    );
    h.prompt("go").await;
    slow.started.notified().await;
    h.session
        .submit(Op::Steer(UserInput::text("later")))
        .await
        .unwrap();
    h.wait_for(|e| matches!(e, AgentEvent::QueueUpdate { .. }))
        .await;
    slow.release.notify_one();
    slow.started.notified().await;
    slow.release.notify_one();
    h.run_to_end().await;
    assert_eq!(slow.call_count(), 2);
    let reqs = h.provider.requests();
    let Message::User(u) = reqs[1].messages.last().unwrap() else {
        panic!()
    };
    assert_eq!(u.content[0], ContentBlock::text("later"));
}

#[tokio::test]
async fn follow_ups_run_when_the_agent_would_stop_one_at_a_time_or_all() {
    for (mode, expected_calls) in [(QueueMode::OneAtATime, 3), (QueueMode::All, 2)] {
        let slow = FakeTool::new("slow", true);
        let mut h = harness_with(
            vec![
                calls(&[("c1", "slow", json!({}))]),
                text("a"),
                text("b"),
                text("c"),
            ],
            vec![slow.clone()],
            Arc::new(AllowAll),
            |c| c.follow_up_mode = mode,
        );
        h.prompt("go").await;
        slow.started.notified().await;
        h.session
            .submit(Op::FollowUp(UserInput::text("f1")))
            .await
            .unwrap();
        h.session
            .submit(Op::FollowUp(UserInput::text("f2")))
            .await
            .unwrap();
        h.wait_for(
            |e| matches!(e, AgentEvent::QueueUpdate { follow_up, .. } if follow_up.len() == 2),
        )
        .await;
        slow.release.notify_one();
        let evs = h.run_to_end().await;
        assert_eq!(
            types(&evs).iter().filter(|t| **t == "agent_end").count(),
            1,
            "exactly one agent_end per prompt"
        );
        // Initial call + tool follow-up call + follow-up deliveries.
        assert_eq!(
            h.provider.requests().len(),
            expected_calls + 1,
            "mode {mode:?}"
        );
    }
}

#[tokio::test]
async fn prompt_while_running_is_refused() {
    let slow = FakeTool::new("slow", true);
    let mut h = harness(
        vec![calls(&[("c1", "slow", json!({}))]), text("x")],
        vec![slow.clone()],
    );
    h.prompt("go").await;
    slow.started.notified().await;
    let err = h.session.submit(Op::Prompt(UserInput::text("again"))).await;
    assert!(matches!(err, Err(Error::Busy)));
    slow.release.notify_one();
    h.run_to_end().await;
    // Idle again: a new prompt is accepted.
    assert!(
        h.session
            .submit(Op::Prompt(UserInput::text("again")))
            .await
            .is_ok()
    );
}

#[tokio::test]
async fn history_is_restored_and_logged_messages_match() {
    let mut h = harness_with(vec![text("second")], vec![], Arc::new(AllowAll), |c| {
        c.initial_messages = vec![Message::User(keel_protocol::UserMessage {
            content: vec![ContentBlock::text("earlier")],
            timestamp: 1,
        })];
    });
    h.prompt("now").await;
    h.run_to_end().await;
    assert_eq!(h.provider.requests()[0].messages.len(), 2);
    let logged: Vec<_> = h
        .log
        .entries()
        .into_iter()
        .filter_map(|e| match e {
            EntryBody::Message { message } => Some(message.role()),
            _ => None,
        })
        .collect();
    assert_eq!(logged, vec!["user", "assistant"]);
}

/// A durable driver's turn (`sync_prompts`) has its prompt synced before
/// the model is asked; an in-process turn syncs at `turn_end`.
#[tokio::test]
async fn a_durable_drivers_prompt_is_synced_before_the_model_is_called() {
    for sync in [false, true] {
        let h = harness_with(
            vec![Script::Hang(vec![])],
            vec![],
            Arc::new(AllowAll),
            |c| c.sync_prompts = sync,
        );
        h.prompt("hi").await;
        tokio::time::timeout(Duration::from_secs(10), async {
            while h.provider.requests().is_empty() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the model was never asked");
        assert_eq!(h.log.flushed_len() >= 1, sync, "sync_prompts = {sync}");
    }
}

mod approvals;
mod compaction;
mod elsewhere;
mod handle;
mod resume;
mod retry;
mod todo;

/// A gate that lets every call run with the input its decider gave it.
struct Rewrites(Value);

#[async_trait::async_trait]
impl ApprovalGate for Rewrites {
    async fn check(&self, _call: &ToolCallInfo) -> GateDecision {
        GateDecision::Allow
    }
    async fn rewrite(&self, _call: &ToolCallInfo) -> Option<Value> {
        Some(self.0.clone())
    }
}

#[tokio::test]
async fn a_call_runs_with_the_input_its_decider_gave_it() {
    let tool = FakeTool::new("echo", false);
    let mut h = harness_with(
        vec![
            calls(&[("c1", "echo", json!({"say": "rm -rf"}))]),
            text("ok"),
        ],
        vec![tool.clone()],
        Arc::new(Rewrites(json!({"say": "hello"}))),
        |_| {},
    );
    h.prompt("go").await;
    let events = h.run_to_end().await;
    assert_eq!(*tool.calls.lock().unwrap(), vec![json!({"say": "hello"})]);
    // The host hears of the input the call ran with; the model's message
    // keeps what the model asked for.
    let started = events.iter().find_map(|e| match e {
        AgentEvent::ToolExecutionStart { args, .. } => Some(args.clone()),
        _ => None,
    });
    assert_eq!(started, Some(json!({"say": "hello"})));
    let asked = h.session.messages().iter().find_map(|m| match m {
        Message::Assistant(a) => a.content.iter().find_map(|b| match b {
            ContentBlock::ToolCall { arguments, .. } => Some(arguments.clone()),
            _ => None,
        }),
        _ => None,
    });
    assert_eq!(asked, Some(json!({"say": "rm -rf"})));
}
