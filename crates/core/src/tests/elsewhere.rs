//! Runs elsewhere: the session hands each run's start to its
//! `RunsElsewhere`, relays the run's events (one run even when a try died
//! there), ends the run here, says why when it could not run there, and
//! passes an abort on.

use std::sync::Mutex;

use keel_protocol::AssistantMessage;
use tokio::sync::Notify;

use super::*;
use crate::{RemoteEvents, RemoteRun, RunEnd, RunsElsewhere, Watched};

fn answer(text: &str) -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![ContentBlock::text(text)],
        api: "test".into(),
        provider: "scripted".into(),
        model: "m".into(),
        usage: Default::default(),
        stop_reason: StopReason::Stop,
        error_message: None,
        error_kind: None,
        timestamp: 1,
        response_id: None,
    })
}

/// Plays `script` for each run, or fails with `fail`; waits for an
/// interrupt first when `until_interrupted`.
#[derive(Default)]
struct Scripted {
    script: Vec<AgentEvent>,
    /// Scripts for the first runs, one each, before `script`.
    runs: Mutex<std::collections::VecDeque<Vec<AgentEvent>>>,
    fail: Option<String>,
    until_interrupted: bool,
    /// Released by the test before the run ends.
    gate: Option<Arc<Notify>>,
    prompts: Mutex<Vec<Option<String>>>,
    /// What the session hears of runs another front-end started.
    watched: Mutex<Option<tokio::sync::mpsc::Receiver<crate::Watched>>>,
    /// A tool of this side the run there calls, and what it got.
    calls: Option<(String, serde_json::Value)>,
    called: Mutex<Option<keel_tools::ToolOutput>>,
    /// The names of the tools the run was offered.
    offered: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl RunsElsewhere for Scripted {
    async fn run(
        &self,
        run: RemoteRun,
        events: &dyn RemoteEvents,
    ) -> std::result::Result<(), String> {
        self.prompts.lock().unwrap().push(run.prompt.clone());
        *self.offered.lock().unwrap() = run.tools.iter().map(|t| t.spec.name.clone()).collect();
        if let Some((tool, args)) = &self.calls {
            let out = events.run_tool("call_9", tool, args.clone()).await;
            *self.called.lock().unwrap() = Some(out);
        }
        if let Some(fail) = &self.fail {
            return Err(fail.clone());
        }
        let script = self.runs.lock().unwrap().pop_front();
        for (at, event) in script.as_ref().unwrap_or(&self.script).iter().enumerate() {
            events.event(event.clone(), at as u64 + 1).await;
        }
        if self.until_interrupted {
            run.interrupt.cancelled().await;
            events
                .event(AgentEvent::AgentEnd { messages: vec![] }, 99)
                .await;
        }
        if let Some(gate) = &self.gate {
            gate.notified().await;
        }
        Ok(())
    }

    fn watch(
        &self,
        _session_id: &str,
        _seen: Option<u64>,
    ) -> Option<tokio::sync::mpsc::Receiver<crate::Watched>> {
        self.watched.lock().unwrap().take()
    }
}

fn elsewhere(scripted: Scripted) -> (Harness, Arc<Scripted>) {
    let scripted = Arc::new(scripted);
    let h = harness_elsewhere(
        vec![],
        vec![],
        Arc::new(AllowAll),
        |_| {},
        Some(scripted.clone()),
        None,
    );
    (h, scripted)
}

fn a_run(text: &str) -> Vec<AgentEvent> {
    vec![
        AgentEvent::AgentStart,
        AgentEvent::TurnStart,
        AgentEvent::MessageEnd {
            message: answer(text),
        },
        AgentEvent::AgentEnd {
            messages: vec![answer(text)],
        },
        AgentEvent::AgentSettled,
    ]
}

#[tokio::test]
async fn a_prompt_runs_elsewhere_and_its_run_ends_here() {
    let (mut h, scripted) = elsewhere(Scripted {
        script: a_run("from the worker"),
        ..Scripted::default()
    });
    h.prompt("hi").await;
    let events = h.run_to_end().await;
    let names: Vec<&str> = events.iter().map(AgentEvent::type_name).collect();
    assert_eq!(
        names,
        ["agent_start", "turn_start", "message_end", "agent_end"]
    );
    assert_eq!(*scripted.prompts.lock().unwrap(), [Some("hi".to_owned())]);
    // The model here was never asked.
    assert!(h.provider.requests().is_empty());
    assert!(!h.session.snapshot().is_streaming);
}

/// The session cannot be read again at once after the run (its database
/// is restarting): it is read again until it can, before the run ends
/// here, so the next run does not begin after a stale leaf.
#[tokio::test(start_paused = true)]
async fn a_session_that_cannot_be_read_after_a_run_is_read_again() {
    let (mut h, _) = elsewhere(Scripted {
        script: a_run("from the worker"),
        ..Scripted::default()
    });
    h.log.fail_reloads(3);
    h.prompt("hi").await;
    let events = h.run_to_end().await;
    assert_eq!(events.last().map(AgentEvent::type_name), Some("agent_end"));
    assert_eq!(
        h.log.reloads(),
        4,
        "three failed reads, then one that worked"
    );
}

/// The events up to `agent_settled`, each with its place in the log.
async fn places(h: &mut Harness) -> Vec<(&'static str, Option<u64>)> {
    let mut out = Vec::new();
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), h.session.next_session_event())
            .await
            .expect("timed out waiting for an event")
            .expect("session ended");
        out.push((next.event.type_name(), next.log_seq));
        if next.event == AgentEvent::AgentSettled {
            return out;
        }
    }
}

