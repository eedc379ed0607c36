//! Front-ends that go away while a worker runs their session's turn. A
//! host that reconnects: every event frame of such a turn carries
//! `log_seq`, its place in the session's shared event log, and a host
//! that opens the session on another front-end with the last one it saw
//! gets the rest of the turn, each event once, and the calls still held
//! offered again. A front-end killed while it runs a host tool for the
//! worker: the worker's call ends once the front-end has been silent a
//! while, as a call that may or may not have happened, and the turn goes
//! on; a slow host tool on a live front-end is waited for, and so is one
//! whose answer comes while the database is away. A worker's try that
//! fails while the model answers (the database went away) leaves the
//! answer to the next try. Built only with the `temporal` feature.

#[cfg(feature = "temporal")]
mod reconnect {
    use std::time::Duration;

    use keel_test_support::{KeelChild, MockResponse, tool_call};
    use serde_json::{Value, json};

    use crate::suite::cluster::durable::{HANG, deploy_turn, kill9};
    use crate::suite::cluster_front_ends::front_ends::{Machines, finished, machines};
    use crate::suite::cluster_turns::on_workers::{rpc_front_end, turn_worker};
    use crate::suite::rpc::host::{answer_echo, echo_tool};
    use crate::suite::rpc::{Rpc, event_type};

    /// The type and `log_seq` of each event frame `front` wrote.
    fn placed(front: &Rpc) -> Vec<(String, u64)> {
        front
            .frames
            .iter()
            .filter_map(|f| {
                let t = event_type(f)?.to_owned();
                let seq = f["log_seq"]
                    .as_u64()
                    .unwrap_or_else(|| panic!("an event frame without log_seq: {f}"));
                Some((t, seq))
            })
            .collect()
    }

    /// Places rise one frame to the next (one `agent_settled` stands
    /// where its `agent_end` stands).
    fn rising(events: &[(String, u64)]) {
        for pair in events.windows(2) {
            let settled = pair[1].0 == "agent_settled" && pair[1].1 == pair[0].1;
            assert!(pair[0].1 < pair[1].1 || settled, "{events:?}");
        }
    }

    /// `keel --mode rpc` on the session, its host having seen the log up
    /// to `seen`.
    async fn reconnected(m: &Machines, home: usize, session: &str, seen: u64) -> Rpc {
        let seen = seen.to_string();
        let args = ["--session", session, "--after-log-seq", &seen];
        rpc_front_end(&m.c, &m.mock, m.homes[home].path(), m.ws.path(), &args).await
    }

