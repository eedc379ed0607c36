//! A streamable HTTP server that checks the bearer token
//! (`tests/clients/guarded_server.py`, on the published Python SDK): keel
//! sends the token and the configured headers, a wrong token fails the
//! server with a clear error, and a server's question (elicitation) is
//! declined and logged.

use std::path::Path;

use keel_test_support::MockResponse;
use serde_json::{Value, json};

use super::super::Env;
use super::super::clients::clients_dir;
use super::super::rpc::WAIT;
use super::{call, result_for, write_config};

/// The guarded server on a free loopback port, token read from `TOKEN`.
struct Guarded {
    port: u16,
    _child: tokio::process::Child,
}

async fn guarded(python: &Path, token: &str) -> Guarded {
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

fn config(port: u16) -> String {
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