#[tokio::test]
async fn each_event_of_a_run_elsewhere_keeps_its_place_in_the_log() {
    let (mut h, _) = elsewhere(Scripted {
        script: a_run("from the worker"),
        ..Scripted::default()
    });
    h.prompt("hi").await;
    // The log's own agent_settled (5) is not passed on: the one said here
    // stands where the run's end stands.
    assert_eq!(
        places(&mut h).await,
        [
            ("agent_start", Some(1)),
            ("turn_start", Some(2)),
            ("message_end", Some(3)),
            ("agent_end", Some(4)),
            ("agent_settled", Some(4)),
        ]
    );
}

#[tokio::test]
async fn a_try_that_died_elsewhere_and_the_next_are_one_run_here() {
    let mut script = vec![AgentEvent::AgentStart, AgentEvent::TurnStart];
    script.push(AgentEvent::AgentEnd { messages: vec![] });
    script.extend(a_run("went on"));
    let (mut h, _) = elsewhere(Scripted {
        script,
        ..Scripted::default()
    });
    h.prompt("hi").await;
    let names: Vec<&str> = h
        .run_to_end()
        .await
        .iter()
        .map(AgentEvent::type_name)
        .collect();
    assert_eq!(
        names,
        [
            "agent_start",
            "turn_start",
            "turn_start",
            "message_end",
            "agent_end"
        ]
    );
}

/// The session as the run there left it: `messages`, one after another.
fn stored(messages: &[Message]) -> keel_session_store::SessionTree {
    let entries: Vec<keel_session_store::Entry> = messages
        .iter()
        .enumerate()
        .map(|(at, message)| keel_session_store::Entry {
            id: format!("{:08x}", at + 1),
            parent_id: (at > 0).then(|| format!("{at:08x}")),
            timestamp: "2026-01-01T00:00:00.000Z".into(),
            body: keel_session_store::EntryBody::Message {
                message: message.clone(),
            },
        })
        .collect();
    let leaf = entries.last().map(|e| e.id.clone());
    keel_session_store::SessionTree::new(entries, Default::default(), leaf)
}

fn said(text: &str) -> Message {
    Message::User(keel_protocol::UserMessage {
        content: vec![ContentBlock::text(text)],
        timestamp: 0,
    })
}

/// A try died there (its `agent_end` lists nothing) and the next went on
/// from the stored prompt (its `agent_end` lists its answer only): the
/// run's end here lists the whole run, prompt first, as the session holds
/// it, as a run of one try does; what the session held before the run is
/// not listed again.
#[tokio::test]
async fn the_end_of_a_run_of_several_tries_lists_the_whole_run() {
    let mut two_tries = vec![AgentEvent::AgentStart, AgentEvent::TurnStart];
    two_tries.push(AgentEvent::AgentEnd { messages: vec![] });
    two_tries.extend(a_run("second"));
    let (mut h, _) = elsewhere(Scripted {
        runs: Mutex::new([a_run("first")].into()),
        script: two_tries,
        ..Scripted::default()
    });
    let first = [said("one"), answer("first")];
    h.log.reload_as(stored(&first));
    h.prompt("one").await;
    let events = h.run_to_end().await;
    assert!(
        matches!(
            events.last(),
            Some(AgentEvent::AgentEnd { messages }) if *messages == [answer("first")]
        ),
        "a run of one try ends as it ended there: {events:#?}"
    );
    let mut both = first.to_vec();
    both.extend([said("two"), answer("second")]);
    h.log.reload_as(stored(&both));
    h.prompt("two").await;
    let events = h.run_to_end().await;
    let Some(AgentEvent::AgentEnd { messages }) = events.last() else {
        panic!("{events:#?}")
    };
    assert_eq!(*messages, [said("two"), answer("second")]);
}

