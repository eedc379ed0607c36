//! keel beyond one machine: `keel worker` on a real Temporal dev server and
//! a real PostgreSQL server. A held call's wait is a workflow
//! (`keel.approval`); these tests kill its worker with SIGKILL, decide it
//! from another process while no worker runs, let it expire on its durable
//! timer while no worker runs, and kill the Temporal server itself mid-wait.
//! A call held by a turn in a front-end (`keel --mode rpc --temporal`) gets
//! such a wait too, which outlives that process.
//! The row in PostgreSQL is the record each time. Built only with the
//! `temporal` feature; a build without it says how to get one.

#[cfg(feature = "temporal")]
pub(crate) mod durable {
    use std::sync::Arc;
    use std::time::Duration;

    use keel_core::keel_approvals::{
        ApprovalEngine, CallContext, Decision, EngineConfig, GateOutcome, Resolution, Status,
        StoreLocation, SystemClock, ToolOrigin,
    };
    use keel_temporal::{TemporalClient, TemporalSettings};
    use keel_test_support::{
        KeelChild, KeelCommand, MockModelServer, MockResponse, PostgresServer, TemporalServer,
        tool_call,
    };
    use serde_json::json;
    use tempfile::TempDir;

    use crate::suite::rpc::Rpc;

    /// Generous: reached only when something hangs.
    pub(crate) const HANG: Duration = Duration::from_secs(90);

    /// One PostgreSQL database, one Temporal dev server, a keel home.
    pub(crate) struct Cluster {
        pub(crate) pg: PostgresServer,
        pub(crate) temporal: TemporalServer,
        pub(crate) url: String,
        pub(crate) home: TempDir,
        pub(crate) engine: ApprovalEngine,
        pub(crate) client: TemporalClient,
    }

    impl Cluster {
        /// `keel approvals approve ID` from a process of its own; it exits 0.
        pub(crate) async fn approve(&self, id: &str) {
            let approved = self
                .keel()
                .args(["approvals", "approve", id])
                .run()
                .await
                .unwrap();
            assert_eq!(approved.code(), Some(0), "{}", approved.stderr);
        }

        pub(crate) async fn start(ttl: Duration) -> Option<Self> {
            let pg = PostgresServer::start().await?;
            let temporal = TemporalServer::start()?;
            let url = pg.database().await;
            let config = EngineConfig {
                default_ttl: ttl,
                ..EngineConfig::default()
            };
            let engine = ApprovalEngine::open_at(
                &StoreLocation::Postgres { url: url.clone() },
                Arc::new(SystemClock),
                config,
            )
            .await
            .unwrap();
            let settings = TemporalSettings::new(&temporal.address()).unwrap();
            let client = TemporalClient::connect(&settings, "keel-test")
                .await
                .unwrap();
            Some(Self {
                pg,
                temporal,
                url,
                home: tempfile::tempdir().unwrap(),
                engine,
                client,
            })
        }

        pub(crate) fn keel(&self) -> KeelCommand {
            self.keel_at(self.home.path(), self.home.path())
        }

        /// `keel` on the cluster as another machine would run it: its own
        /// home, in `cwd`.
        pub(crate) fn keel_at(&self, home: &std::path::Path, cwd: &std::path::Path) -> KeelCommand {
            KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
                .home(home)
                .cwd(cwd)
                .args([
                    "--database",
                    &self.url,
                    "--temporal",
                    &self.temporal.address(),
                ])
                .timeout(HANG)
        }

        /// `keel worker`, once it polls.
        pub(crate) async fn worker(&self) -> KeelChild {
            let mut worker = self
                .keel()
                .env("RUST_LOG", "keel_temporal=info")
                .arg("worker")
                .spawn()
                .await
                .unwrap();
            worker
                .wait_for_stderr(HANG, |l| l.contains("the worker is polling"))
                .await
                .unwrap();
            worker
        }

        /// `keel worker`, once its workflows have had time for their first
        /// look at the row (so what the test does next lands mid-wait).
        async fn worker_mid_wait(&self) -> KeelChild {
            let worker = self.worker().await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            worker
        }

        /// A call held in the shared store, and its wait started on Temporal.
        async fn held(&self, call_id: &str) -> String {
            let id = hold(&self.engine, call_id).await;
            self.client.start_approval_wait(&id).await.unwrap();
            id
        }

        async fn result(&self, id: &str) -> Resolution {
            tokio::time::timeout(HANG, self.client.approval_result(id))
                .await
                .expect("the approval workflow never ended")
                .unwrap()
        }

