//! A host that reconnects to a session whose turns run on workers: every
//! event frame of such a turn carries `log_seq`, its place in the
//! session's shared event log, and a host that opens the session on
//! another front-end with the last one it saw gets the rest of the turn,
//! each event once, and the calls still held offered again. Built only
//! with the `temporal` feature.

#[cfg(feature = "temporal")]
mod reconnect {
    use keel_test_support::KeelChild;
    use serde_json::{Value, json};

    use crate::suite::cluster::durable::{deploy_turn, kill9};
    use crate::suite::cluster_front_ends::front_ends::{Machines, finished, machines};
    use crate::suite::cluster_turns::on_workers::{rpc_front_end, turn_worker};
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
        let Some(m) = machines(4).await else {
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
        finished(b).await;
        finished(c).await;
    }
}
