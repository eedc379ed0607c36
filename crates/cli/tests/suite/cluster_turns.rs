//! Turns run on `keel worker`s: `keel exec` with a Temporal cluster and a
//! shared database starts the turn's workflow and shows the events a
//! worker appends to the session's event log. A worker killed with
//! SIGKILL while the turn's held call waits hands the turn to another
//! worker, which honours the decision taken meanwhile; the front-end sees
//! every event once, in order, and the session holds every message once.
//! Built only with the `temporal` feature.

#[cfg(feature = "temporal")]
pub(crate) mod on_workers {
    use std::time::Duration;

    use keel_core::keel_approvals::Status;
    use keel_test_support::{KeelChild, KeelCommand, MockModelServer, MockResponse};
    use serde_json::Value;

    use crate::suite::cluster::durable::{Cluster, HANG, deploy_turn, kill9};
    use crate::suite::rpc::Rpc;
    use serde_json::json;

    /// `keel worker` in a home of its own (a machine of its own), running
    /// turns on the mock model, once it polls.
    pub(crate) async fn turn_worker(
        c: &Cluster,
        mock: &MockModelServer,
        home: &std::path::Path,
        extra: &[&str],
    ) -> KeelChild {
        let mut worker = c
            .keel_at(home, home)
            .env("RUST_LOG", "keel_temporal=info,keel=info")
            .env("KEEL_BASE_URL", mock.base_url())
            .env("KEEL_MODEL", "mock-model")
            .arg("worker")
            .args(extra.iter().copied())
            .spawn()
            .await
            .unwrap();
        worker
            .wait_for_stderr(HANG, |l| l.contains("the worker is polling"))
            .await
            .unwrap();
        worker
    }

    /// `keel exec --json PROMPT` in `ws` from a home of its own.
    fn exec(
        c: &Cluster,
        home: &std::path::Path,
        ws: &std::path::Path,
        prompt: &str,
    ) -> KeelCommand {
        c.keel_at(home, ws)
            .args(["exec", "--json", "--model", "mock-model", prompt])
    }

    /// Whether `worker` has said it runs a turn (within `within`).
    pub(crate) async fn runs_the_turn(worker: &mut KeelChild, within: Duration) -> bool {
        worker
            .wait_for_stderr(within, |l| l.contains("running a turn"))
            .await
            .is_ok()
    }

    /// Of two workers, the one that says it runs the turn, then the other.
    pub(crate) async fn which_runs_the_turn(
        mut one: KeelChild,
        mut two: KeelChild,
    ) -> (KeelChild, KeelChild) {
        if runs_the_turn(&mut one, Duration::from_secs(2)).await {
            (one, two)
        } else {
            assert!(runs_the_turn(&mut two, Duration::from_secs(2)).await);
            (two, one)
        }
    }

    /// The approval id in the front-end's "held for approval" line.
    async fn held_call(front: &mut KeelChild) -> String {
        let line = front
            .wait_for_stderr(HANG, |l| l.contains("held for approval"))
            .await
            .unwrap();
        let (_, rest) = line.split_once("keel approvals approve ").unwrap();
        rest.split('`').next().unwrap().to_owned()
    }

    /// The `type`s of the JSON events, without the streamed deltas.
    fn event_types(stdout: &str) -> Vec<String> {
        stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter_map(|v| v["type"].as_str().map(str::to_owned))
            .filter(|t| t != "message_update")
            .collect()
    }

    /// Two workers, each on a machine of its own, and a front-end on a
    /// third whose turn (a deploy) holds its call.
    struct HeldTurn {
        c: Cluster,
        mock: MockModelServer,
        homes: Vec<tempfile::TempDir>,
        ws: tempfile::TempDir,
        front: KeelChild,
        /// The held call's approval id.
        id: String,
        /// The worker running the turn, and the other.
        running: KeelChild,
        other: KeelChild,
    }

    async fn held_turn(extra_worker_args: &[&str]) -> Option<HeldTurn> {
        let c = Cluster::start(Duration::from_secs(3600)).await?;
        let mock = MockModelServer::start().await;
        deploy_turn(&mock, "d1");
        let homes: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let ws = tempfile::tempdir().unwrap();
        let one = turn_worker(&c, &mock, homes[0].path(), extra_worker_args).await;
        let two = turn_worker(&c, &mock, homes[1].path(), extra_worker_args).await;
        let mut front = exec(&c, homes[2].path(), ws.path(), "deploy")
            .spawn()
            .await
            .unwrap();
        let id = held_call(&mut front).await;
        let (running, other) = which_runs_the_turn(one, two).await;
        Some(HeldTurn {
            c,
            mock,
            homes,
            ws,
            front,
            id,
            running,
            other,
        })
    }

