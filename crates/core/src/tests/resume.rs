//! Resuming a turn a crash or kill cut off: the unanswered calls of the
//! last assistant message are answered once each (a call that may have
//! been running and could change something is not run again), the model
//! hears the results, and no user message is added.

use keel_protocol::{AssistantMessage, ToolResultMessage, UserMessage};

use super::*;
use crate::tool_exec::INTERRUPTED_TEXT;

fn assistant_calling(calls: &[(&str, &str)]) -> Message {
    Message::Assistant(AssistantMessage {
        content: calls
            .iter()
            .map(|(id, name)| ContentBlock::ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: json!({"n": id}),
            })
            .collect(),
        api: "test".into(),
        provider: "scripted".into(),
        model: "m".into(),
        usage: Default::default(),
        stop_reason: StopReason::ToolUse,
        error_message: None,
        error_kind: None,
        timestamp: 1,
        response_id: None,
    })
}

fn user(text: &str) -> Message {
    Message::User(UserMessage {
        content: vec![ContentBlock::text(text)],
        timestamp: 0,
    })
}

fn result(id: &str, name: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: id.into(),
        tool_name: name.into(),
        content: vec![ContentBlock::text("done before the crash")],
        details: None,
        is_error: false,
        timestamp: 2,
    })
}

fn resumed(history: Vec<Message>, tools: Vec<Arc<dyn Tool>>, scripts: Vec<Script>) -> Harness {
    harness_with(scripts, tools, Arc::new(AllowAll), move |c| {
        c.initial_messages = history;
    })
}

fn tool_results(events: &[AgentEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionEnd {
                tool_call_id,
                result,
                ..
            } => Some((
                tool_call_id.clone(),
                match result.content.first() {
                    Some(ContentBlock::Text { text }) => text.clone(),
                    _ => String::new(),
                },
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_unanswered_calls_are_answered_once_and_the_turn_continues() {
    let edit = FakeTool::new("edit", false);
    let read = FakeTool::new("read", false);
    let history = vec![
        user("tidy up"),
        assistant_calling(&[("c0", "read"), ("c1", "edit"), ("c2", "read")]),
        result("c0", "read"),
    ];
    let mut h = resumed(
        history,
        vec![edit.clone(), read.clone()],
        vec![text("Tidied.")],
    );
    assert!(h.session.handle().has_cut_off_turn());
    assert!(h.session.handle().cut_off_calls_missing_tools().is_empty());
    h.session.handle().set_tools(vec![read.clone()]);
    assert_eq!(h.session.handle().cut_off_calls_missing_tools(), ["edit"]);
    h.session
        .handle()
        .set_tools(vec![edit.clone(), read.clone()]);
    assert!(h.session.handle().resume_interrupted().await.unwrap());
    assert!(!h.session.handle().has_cut_off_turn(), "busy now");
    let events = h.run_to_end().await;
    assert!(matches!(events[0], AgentEvent::AgentStart));
    // c0 was answered before the crash; c1 may have been running and could
    // have changed something; c2 never started and runs now.
    let results = tool_results(&events);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0], ("c1".to_owned(), INTERRUPTED_TEXT.to_owned()));
    assert_eq!(results[1].0, "c2");
    assert_eq!(edit.call_count(), 0, "not run again");
    assert_eq!(read.call_count(), 1);

    // The model heard both results, after the one from before the crash,
    // and no new user message.
    let request = h.provider.requests().pop().unwrap();
    let kinds: Vec<&str> = request
        .messages
        .iter()
        .map(|m| match m {
            Message::User(_) => "user",
            Message::Assistant(_) => "assistant",
            Message::ToolResult(_) => "result",
        })
        .collect();
    assert_eq!(kinds, ["user", "assistant", "result", "result", "result"]);
    assert_eq!(h.session.handle().last_assistant_text().unwrap(), "Tidied.");
    // Only what was missing was written: two results and the answer.
    let logged = h.log.entries();
    let messages: Vec<_> = logged
        .iter()
        .filter_map(|e| match e {
            EntryBody::Message { message } => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(messages.len(), 3, "{messages:#?}");

    // Nothing is left to resume.
    assert!(!h.session.handle().has_cut_off_turn());
    assert!(!h.session.handle().resume_interrupted().await.unwrap());
}

#[tokio::test]
async fn a_read_only_call_that_may_have_been_running_runs_again() {
    let read = FakeTool::new("read", false);
    let gate = Arc::new(ReadOnly);
    let history = vec![user("look"), assistant_calling(&[("c1", "read")])];
    let mut h = harness_with(vec![text("Seen.")], vec![read.clone()], gate, move |c| {
        c.initial_messages = history;
    });
    assert!(h.session.handle().resume_interrupted().await.unwrap());
    let events = h.run_to_end().await;
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.starts_with("read ran with"), "{results:?}");
    assert_eq!(read.call_count(), 1);
}

#[tokio::test]
async fn nothing_is_resumed_when_the_conversation_went_on() {
    for history in [
        vec![],
        vec![user("hi")],
        vec![
            user("tidy"),
            assistant_calling(&[("c1", "edit")]),
            result("c1", "edit"),
        ],
        vec![
            user("tidy"),
            assistant_calling(&[("c1", "edit")]),
            user("never mind"),
        ],
    ] {
        let h = resumed(history.clone(), vec![], vec![]);
        assert!(
            !h.session.handle().resume_interrupted().await.unwrap(),
            "{history:#?}"
        );
        assert!(!h.session.snapshot().is_streaming);
    }
}

/// A gate that knows nothing of any call, and calls every one read-only.
struct ReadOnly;

#[async_trait::async_trait]
impl ApprovalGate for ReadOnly {
    async fn check(&self, _call: &ToolCallInfo) -> GateDecision {
        GateDecision::Allow
    }

    async fn recover(&self, _call: &ToolCallInfo) -> Recovery {
        Recovery::Unrecorded { read_only: true }
    }
}

#[tokio::test]
async fn a_driver_that_knows_the_turn_was_cut_off_gets_the_pending_message_answered() {
    // The prompt was stored, then the worker died in the model call.
    let mut h = resumed(vec![user("say hi")], vec![], vec![text("hi")]);
    assert!(!h.session.handle().resume_interrupted().await.unwrap());
    assert!(h.session.handle().answer_pending().await.unwrap());
    let events = h.run_to_end().await;
    let users = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::MessageStart {
                    message: Message::User(_)
                }
            )
        })
        .count();
    assert_eq!(users, 0, "no user message is added: {events:#?}");
    assert_eq!(
        h.session.handle().last_assistant_text().as_deref(),
        Some("hi")
    );
}

#[tokio::test]
async fn nothing_is_pending_after_an_answer_or_while_calls_are_unanswered() {
    for history in [
        vec![],
        vec![user("hi"), assistant_calling(&[])],
        vec![user("tidy"), assistant_calling(&[("c1", "edit")])],
    ] {
        let h = resumed(history.clone(), vec![], vec![]);
        assert!(
            !h.session.handle().answer_pending().await.unwrap(),
            "{history:#?}"
        );
        assert!(!h.session.snapshot().is_streaming);
    }
}