/// A try died there after it stored its answer (the next try's closing
/// `agent_end` lists nothing, and that try found nothing left to run):
/// the run's end here lists the whole run as the session holds it.
#[tokio::test]
async fn a_run_whose_answer_a_died_try_stored_ends_with_it() {
    let died = vec![
        AgentEvent::AgentStart,
        AgentEvent::TurnStart,
        AgentEvent::AgentEnd { messages: vec![] },
    ];
    let (mut h, _) = elsewhere(Scripted {
        script: died,
        ..Scripted::default()
    });
    h.log.reload_as(stored(&[said("one"), answer("stored")]));
    h.prompt("one").await;
    let events = h.run_to_end().await;
    let Some(AgentEvent::AgentEnd { messages }) = events.last() else {
        panic!("{events:#?}")
    };
    assert_eq!(*messages, [said("one"), answer("stored")]);
}

#[tokio::test]
async fn a_run_that_cannot_run_elsewhere_ends_with_the_reason() {
    let (mut h, _) = elsewhere(Scripted {
        fail: Some("cannot reach the cluster".into()),
        ..Scripted::default()
    });
    h.prompt("hi").await;
    let events = h.run_to_end().await;
    let Some(AgentEvent::AgentEnd { messages }) = events.last() else {
        panic!("{events:#?}")
    };
    let Some(Message::Assistant(failed)) = messages.last() else {
        panic!("{messages:#?}")
    };
    assert_eq!(failed.stop_reason, StopReason::Error);
    assert_eq!(
        failed.error_message.as_deref(),
        Some("cannot reach the cluster")
    );
    assert!(matches!(events[0], AgentEvent::AgentStart));
}

#[tokio::test]
async fn an_abort_here_reaches_the_run_elsewhere() {
    let (mut h, _) = elsewhere(Scripted {
        script: vec![AgentEvent::AgentStart],
        until_interrupted: true,
        ..Scripted::default()
    });
    h.prompt("hi").await;
    let first = tokio::time::timeout(Duration::from_secs(10), h.session.next_event())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, AgentEvent::AgentStart);
    h.session.submit(Op::Abort).await.unwrap();
    let rest = h.run_to_end().await;
    assert!(matches!(rest.last(), Some(AgentEvent::AgentEnd { .. })));
}

#[tokio::test]
async fn a_message_queued_meanwhile_is_the_next_run_elsewhere() {
    let gate = Arc::new(Notify::new());
    let (mut h, scripted) = elsewhere(Scripted {
        script: a_run("ok"),
        gate: Some(gate.clone()),
        ..Scripted::default()
    });
    h.prompt("first").await;
    let first = tokio::time::timeout(Duration::from_secs(10), h.session.next_event())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first, AgentEvent::AgentStart);
    h.session
        .handle()
        .enqueue_or_start(UserInput::text("second"), crate::QueueKind::FollowUp)
        .await
        .unwrap();
    gate.notify_one();
    gate.notify_one();
    let mut ends = 0;
    while ends < 2 {
        let ev = tokio::time::timeout(Duration::from_secs(10), h.session.next_event())
            .await
            .unwrap()
            .unwrap();
        ends += usize::from(matches!(ev, AgentEvent::AgentEnd { .. }));
    }
    assert_eq!(
        *scripted.prompts.lock().unwrap(),
        [Some("first".to_owned()), Some("second".to_owned())]
    );
}

