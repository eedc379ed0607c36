//! Tests of automatic retries: backoff through the clock (no real waiting),
//! `retry-after`, giving up, abort and `abort_retry` during the wait, the
//! partial message of a cut stream discarded, retries switched off.

use std::pin::Pin;

use super::*;

/// A clock whose sleeps are recorded and end at once, or never (`hold`).
#[derive(Default)]
struct TestClock {
    sleeps: Mutex<Vec<Duration>>,
    hold: bool,
}

impl Clock for TestClock {
    fn now_ms(&self) -> i64 {
        1_700_000_000_000
    }
    fn today(&self) -> String {
        "2025-01-01".into()
    }
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        self.sleeps.lock().unwrap().push(duration);
        if self.hold {
            Box::pin(futures::future::pending())
        } else {
            Box::pin(async {})
        }
    }
}

fn retrying(scripts: Vec<Script>, clock: Arc<TestClock>, policy: RetryPolicy) -> Harness {
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
            ..ModelInfo::default()
        },
    );
    config.retry = policy;
    let deps = SessionDeps {
        provider: provider.clone(),
        tools: vec![],
        fs: Arc::new(LocalFileSystem),
        process: Arc::new(LocalProcessRunner::default()),
        gate: Arc::new(AllowAll),
        clock,
        log: log.clone(),
        sandbox: None,
        elsewhere: None,
        fence: None,
        asker: None,
    };
    Harness {
        session: Session::spawn(config, deps),
        provider,
        log,
    }
}

fn fail(kind: ErrorKind, message: &str) -> Script {
    Script::Fail(model_error(kind, message))
}

fn retry_starts(evs: &[AgentEvent]) -> Vec<(u32, u32, u64, String)> {
    evs.iter()
        .filter_map(|e| match e {
            AgentEvent::AutoRetryStart {
                attempt,
                max_attempts,
                delay_ms,
                error_message,
                ..
            } => Some((*attempt, *max_attempts, *delay_ms, error_message.clone())),
            _ => None,
        })
        .collect()
}

fn retry_ends(evs: &[AgentEvent]) -> Vec<(bool, u32, Option<String>)> {
    evs.iter()
        .filter_map(|e| match e {
            AgentEvent::AutoRetryEnd {
                success,
                attempt,
                final_error,
            } => Some((*success, *attempt, final_error.clone())),
            _ => None,
        })
        .collect()
}

fn last_assistant(evs: &[AgentEvent]) -> AssistantMessage {
    let Some(AgentEvent::AgentEnd { messages }) = evs.last() else {
        panic!("the run did not end: {:?}", types(evs))
    };
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant(a) => Some(a.clone()),
            _ => None,
        })
        .expect("an assistant message")
}

fn logged_assistants(log: &MemoryLog) -> Vec<AssistantMessage> {
    log.entries()
        .into_iter()
        .filter_map(|e| match e {
            EntryBody::Message {
                message: Message::Assistant(a),
            } => Some(a),
            _ => None,
        })
        .collect()
}

fn count(evs: &[AgentEvent], ty: &str) -> usize {
    types(evs).iter().filter(|t| **t == ty).count()
}

use keel_protocol::AssistantMessage;

#[tokio::test]
async fn retry_succeeds_after_two_failures() {
    let clock = Arc::new(TestClock::default());
    let mut h = retrying(
        vec![
            fail(ErrorKind::RateLimitExceeded, "HTTP 429 slow down"),
            fail(ErrorKind::ServerOverloaded, "HTTP 529 overloaded"),
            text("finally"),
        ],
        clock.clone(),
        RetryPolicy::default(),
    );
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    let starts = retry_starts(&evs);
    assert_eq!(starts.len(), 2, "{:?}", types(&evs));
    assert_eq!((starts[0].0, starts[0].1), (1, 3));
    assert_eq!(starts[0].3, "HTTP 429 slow down");
    assert_eq!(
        (starts[1].0, starts[1].3.as_str()),
        (2, "HTTP 529 overloaded")
    );
    assert_eq!(retry_ends(&evs), vec![(true, 2, None)]);
    // The waits went through the clock, with the announced lengths.
    let sleeps = clock.sleeps.lock().unwrap().clone();
    assert_eq!(
        sleeps
            .iter()
            .map(|d| d.as_millis() as u64)
            .collect::<Vec<_>>(),
        starts.iter().map(|s| s.2).collect::<Vec<_>>()
    );
    assert!(sleeps[0] >= Duration::from_secs(1) && sleeps[0] <= Duration::from_secs(2));
    assert!(sleeps[1] >= Duration::from_secs(2) && sleeps[1] <= Duration::from_secs(4));

    let a = last_assistant(&evs);
    assert_eq!(a.stop_reason, StopReason::Stop);
    assert_eq!(a.text(), "finally");
    assert_eq!(count(&evs, "agent_end"), 1);
    assert_eq!(count(&evs, "turn_end"), 1);
    // Three assistant message_starts (one per attempt), one message_end.
    let assistant_ends = evs
        .iter()
        .filter(|e| {
            matches!(
                e,
                AgentEvent::MessageEnd {
                    message: Message::Assistant(_)
                }
            )
        })
        .count();
    assert_eq!(assistant_ends, 1);
    assert_eq!(logged_assistants(&h.log).len(), 1);
    assert_eq!(h.provider.requests().len(), 3);
    // `auto_retry_end` comes before the message's end.
    let end_at = types(&evs).iter().position(|t| *t == "auto_retry_end");
    let msg_end_at = types(&evs).iter().rposition(|t| *t == "message_end");
    assert!(end_at < msg_end_at);
}