    /// The model heard the prompt, its call and the call's result once
    /// each (the session holds each once), and was asked twice.
    pub(crate) fn each_message_once(mock: &MockModelServer) {
        let body = mock.last_request().unwrap().body;
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["role"].as_str())
            .filter(|r| *r != "system")
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool"], "{body:#}");
        assert_eq!(mock.request_count(), 2);
    }

    /// Approves `id` from a third process; the front-end then exits 0,
    /// having shown the call run once and the answer, and the model heard
    /// each message once.
    async fn approved_and_done_once(
        c: &Cluster,
        id: &str,
        front: KeelChild,
        mock: &MockModelServer,
    ) {
        c.approve(id).await;
        let out = front.wait().await.unwrap();
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        let types = event_types(&out.stdout);
        let count = |t: &str| types.iter().filter(|x| *x == t).count();
        assert_eq!(count("tool_execution_end"), 1, "{}", out.stdout);
        assert!(
            out.stdout.contains("\"text\":\"deployed\""),
            "{}",
            out.stdout
        );
        each_message_once(mock);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_turn_moves_to_another_worker_when_its_worker_dies_mid_wait() {
        let Some(HeldTurn {
            c,
            mock,
            front,
            id,
            running,
            mut other,
            homes: _homes,
            ws: _ws,
        }) = held_turn(&[]).await
        else {
            return;
        };
        // The worker running the turn dies with the call waiting; the call
        // is approved from a third process meanwhile.
        kill9(running).await;
        c.approve(&id).await;
        let out = front.wait().await.unwrap();
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        assert!(runs_the_turn(&mut other, Duration::from_secs(5)).await);
        assert_eq!(
            event_types(&out.stdout),
            [
                // The first try, on the worker that died.
                "agent_start",
                "turn_start",
                "message_start",
                "message_end",
                "message_start",
                "message_end",
                "approval_request",
                // Closed by the second try, which goes on from the session.
                "agent_end",
                "approval_resolved",
                "agent_start",
                "turn_start",
                "tool_execution_start",
                "tool_execution_update",
                "tool_execution_end",
                "message_start",
                "message_end",
                "turn_end",
                "turn_start",
                "message_start",
                "message_end",
                "turn_end",
                "agent_end",
            ],
            "{}",
            out.stdout
        );
        each_message_once(&mock);
        // The row is the record. (The call's wait workflow may never have
        // started: the worker can die before its start reaches Temporal,
        // and the next try found the call decided and did not wait.)
        assert_eq!(c.status(&id).await, Status::Approved);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_paused_worker_that_comes_back_does_not_run_the_call_again() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let mock = MockModelServer::start().await;
        mock.push_all([
            MockResponse::tool_calls(vec![keel_test_support::tool_call(
                "p1",
                "bash",
                json!({"command": "keel-test-unknown-program --deploy; echo ran >> runs.txt"}),
            )]),
            MockResponse::text("deployed"),
        ]);
        let homes: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let ws = tempfile::tempdir().unwrap();
        let one = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let two = turn_worker(&c, &mock, homes[1].path(), &[]).await;
        let mut front = exec(&c, homes[2].path(), ws.path(), "deploy")
            .spawn()
            .await
            .unwrap();
        let id = held_call(&mut front).await;
        let (paused, mut other) = which_runs_the_turn(one, two).await;
        // The worker running the turn stops answering (as one cut off
        // from the cluster would): after the heartbeat timeout the server
        // gives the turn to the other, which waits on the same call.
        paused.signal("STOP").await.unwrap();
        assert!(runs_the_turn(&mut other, HANG).await);
        c.approve(&id).await;
        let out = front.wait().await.unwrap();
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        // The paused worker comes back to a decided call in a try that was
        // replaced: it must not run the call a second time.
        paused.signal("CONT").await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let runs = std::fs::read_to_string(ws.path().join("runs.txt")).unwrap();
        assert_eq!(runs, "ran\n", "the call ran more than once");
        kill9(paused).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_draining_worker_leaves_its_waiting_turn_to_another_at_once() {
        let Some(HeldTurn {
            c,
            mock,
            front,
            id,
            running,
            mut other,
            homes: _homes,
            ws: _ws,
        }) = held_turn(&["--drain-timeout", "1s"]).await
        else {
            return;
        };
        // SIGTERM: the turn still waits after the grace, so the worker
        // leaves it and exits; another takes it without waiting for the
        // heartbeat to time out.
        running.signal("TERM").await.unwrap();
        let left = running.wait().await.unwrap();
        assert_eq!(left.code(), Some(0), "{}", left.stderr);
        assert!(
            left.stderr.contains("leaving the turns still running"),
            "{}",
            left.stderr
        );
        assert!(runs_the_turn(&mut other, Duration::from_secs(4)).await);
        approved_and_done_once(&c, &id, front, &mock).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_second_turn_in_the_session_is_refused_and_an_interrupt_reaches_the_worker() {
        let Some(HeldTurn {
            c,
            homes,
            ws,
            front,
            id,
            mock: _mock,
            running: _running,
            other: _other,
        }) = held_turn(&[]).await
        else {
            return;
        };
        let second = exec(&c, homes[2].path(), ws.path(), "again")
            .arg("--continue")
            .run()
            .await
            .unwrap();
        assert_eq!(second.code(), Some(2), "{}", second.stderr);
        assert!(
            second
                .stderr
                .contains("a turn is already running in session"),
            "{}",
            second.stderr
        );
        // Ctrl-C in the front-end aborts the turn on its worker: the held
        // call is cancelled and never runs (its result says so).
        front.signal("INT").await.unwrap();
        let out = front.wait().await.unwrap();
        assert_eq!(out.code(), Some(130), "{}", out.stderr);
        assert_eq!(c.status(&id).await, Status::Cancelled);
        assert!(
            out.stdout.contains("Tool execution was aborted")
                && !out.stdout.contains("command not found"),
            "{}",
            out.stdout
        );
        assert!(
            out.stdout.contains("\"status\":\"cancelled\""),
            "{}",
            out.stdout
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_model_call_cut_off_by_a_dying_worker_is_made_again_on_another() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let mock = MockModelServer::start().await;
        // The first answer stops mid-stream (its worker dies there).
        mock.push_all([
            MockResponse::text("half an answer").stall_after(3),
            MockResponse::text("a whole answer"),
        ]);
        let homes: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
        let ws = tempfile::tempdir().unwrap();
        let one = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let two = turn_worker(&c, &mock, homes[1].path(), &[]).await;
        let mut front = exec(&c, homes[2].path(), ws.path(), "answer me")
            .spawn()
            .await
            .unwrap();
        front
            .wait_for_stdout(HANG, |l| l.contains("text_delta"))
            .await
            .unwrap();
        let (running, mut other) = which_runs_the_turn(one, two).await;
        kill9(running).await;
        let out = front.wait().await.unwrap();
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        assert!(runs_the_turn(&mut other, Duration::from_secs(5)).await);
        assert_eq!(
            event_types(&out.stdout),
            [
                "agent_start",
                "turn_start",
                "message_start",
                "message_end",
                "message_start",
                // The half answer is dropped visibly, the dead try's run ends.
                "auto_retry_start",
                "auto_retry_end",
                "agent_end",
                // The prompt is answered again, not sent again.
                "agent_start",
                "turn_start",
                "message_start",
                "message_end",
                "turn_end",
                "agent_end",
            ],
            "{}",
            out.stdout
        );
        assert!(out.stdout.contains("workerLost"), "{}", out.stdout);
        let body = mock.last_request().unwrap().body;
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["role"].as_str())
            .filter(|r| *r != "system")
            .collect();
        assert_eq!(roles, ["user"], "{body:#}");
        assert_eq!(mock.request_count(), 2);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_temporal_server_killed_mid_turn_and_restarted_loses_nothing() {
        let Some(HeldTurn {
            mut c,
            mock,
            front,
            id,
            homes: _homes,
            ws: _ws,
            running: _running,
            other: _other,
        }) = held_turn(&[]).await
        else {
            return;
        };
        // Down for longer than the turn's heartbeat timeout: the server may
        // give the turn to a new try when it is back, and the try that
        // waited must then stop without running the call.
        c.temporal.kill();
        tokio::time::sleep(Duration::from_secs(7)).await;
        c.temporal.restart().unwrap();
        approved_and_done_once(&c, &id, front, &mock).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn postgresql_restarted_mid_turn_loses_nothing() {
        let Some(HeldTurn {
            mut c,
            mock,
            front,
            id,
            homes: _homes,
            ws: _ws,
            running: _running,
            other: _other,
        }) = held_turn(&[]).await
        else {
            return;
        };
        // The database crashes while the call waits: the worker's wait, the
        // front-end's follower and the event log reconnect by themselves.
        c.pg.crash_and_restart().await;
        approved_and_done_once(&c, &id, front, &mock).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_interrupt_given_while_postgresql_is_down_reaches_the_worker_once_it_is_back() {
        let Some(HeldTurn {
            mut c,
            front,
            id,
            mock: _mock,
            homes: _homes,
            ws: _ws,
            running: _running,
            other: _other,
        }) = held_turn(&[]).await
        else {
            return;
        };
        // Ctrl-C while the database is down: the front-end keeps its word
        // to the worker until it can store it.
        c.pg.crash().await;
        front.signal("INT").await.unwrap();
        tokio::time::sleep(Duration::from_secs(3)).await;
        c.pg.restart().await;
        let out = front.wait().await.unwrap();
        assert_eq!(out.code(), Some(130), "{}", out.stderr);
        assert_eq!(c.status(&id).await, Status::Cancelled);
        assert!(
            out.stdout.contains("Tool execution was aborted"),
            "{}",
            out.stdout
        );
    }

    /// `keel --mode rpc` on the cluster from a home of its own, in `ws`,
    /// its runs going to the workers.
    pub(crate) async fn rpc_front_end(
        c: &Cluster,
        mock: &MockModelServer,
        home: &std::path::Path,
        ws: &std::path::Path,
        extra: &[&str],
    ) -> Rpc {
        let base_url = mock.base_url();
        Rpc::start(
            c.keel_at(home, ws)
                .env("RUST_LOG", "keel=info")
                .args(["--mode", "rpc", "--base-url", &base_url])
                .args(["--model", "mock-model"])
                .args(extra.iter().copied()),
        )
        .await
    }

    /// The turn of each row of `session_id`'s event log, in order.
    async fn logged_turns(c: &Cluster, session_id: &str) -> Vec<String> {
        let (client, connection) = tokio_postgres::connect(&c.url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .query(
                "SELECT turn FROM keel_session_events WHERE session_id = $1 ORDER BY seq",
                &[&session_id],
            )
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect()
    }

    fn roles(messages: &Value) -> Vec<String> {
        messages["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["role"].as_str().map(str::to_owned))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn rpc_front_ends_run_their_turns_on_workers_and_outlive_a_dead_one() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let mock = MockModelServer::start().await;
        deploy_turn(&mock, "r1");
        let homes: Vec<_> = (0..4).map(|_| tempfile::tempdir().unwrap()).collect();
        let ws = tempfile::tempdir().unwrap();
        // Earlier turns' events go as soon as a later turn has ended.
        let forget = ["--keep-events", "0s"];
        let one = turn_worker(&c, &mock, homes[0].path(), &forget).await;
        let two = turn_worker(&c, &mock, homes[1].path(), &forget).await;

        // Front-end A: the host sees the held call as a call held here.
        let mut a = rpc_front_end(&c, &mock, homes[2].path(), ws.path(), &[]).await;
        a.send(json!({"type": "prompt", "message": "deploy"})).await;
        let request = a.approval_request().await;
        let id = request["id"].as_str().unwrap().to_owned();
        assert_eq!(request["toolCallId"], "r1");
        let (running, mut other) = which_runs_the_turn(one, two).await;
        // The worker dies with the call waiting; a third process decides.
        kill9(running).await;
        c.approve(&id).await;
        a.tool_end("r1").await;
        let end = a.event("agent_end").await;
        assert!(end["messages"].to_string().contains("deployed"), "{end}");
        assert!(runs_the_turn(&mut other, Duration::from_secs(5)).await);
        // Every event once, in order: one tool run, one answer.
        let types = a.event_types();
        let count = |t: &str| types.iter().filter(|x| **x == t).count();
        assert_eq!(count("tool_execution_end"), 1, "{types:?}");
        // user, call, result, answer; the host sees one run.
        assert_eq!(count("message_end"), 4, "{types:?}");
        assert_eq!(count("agent_start"), 1, "{types:?}");
        assert_eq!(count("agent_end"), 1, "{types:?}");
        each_message_once(&mock);

        // A reads the session as the worker left it, and goes on in it.
        let state = a.ok(json!({"type": "get_state"})).await;
        let session_id = state["sessionId"].as_str().unwrap().to_owned();
        let messages = a.ok(json!({"type": "get_messages"})).await;
        assert_eq!(
            roles(&messages),
            ["user", "assistant", "toolResult", "assistant"]
        );
        mock.push_all([MockResponse::text("second answer")]);
        a.send(json!({"type": "prompt", "message": "and now?"}))
            .await;
        let end = a.event("agent_end").await;
        assert!(
            end["messages"].to_string().contains("second answer"),
            "{end}"
        );
        // The first turn's events are forgotten once the second has ended
        // (the row the second began after stays).
        let turns = logged_turns(&c, &session_id).await;
        let last = turns.last().unwrap().clone();
        assert_eq!(turns.iter().filter(|t| **t != last).count(), 1, "{turns:?}");
        let (out, _) = a.finish().await;
        assert_eq!(out.code(), Some(0), "{}", out.stderr);

        // Front-end B, on another machine, sees the whole thread.
        let mut b = rpc_front_end(
            &c,
            &mock,
            homes[3].path(),
            ws.path(),
            &["--session", &session_id],
        )
        .await;
        let messages = b.ok(json!({"type": "get_messages"})).await;
        assert_eq!(
            roles(&messages),
            [
                "user",
                "assistant",
                "toolResult",
                "assistant",
                "user",
                "assistant"
            ]
        );
        let (out, _) = b.finish().await;
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_front_end_that_cannot_reach_temporal_says_so_and_stores_nothing() {
        let Some(pg) = keel_test_support::PostgresServer::start().await else {
            return;
        };
        let url = pg.database().await;
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string();
        let (home, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let keel = || {
            KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
                .home(home.path())
                .cwd(ws.path())
                .args(["--database", &url, "--temporal", &dead])
                .timeout(HANG)
        };
        let out = keel()
            .args(["exec", "--model", "mock-model", "hi"])
            .run()
            .await
            .unwrap();
        assert_eq!(out.code(), Some(2), "{}", out.stderr);
        assert!(
            out.stderr.contains("cannot connect to the Temporal server"),
            "{}",
            out.stderr
        );
        let listed = keel()
            .args(["sessions", "list", "--json"])
            .run()
            .await
            .unwrap();
        assert_eq!(listed.code(), Some(0), "{}", listed.stderr);
        assert_eq!(listed.stdout, "", "a session was stored");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_turn_goes_on_on_its_worker_when_its_front_end_is_killed() {
        let Some(HeldTurn {
            c,
            mock,
            front,
            id,
            homes,
            ws,
            running: _running,
            other: _other,
        }) = held_turn(&[]).await
        else {
            return;
        };
        kill9(front).await;
        // From another machine, the user attaches to the turn: it is shown
        // from its start, the held call with how to decide it.
        let attach = || {
            c.keel_at(homes[1].path(), ws.path())
                .args(["exec", "--json", "--attach", "--continue"])
        };
        let mut attached = attach().spawn().await.unwrap();
        assert_eq!(held_call(&mut attached).await, id);
        approved_and_done_once(&c, &id, attached, &mock).await;
        // The worker finishes the turn: the session, listed from another
        // machine, holds the prompt, the call, its result and the answer.
        let finished = async {
            loop {
                let listed = c
                    .keel_at(homes[1].path(), ws.path())
                    .args(["sessions", "list", "--json"])
                    .run()
                    .await
                    .unwrap();
                let rows = listed.json_lines().unwrap_or_default();
                if rows.first().is_some_and(|r| r["messages"] == 4) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        tokio::time::timeout(HANG, finished)
            .await
            .expect("the worker never finished the turn");
        // Once it has ended there is nothing to attach to.
        let after = attach().run().await.unwrap();
        assert_eq!(after.code(), Some(0), "{}", after.stderr);
        assert!(
            after.stderr.contains("no turn runs in session"),
            "{}",
            after.stderr
        );
        // The call's wait was a child of the turn's workflow.
        let parent = async {
            loop {
                if let Ok(Some(parent)) = c.client.approval_wait_parent(&id).await {
                    return parent;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        };
        let parent = tokio::time::timeout(HANG, parent)
            .await
            .expect("the call's wait has no parent");
        assert!(parent.starts_with("keel-turn-"), "{parent}");
    }
}