#[tokio::test]
async fn a_prompt_with_images_is_stored_here_and_answered_there() {
    let (mut h, scripted) = elsewhere(Scripted {
        script: a_run("a cat"),
        ..Scripted::default()
    });
    let mut input = UserInput::text("what is this?");
    input.images.push(keel_protocol::ImageContent {
        kind: "image".into(),
        data: "aGk=".into(),
        mime_type: "image/png".into(),
    });
    h.session.submit(Op::Prompt(input)).await.unwrap();
    let events = h.run_to_end().await;
    // The run there was started without a prompt: it answers the stored one.
    assert_eq!(*scripted.prompts.lock().unwrap(), [None]);
    // The message, images and all, was stored (and flushed) before.
    let stored = format!("{:?}", h.log.entries());
    assert!(
        stored.contains("aGk=") && stored.contains("what is this?"),
        "{stored}"
    );
    // The host sees it where a prompt shows: after the run's turn_start.
    let names: Vec<&str> = events.iter().map(AgentEvent::type_name).collect();
    assert_eq!(
        names,
        [
            "agent_start",
            "turn_start",
            "message_start",
            "message_end",
            "message_end",
            "agent_end"
        ]
    );
    assert!(format!("{:?}", events[3]).contains("aGk="));
    // The run's end lists the user's message first, then the answer.
    let AgentEvent::AgentEnd { messages } = &events[5] else {
        panic!("{events:?}")
    };
    assert_eq!(messages.len(), 2);
    assert!(matches!(messages[0], Message::User { .. }), "{messages:?}");
}

/// `event` as read from the log at `log_seq`.
fn logged(event: &AgentEvent, log_seq: u64) -> crate::SessionEvent {
    crate::SessionEvent {
        event: event.clone(),
        log_seq: Some(log_seq),
    }
}

/// A session whose `watch` hears what the test sends.
fn watching() -> (Harness, tokio::sync::mpsc::Sender<Watched>) {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let (h, _) = elsewhere(Scripted {
        script: a_run("mine"),
        watched: Mutex::new(Some(rx)),
        ..Scripted::default()
    });
    (h, tx)
}

#[tokio::test]
async fn a_run_another_front_end_started_is_passed_on_and_ends_here() {
    let (mut h, watched) = watching();
    let run = a_run("from another front-end");
    // The log's own agent_settled is not passed on: it is said here.
    for (at, event) in run[..3].iter().enumerate() {
        watched
            .send(Watched::Event(Box::new(logged(event, at as u64 + 7))))
            .await
            .unwrap();
    }
    watched
        .send(Watched::Event(Box::new(logged(
            &AgentEvent::AgentSettled,
            10,
        ))))
        .await
        .unwrap();
    watched
        .send(Watched::Ended {
            end: Some(Box::new(RunEnd {
                end: logged(&run[3], 11),
                several_tries: false,
            })),
        })
        .await
        .unwrap();
    assert_eq!(
        places(&mut h).await,
        [
            ("agent_start", Some(7)),
            ("turn_start", Some(8)),
            ("message_end", Some(9)),
            ("agent_end", Some(11)),
            ("agent_settled", Some(11)),
        ]
    );
    // Nothing ran here.
    assert!(h.provider.requests().is_empty());
}

/// A run another front-end started took two tries: its end here lists
/// the whole run as the session, read again, holds it after what this
/// front-end had read before the run.
#[tokio::test]
async fn a_watched_run_of_several_tries_ends_with_the_whole_run() {
    let (mut h, watched) = watching();
    let first = [said("one"), answer("first")];
    h.log.reload_as(stored(&first));
    let end = |messages, at, several_tries| Watched::Ended {
        end: Some(Box::new(RunEnd {
            end: logged(&AgentEvent::AgentEnd { messages }, at),
            several_tries,
        })),
    };
    // A first run, of one try, and the session read after it.
    watched
        .send(Watched::Event(Box::new(logged(&AgentEvent::AgentStart, 1))))
        .await
        .unwrap();
    watched
        .send(end(vec![answer("first")], 2, false))
        .await
        .unwrap();
    assert_eq!(
        places(&mut h).await,
        [
            ("agent_start", Some(1)),
            ("agent_end", Some(2)),
            ("agent_settled", Some(2))
        ]
    );
    let mut both = first.to_vec();
    both.extend([said("two"), answer("second")]);
    h.log.reload_as(stored(&both));
    watched
        .send(Watched::Event(Box::new(logged(&AgentEvent::AgentStart, 3))))
        .await
        .unwrap();
    watched
        .send(end(vec![answer("second")], 6, true))
        .await
        .unwrap();
    let _ = h.session.next_event().await;
    let ended = tokio::time::timeout(Duration::from_secs(10), h.session.next_event())
        .await
        .unwrap()
        .unwrap();
    let AgentEvent::AgentEnd { messages } = ended else {
        panic!("{ended:?}")
    };
    assert_eq!(messages, [said("two"), answer("second")]);
}