#[tokio::test]
async fn gives_up_after_max_attempts_with_the_last_error() {
    let clock = Arc::new(TestClock::default());
    let mut h = retrying(
        vec![
            fail(ErrorKind::RateLimitExceeded, "fail 1"),
            fail(ErrorKind::RateLimitExceeded, "fail 2"),
            fail(ErrorKind::Connection, "fail 3"),
            fail(ErrorKind::ServerOverloaded, "fail 4"),
            text("never asked for"),
        ],
        clock.clone(),
        RetryPolicy::default(),
    );
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    assert_eq!(retry_starts(&evs).len(), 3);
    assert_eq!(
        retry_ends(&evs),
        vec![(false, 3, Some("fail 4".to_owned()))]
    );
    let a = last_assistant(&evs);
    assert_eq!(a.stop_reason, StopReason::Error);
    assert_eq!(a.error_message.as_deref(), Some("fail 4"));
    assert_eq!(a.error_kind.as_deref(), Some("serverOverloaded"));
    assert_eq!(h.provider.requests().len(), 4);
    assert_eq!(count(&evs, "agent_end"), 1);
    assert_eq!(logged_assistants(&h.log).len(), 1);
}

#[tokio::test]
async fn retry_after_is_honoured() {
    let clock = Arc::new(TestClock::default());
    let mut e = model_error(ErrorKind::RateLimitExceeded, "HTTP 429");
    e.retry_after = Some(Duration::from_millis(7_250));
    let mut h = retrying(
        vec![Script::Fail(e), text("ok")],
        clock.clone(),
        RetryPolicy::default(),
    );
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    assert_eq!(retry_starts(&evs)[0].2, 7_250);
    assert_eq!(
        *clock.sleeps.lock().unwrap(),
        vec![Duration::from_millis(7_250)]
    );
    assert_eq!(last_assistant(&evs).text(), "ok");

    // A server asking for longer than the cap is not waited for.
    let mut e = model_error(ErrorKind::RateLimitExceeded, "HTTP 429 come back tomorrow");
    e.retry_after = Some(Duration::from_secs(86_400));
    let clock = Arc::new(TestClock::default());
    let mut h = retrying(vec![Script::Fail(e)], clock.clone(), RetryPolicy::default());
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    assert!(retry_starts(&evs).is_empty());
    assert!(retry_ends(&evs).is_empty());
    assert_eq!(
        last_assistant(&evs).error_kind.as_deref(),
        Some("rateLimitExceeded")
    );
    assert!(clock.sleeps.lock().unwrap().is_empty());
}

#[tokio::test]
async fn abort_during_the_backoff_ends_the_run_cleanly() {
    let clock = Arc::new(TestClock {
        hold: true,
        ..TestClock::default()
    });
    let mut h = retrying(
        vec![fail(ErrorKind::ServerOverloaded, "HTTP 503"), text("never")],
        clock,
        RetryPolicy::default(),
    );
    h.prompt("hi").await;
    let mut evs = h
        .wait_for(|e| matches!(e, AgentEvent::AutoRetryStart { .. }))
        .await;
    assert!(h.session.snapshot().is_retrying);
    h.session.submit(Op::Abort).await.unwrap();
    evs.extend(h.run_to_end().await);
    assert_eq!(
        retry_ends(&evs),
        vec![(false, 1, Some("Request was aborted".to_owned()))]
    );
    let a = last_assistant(&evs);
    assert_eq!(a.stop_reason, StopReason::Aborted);
    assert!(a.content.is_empty());
    assert_eq!(count(&evs, "agent_end"), 1);
    assert_eq!(h.provider.requests().len(), 1);
    let snap = h.session.snapshot();
    assert!(!snap.is_streaming && !snap.is_retrying);
    assert_eq!(logged_assistants(&h.log).len(), 1);
}

