//! Front-ends of one session on several machines, its turns on workers:
//! app-server front-ends whose turns outlive a dead worker, a front-end
//! that opens a session mid-turn and sees the turn from its start, and a
//! call held by one front-end's turn decided through another. The client
//! of the front-end that started the turn sees what an in-process
//! app-server shows for the same turn, every notification once, in order.
//! Built only with the `temporal` feature.

#[cfg(feature = "temporal")]
pub(crate) mod front_ends {
    use std::time::Duration;

    use keel_test_support::{KeelCommand, MockModelServer, MockResponse, tool_call};
    use serde_json::json;

    use crate::suite::app_server::AppServer;
    use crate::suite::cluster::durable::{Cluster, HANG, deploy_turn, kill9};
    use crate::suite::cluster_turns::on_workers::{
        each_message_once, rpc_front_end, runs_the_turn, turn_worker, which_runs_the_turn,
    };
    use crate::suite::rpc::Rpc;
    use crate::suite::rpc::host::{
        answer_echo, db_read_then_write, echo_tool, serve_db_read_then_write,
    };

    /// A cluster, a mock model, `n` homes (a machine each) and the
    /// workspace they share.
    pub(crate) struct Machines {
        pub c: Cluster,
        pub mock: MockModelServer,
        pub homes: Vec<tempfile::TempDir>,
        pub ws: tempfile::TempDir,
    }

    pub(crate) async fn machines(n: usize) -> Option<Machines> {
        Some(Machines {
            c: Cluster::start(Duration::from_secs(3600)).await?,
            mock: MockModelServer::start().await,
            homes: (0..n).map(|_| tempfile::tempdir().unwrap()).collect(),
            ws: tempfile::tempdir().unwrap(),
        })
    }

    /// Closes an RPC front-end's stdin; it exits 0.
    pub(crate) async fn finished(front: Rpc) {
        let (out, _) = front.finish().await;
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
    }

    /// `keel app-server` on the cluster from a home of its own, handshake
    /// done.
    async fn app_server_front_end(
        c: &Cluster,
        mock: &MockModelServer,
        home: &std::path::Path,
        ws: &std::path::Path,
    ) -> AppServer {
        let base_url = mock.base_url();
        let mut s = AppServer::start(
            c.keel_at(home, ws)
                .env("RUST_LOG", "keel=info")
                .args(["app-server", "--base-url", &base_url])
                .args(["--model", "mock-model"]),
        )
        .await;
        s.initialize(false).await;
        s
    }

    /// The client of `a` saw one turn, with one command run.
    fn one_turn_one_command(a: &AppServer) {
        assert_eq!(a.seen("turn/started").len(), 1);
        let commands = a
            .seen("item/completed")
            .into_iter()
            .filter(|f| f["params"]["item"]["type"] == "commandExecution")
            .count();
        assert_eq!(commands, 1, "{:?}", a.methods());
    }

