//! A streamable HTTP server that checks the bearer token
//! (`tests/clients/guarded_server.py`, on the published Python SDK): keel
//! sends the token and the configured headers, a wrong token fails the
//! server with a clear error, and a server's question (elicitation) is
//! declined and logged by `keel exec` and put to the person by the
//! app-server, the Claude Agent SDK and an RPC host.

use std::path::Path;

use keel_test_support::MockResponse;
use serde_json::{Value, json};

use super::super::Env;
use super::super::clients::clients_dir;
use super::super::rpc::WAIT;
use super::{call, result_for, write_config};

/// The guarded server on a free loopback port, token read from `TOKEN`.
pub(crate) struct Guarded {
    pub(crate) port: u16,
    _child: tokio::process::Child,
}

pub(crate) async fn guarded(python: &Path, token: &str) -> Guarded {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new(python)
        .arg(clients_dir().join("guarded_server.py"))
        .arg(port.to_string())
        .arg("TOKEN")
        .env("TOKEN", token)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    tokio::time::timeout(WAIT, async {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("Uvicorn running") {
                break;
            }
        }
        // Keep reading so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    })
    .await
    .expect("the guarded server did not start");
    Guarded {
        port,
        _child: child,
    }
}

pub(crate) fn config(port: u16) -> String {
    format!(
        "[mcp_servers.guard]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
         bearer_token_env_var = \"GUARD_TOKEN\"\nhttp_headers = {{ \"X-Team\" = \"infra\" }}\n\
         default_class = \"read\"\nstartup_timeout_sec = 20\n"
    )
}

#[tokio::test]
async fn the_bearer_token_and_headers_reach_the_server_and_its_question_is_declined() {
    let Some(python) = super::super::clients::pip_client("mcp") else {
        return;
    };
    let token = "guard-token-5151";
    let server = guarded(&python, token).await;
    let env = Env::new().await;
    write_config(&env, &config(server.port));
    env.mock.push_all([
        call("c1", "mcp__guard__whoami", json!({})),
        call("c2", "mcp__guard__ask", json!({})),
        MockResponse::text("done"),
    ]);
    let run = env
        .exec()
        .env("GUARD_TOKEN", token)
        .arg("who am I")
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    let who = result_for(&env, "c1");
    assert!(who.contains("authorized; team=infra"), "{who}");
    // keel says it takes questions, answers each with a decline, and
    // says so in its log.
    let asked = result_for(&env, "c2");
    assert!(asked.contains("the client answered: decline"), "{asked}");
    assert!(run.stderr.contains("elicitation"), "{}", run.stderr);
    assert!(!run.stderr.contains(token));
}

#[tokio::test]
async fn a_wrong_bearer_token_fails_the_server_with_a_clear_error() {
    let Some(python) = super::super::clients::pip_client("mcp") else {
        return;
    };
    let server = guarded(&python, "the-right-one").await;
    let env = Env::new().await;
    write_config(&env, &config(server.port));
    let list = env
        .keel()
        .env("GUARD_TOKEN", "a-wrong-one")
        .args(["mcp", "list", "--json"])
        .run()
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&list.stdout).unwrap_or(Value::Null);
    let guard = &v[0];
    assert_eq!(guard["name"], "guard", "{}\n{}", list.stdout, list.stderr);
    assert_eq!(guard["state"], "failed", "{guard}");
    let error = guard["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("401") || error.to_lowercase().contains("unauthorized"),
        "{error}"
    );
    assert!(!list.stdout.contains("a-wrong-one") && !list.stderr.contains("a-wrong-one"));
    // Without the variable set at all, the error names it.
    let list = env
        .keel()
        .args(["mcp", "list", "--json"])
        .run()
        .await
        .unwrap();
    assert!(
        list.stdout.contains("GUARD_TOKEN"),
        "{}\n{}",
        list.stdout,
        list.stderr
    );
}

