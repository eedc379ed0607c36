//! Tests of the handle's session controls: settings applied at once and
//! logged, `enqueue_or_start`, model and tool switches, context messages,
//! and the event stream ending while handles live on.

use super::*;
use keel_protocol::{ThinkingLevel, TodoPhase, TodoStatus, TodoTask};

#[tokio::test]
async fn settings_apply_at_once_and_are_logged_and_announced() {
    let mut h = harness(vec![], vec![]);
    let handle = h.session.handle();
    handle
        .submit(Op::SetThinkingLevel {
            level: ThinkingLevel::High,
        })
        .await
        .unwrap();
    handle
        .submit(Op::SetSessionName {
            name: Some("named".into()),
        })
        .await
        .unwrap();
    handle
        .submit(Op::SetSteeringMode {
            mode: QueueMode::All,
        })
        .await
        .unwrap();
    let todos = vec![TodoPhase {
        id: None,
        name: "P".into(),
        tasks: vec![TodoTask {
            id: None,
            content: "t".into(),
            status: TodoStatus::Pending,
        }],
    }];
    handle
        .submit(Op::SetTodos {
            phases: todos.clone(),
        })
        .await
        .unwrap();
    let snap = handle.snapshot();
    assert_eq!(snap.thinking_level, ThinkingLevel::High);
    assert_eq!(snap.session_name.as_deref(), Some("named"));
    assert_eq!(snap.steering_mode, QueueMode::All);
    assert_eq!(snap.todos, todos);
    let kinds: Vec<_> = h.log.entries().iter().map(|e| e.kind()).collect();
    assert_eq!(kinds, ["thinking_level_change", "session_info"]);
    assert_eq!(h.log.flushed_len(), 2);
    let evs = h
        .wait_for(|e| matches!(e, AgentEvent::SessionInfoChanged { .. }))
        .await;
    assert_eq!(
        types(&evs),
        ["thinking_level_changed", "session_info_changed"]
    );
}

#[tokio::test]
async fn enqueue_or_start_starts_when_idle_and_queues_while_running() {
    let tool = FakeTool::new("slow", true);
    let mut h = harness(
        vec![
            text("first"),
            calls(&[("c1", "slow", json!({}))]),
            text("after steer"),
        ],
        vec![tool.clone()],
    );
    let handle = h.session.handle();
    let d = handle
        .enqueue_or_start(UserInput::text("go"), QueueKind::Steer)
        .await
        .unwrap();
    assert_eq!(d, Delivery::Started);
    h.run_to_end().await;
    handle
        .submit(Op::Prompt(UserInput::text("again")))
        .await
        .unwrap();
    tool.started.notified().await;
    let d = handle
        .enqueue_or_start(UserInput::text("steer"), QueueKind::Steer)
        .await
        .unwrap();
    assert_eq!(d, Delivery::Queued);
    tool.release.notify_one();
    h.run_to_end().await;
    let reqs = h.provider.requests();
    assert_eq!(reqs.len(), 3);
    assert!(matches!(reqs[2].messages.last(), Some(Message::User(_))));
}

#[tokio::test]
async fn model_tools_and_context_switch_for_the_next_call() {
    let mut h = harness(vec![text("one")], vec![]);
    let handle = h.session.handle();
    let other = ScriptedProvider::new(vec![text("two")]);
    let mut model = handle.snapshot().model;
    model.id = "m2".into();
    handle.set_model(model, other.clone()).await.unwrap();
    let extra = FakeTool::new("extra", false);
    handle.set_tools(vec![extra.clone()]);
    assert_eq!(handle.tool_specs()[0].name, "extra");
    assert!(handle.system_prompt().contains("- extra:"));
    handle.add_context(UserInput::text("Ran `ls`"));
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    assert!(types(&evs).contains(&"model_changed"));
    assert!(h.provider.requests().is_empty());
    let req = &other.requests()[0];
    assert_eq!(req.model, "m2");
    assert_eq!(req.tools[0].name, "extra");
    assert_eq!(req.messages.len(), 2, "the context message comes first");
    assert_eq!(h.log.entries()[0].kind(), "model_change");
}

#[tokio::test]
async fn events_end_after_shutdown_even_with_handles_alive() {
    let h = harness(vec![], vec![]);
    let (handle, mut events, task) = h.session.split();
    assert!(!handle.is_closed());
    crate::shutdown_split(&handle, task).await;
    assert!(handle.is_closed(), "a handle outliving its session says so");
    let next = tokio::time::timeout(Duration::from_secs(5), events.recv())
        .await
        .expect("the event stream must end");
    assert!(next.is_none());
    assert!(handle.submit(Op::Abort).await.is_err());
}

#[tokio::test]
async fn thinking_levels_are_clamped_to_the_model() {
    let mut h = harness_with(vec![], vec![], Arc::new(AllowAll), |c| {
        c.model.thinking_levels = vec![ThinkingLevel::Off, ThinkingLevel::Low];
        c.thinking_level = ThinkingLevel::High;
    });
    let handle = h.session.handle();
    // Clamped at spawn.
    assert_eq!(handle.snapshot().thinking_level, ThinkingLevel::Low);
    handle
        .submit(Op::SetThinkingLevel {
            level: ThinkingLevel::Xhigh,
        })
        .await
        .unwrap();
    assert_eq!(handle.snapshot().thinking_level, ThinkingLevel::Low);
    let ev = h
        .wait_for(|e| matches!(e, AgentEvent::ThinkingLevelChanged { .. }))
        .await;
    assert_eq!(
        ev.last(),
        Some(&AgentEvent::ThinkingLevelChanged {
            level: ThinkingLevel::Low
        })
    );
    // A model without reasoning turns thinking off, and says so.
    let model = ModelInfo {
        id: "plain".into(),
        thinking_levels: vec![ThinkingLevel::Off],
        ..ModelInfo::default()
    };
    handle.set_model(model, h.provider.clone()).await.unwrap();
    assert_eq!(handle.snapshot().thinking_level, ThinkingLevel::Off);
    let ev = h
        .wait_for(|e| matches!(e, AgentEvent::ThinkingLevelChanged { .. }))
        .await;
    assert!(matches!(
        ev.last(),
        Some(AgentEvent::ThinkingLevelChanged {
            level: ThinkingLevel::Off
        })
    ));
}

#[tokio::test]
async fn a_model_marked_compact_gets_the_compact_form_of_each_tool() {
    let mut h = harness(vec![], vec![]);
    let handle = h.session.handle();
    let small = ScriptedProvider::new(vec![text("one")]);
    let model = ModelInfo {
        id: "small".into(),
        compact_tools: true,
        ..ModelInfo::default()
    };
    handle.set_model(model, small.clone()).await.unwrap();
    handle.set_tools(vec![Arc::new(keel_tools::ReadTool)]);
    h.prompt("hi").await;
    h.run_to_end().await;
    let req = &small.requests()[0];
    let read = &req.tools[0];
    assert_eq!(read.description, "Read the contents of a file.");
    let props = read.parameters["properties"].as_object().unwrap();
    assert_eq!(props.keys().collect::<Vec<_>>(), vec!["path"]);
    // The system prompt lists it by the same short description.
    assert!(
        req.system_prompt
            .contains("- read: Read the contents of a file.\n")
    );
    // The full form otherwise.
    let full = keel_tools::ReadTool.spec();
    assert!(full.parameters["properties"].get("offset").is_some());
}