#[tokio::test]
async fn abort_retry_ends_the_run_with_the_last_error() {
    let clock = Arc::new(TestClock {
        hold: true,
        ..TestClock::default()
    });
    let mut h = retrying(
        vec![
            fail(ErrorKind::RateLimitExceeded, "HTTP 429 busy"),
            text("never"),
        ],
        clock,
        RetryPolicy::default(),
    );
    let handle = h.session.handle();
    assert!(!handle.abort_retry(), "nothing to abort while idle");
    h.prompt("hi").await;
    let mut evs = h
        .wait_for(|e| matches!(e, AgentEvent::AutoRetryStart { .. }))
        .await;
    assert!(handle.abort_retry());
    evs.extend(h.run_to_end().await);
    assert_eq!(
        retry_ends(&evs),
        vec![(false, 1, Some("HTTP 429 busy".to_owned()))]
    );
    let a = last_assistant(&evs);
    assert_eq!(a.stop_reason, StopReason::Error);
    assert_eq!(a.error_kind.as_deref(), Some("rateLimitExceeded"));
    assert_eq!(a.error_message.as_deref(), Some("HTTP 429 busy"));
    // The discarded attempt's message_start is followed by a fresh one for
    // the message that ends the run.
    let tail: Vec<_> = types(&evs)
        .into_iter()
        .skip_while(|t| *t != "auto_retry_start")
        .collect();
    assert_eq!(
        tail,
        vec![
            "auto_retry_start",
            "message_start",
            "auto_retry_end",
            "message_end",
            "turn_end",
            "agent_end"
        ]
    );
    assert_eq!(h.provider.requests().len(), 1);
}

#[tokio::test]
async fn a_cut_stream_is_retried_and_its_partial_message_discarded() {
    let clock = Arc::new(TestClock::default());
    let cut = Script::Events(vec![
        ModelEvent::Start { response_id: None },
        ModelEvent::TextDelta("partial ans".into()),
    ]);
    let mut h = retrying(
        vec![cut, text("the full answer")],
        clock,
        RetryPolicy::default(),
    );
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    let seq: Vec<_> = types(&evs)
        .into_iter()
        .skip_while(|t| *t != "turn_start")
        .skip(3) // turn_start, user message_start/_end
        .collect();
    assert_eq!(
        seq,
        vec![
            "message_start",
            "message_update", // text_start
            "message_update", // text_delta "partial ans"
            "auto_retry_start",
            "message_start",
            "message_update",
            "message_update",
            "message_update", // text_end of the retry's answer only
            "auto_retry_end",
            "message_end",
            "turn_end",
            "agent_end"
        ]
    );
    let ends: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            AgentEvent::MessageUpdate {
                assistant_message_event:
                    keel_protocol::AssistantMessageEvent::TextEnd { content, .. },
            } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec!["the full answer".to_owned()]);
    let a = last_assistant(&evs);
    assert_eq!(a.text(), "the full answer");
    let logged = logged_assistants(&h.log);
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].text(), "the full answer");
    // The retry sent the same history: no trace of the partial answer.
    let requests = h.provider.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].messages, requests[1].messages);
    assert_eq!(h.session.messages().len(), 2);
}

#[tokio::test]
async fn disabled_retry_ends_the_turn_at_once() {
    let clock = Arc::new(TestClock::default());
    let mut h = retrying(
        vec![
            fail(ErrorKind::RateLimitExceeded, "HTTP 429"),
            text("never"),
        ],
        clock.clone(),
        RetryPolicy::disabled(),
    );
    assert!(!h.session.snapshot().auto_retry_enabled);
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    assert!(retry_starts(&evs).is_empty() && retry_ends(&evs).is_empty());
    assert_eq!(last_assistant(&evs).stop_reason, StopReason::Error);
    assert_eq!(h.provider.requests().len(), 1);

    // Switched on at run time, the next failure is retried; switched off
    // again, it is not.
    let handle = h.session.handle();
    handle.set_auto_retry(true);
    assert!(h.session.snapshot().auto_retry_enabled);
    h.provider.scripts.lock().unwrap().extend([
        fail(ErrorKind::Timeout, "idle timeout"),
        text("after the retry"),
    ]);
    // `text("never")` is still first in the script: drop it.
    h.provider.scripts.lock().unwrap().pop_front();
    h.prompt("again").await;
    let evs = h.run_to_end().await;
    assert_eq!(retry_starts(&evs).len(), 1);
    assert_eq!(last_assistant(&evs).text(), "after the retry");

    handle.set_auto_retry(false);
    h.provider
        .scripts
        .lock()
        .unwrap()
        .push_back(fail(ErrorKind::Timeout, "idle timeout"));
    h.prompt("third").await;
    let evs = h.run_to_end().await;
    assert!(retry_starts(&evs).is_empty());
    assert_eq!(last_assistant(&evs).error_kind.as_deref(), Some("timeout"));
    assert_eq!(clock.sleeps.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn final_errors_are_not_retried() {
    let clock = Arc::new(TestClock::default());
    let mut h = retrying(
        vec![fail(ErrorKind::Unauthorized, "HTTP 401"), text("never")],
        clock.clone(),
        RetryPolicy::default(),
    );
    h.prompt("hi").await;
    let evs = h.run_to_end().await;
    assert!(retry_starts(&evs).is_empty());
    assert_eq!(
        last_assistant(&evs).error_kind.as_deref(),
        Some("unauthorized")
    );
    assert!(clock.sleeps.lock().unwrap().is_empty());
}
