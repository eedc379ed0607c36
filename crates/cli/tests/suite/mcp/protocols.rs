//! Both eras of MCP: a server that speaks only 2026-07-28 (stateless,
//! `tests/clients/stateless_server.py`) is reached with `server/discover`
//! once it refuses `initialize`; `protocol = "2026-07-28"` asks a server
//! that speaks both (`mcp-server-time`) for the new era first; a
//! session-based server (`server-everything`) keeps `initialize` either
//! way; a bad value is named.

use serde_json::{Value, json};

use super::super::Env;
use super::super::clients::clients_dir;
use super::{call, everything, result_for, time_server, write_config};

#[tokio::test]
async fn stateless_and_session_servers_are_both_reached() {
    let (Some(everything), Some(time)) = (everything(), time_server()) else {
        return;
    };
    let env = Env::new().await;
    let stateless = clients_dir().join("stateless_server.py");
    write_config(
        &env,
        &format!(
            "[mcp_servers.stateless]\ncommand = \"python3\"\nargs = [\"{}\"]\n\n\
             [mcp_servers.time]\ncommand = \"{}\"\nprotocol = \"2026-07-28\"\n\n\
             [mcp_servers.everything]\ncommand = \"{}\"\nprotocol = \"2026-07-28\"\n\n\
             [mcp_servers.session]\ncommand = \"{}\"\n",
            stateless.display(),
            time.display(),
            everything.display(),
            time.display(),
        ),
    );
    let list = env
        .keel()
        .args(["mcp", "list", "--json"])
        .run()
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&list.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}\n{}", list.stdout, list.stderr));
    let version = |name: &str| -> Value {
        let s = v
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name}: {v}"));
        assert_eq!(s["state"], "ready", "{s}");
        s["protocolVersion"].clone()
    };
    assert_eq!(version("stateless"), "2026-07-28");
    assert_eq!(version("time"), "2026-07-28");
    assert_eq!(version("session"), "2025-11-25");
    assert_eq!(version("everything"), "2025-11-25");

    // A session's calls reach the stateless server, each request naming
    // its version, and the dual server in the new era.
    env.mock.push_all([
        call("c1", "mcp__stateless__era", json!({})),
        call(
            "c2",
            "mcp__time__get_current_time",
            json!({"timezone": "UTC"}),
        ),
        keel_test_support::MockResponse::text("done"),
    ]);
    let run = env.exec().arg("which era?").run().await.unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    let era = result_for(&env, "c1");
    assert!(
        era.contains("this request named protocol 2026-07-28"),
        "{era}"
    );
    assert!(
        result_for(&env, "c2").contains("UTC"),
        "{}",
        result_for(&env, "c2")
    );
}

#[tokio::test]
async fn an_unknown_protocol_is_named() {
    let env = Env::new().await;
    write_config(
        &env,
        "[mcp_servers.x]\ncommand = \"python3\"\nprotocol = \"2024\"\n",
    );
    let list = env
        .keel()
        .args(["mcp", "list", "--json"])
        .run()
        .await
        .unwrap();
    assert!(
        list.stdout
            .contains("protocol = \\\"2024\\\": use \\\"session\\\" or \\\"2026-07-28\\\""),
        "{}\n{}",
        list.stdout,
        list.stderr
    );
}

/// A 2026-07-28 server's question (an `input_required` result) reaches
/// the person, here an RPC host's `confirm`, and the call goes on with
/// the answer and the server's request state.
#[tokio::test]
async fn a_stateless_servers_question_reaches_the_person() {
    let env = Env::new().await;
    let stateless = clients_dir().join("stateless_server.py");
    write_config(
        &env,
        &format!(
            "[mcp_servers.stateless]\ncommand = \"python3\"\nargs = [\"{}\"]\n",
            stateless.display()
        ),
    );
    env.mock.push_all([
        call("c1", "mcp__stateless__ask", json!({})),
        keel_test_support::MockResponse::text("done"),
    ]);
    let mut rpc = super::super::rpc::Rpc::start(env.rpc_cmd()).await;
    rpc.send(json!({"type": "prompt", "message": "migrate"}))
        .await;
    let confirm = rpc
        .wait_for("a confirm dialog", |f| {
            f["type"] == "extension_ui_request" && f["method"] == "confirm"
        })
        .await;
    assert_eq!(
        confirm["title"],
        "stateless asks: Proceed with the migration?"
    );
    rpc.send(json!({"type": "extension_ui_response", "id": confirm["id"], "confirmed": true}))
        .await;
    rpc.event("agent_end").await;
    let answered = result_for(&env, "c1");
    assert_eq!(
        answered, "the client answered: accept; {\"proceed\": true}",
        "{answered}"
    );
    rpc.finish().await;
}