#[tokio::test]
async fn what_is_heard_of_others_while_a_run_of_its_own_runs_is_dropped() {
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    let gate = Arc::new(Notify::new());
    let (mut h, _) = elsewhere(Scripted {
        script: a_run("mine")[..3].to_vec(),
        gate: Some(gate.clone()),
        watched: Mutex::new(Some(rx)),
        ..Scripted::default()
    });
    h.prompt("hi").await;
    // The own run has started (its first event is out) before the watch
    // says anything.
    let first = tokio::time::timeout(Duration::from_secs(10), h.session.next_event())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(first.type_name(), "agent_start");
    tx.send(Watched::Event(Box::new(logged(&AgentEvent::TurnStart, 3))))
        .await
        .unwrap();
    tx.send(Watched::Ended {
        end: Some(Box::new(RunEnd {
            end: logged(&AgentEvent::AgentEnd { messages: vec![] }, 4),
            several_tries: false,
        })),
    })
    .await
    .unwrap();
    // Let the watch take both before the own run ends.
    while tx.capacity() < 16 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    gate.notify_one();
    let events = h.run_to_end().await;
    let names: Vec<&str> = events.iter().map(AgentEvent::type_name).collect();
    // One turn_start (the own run's) and the failed end of a run whose
    // agent_end the script did not send.
    assert_eq!(
        names.iter().filter(|n| **n == "turn_start").count(),
        1,
        "{names:?}"
    );
}

/// A tool only this side has, which says what it is.
struct EchoHere;

#[async_trait::async_trait]
impl keel_tools::Tool for EchoHere {
    fn name(&self) -> &str {
        "echo_here"
    }
    fn description(&self) -> &str {
        "echoes, here"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object"})
    }
    fn hints(&self) -> Option<keel_tools::ToolHints> {
        Some(keel_tools::ToolHints {
            class: Some("read".into()),
            ..Default::default()
        })
    }
    async fn execute(
        &self,
        ctx: &keel_tools::ToolContext,
        args: serde_json::Value,
    ) -> keel_tools::Result<keel_tools::ToolOutput> {
        (ctx.updates)(keel_protocol::ToolResult::text("working"));
        Ok(keel_tools::ToolOutput::success(
            keel_protocol::ToolResult::text(format!("{}: {}", ctx.call_id, args["message"])),
        ))
    }
}

#[tokio::test]
async fn a_tool_only_this_side_has_is_offered_there_and_run_here() {
    let scripted = Arc::new(Scripted {
        script: a_run("done"),
        calls: Some(("echo_here".into(), serde_json::json!({"message": "hi"}))),
        ..Scripted::default()
    });
    let mut h = harness_elsewhere(
        vec![],
        vec![Arc::new(EchoHere), Arc::new(keel_tools::LsTool)],
        Arc::new(AllowAll),
        |_| {},
        Some(scripted.clone()),
        None,
    );
    h.prompt("hi").await;
    let events = h.run_to_end().await;
    // keel's own tools are there already; only this side's is offered.
    assert_eq!(*scripted.offered.lock().unwrap(), ["echo_here"]);
    let out = scripted.called.lock().unwrap().clone().unwrap();
    assert!(!out.is_error);
    assert_eq!(out.text(), "call_9: \"hi\"");
    // Its partial result reached this side's host.
    assert!(events.iter().any(|e| matches!(
        e,
        AgentEvent::ToolExecutionUpdate { tool_call_id, .. } if tool_call_id == "call_9"
    )));
}

#[tokio::test]
async fn a_file_call_on_a_scheme_this_host_does_not_serve_is_not_run_here() {
    let scripted = Arc::new(Scripted {
        script: a_run("done"),
        calls: Some(("read".into(), serde_json::json!({"path": "db://users/42"}))),
        ..Scripted::default()
    });
    let mut h = harness_elsewhere(
        vec![],
        vec![Arc::new(keel_tools::ReadTool)],
        Arc::new(AllowAll),
        |_| {},
        Some(scripted.clone()),
        None,
    );
    h.prompt("hi").await;
    h.run_to_end().await;
    let out = scripted.called.lock().unwrap().clone().unwrap();
    assert!(out.is_error);
    assert!(out.text().contains("not available here"), "{}", out.text());
}