    async fn until_settled(front: &mut Rpc) {
        front
            .wait_for("agent_settled", |f| event_type(f) == Some("agent_settled"))
            .await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_host_that_reconnects_elsewhere_gets_the_rest_of_the_turn_once() {
        let Some(m) = machines(5).await else {
            return;
        };
        deploy_turn(&m.mock, "r1");
        let _worker: KeelChild = turn_worker(&m.c, &m.mock, m.homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&m.c, &m.mock, m.homes[1].path(), m.ws.path(), &[]).await;
        let state = a.ok(json!({"type": "get_state"})).await;
        let session = state["sessionId"].as_str().unwrap().to_owned();
        a.send(json!({"type": "prompt", "message": "deploy"})).await;
        let asked = a.approval_request().await;
        let before = placed(&a);
        rising(&before);
        let seen = before.last().unwrap().1;
        // A's machine dies with the call waiting.
        kill9(a.child).await;

        // The host reconnects to B with the last place it saw.
        let mut b = reconnected(&m, 2, &session, seen).await;
        let again = b.approval_request().await;
        assert_eq!(again["toolCallId"], asked["toolCallId"]);
        let id = again["id"].as_str().unwrap().to_owned();
        b.decide(&id, "approve", json!({})).await;
        until_settled(&mut b).await;
        let after = placed(&b);
        rising(&after);
        assert!(after.iter().all(|(_, at)| *at > seen), "{after:?}");
        // Together: one run, each event once.
        let all: Vec<&str> = before
            .iter()
            .chain(&after)
            .map(|(t, _)| t.as_str())
            .collect();
        let count = |t: &str| all.iter().filter(|x| **x == t).count();
        assert_eq!(count("agent_start"), 1, "{all:?}");
        assert_eq!(count("tool_execution_start"), 1, "{all:?}");
        assert_eq!(count("agent_end"), 1, "{all:?}");
        assert_eq!(count("message_end"), 4, "{all:?}");
        let end = b.frames.iter().find(|f| event_type(f) == Some("agent_end"));
        assert!(end.unwrap().to_string().contains("deployed"), "{end:?}");

        // Once the turn has ended, a host that saw as much gets the same
        // rest, and is asked nothing: the call was decided. This one
        // switches to the session in a running process.
        let mut c = rpc_front_end(&m.c, &m.mock, m.homes[3].path(), m.ws.path(), &[]).await;
        c.ok(json!({"type": "switch_session", "sessionPath": session, "afterLogSeq": seen}))
            .await;
        until_settled(&mut c).await;
        assert_eq!(placed(&c), after);
        let asked: Vec<&Value> = c
            .frames
            .iter()
            .filter(|f| f["type"] == "approval_request")
            .collect();
        assert!(asked.is_empty(), "{asked:?}");

        // A later turn ended meanwhile: the worker keeps earlier turns'
        // events for a while (`--keep-events`), so a host that was away
        // gets the rest of the first turn and the whole second one.
        m.mock.push_all([MockResponse::text("second answer")]);
        b.send(json!({"type": "prompt", "message": "and now?"}))
            .await;
        b.wait_for("the second turn's end", |f| {
            event_type(f) == Some("agent_settled")
                && f["log_seq"].as_u64() > after.last().map(|(_, at)| *at)
        })
        .await;
        let second: Vec<(String, u64)> = placed(&b)
            .into_iter()
            .filter(|(_, at)| *at > after.last().unwrap().1)
            .collect();
        let mut d = reconnected(&m, 4, &session, seen).await;
        d.wait_for("the second turn's end", |f| {
            f["log_seq"].as_u64() == second.last().map(|(_, at)| *at)
                && event_type(f) == Some("agent_settled")
        })
        .await;
        let both: Vec<(String, u64)> = after.iter().chain(&second).cloned().collect();
        assert_eq!(placed(&d), both);
        finished(b).await;
        finished(c).await;
        finished(d).await;
    }

    fn echo_turn(mock: &keel_test_support::MockModelServer, call_id: &str, then: &str) {
        mock.push_all([
            MockResponse::tool_calls(vec![tool_call(
                call_id,
                "echo_host",
                json!({"message": "hello"}),
            )]),
            MockResponse::text(then),
        ]);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_front_end_killed_while_its_host_runs_a_tool_for_the_worker_ends_only_that_call() {
        let Some(m) = machines(3).await else {
            return;
        };
        let _worker = turn_worker(&m.c, &m.mock, m.homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&m.c, &m.mock, m.homes[1].path(), m.ws.path(), &[]).await;
        a.ok(echo_tool()).await;
        let state = a.ok(json!({"type": "get_state"})).await;
        let session = state["sessionId"].as_str().unwrap().to_owned();

        // A slow host on a live front-end is waited for, past the silence
        // after which a front-end counts as gone.
        echo_turn(&m.mock, "h1", "The host said hello.");
        a.send(json!({"type": "prompt", "message": "echo hello"}))
            .await;
        tokio::time::sleep(Duration::from_secs(13)).await;
        answer_echo(&mut a, "h1").await;
        a.event("agent_end").await;
        let heard = m.mock.last_request().unwrap().body["messages"].to_string();
        assert!(heard.contains("host says: hello"), "{heard}");

        // B has the session open; A dies while its host runs the next call.
        let args = ["--session", session.as_str()];
        let mut b = rpc_front_end(&m.c, &m.mock, m.homes[2].path(), m.ws.path(), &args).await;
        b.ok(json!({"type": "get_state"})).await;
        echo_turn(&m.mock, "h2", "The host went away.");
        a.send(json!({"type": "prompt", "message": "echo hello again"}))
            .await;
        a.wait_for("host_tool_call", |f| f["type"] == "host_tool_call")
            .await;
        kill9(a.child).await;
        // The worker's call ends as one that may or may not have happened,
        // and the turn goes on to its end.
        let end = b
            .wait_for("tool_execution_end", |f| {
                event_type(f) == Some("tool_execution_end")
            })
            .await;
        let end = &end["payload"]["event"];
        assert_eq!(end["isError"], true, "{end}");
        assert!(
            end.to_string().contains("may or may not have happened"),
            "{end}"
        );
        until_settled(&mut b).await;
        let messages = b.ok(json!({"type": "get_messages"})).await;
        let text = messages.to_string();
        assert!(text.contains("went away before it answered"), "{text}");
        assert!(text.contains("The host went away."), "{text}");
        assert_eq!(m.mock.request_count(), 4);
        finished(b).await;
    }

    /// The database is away longer than a front-end may be silent, while
    /// the front-end's host runs a tool for the worker, and the host
    /// answers meanwhile: the worker waits for the log instead of taking
    /// the front-end for gone, the front-end keeps the answer until it can
    /// store it, and the model gets the host's answer once.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_database_away_while_the_host_runs_a_tool_loses_nothing() {
        let Some(mut m) = machines(2).await else {
            return;
        };
        let _worker = turn_worker(&m.c, &m.mock, m.homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&m.c, &m.mock, m.homes[1].path(), m.ws.path(), &[]).await;
        a.ok(echo_tool()).await;
        echo_turn(&m.mock, "h1", "The host said hello.");
        a.send(json!({"type": "prompt", "message": "echo hello"}))
            .await;
        let call = a
            .wait_for("host_tool_call", |f| f["type"] == "host_tool_call")
            .await;
        m.c.pg.crash().await;
        tokio::time::sleep(Duration::from_secs(12)).await;
        a.send(json!({"type": "host_tool_result", "id": call["id"],
            "result": {"content": [{"type": "text", "text": "host says: hello"}]}}))
            .await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        m.c.pg.restart().await;
        let end = a.event("tool_execution_end").await;
        assert_eq!(end["isError"], false, "{end}");
        assert_eq!(end["result"]["content"][0]["text"], "host says: hello");
        a.event("agent_end").await;
        let heard = m.mock.last_request().unwrap().body["messages"].to_string();
        assert!(heard.contains("host says: hello"), "{heard}");
        assert_eq!(heard.matches("host says: hello").count(), 1, "{heard}");
        assert_eq!(m.mock.request_count(), 2);
        finished(a).await;
    }

    /// The database goes away while the model answers a worker's turn, so
    /// the try fails when it appends the answer to the log. What the
    /// failed try's stopping would write (an aborted answer) never reaches
    /// the session: the next try, once the database is back, asks the
    /// model again, and the session holds the prompt and that answer.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_try_that_fails_while_the_model_answers_leaves_the_answer_to_the_next() {
        let Some(mut m) = machines(2).await else {
            return;
        };
        let mut worker = turn_worker(&m.c, &m.mock, m.homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&m.c, &m.mock, m.homes[1].path(), m.ws.path(), &[]).await;
        m.mock.push_all([
            MockResponse::text("lost with its try").delay_headers(Duration::from_secs(2)),
            MockResponse::text("the answer"),
        ]);
        a.send(json!({"type": "prompt", "message": "hello"})).await;
        let asked = async {
            while m.mock.request_count() < 1 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(HANG, asked)
            .await
            .expect("the worker never asked the model");
        m.c.pg.crash().await;
        worker
            .wait_for_stderr(HANG, |l| l.contains("the turn's try failed"))
            .await
            .unwrap();
        // The stopped try's writer, had it been left open, would store its
        // aborted answer as soon as the database is back.
        m.c.pg.restart().await;
        until_settled(&mut a).await;
        let messages = a.ok(json!({"type": "get_messages"})).await;
        let said: Vec<(String, String)> = messages["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|message| {
                let text = message["content"][0]["text"].as_str().unwrap_or_default();
                (
                    message["role"].as_str().unwrap().to_owned(),
                    text.to_owned(),
                )
            })
            .collect();
        let said: Vec<(&str, &str)> = said.iter().map(|(r, t)| (r.as_str(), t.as_str())).collect();
        assert_eq!(
            said,
            [("user", "hello"), ("assistant", "the answer")],
            "{messages:#}"
        );
        assert_eq!(m.mock.request_count(), 2);
        finished(a).await;
    }
}