    /// `b` lists `thread` and reads its items: the call `call_id` and the
    /// answer after it.
    async fn reads_the_thread(b: &mut AppServer, thread: &str, call_id: &str) {
        let list = b.ok("thread/list", json!({})).await;
        assert_eq!(list["data"][0]["id"], thread, "{list:#}");
        let read = b
            .ok(
                "thread/read",
                json!({"threadId": thread, "includeTurns": true}),
            )
            .await;
        let items = read["thread"]["turns"][0]["items"].to_string();
        assert!(
            items.contains("deployed") && items.contains(call_id),
            "{read:#}"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn app_server_front_ends_run_their_turns_on_workers_and_outlive_a_dead_one() {
        let Some(Machines { c, mock, homes, ws }) = machines(4).await else {
            return;
        };
        deploy_turn(&mock, "p1");
        let one = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let two = turn_worker(&c, &mock, homes[1].path(), &[]).await;

        let mut a = app_server_front_end(&c, &mock, homes[2].path(), ws.path()).await;
        let thread = a.start_thread(ws.path(), "on-request").await;
        let turn = a.start_turn(&thread, "deploy").await;
        let request = a.server_request().await;
        assert_eq!(request["method"], "item/commandExecution/requestApproval");
        assert_eq!(request["params"]["itemId"], "p1");
        let (running, mut other) = which_runs_the_turn(one, two).await;
        // The worker dies with the call waiting; the client approves it in
        // the front-end, and the other worker finishes the turn.
        kill9(running).await;
        a.send(json!({"id": request["id"].clone(), "result": {"decision": "accept"}}))
            .await;
        let completed = a.finish_turn(&turn, "accept").await;
        assert_eq!(completed["status"], "completed", "{completed:#}");
        assert!(runs_the_turn(&mut other, Duration::from_secs(5)).await);
        one_turn_one_command(&a);
        each_message_once(&mock);
        a.close().await;

        // Front-end B, on another machine, lists and reads the thread.
        let mut b = app_server_front_end(&c, &mock, homes[3].path(), ws.path()).await;
        reads_the_thread(&mut b, &thread, "p1").await;
        b.close().await;
    }

    /// `turn/start` is answered only once its turn is durably started on
    /// the workers: sent while the Temporal server is down, it gets no
    /// answer; once the server is back the answer comes, and a front-end
    /// killed the moment it answered loses nothing: the turn runs to its
    /// end on a worker, and another front-end reads it.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_turn_start_is_answered_only_once_the_turn_is_durable() {
        let Some(Machines {
            mut c,
            mock,
            homes,
            ws,
        }) = machines(3).await
        else {
            return;
        };
        mock.push(MockResponse::text("the durable answer"));
        let _worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let mut a = app_server_front_end(&c, &mock, homes[1].path(), ws.path()).await;
        let thread = a.start_thread(ws.path(), "never").await;
        c.temporal.kill();
        let id = a
            .request(
                "turn/start",
                json!({"threadId": thread, "input": [{"type": "text", "text": "keep this"}]}),
            )
            .await;
        let early = tokio::time::timeout(Duration::from_secs(3), a.response(&id)).await;
        assert!(
            early.is_err(),
            "turn/start was answered before its turn could start: {early:?}"
        );
        tokio::task::block_in_place(|| c.temporal.restart()).unwrap();
        let answer = a.response(&id).await;
        assert_eq!(answer["result"]["turn"]["status"], "inProgress", "{answer}");
        kill9(a.child).await;

        let mut b = app_server_front_end(&c, &mock, homes[2].path(), ws.path()).await;
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let read = b
                .ok(
                    "thread/read",
                    json!({"threadId": thread, "includeTurns": true}),
                )
                .await;
            let turns = read["thread"]["turns"].to_string();
            if turns.contains("keep this") && turns.contains("the durable answer") {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the acknowledged turn never ran: {read:#}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        // Run once: the model was asked once, with the prompt once.
        assert_eq!(mock.request_count(), 1);
        let body = mock.last_request().unwrap().body;
        let users = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .count();
        assert_eq!(users, 1, "{body:#}");
        b.close().await;
    }

    /// A turn a worker runs calls a tool of the front-end's own MCP server
    /// (run on the front-end), and that server's question reaches the
    /// front-end's client, whose answer reaches the server.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_front_end_servers_question_in_a_worker_run_turn_reaches_its_client() {
        let Some(python) = crate::suite::clients::pip_client("mcp") else {
            return;
        };
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        let token = "guard-token-9595";
        let server = crate::suite::mcp::guarded::guarded(&python, token).await;
        std::fs::write(
            homes[1].path().join("config.toml"),
            crate::suite::mcp::guarded::config(server.port),
        )
        .unwrap();
        mock.push_all([
            MockResponse::tool_calls(vec![tool_call("q1", "mcp__guard__ask", json!({}))]),
            MockResponse::text("asked"),
        ]);
        let _worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let base_url = mock.base_url();
        let mut a = AppServer::start(
            c.keel_at(homes[1].path(), ws.path())
                .env("GUARD_TOKEN", token)
                .args(["app-server", "--base-url", &base_url])
                .args(["--model", "mock-model"]),
        )
        .await;
        a.initialize(false).await;
        let thread = a.start_thread(ws.path(), "never").await;
        let turn = a.start_turn(&thread, "ask").await;
        let asked = a
            .wait_for("the server's question", |f| {
                f["method"] == "mcpServer/elicitation/request"
            })
            .await;
        assert_eq!(asked["params"]["serverName"], "guard");
        a.send(json!({"id": asked["id"], "result": {"action": "accept", "content": {"proceed": true}}}))
            .await;
        let completed = a.finish_turn(&turn, "accept").await;
        assert_eq!(completed["status"], "completed", "{completed:#}");
        let seen = mock.last_request().unwrap().body.to_string();
        assert!(
            seen.contains("the client answered: accept; proceed=True target=staging"),
            "{seen}"
        );
        a.close().await;
    }

    /// The notifications and server requests a client saw, in order,
    /// with repeats (streamed deltas) collapsed.
    fn sequence(s: &AppServer) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for m in s.methods() {
            if out.last() != Some(&m) {
                out.push(m);
            }
        }
        out
    }

    /// What an in-process app-server's client sees for the deploy turn
    /// (its call `call_id` approved by the client).
    async fn in_process_sequence(call_id: &str) -> Vec<String> {
        let mock = MockModelServer::start().await;
        deploy_turn(&mock, call_id);
        let (home, ws) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let base_url = mock.base_url();
        let mut s = AppServer::start(
            KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
                .home(home.path())
                .cwd(ws.path())
                .args(["app-server", "--base-url", &base_url])
                .args(["--model", "mock-model"]),
        )
        .await;
        s.initialize(false).await;
        let thread = s.start_thread(ws.path(), "on-request").await;
        let turn = s.start_turn(&thread, "deploy").await;
        let completed = s.finish_turn(&turn, "accept").await;
        assert_eq!(completed["status"], "completed", "{completed:#}");
        let seen = sequence(&s);
        s.close().await;
        seen
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_front_end_opened_mid_turn_sees_it_and_decides_its_call_while_the_worker_dies() {
        let Some(Machines { c, mock, homes, ws }) = machines(4).await else {
            return;
        };
        let reference = in_process_sequence("b1").await;
        deploy_turn(&mock, "b1");
        let one = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let two = turn_worker(&c, &mock, homes[3].path(), &[]).await;
        let mut a = app_server_front_end(&c, &mock, homes[1].path(), ws.path()).await;
        let thread = a.start_thread(ws.path(), "on-request").await;
        let turn = a.start_turn(&thread, "deploy").await;
        let asked_a = a.server_request().await;
        assert_eq!(asked_a["method"], "item/commandExecution/requestApproval");

        // B opens the thread while the call waits: its client sees the
        // turn from its start and is asked too.
        let mut b = app_server_front_end(&c, &mock, homes[2].path(), ws.path()).await;
        let resumed = b.ok("thread/resume", json!({"threadId": thread})).await;
        // The history ends before that turn: it comes live, once.
        let turns = &resumed["thread"]["turns"];
        assert_eq!(turns, &json!([]), "{resumed:#}");
        let asked = b.server_request().await;
        assert_eq!(asked["method"], "item/commandExecution/requestApproval");
        assert_eq!(asked["params"]["itemId"], "b1");
        assert_eq!(asked["params"]["threadId"], thread.as_str());
        let b_turn = b.notification("turn/started").await;
        assert_eq!(b_turn["params"]["threadId"], thread.as_str());
        // One turn id everywhere: B's client knows the turn by A's id.
        assert_eq!(b_turn["params"]["turn"]["id"], turn.as_str(), "{b_turn:#}");
        assert_eq!(asked["params"]["turnId"], turn.as_str());

        // The worker running the turn dies while the call waits; B's client
        // answers meanwhile, and the other worker finishes the turn.
        let (running, mut other) = which_runs_the_turn(one, two).await;
        kill9(running).await;
        b.send(json!({"id": asked["id"].clone(), "result": {"decision": "accept"}}))
            .await;
        let completed = a
            .wait_for("turn/completed", |f| {
                f["method"] == "turn/completed" && f["params"]["turn"]["id"] == turn.as_str()
            })
            .await;
        assert_eq!(
            completed["params"]["turn"]["status"], "completed",
            "{completed:#}"
        );
        assert!(runs_the_turn(&mut other, Duration::from_secs(5)).await);
        // A's client saw what an in-process app-server shows for this
        // turn: every notification once, in order (its own request was
        // answered elsewhere and withdrawn, as an answered request is).
        assert_eq!(sequence(&a), reference);
        one_turn_one_command(&a);
        each_message_once(&mock);
        a.close().await;

        // B's client saw the turn run live, to its end.
        let b_completed = b
            .wait_for("turn/completed", |f| f["method"] == "turn/completed")
            .await;
        assert_eq!(
            b_completed["params"]["turn"]["status"], "completed",
            "{b_completed:#}"
        );
        assert_eq!(b_completed["params"]["turn"]["id"], turn.as_str());
        let read = b
            .ok(
                "thread/read",
                json!({"threadId": thread, "includeTurns": true}),
            )
            .await;
        assert_eq!(read["thread"]["turns"][0]["id"], turn.as_str(), "{read:#}");
        one_turn_one_command(&b);
        let answer = b
            .seen("item/completed")
            .into_iter()
            .any(|f| f["params"]["item"]["text"] == "deployed");
        assert!(answer, "{:?}", b.methods());
        reads_the_thread(&mut b, &thread, "b1").await;
        b.close().await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_rpc_front_end_with_the_session_open_sees_another_ones_turn_and_decides_its_call() {
        let Some(Machines { c, mock, homes, ws }) = machines(3).await else {
            return;
        };
        deploy_turn(&mock, "w1");
        let _worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        // A names the session; B opens it before A's turn starts.
        let mut a = rpc_front_end(&c, &mock, homes[1].path(), ws.path(), &[]).await;
        let state = a.ok(json!({"type": "get_state"})).await;
        let session_id = state["sessionId"].as_str().unwrap().to_owned();
        a.ok(json!({"type": "set_session_name", "name": "shared"}))
            .await;
        let mut b = rpc_front_end(
            &c,
            &mock,
            homes[2].path(),
            ws.path(),
            &["--session", &session_id],
        )
        .await;
        b.ok(json!({"type": "get_state"})).await;

        a.send(json!({"type": "prompt", "message": "deploy"})).await;
        a.approval_request().await;
        // B's host sees the turn's events and is asked too; it decides.
        let asked = b.approval_request().await;
        assert_eq!(asked["toolCallId"], "w1");
        let id = asked["id"].as_str().unwrap().to_owned();
        b.decide(&id, "approve", json!({})).await;
        let end = a.event("agent_end").await;
        assert!(end["messages"].to_string().contains("deployed"), "{end}");
        let end = b.event("agent_end").await;
        assert!(end["messages"].to_string().contains("deployed"), "{end}");
        for types in [a.event_types(), b.event_types()] {
            let count = |t: &str| types.iter().filter(|x| **x == t).count();
            assert_eq!(count("agent_start"), 1, "{types:?}");
            assert_eq!(count("tool_execution_end"), 1, "{types:?}");
            assert_eq!(count("agent_end"), 1, "{types:?}");
        }
        // B reads what the worker stored.
        let messages = b.ok(json!({"type": "get_messages"})).await;
        assert_eq!(
            messages["messages"].as_array().unwrap().len(),
            4,
            "{messages:#}"
        );
        each_message_once(&mock);
        finished(a).await;
        finished(b).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_host_tool_called_by_a_worker_run_turn_is_run_by_the_front_ends_host() {
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        mock.push_all([
            MockResponse::tool_calls(vec![tool_call(
                "h1",
                "echo_host",
                json!({"message": "hello"}),
            )]),
            MockResponse::text("The host said hello."),
        ]);
        let mut worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&c, &mock, homes[1].path(), ws.path(), &[]).await;
        a.ok(echo_tool()).await;
        a.send(json!({"type": "prompt", "message": "echo hello"}))
            .await;
        // The worker runs the turn; the call comes to this host.
        answer_echo(&mut a, "h1").await;
        assert!(runs_the_turn(&mut worker, Duration::from_secs(5)).await);
        a.event("agent_end").await;
        // The worker offered the host's tool to the model, and the model
        // read the host's answer.
        let requests = mock.requests();
        assert!(requests[0].body["tools"].to_string().contains("echo_host"));
        assert!(
            requests[1].body["messages"]
                .to_string()
                .contains("host says: hello")
        );
        finished(a).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_prompt_with_an_image_reaches_the_model_on_a_worker() {
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        mock.push(MockResponse::text("A pixel."));
        let mut worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&c, &mock, homes[1].path(), ws.path(), &[]).await;
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
        a.ok(json!({"type": "prompt", "message": "what is this?",
            "images": [{"type": "image", "data": png, "mimeType": "image/png"}]}))
            .await;
        let end = a.event("agent_end").await;
        assert!(runs_the_turn(&mut worker, Duration::from_secs(5)).await);
        // The run's end lists the user's message, image and all, then the
        // worker's answer.
        assert_eq!(end["messages"][0]["content"][1]["type"], "image", "{end}");
        assert!(end["messages"][1].to_string().contains("A pixel."), "{end}");
        // The worker's model call carried the image, once.
        let body = mock.last_request().unwrap().body.to_string();
        assert_eq!(body.matches(png).count(), 1, "{body}");
        let messages = a.ok(json!({"type": "get_messages"})).await;
        assert_eq!(
            messages["messages"].as_array().unwrap().len(),
            2,
            "{messages:#}"
        );
        finished(a).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_model_and_thinking_level_a_host_sets_are_the_workers() {
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        mock.push(MockResponse::text("from two"));
        // Front-end and worker have the same catalogue, with a second
        // model that reasons.
        let config = format!(
            "[model]\nprovider = \"mock\"\nid = \"mock-model\"\n\n\
             [providers.mock]\ndialect = \"openai-completions\"\nbase_url = \"{}\"\n\
             supports_reasoning_effort = true\n\n\
             [[models]]\nprovider = \"mock\"\nid = \"mock-model-2\"\nreasoning = true\n",
            mock.base_url()
        );
        for home in &homes {
            std::fs::write(home.path().join("config.toml"), &config).unwrap();
        }
        let mut worker = c
            .keel_at(homes[0].path(), homes[0].path())
            .env("RUST_LOG", "keel_temporal=info,keel=info")
            .arg("worker")
            .spawn()
            .await
            .unwrap();
        worker
            .wait_for_stderr(HANG, |l| l.contains("the worker is polling"))
            .await
            .unwrap();
        let mut a = Rpc::start(
            c.keel_at(homes[1].path(), ws.path())
                .env("RUST_LOG", "keel=info")
                .args(["--mode", "rpc"]),
        )
        .await;
        a.ok(json!({"type": "set_model", "provider": "mock", "modelId": "mock-model-2"}))
            .await;
        a.ok(json!({"type": "set_thinking_level", "level": "high"}))
            .await;
        a.ok(json!({"type": "prompt", "message": "hi"})).await;
        let end = a.event("agent_end").await;
        assert!(end.to_string().contains("from two"), "{end}");
        assert!(runs_the_turn(&mut worker, Duration::from_secs(5)).await);
        let body = mock.last_request().unwrap().body;
        assert_eq!(body["model"], "mock-model-2", "{body:#}");
        assert_eq!(body["reasoning_effort"], "high", "{body:#}");
        finished(a).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_threads_approval_policy_is_the_workers() {
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        mock.push_all([
            MockResponse::tool_calls(vec![tool_call(
                "f1",
                "write",
                json!({"path": "hello.txt", "content": "hello\n"}),
            )]),
            MockResponse::text("Created hello.txt."),
        ]);
        let _worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let mut a = app_server_front_end(&c, &mock, homes[1].path(), ws.path()).await;
        // `untrusted` asks before a write in the workspace, which the
        // workspace's own mode lets through.
        let thread = a.start_thread(ws.path(), "untrusted").await;
        let turn = a.start_turn(&thread, "create hello.txt").await;
        let asked = a.server_request().await;
        assert_eq!(
            asked["method"], "item/fileChange/requestApproval",
            "{asked:#}"
        );
        assert!(!ws.path().join("hello.txt").exists());
        a.send(json!({"id": asked["id"].clone(), "result": {"decision": "accept"}}))
            .await;
        let completed = a.finish_turn(&turn, "accept").await;
        assert_eq!(completed["status"], "completed", "{completed:#}");
        assert_eq!(
            std::fs::read_to_string(ws.path().join("hello.txt")).unwrap(),
            "hello\n"
        );
        a.close().await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_workflow_gate_asked_by_a_worker_run_turn_is_answered_by_the_host() {
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        mock.push_all([
            MockResponse::tool_calls(vec![tool_call(
                "g1",
                "ask_host",
                json!({"question": "Approve plan?", "options": [
                    {"value": "approve", "label": "Approve execution"},
                    {"value": "reject", "label": "Reject"}]}),
            )]),
            MockResponse::text("Proceeding."),
        ]);
        let mut worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let mut a =
            rpc_front_end(&c, &mock, homes[1].path(), ws.path(), &["--rpc-gate-tool"]).await;
        a.send(json!({"type": "prompt", "message": "plan it"}))
            .await;
        let gate = a
            .wait_for("workflow_gate", |f| f["type"] == "workflow_gate")
            .await;
        assert!(runs_the_turn(&mut worker, Duration::from_secs(5)).await);
        let answered = a
            .ok(
                json!({"type": "workflow_gate_response", "gate_id": gate["gate_id"].clone(),
                "answer": "approve"}),
            )
            .await;
        assert_eq!(answered["status"], "accepted", "{answered}");
        let end = a.event("tool_execution_end").await;
        assert_eq!(
            end["result"]["content"][0]["text"],
            "The host answered: \"approve\""
        );
        a.event("agent_end").await;
        // The worker's model read the host's answer.
        let body = mock.last_request().unwrap().body.to_string();
        assert!(body.contains("The host answered"), "{body}");
        finished(a).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn compaction_and_branches_of_a_front_end_shape_the_workers_context() {
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        mock.push_all([
            MockResponse::text("first answer"),
            MockResponse::text("second answer"),
            MockResponse::text("## Goal\nAnswer the questions."),
            MockResponse::text("third answer"),
            MockResponse::text("fourth answer"),
        ]);
        let mut worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&c, &mock, homes[1].path(), ws.path(), &[]).await;
        a.prompt_and_wait("question one").await;
        assert!(runs_the_turn(&mut worker, Duration::from_secs(5)).await);
        a.prompt_and_wait("question two").await;
        // The front-end compacts (its own model call); the worker's next
        // turn starts from the summary and the kept turn.
        let compacted = a.ok(json!({"type": "compact"})).await;
        assert_eq!(compacted["summary"], "## Goal\nAnswer the questions.");
        a.prompt_and_wait("question three").await;
        let context = mock.last_request().unwrap().body["messages"].to_string();
        assert!(
            context.contains("Answer the questions.") && context.contains("question two"),
            "{context}"
        );
        assert!(!context.contains("question one"), "{context}");
        // A branch from the third question: the worker's next turn goes on
        // from before it.
        let points = a.ok(json!({"type": "get_branch_messages"})).await;
        let third = points["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["text"] == "question three")
            .cloned()
            .unwrap();
        a.ok(json!({"type": "branch", "entryId": third["entryId"]}))
            .await;
        a.prompt_and_wait("question four").await;
        let context = mock.last_request().unwrap().body["messages"].to_string();
        assert!(
            context.contains("question two") && context.contains("question four"),
            "{context}"
        );
        assert!(!context.contains("question three"), "{context}");
        finished(a).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_worker_run_turns_reads_and_writes_of_host_uris_go_to_the_host() {
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        let [read, write] = db_read_then_write();
        mock.push_all([read, write, MockResponse::text("done")]);
        let mut worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&c, &mock, homes[1].path(), ws.path(), &[]).await;
        a.ok(json!({"type": "set_host_uri_schemes", "schemes": [
            {"scheme": "db", "description": "Virtual db rows", "writable": true}]}))
            .await;
        a.send(json!({"type": "prompt", "message": "go"})).await;
        serve_db_read_then_write(&mut a).await;
        assert!(runs_the_turn(&mut worker, Duration::from_secs(5)).await);
        a.event("agent_end").await;
        // The worker's model read the host's row; nothing went to files.
        let body = mock.last_request().unwrap().body.to_string();
        assert!(body.contains("name=Alice"), "{body}");
        assert_eq!(std::fs::read_dir(ws.path()).unwrap().count(), 0);
        finished(a).await;
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_workers_own_mcp_server_serves_the_turns_it_runs() {
        if !crate::suite::clients::npm_client("@modelcontextprotocol/server-everything") {
            return;
        }
        let Some(Machines { c, mock, homes, ws }) = machines(2).await else {
            return;
        };
        let everything =
            crate::suite::clients::clients_dir().join("node_modules/.bin/mcp-server-everything");
        // Only the worker's configuration names the server.
        std::fs::write(
            homes[0].path().join("config.toml"),
            format!(
                "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\ndefault_class = \"read\"\n",
                everything.display().to_string()
            ),
        )
        .unwrap();
        mock.push_all([
            MockResponse::tool_calls(vec![tool_call(
                "m1",
                "mcp__everything__echo",
                json!({"message": "from the worker's server"}),
            )]),
            MockResponse::text("echoed"),
        ]);
        let mut worker = turn_worker(&c, &mock, homes[0].path(), &[]).await;
        let mut a = rpc_front_end(&c, &mock, homes[1].path(), ws.path(), &[]).await;
        a.send(json!({"type": "prompt", "message": "echo it"}))
            .await;
        let end = a.event("tool_execution_end").await;
        assert_eq!(end["isError"], false, "{end}");
        assert!(
            end.to_string().contains("from the worker's server"),
            "{end}"
        );
        a.event("agent_end").await;
        assert!(runs_the_turn(&mut worker, Duration::from_secs(5)).await);
        let offered = mock.requests()[0].body["tools"].to_string();
        assert!(offered.contains("mcp__everything__echo"), "{offered}");
        // The front-end has no such server: the worker ran it.
        let state = a.ok(json!({"type": "get_state"})).await;
        let servers = state["mcpServers"].as_array();
        assert!(servers.is_none_or(Vec::is_empty), "{state}");
        finished(a).await;
    }
}
