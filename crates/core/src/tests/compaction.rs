//! Tests of compaction (threshold, overflow retry, manual, repeated, abort,
//! failure), branching and statistics against the scripted provider.

use keel_protocol::{CompactionReason, Usage};
use keel_session_store::SUMMARY_PREFIX;

use super::*;

fn text_with_usage(t: &str, input: u64) -> Script {
    Script::Events(vec![
        ModelEvent::Start { response_id: None },
        ModelEvent::TextDelta(t.into()),
        ModelEvent::Usage(Usage {
            input,
            output: 10,
            total_tokens: input + 10,
            ..Usage::default()
        }),
        ModelEvent::Finish {
            stop_reason: StopReason::Stop,
        },
    ])
}

fn first_text(m: &Message) -> String {
    let blocks = match m {
        Message::User(u) => &u.content,
        Message::Assistant(a) => &a.content,
        Message::ToolResult(r) => &r.content,
    };
    blocks
        .iter()
        .find_map(|b| match b {
            ContentBlock::Text { text } => Some(text.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn compaction_ends(evs: &[AgentEvent]) -> Vec<&AgentEvent> {
    evs.iter()
        .filter(|e| matches!(e, AgentEvent::AutoCompactionEnd { .. }))
        .collect()
}

fn compaction_entries(log: &MemoryLog) -> Vec<EntryBody> {
    log.entries()
        .into_iter()
        .filter(|e| matches!(e, EntryBody::Compaction { .. }))
        .collect()
}

#[tokio::test]
async fn threshold_compacts_before_the_model_call() {
    let mut h = harness(
        vec![
            text_with_usage("first answer", 800),
            text("## Goal\nthe summary"),
            text("second answer"),
        ],
        vec![],
    );
    h.prompt("first question").await;
    h.run_to_end().await;
    h.prompt("second question").await;
    let evs = h.run_to_end().await;
    let kinds = types(&evs);
    let start = kinds
        .iter()
        .position(|k| *k == "auto_compaction_start")
        .unwrap();
    let end = kinds
        .iter()
        .position(|k| *k == "auto_compaction_end")
        .unwrap();
    // Inside the turn, after the new user message, before the answer.
    assert!(kinds[..start].contains(&"turn_start"));
    assert_eq!(kinds[end + 1], "message_start");
    assert!(matches!(
        evs[start],
        AgentEvent::AutoCompactionStart {
            reason: CompactionReason::Threshold
        }
    ));
    let AgentEvent::AutoCompactionEnd {
        result: Some(result),
        aborted: false,
        will_retry: false,
        ..
    } = &evs[end]
    else {
        panic!("{:?}", evs[end])
    };
    assert_eq!(result.summary, "## Goal\nthe summary");
    assert!(result.tokens_before > 750, "{result:?}");
    assert!(result.tokens_after < result.tokens_before);

    let reqs = h.provider.requests();
    assert_eq!(reqs.len(), 3);
    // The summarisation call: no tools, the conversation in the prompt.
    assert_eq!(reqs[1].system_prompt, crate::compaction::SYSTEM_PROMPT);
    assert!(reqs[1].tools.is_empty());
    let prompt = first_text(&reqs[1].messages[0]);
    assert!(prompt.contains("[User]: first question"), "{prompt}");
    assert!(prompt.contains("[Assistant]: first answer"), "{prompt}");
    assert!(!prompt.contains("second question"), "{prompt}");
    // The next call sees the summary, then the kept turn.
    let texts: Vec<String> = reqs[2].messages.iter().map(first_text).collect();
    assert!(texts[0].starts_with(SUMMARY_PREFIX), "{texts:?}");
    assert!(texts[0].contains("the summary"));
    assert_eq!(texts[1..], ["second question"]);
    assert_eq!(compaction_entries(&h.log).len(), 1);
    let EntryBody::Compaction {
        first_kept_entry_id,
        ..
    } = &compaction_entries(&h.log)[0]
    else {
        unreachable!()
    };
    assert_eq!(first_kept_entry_id, &result.first_kept_entry_id);
    let snap = h.session.snapshot();
    assert_eq!(snap.message_count, 3);
    assert!(!snap.is_compacting);
}

#[tokio::test]
async fn overflow_compacts_and_retries_the_call_once() {
    let mut h = harness(
        vec![
            text("first answer"),
            Script::Fail(model_error(
                ErrorKind::ContextWindowExceeded,
                "maximum context length is 1000 tokens",
            )),
            text("the summary"),
            text("retried answer"),
        ],
        vec![],
    );
    h.prompt("first question").await;
    h.run_to_end().await;
    h.prompt("second question").await;
    let evs = h.run_to_end().await;
    assert_eq!(
        types(&evs).iter().filter(|k| **k == "turn_start").count(),
        2
    );
    let ends = compaction_ends(&evs);
    assert_eq!(ends.len(), 1);
    assert!(matches!(
        ends[0],
        AgentEvent::AutoCompactionEnd {
            reason: CompactionReason::Overflow,
            will_retry: true,
            result: Some(_),
            ..
        }
    ));
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    let Message::Assistant(last) = messages.last().unwrap() else {
        panic!()
    };
    assert_eq!(last.text(), "retried answer");
    // The failed message stays in the log, off the branch; the context is
    // summary + the kept question + the answer.
    let texts: Vec<String> = h.session.messages().iter().map(first_text).collect();
    assert_eq!(texts.len(), 3, "{texts:?}");
    assert!(texts[0].starts_with(SUMMARY_PREFIX));
    assert_eq!(texts[1..], ["second question", "retried answer"]);
    let retried = &h.provider.requests()[3];
    assert_eq!(retried.messages.len(), 2);
    assert!(h.log.entries().iter().any(|e| matches!(e,
        EntryBody::Message { message: Message::Assistant(a) } if a.stop_reason == StopReason::Error)));
}

#[tokio::test]
async fn a_second_overflow_in_the_run_ends_it() {
    let overflow = || {
        Script::Fail(model_error(
            ErrorKind::ContextWindowExceeded,
            "prompt is too long",
        ))
    };
    let mut h = harness(
        vec![text("a1"), overflow(), text("summary"), overflow()],
        vec![],
    );
    h.prompt("q1").await;
    h.run_to_end().await;
    h.prompt("q2").await;
    let evs = h.run_to_end().await;
    assert_eq!(compaction_ends(&evs).len(), 1);
    let AgentEvent::AgentEnd { messages } = evs.last().unwrap() else {
        unreachable!()
    };
    let Message::Assistant(last) = messages.last().unwrap() else {
        panic!()
    };
    assert_eq!(last.stop_reason, StopReason::Error);
    assert_eq!(h.provider.requests().len(), 4);
}

#[tokio::test]
async fn manual_compaction_twice_builds_on_the_first_summary() {
    let mut h = harness(
        vec![
            text("a1"),
            text("a2"),
            text("SUMMARY ONE"),
            text("a3"),
            text("SUMMARY TWO"),
        ],
        vec![],
    );
    for q in ["q1", "q2"] {
        h.prompt(q).await;
        h.run_to_end().await;
    }
    let handle = h.session.handle();
    let first = handle
        .compact(Some("focus on the tests".into()))
        .await
        .unwrap();
    assert_eq!(first.summary, "SUMMARY ONE");
    let prompt = first_text(&h.provider.requests()[2].messages[0]);
    assert!(prompt.ends_with("Additional focus: focus on the tests"));
    h.prompt("q3").await;
    h.run_to_end().await;
    let second = handle.compact(None).await.unwrap();
    assert_eq!(second.summary, "SUMMARY TWO");
    let prompt = first_text(&h.provider.requests()[4].messages[0]);
    assert!(
        prompt.starts_with("<previous-summary>\nSUMMARY ONE\n</previous-summary>"),
        "{prompt}"
    );
    assert!(!prompt.contains(SUMMARY_PREFIX));
    let texts: Vec<String> = h.session.messages().iter().map(first_text).collect();
    assert!(texts[0].contains("SUMMARY TWO"), "{texts:?}");
    assert_eq!(texts[1..], ["q3", "a3"]);
    assert_eq!(compaction_entries(&h.log).len(), 2);
    // The events: start/end with reason manual, outside any run.
    let evs = h
        .wait_for(|e| matches!(e, AgentEvent::AutoCompactionEnd { .. }))
        .await;
    assert!(matches!(
        evs[0],
        AgentEvent::AutoCompactionStart {
            reason: CompactionReason::Manual
        }
    ));
    let stats = handle.stats();
    assert_eq!(stats.compactions, 2);
    assert_eq!(stats.user_messages, 3);
    assert_eq!(stats.context_messages, 3);
}

#[tokio::test]
async fn an_aborted_compaction_changes_nothing() {
    let mut h = harness(
        vec![
            text("a1"),
            text("a2"),
            Script::Hang(vec![ModelEvent::TextDelta("partial".into())]),
        ],
        vec![],
    );
    for q in ["q1", "q2"] {
        h.prompt(q).await;
        h.run_to_end().await;
    }
    let before = h.session.messages();
    let handle = h.session.handle();
    let task = tokio::spawn({
        let handle = handle.clone();
        async move { handle.compact(None).await }
    });
    h.wait_for(|e| matches!(e, AgentEvent::AutoCompactionStart { .. }))
        .await;
    assert!(handle.snapshot().is_compacting);
    // A prompt meanwhile is refused.
    assert!(matches!(
        handle.submit(Op::Prompt(UserInput::text("no"))).await,
        Err(Error::Busy)
    ));
    handle.submit(Op::Abort).await.unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(outcome, Err(Error::Compaction(ref m)) if m.contains("aborted")));
    let evs = h
        .wait_for(|e| matches!(e, AgentEvent::AutoCompactionEnd { .. }))
        .await;
    assert!(matches!(
        evs.last().unwrap(),
        AgentEvent::AutoCompactionEnd {
            aborted: true,
            result: None,
            ..
        }
    ));
    assert_eq!(h.session.messages(), before);
    assert!(compaction_entries(&h.log).is_empty());
    assert!(!handle.snapshot().is_compacting);
}

#[tokio::test]
async fn a_failed_compaction_leaves_the_session_as_it_was() {
    let mut h = harness(
        vec![
            text("a1"),
            text("a2"),
            Script::Fail(model_error(ErrorKind::ServerOverloaded, "overloaded")),
            text("a3"),
        ],
        vec![],
    );
    for q in ["q1", "q2"] {
        h.prompt(q).await;
        h.run_to_end().await;
    }
    let before = h.session.messages();
    let handle = h.session.handle();
    let err = handle.compact(None).await.unwrap_err();
    assert!(err.to_string().starts_with("Compaction failed"), "{err}");
    let evs = h
        .wait_for(|e| matches!(e, AgentEvent::AutoCompactionEnd { .. }))
        .await;
    assert!(matches!(
        evs.last().unwrap(),
        AgentEvent::AutoCompactionEnd { error_message: Some(m), aborted: false, .. } if m.contains("overloaded")
    ));
    assert_eq!(h.session.messages(), before);
    assert!(compaction_entries(&h.log).is_empty());
    // The session still works.
    h.prompt("q3").await;
    h.run_to_end().await;
    assert_eq!(h.session.messages().len(), 6);
    // Too little to compact is a clear error, and no model call.
    let mut small = harness(vec![text("only")], vec![]);
    small.prompt("one").await;
    small.run_to_end().await;
    let err = small.session.handle().compact(None).await.unwrap_err();
    assert!(err.to_string().contains("Nothing to compact"), "{err}");
    assert_eq!(small.provider.requests().len(), 1);
}

#[tokio::test]
async fn auto_compaction_can_be_switched_off() {
    let mut h = harness(vec![text_with_usage("a1", 900), text("a2")], vec![]);
    h.session.handle().set_auto_compaction(false);
    assert!(!h.session.snapshot().auto_compaction_enabled);
    h.prompt("q1").await;
    h.run_to_end().await;
    h.prompt("q2").await;
    let evs = h.run_to_end().await;
    assert!(compaction_ends(&evs).is_empty());
    assert_eq!(h.provider.requests().len(), 2);
    let usage = h.session.handle().context_usage();
    assert!(usage.tokens >= 910);
    assert_eq!(usage.context_window, 1000);
}

#[tokio::test]
async fn branching_continues_from_an_earlier_user_message() {
    let mut h = harness(vec![text("a1"), text("a2"), text("a3")], vec![]);
    for q in ["q1", "q2"] {
        h.prompt(q).await;
        h.run_to_end().await;
    }
    let handle = h.session.handle();
    let points = handle.branch_messages();
    assert_eq!(
        points.iter().map(|(_, t)| t.as_str()).collect::<Vec<_>>(),
        ["q1", "q2"]
    );
    let text = handle.branch(&points[1].0).await.unwrap();
    assert_eq!(text, "q2");
    let texts: Vec<String> = h.session.messages().iter().map(first_text).collect();
    assert_eq!(texts, ["q1", "a1"]);
    h.prompt("q2 edited").await;
    h.run_to_end().await;
    let sent: Vec<String> = h.provider.requests()[2]
        .messages
        .iter()
        .map(first_text)
        .collect();
    assert_eq!(sent, ["q1", "a1", "q2 edited"]);
    // Both branches are in the tree; the active one is the new.
    let tree = handle.tree();
    // Six messages and the marker that records the branch.
    assert_eq!(tree.entries().len(), 7);
    assert!(
        h.log
            .entries()
            .iter()
            .any(|e| matches!(e, EntryBody::Branch { .. }))
    );
    assert_eq!(handle.branch_messages().len(), 2);
    assert!(matches!(
        handle.branch("nope").await,
        Err(Error::InvalidEntry(m)) if m == "Invalid entry ID for branching"
    ));
    let assistant_id = tree.branch()[1].id.clone();
    assert!(handle.branch(&assistant_id).await.is_err());
    // Branching to the first message empties the context.
    handle.branch(&points[0].0).await.unwrap();
    assert!(h.session.messages().is_empty());
}

#[tokio::test]
async fn stats_count_roles_calls_tokens_and_cost() {
    let tool = FakeTool::new("echo", false);
    let mut h = harness_with(
        vec![
            calls(&[("c1", "echo", json!({"x": 1}))]),
            text_with_usage("done", 100),
        ],
        vec![tool],
        Arc::new(AllowAll),
        |c| {
            c.model.pricing = ModelPricing {
                input: 1_000_000.0,
                output: 0.0,
                cache_read: 0.0,
                cache_write: 0.0,
            };
        },
    );
    h.prompt("go").await;
    h.run_to_end().await;
    let stats = h.session.handle().stats();
    assert_eq!(stats.user_messages, 1);
    assert_eq!(stats.assistant_messages, 2);
    assert_eq!(stats.tool_calls, 1);
    assert_eq!(stats.tool_results, 1);
    assert_eq!(stats.total_messages, 4);
    assert_eq!(stats.tokens.input, 100);
    assert_eq!(stats.tokens.output, 10);
    assert_eq!(stats.tokens.total, 110);
    assert!((stats.cost - 100.0).abs() < 1e-9, "{}", stats.cost);
    assert_eq!(stats.context_usage.context_window, 1000);
    assert!(stats.context_usage.tokens >= 110);
}

#[tokio::test]
async fn a_restored_tree_gives_the_compacted_context() {
    let (dir, store) = {
        let dir = tempfile::tempdir().unwrap();
        let store = keel_session_store::SessionStore::new(dir.path().join("s"));
        (dir, store)
    };
    let writer = store.create(dir.path(), None).await.unwrap();
    let user = |t: &str| EntryBody::Message {
        message: Message::User(keel_protocol::UserMessage {
            content: vec![ContentBlock::text(t)],
            timestamp: 0,
        }),
    };
    writer.append(user("old")).await.unwrap();
    let kept = writer.append(user("kept")).await.unwrap();
    writer
        .append(EntryBody::Compaction {
            summary: "S".into(),
            first_kept_entry_id: kept.id.clone(),
            tokens_before: 10,
            tokens_after: None,
            details: None,
        })
        .await
        .unwrap();
    writer.close().await.unwrap();
    let loaded = keel_session_store::load(writer.path()).await.unwrap();
    let h = harness_with(vec![], vec![], Arc::new(AllowAll), |c| {
        c.history = Some(loaded.tree());
    });
    let texts: Vec<String> = h.session.messages().iter().map(first_text).collect();
    assert_eq!(texts.len(), 2);
    assert!(texts[0].contains("S"));
    assert_eq!(texts[1], "kept");
    assert_eq!(h.session.handle().branch_messages().len(), 2);
}