        /// The wait on `id` ended approved.
        async fn approved(&self, id: &str) {
            let resolution = self.result(id).await;
            assert!(
                matches!(&resolution, Resolution::Approved { request_id, .. } if request_id == id),
                "{resolution:?}"
            );
        }

        /// The wait on `id` ended on its timer and its row says expired.
        async fn expired(&self, id: &str) {
            let resolution = self.result(id).await;
            assert!(
                matches!(resolution, Resolution::Expired { .. }),
                "{resolution:?}"
            );
            assert_eq!(self.status(id).await, Status::Expired);
        }

        pub(crate) async fn status(&self, id: &str) -> Status {
            self.engine.request(id).await.unwrap().status
        }
    }

    /// `cargo publish` held in `engine`'s store; its approval id.
    async fn hold(engine: &ApprovalEngine, call_id: &str) -> String {
        let call = CallContext {
            workspace: "/ws".to_owned(),
            cwd: "/ws".into(),
            session_id: "s1".to_owned(),
            call_id: call_id.to_owned(),
            tool_name: "bash".to_owned(),
            args: json!({ "command": "cargo publish" }),
            origin: ToolOrigin::Builtin,
            unattended: false,
            write_target: None,
        };
        match engine.gate_check(&call).await {
            GateOutcome::Held { request } => request.id,
            other => panic!("cargo publish was not held: {other:?}"),
        }
    }

    pub(crate) async fn kill9(worker: KeelChild) {
        worker.signal("KILL").await.unwrap();
        let _ = worker.wait().await;
    }

    /// `keel --mode rpc` on the cluster, its model the mock, with the
    /// approvals expiry `expire_after`, once ready.
    async fn rpc_front_end(c: &Cluster, mock: &MockModelServer, expire_after: &str) -> Rpc {
        std::fs::write(
            c.home.path().join("config.toml"),
            format!("[approvals]\nexpire_after = \"{expire_after}\"\n"),
        )
        .unwrap();
        let base_url = mock.base_url();
        // The turn runs here; its held calls wait on Temporal too.
        Rpc::start(
            c.keel()
                .env("RUST_LOG", "keel=debug")
                .env("KEEL_TEMPORAL_TURNS", "here")
                .args([
                    "--mode",
                    "rpc",
                    "--base-url",
                    &base_url,
                    "--model",
                    "mock-model",
                ]),
        )
        .await
    }

    /// An RPC front-end (approvals expiring after `expire_after`) whose
    /// turn holds a deploy; the held call's id, once its workflow exists.
    async fn held_in_front_end(
        c: &Cluster,
        mock: &MockModelServer,
        expire_after: &str,
    ) -> (Rpc, String) {
        let mut rpc = rpc_front_end(c, mock, expire_after).await;
        rpc.send(json!({"type": "prompt", "message": "deploy"}))
            .await;
        let request = rpc.approval_request().await;
        let id = request["id"].as_str().unwrap().to_owned();
        workflow_started(c, &id).await;
        (rpc, id)
    }