#[tokio::test]
async fn a_tool_annotated_destructive_is_held_and_runs_only_after_allow() {
    let Some(python) = super::super::clients::pip_client("mcp") else {
        return;
    };
    let token = "guard-token-6262";
    let server = guarded(&python, token).await;
    let env = Env::new().await;
    // No class configured: the server's annotations decide.
    write_config(
        &env,
        &format!(
            "[mcp_servers.guard]\nurl = \"http://127.0.0.1:{}/mcp\"\n\
             bearer_token_env_var = \"GUARD_TOKEN\"\n",
            server.port
        ),
    );
    env.mock.push_all([
        call("c1", "mcp__guard__deploy", json!({})),
        MockResponse::text("not deployed"),
        call("c2", "mcp__guard__deploy", json!({})),
        MockResponse::text("deployed"),
    ]);
    let mut rpc = super::super::rpc::Rpc::start(env.rpc_cmd().env("GUARD_TOKEN", token)).await;
    rpc.send(json!({"type": "prompt", "message": "deploy"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(
        (req["toolName"].clone(), req["class"].clone()),
        (json!("mcp__guard__deploy"), json!("money")),
        "{req}"
    );
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "decline", json!({"note": "not today"}))
        .await;
    let end = rpc.tool_end("c1").await;
    assert!(
        super::super::approvals::result_text(&end).contains("not today"),
        "{end}"
    );
    rpc.event("agent_end").await;
    rpc.send(json!({"type": "prompt", "message": "deploy now"}))
        .await;
    let req = rpc.approval_request().await;
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "approve", json!({})).await;
    let end = rpc.tool_end("c2").await;
    // The server counts one deployment: the declined call never reached it.
    assert!(
        super::super::approvals::result_text(&end).contains("deployed #1"),
        "{end}"
    );
    rpc.event("agent_end").await;
}

/// An app-server client is asked the server's question while the tool
/// runs (`mcpServer/elicitation/request`, the thread `waitingOnUserInput`)
/// and its answer reaches the server, the form's default filled in; a
/// decline is a decline, and `serverRequest/resolved` ends each question.
#[tokio::test]
async fn an_app_server_client_answers_the_servers_question() {
    let Some(python) = super::super::clients::pip_client("mcp") else {
        return;
    };
    let token = "guard-token-6262";
    let server = guarded(&python, token).await;
    let env = Env::new().await;
    write_config(&env, &config(server.port));
    env.mock.push_all([
        call("c1", "mcp__guard__ask", json!({})),
        call("c2", "mcp__guard__ask", json!({})),
        MockResponse::text("done"),
    ]);
    let mut s =
        super::super::app_server::AppServer::start(env.app_server_cmd().env("GUARD_TOKEN", token))
            .await;
    s.initialize(false).await;
    let thread = s.start_thread(env.ws.path(), "never").await;
    let turn = s.start_turn(&thread, "deploy").await;
    let mut asked = Vec::new();
    let mut answers = [
        json!({"action": "accept", "content": {"proceed": true}}),
        json!({"action": "decline"}),
    ]
    .into_iter();
    let deadline = tokio::time::Instant::now() + WAIT * 2;
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the turn did not end"
        );
        let f = s.next().await;
        if f["method"] == "mcpServer/elicitation/request" {
            asked.push(f.clone());
            let answer = answers.next().expect("asked more than twice");
            s.send(json!({"id": f["id"], "result": answer})).await;
        }
        if f["method"] == "turn/completed" && f["params"]["turn"]["id"] == turn {
            break;
        }
    }
    assert_eq!(asked.len(), 2, "{:#?}", s.frames);
    let p = &asked[0]["params"];
    assert_eq!(p["serverName"], "guard");
    assert_eq!(p["threadId"], thread.as_str());
    assert_eq!(p["turnId"], turn.as_str());
    assert_eq!(p["mode"], "form");
    assert_eq!(p["message"], "Proceed with the deployment?");
    assert_eq!(
        p["requestedSchema"]["properties"]["proceed"]["type"], "boolean",
        "{p}"
    );
    let accepted = result_for(&env, "c1");
    assert!(
        accepted.contains("the client answered: accept; proceed=True target=staging"),
        "{accepted}"
    );
    let declined = result_for(&env, "c2");
    assert!(
        declined.contains("the client answered: decline"),
        "{declined}"
    );
    // Each question was resolved, and the thread said it waited on input.
    let resolved: Vec<Value> = s
        .seen("serverRequest/resolved")
        .into_iter()
        .map(|f| f["params"]["requestId"].clone())
        .collect();
    for q in &asked {
        assert!(resolved.contains(&q["id"]), "{resolved:?} {q}");
    }
    assert!(
        s.seen("thread/status/changed")
            .iter()
            .any(|f| f["params"]["status"]["activeFlags"]
                .to_string()
                .contains("waitingOnUserInput")),
        "{:#?}",
        s.seen("thread/status/changed")
    );
    let out = s.close().await;
    assert!(!out.stderr.contains(token));
}

/// The Claude Agent SDK's `onElicitation` callback is asked the server's
/// question (`claude_agent_sdk_elicitation.mjs`), and its accept and
/// decline reach the server.
#[tokio::test]
async fn the_claude_sdks_callback_answers_the_servers_question() {
    use super::super::clients::{claude_agent_sdk::sdk_env, npm_client, run_node};
    let Some(python) = super::super::clients::pip_client("mcp") else {
        return;
    };
    if !npm_client("@anthropic-ai/claude-agent-sdk") {
        return;
    }
    let token = "guard-token-7373";
    let server = guarded(&python, token).await;
    let env = Env::new().await;
    write_config(&env, &config(server.port));
    env.mock.push_all([
        keel_test_support::anthropic::tool_calls(vec![keel_test_support::tool_call(
            "c1",
            "mcp__guard__ask",
            json!({}),
        )]),
        keel_test_support::anthropic::tool_calls(vec![keel_test_support::tool_call(
            "c2",
            "mcp__guard__ask",
            json!({}),
        )]),
        keel_test_support::anthropic::text("Deployed."),
    ]);
    let mut vars = sdk_env(&env);
    vars.push(("GUARD_TOKEN", token.to_owned()));
    let out = run_node("claude_agent_sdk_elicitation.mjs", &vars).await;
    assert_eq!(out["errors"], json!({}), "{out}");
    assert_eq!(out["results"], json!(["Deployed."]), "{out}");
    let asked = out["asked"].as_array().unwrap();
    assert_eq!(asked.len(), 2, "{out}");
    assert_eq!(asked[0]["serverName"], "guard");
    assert_eq!(asked[0]["message"], "Proceed with the deployment?");
    assert_eq!(asked[0]["mode"], "form");
    assert_eq!(
        asked[0]["requestedSchema"]["properties"]["proceed"]["type"], "boolean",
        "{out}"
    );
    let requests = env.mock.requests();
    let seen = requests.last().unwrap().body.to_string();
    assert!(
        seen.contains("the client answered: accept; proceed=True target=staging"),
        "{seen}"
    );
    assert!(seen.contains("the client answered: decline"), "{seen}");
}

/// An RPC host is asked the server's question as an extension UI dialog
/// (a form of two fields: an `editor` prefilled with the defaults), and
/// what it types reaches the server; a cancelled dialog is `cancel`.
#[tokio::test]
async fn an_rpc_host_answers_the_servers_question_in_a_dialog() {
    let Some(python) = super::super::clients::pip_client("mcp") else {
        return;
    };
    let token = "guard-token-8484";
    let server = guarded(&python, token).await;
    let env = Env::new().await;
    write_config(&env, &config(server.port));
    env.mock.push_all([
        call("c1", "mcp__guard__ask", json!({})),
        call("c2", "mcp__guard__ask", json!({})),
        MockResponse::text("done"),
        call("c3", "mcp__guard__ask", json!({})),
        MockResponse::text("stopped"),
    ]);
    let mut rpc = super::super::rpc::Rpc::start(env.rpc_cmd().env("GUARD_TOKEN", token)).await;
    rpc.send(json!({"type": "prompt", "message": "deploy"}))
        .await;
    let is_editor = |f: &Value| f["type"] == "extension_ui_request" && f["method"] == "editor";
    let first = rpc.wait_for("an editor dialog", is_editor).await;
    assert_eq!(first["title"], "guard asks: Proceed with the deployment?");
    let prefill: Value = serde_json::from_str(first["prefill"].as_str().unwrap()).unwrap();
    assert_eq!(prefill, json!({"proceed": null, "target": "staging"}));
    rpc.send(json!({"type": "extension_ui_response", "id": first["id"],
                    "value": "{\"proceed\": true, \"target\": \"prod\"}"}))
        .await;
    let second = rpc
        .wait_for("a second editor dialog", |f| {
            f["type"] == "extension_ui_request" && f["method"] == "editor" && f["id"] != first["id"]
        })
        .await;
    rpc.send(json!({"type": "extension_ui_response", "id": second["id"], "cancelled": true}))
        .await;
    rpc.event("agent_end").await;
    let accepted = result_for(&env, "c1");
    assert!(
        accepted.contains("the client answered: accept; proceed=True target=prod"),
        "{accepted}"
    );
    let cancelled = result_for(&env, "c2");
    assert!(
        cancelled.contains("the client answered: cancel"),
        "{cancelled}"
    );
    // Aborted while the dialog is open: keel withdraws it.
    rpc.send(json!({"type": "prompt", "message": "again"}))
        .await;
    let third = rpc
        .wait_for("a third editor dialog", |f| {
            f["type"] == "extension_ui_request"
                && f["method"] == "editor"
                && f["id"] != first["id"]
                && f["id"] != second["id"]
        })
        .await;
    rpc.send(json!({"type": "abort"})).await;
    rpc.wait_for("the dialog withdrawn", |f| {
        f["type"] == "extension_ui_request"
            && f["method"] == "cancel"
            && f["targetId"] == third["id"]
    })
    .await;
    let (out, _) = rpc.finish().await;
    assert!(!out.stderr.contains(token));
}