    /// Waits until the front-end has started the wait's workflow (it
    /// starts beside the announcement, not before it): it takes a nudge.
    async fn workflow_started(c: &Cluster, id: &str) {
        let started = async {
            while c.client.nudge(id).await.is_err() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        tokio::time::timeout(HANG, started)
            .await
            .expect("the turn never started the wait's workflow");
    }

    /// A turn that runs a deploy command (held: it sends).
    pub(crate) fn deploy_turn(mock: &MockModelServer, call_id: &str) {
        mock.push_all([
            MockResponse::tool_calls(vec![tool_call(
                call_id,
                "bash",
                json!({ "command": "keel-test-unknown-program --deploy" }),
            )]),
            MockResponse::text("deployed"),
        ]);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_call_held_by_a_turn_here_waits_on_temporal_too() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let mock = MockModelServer::start().await;
        deploy_turn(&mock, "t1");
        let _worker = c.worker().await;
        let (mut rpc, id) = held_in_front_end(&c, &mock, "1h").await;

        // Decided from a third process: the turn here goes on, and the
        // workflow the turn started for the wait ends with the decision.
        c.approve(&id).await;
        rpc.tool_end("t1").await;
        rpc.event("agent_end").await;
        c.approved(&id).await;
        let (out, _) = rpc.finish().await;
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_call_decided_in_the_front_end_ends_its_workflow_before_the_process_exits() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let mock = MockModelServer::start().await;
        deploy_turn(&mock, "t4");
        let _worker = c.worker().await;
        let (mut rpc, id) = held_in_front_end(&c, &mock, "1h").await;
        // The workflow has looked and sleeps until a nudge or its timer.
        tokio::time::sleep(Duration::from_secs(1)).await;
        rpc.decide(&id, "approve", json!({})).await;
        rpc.tool_end("t4").await;
        rpc.event("agent_end").await;
        // The process exits at once; its last nudge still went out, so the
        // workflow ends now, not at the call's expiry an hour away.
        let (out, _) = rpc.finish().await;
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        c.approved(&id).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_held_call_outlives_its_killed_process_and_expires_on_the_workflow_timer() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let mock = MockModelServer::start().await;
        deploy_turn(&mock, "t2");
        let (rpc, id) = held_in_front_end(&c, &mock, "4s").await;
        // The process that held the call dies; nothing here expires it.
        rpc.child.signal("KILL").await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(c.status(&id).await, Status::Pending);

        // A worker anywhere: the workflow's timer settles the row.
        let _worker = c.worker().await;
        c.expired(&id).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_turn_cut_off_on_one_machine_goes_on_on_another_with_the_decision_taken_meanwhile() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let mock = MockModelServer::start().await;
        deploy_turn(&mock, "t3");
        let _worker = c.worker().await;
        // Two machines: two homes, one workspace path, one database.
        let ws = tempfile::tempdir().unwrap();
        let home_b = tempfile::tempdir().unwrap();
        let base_url = mock.base_url();
        let front_end = |home: &std::path::Path, extra: &[&str]| {
            c.keel_at(home, ws.path())
                .env("KEEL_TEMPORAL_TURNS", "here")
                .args(["--mode", "rpc", "--base-url", &base_url])
                .args(["--model", "mock-model"])
                .args(extra.iter().copied())
        };
        let mut a = Rpc::start(front_end(c.home.path(), &[])).await;
        a.send(json!({"type": "prompt", "message": "deploy"})).await;
        let request = a.approval_request().await;
        let id = request["id"].as_str().unwrap().to_owned();
        workflow_started(&c, &id).await;
        // Machine A dies with the call waiting; it is approved meanwhile.
        a.child.signal("KILL").await.unwrap();
        c.approve(&id).await;

        // Machine B opens the session: the cut-off turn goes on there, the
        // approved call runs once, the model answers.
        let session = request["sessionId"].as_str().unwrap().to_owned();
        let mut b = Rpc::start(front_end(home_b.path(), &["--session", &session])).await;
        b.tool_end("t3").await;
        b.event("agent_end").await;
        let (out, frames) = b.finish().await;
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        assert!(
            !frames.iter().any(|f| f["type"] == "approval_request"),
            "the decision was honoured, not asked again: {frames:?}"
        );
        c.approved(&id).await;
        let row = c.engine.request(&id).await.unwrap();
        assert!(row.finished_at.is_some(), "its outcome is recorded");
        assert_eq!(mock.requests().len(), 2, "one model call on each machine");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_front_end_whose_temporal_is_unreachable_still_runs_its_held_calls() {
        let env = crate::suite::Env::new().await;
        deploy_turn(&env.mock, "t5");
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dead = format!("127.0.0.1:{port}");
        let mut rpc = env.rpc(&["--temporal", &dead]).await;
        rpc.send(json!({"type": "prompt", "message": "deploy"}))
            .await;
        let request = rpc.approval_request().await;
        let id = request["id"].as_str().unwrap().to_owned();
        rpc.decide(&id, "approve", json!({})).await;
        rpc.tool_end("t5").await;
        rpc.event("agent_end").await;
        let (out, _) = tokio::time::timeout(HANG, rpc.finish())
            .await
            .expect("the front-end did not exit");
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        assert!(
            out.stderr.contains("cannot reach Temporal"),
            "{}",
            out.stderr
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_decision_taken_while_no_worker_runs_is_honoured_when_one_starts() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let id = c.held("c1").await;
        // The worker takes its first look, then dies mid-wait.
        kill9(c.worker_mid_wait().await).await;

        c.approve(&id).await;
        assert_eq!(c.status(&id).await, Status::Approved);

        let worker = c.worker().await;
        c.approved(&id).await;

        // SIGTERM drains: the worker stops polling and exits cleanly.
        worker.signal("TERM").await.unwrap();
        let out = worker.wait().await.unwrap();
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        assert!(out.stderr.contains("shutting down"), "{}", out.stderr);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_wait_expires_on_its_durable_timer_while_no_worker_runs() {
        let Some(c) = Cluster::start(Duration::from_secs(3)).await else {
            return;
        };
        let id = c.held("c2").await;
        kill9(c.worker_mid_wait().await).await;
        // The deadline passes with no worker anywhere.
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(c.status(&id).await, Status::Pending);

        let _worker = c.worker().await;
        c.expired(&id).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_cancelled_wait_marks_its_row_cancelled() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let id = c.held("c5").await;
        let _worker = c.worker_mid_wait().await;
        c.client.cancel_approval_wait(&id).await.unwrap();
        let resolution = c.result(&id).await;
        assert!(
            matches!(resolution, Resolution::Cancelled { .. }),
            "{resolution:?}"
        );
        assert_eq!(c.status(&id).await, Status::Cancelled);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_lost_nudge_is_made_up_by_the_reconcile_loop() {
        let Some(c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let id = c.held("c6").await;
        let _worker = c.worker_mid_wait().await;
        // Decided straight on the row: no nudge reaches the workflow.
        c.engine
            .decide(&id, Decision::Approve, "elsewhere", None)
            .await
            .unwrap();
        // The worker's next round after the decision settles (10 s, every
        // 5 s) nudges it.
        c.approved(&id).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_decision_is_stored_when_temporal_is_unreachable() {
        let home = tempfile::tempdir().unwrap();
        let engine = ApprovalEngine::open_sqlite(home.path().join("keel.db"))
            .await
            .unwrap();
        let id = hold(&engine, "c9").await;
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let out = KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
            .home(home.path())
            .timeout(HANG)
            .args(["approvals", "approve", &id])
            .args(["--temporal", &format!("127.0.0.1:{port}")])
            .run()
            .await
            .unwrap();
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        assert!(out.stderr.contains("not nudged"), "{}", out.stderr);
        assert_eq!(engine.request(&id).await.unwrap().status, Status::Approved);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_temporal_server_killed_mid_wait_and_restarted_loses_nothing() {
        let Some(mut c) = Cluster::start(Duration::from_secs(3600)).await else {
            return;
        };
        let id = c.held("c3").await;
        let _worker = c.worker_mid_wait().await;
        c.temporal.kill();
        tokio::task::block_in_place(|| c.temporal.restart()).unwrap();

        let declined = c
            .keel()
            .args(["approvals", "decline", &id, "--note", "not today"])
            .run()
            .await
            .unwrap();
        assert_eq!(declined.code(), Some(0), "{}", declined.stderr);
        let resolution = c.result(&id).await;
        assert!(
            matches!(&resolution, Resolution::Declined { note: Some(n), .. } if n == "not today"),
            "{resolution:?}"
        );
    }
}

/// Two machines (two keel homes) on one database: a session started on
/// one continues on the other, is listed there, and is removed from
/// either; nothing is written under either home's `sessions/`.
#[tokio::test]
async fn two_homes_on_one_database_share_their_sessions() {
    use keel_test_support::{MockModelServer, MockResponse, PostgresServer};

    let Some(pg) = PostgresServer::start().await else {
        return;
    };
    let url = pg.database().await;
    let mock = MockModelServer::start().await;
    let ws = tempfile::tempdir().unwrap();
    let (home_a, home_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let keel = |home: &std::path::Path| {
        keel_test_support::KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
            .home(home)
            .cwd(ws.path())
            .env("KEEL_DATABASE_URL", url.clone())
    };
    let exec = |home: &std::path::Path| {
        keel(home).args([
            "exec",
            "--base-url",
            &mock.base_url(),
            "--model",
            "mock-model",
        ])
    };
    mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::text("second answer"),
    ]);

    let out = exec(home_a.path())
        .arg("first question")
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let out = exec(home_b.path())
        .args(["--continue", "second question"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let body = mock.last_request().unwrap().body;
    let texts: Vec<&str> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user" || m["role"] == "assistant")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(texts, ["first question", "first answer", "second question"]);

    let listed = keel(home_a.path())
        .args(["sessions", "list", "--json"])
        .run()
        .await
        .unwrap();
    assert_eq!(listed.code(), Some(0), "{}", listed.stderr);
    let rows = listed.json_lines().unwrap();
    assert_eq!(rows.len(), 1, "{}", listed.stdout);
    assert_eq!(rows[0]["messages"], 4);
    assert_eq!(rows[0]["firstMessage"], "first question");
    for home in [&home_a, &home_b] {
        let sessions = home.path().join("sessions");
        assert!(!sessions.exists(), "files under {}", sessions.display());
    }

    let show = keel(home_b.path())
        .args(["config", "show"])
        .run()
        .await
        .unwrap();
    assert!(
        show.stdout.contains("sessions_store = \"postgres://")
            && show.stdout.contains("# postgres, from KEEL_DATABASE_URL"),
        "{}",
        show.stdout
    );

    let id = rows[0]["id"].as_str().unwrap().to_owned();
    let removed = keel(home_b.path())
        .args(["sessions", "rm", &id])
        .run()
        .await
        .unwrap();
    assert_eq!(removed.code(), Some(0), "{}", removed.stderr);
    let listed = keel(home_a.path())
        .args(["sessions", "list", "--json"])
        .run()
        .await
        .unwrap();
    assert_eq!(listed.stdout, "");
}

/// PostgreSQL crashes and restarts while a turn waits on the model: the
/// turn finishes once it is back (the session's writer and the approvals
/// store reconnect), the next turn too, and the session holds every
/// message once.
#[tokio::test]
async fn a_database_restarted_mid_turn_loses_nothing() {
    use std::time::Duration;

    use keel_test_support::{MockResponse, PostgresServer};

    use super::{Env, SharedDb};

    let mut env = Env::new().await;
    if env.db.is_none() {
        let Some(server) = PostgresServer::start().await else {
            return;
        };
        let url = server.database().await;
        env.db = Some(SharedDb { server, url });
    }
    env.mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::text("second answer").delay_headers(Duration::from_secs(2)),
        MockResponse::text("third answer"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("one").await;

    let r = rpc
        .call(serde_json::json!({"type": "prompt", "message": "two"}))
        .await;
    assert_eq!(r["success"], true, "{r}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while env.mock.request_count() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the second turn never asked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The model is answering; the database goes down and comes back.
    env.db.as_mut().unwrap().server.crash_and_restart().await;
    rpc.event("agent_end").await;
    rpc.prompt_and_wait("three").await;
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    // It did lose its connection, and said so.
    assert!(
        out.stderr
            .contains("sessions database connection was closed; reconnecting"),
        "{}",
        out.stderr
    );

    let session = env.only_session().await;
    let texts: Vec<String> = session
        .messages()
        .iter()
        .map(|m| serde_json::to_value(m).unwrap())
        .map(|m| {
            m["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(
        texts,
        [
            "one",
            "first answer",
            "two",
            "second answer",
            "three",
            "third answer"
        ]
    );
}

/// An unreachable database is a clear error that names the setting and
/// hides the password; nothing runs.
#[tokio::test]
async fn an_unreachable_database_is_a_clear_error() {
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = keel_test_support::KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
        .home(home.path())
        .cwd(home.path())
        .args([
            "--database",
            &format!("postgres://keel:hunter2@127.0.0.1:{port}/keel?connect_timeout=5"),
            "sessions",
            "list",
        ])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr.contains("--database"), "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot use the sessions database"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
}

#[cfg(not(feature = "temporal"))]
#[tokio::test]
async fn a_build_without_temporal_says_how_to_get_one() {
    let home = tempfile::tempdir().unwrap();
    let out = keel_test_support::KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
        .home(home.path())
        .args(["worker", "--temporal", "127.0.0.1:7233"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr.contains("--features temporal"), "{}", out.stderr);
}

/// A front-end given a cluster that this build cannot use runs as without
/// one, and says so once.
#[cfg(not(feature = "temporal"))]
#[tokio::test]
async fn a_front_end_built_without_temporal_says_its_held_calls_wait_here() {
    let env = super::Env::new().await;
    env.mock
        .push(keel_test_support::MockResponse::text("hello"));
    let out = env
        .exec()
        .args(["--temporal", "127.0.0.1:7233", "hi"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(out.stdout.trim(), "hello");
    assert_eq!(
        out.stderr
            .matches("held calls wait in this process only")
            .count(),
        1,
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--features temporal"), "{}", out.stderr);
}

#[tokio::test]
async fn a_worker_without_a_cluster_says_which_setting_is_missing() {
    let home = tempfile::tempdir().unwrap();
    let out = keel_test_support::KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
        .home(home.path())
        .env("KEEL_TEMPORAL_ADDRESS", "")
        .arg("worker")
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(
        out.stderr.contains("--temporal HOST:PORT"),
        "{}",
        out.stderr
    );
}
