//! MCP servers an app-server client names in a thread's `config`: the
//! thread gets their tools (and the process's, minus any it turns off),
//! other threads do not, and their startup is announced with the thread's
//! id; every frame is checked against Codex's schema.

use keel_test_support::MockResponse;
use serde_json::{Value, json};

use super::super::Env;
use super::{call, everything, offered, time_server, write_config};

#[tokio::test]
async fn a_threads_config_names_servers_of_its_own() {
    let (Some(everything), Some(time)) = (everything(), time_server()) else {
        return;
    };
    let env = Env::new().await;
    write_config(
        &env,
        &format!(
            "[mcp_servers.ev]\ncommand = {:?}\nargs = [\"stdio\"]\ndefault_class = \"read\"\n",
            everything.display().to_string()
        ),
    );
    env.mock.push_all([
        call(
            "c1",
            "mcp__tm__get_current_time",
            json!({"timezone": "UTC"}),
        ),
        MockResponse::text("thread A done"),
        MockResponse::text("thread B done"),
    ]);
    let mut s = env.initialized(false).await;
    // The process's servers started before the client connected; it hears
    // where they stand once it says `initialized`.
    let at_start = s.notification("mcpServer/startupStatus/updated").await;
    assert_eq!(at_start["params"]["name"], "ev", "{at_start}");
    assert_eq!(at_start["params"]["status"], "ready", "{at_start}");
    let a = s
        .ok(
            "thread/start",
            json!({
                "cwd": env.ws().display().to_string(),
                "approvalPolicy": "never",
                "config": {
                    "mcp_servers.tm": {
                        "command": time.display().to_string(),
                        "args": ["--local-timezone", "UTC"],
                        "default_class": "read",
                    },
                    "mcp_servers.ev.enabled": false,
                },
            }),
        )
        .await["thread"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let tm = s
        .wait_for("tm's startup status", |f| {
            f["method"] == "mcpServer/startupStatus/updated" && f["params"]["name"] == "tm"
        })
        .await;
    assert_eq!(tm["params"]["status"], "ready", "{tm}");
    assert_eq!(tm["params"]["threadId"], a.as_str());
    // Listed for the thread: its own server, the process's `ev` turned off.
    let listed = s.ok("mcpServerStatus/list", json!({"threadId": a})).await;
    let by_name = |n: &str| -> Value {
        listed["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .cloned()
            .unwrap_or(Value::Null)
    };
    assert_eq!(by_name("tm")["runtimeStatus"], "connected", "{listed}");
    assert!(by_name("tm")["tools"]["get_current_time"].is_object());
    assert_eq!(by_name("ev")["runtimeStatus"], "disabled", "{listed}");
    // Without a thread: the process's servers only.
    let process = s.ok("mcpServerStatus/list", json!({})).await;
    assert_eq!(process["data"].as_array().unwrap().len(), 1, "{process}");
    assert_eq!(process["data"][0]["name"], "ev");
    // Thread A's model sees tm's tools and not ev's; the call runs.
    let turn = s.start_turn(&a, "what time is it").await;
    let done = s.finish_turn(&turn, "decline").await;
    assert_eq!(done["status"], "completed", "{done}");
    let first = offered(&env, 0);
    assert!(
        first.contains(&"mcp__tm__get_current_time".to_owned()),
        "{first:?}"
    );
    assert!(
        !first.iter().any(|t| t.starts_with("mcp__ev__")),
        "{first:?}"
    );
    let item = s
        .seen("item/completed")
        .into_iter()
        .map(|n| n["params"]["item"].clone())
        .find(|i| i["type"] == "mcpToolCall")
        .expect("an mcpToolCall item");
    assert_eq!(item["server"], "tm", "{item}");
    assert_eq!(item["status"], "completed", "{item}");
    // A client may call the thread's own server directly.
    let direct = s
        .ok(
            "mcpServer/tool/call",
            json!({"threadId": a, "server": "tm", "tool": "get_current_time", "arguments": {"timezone": "UTC"}}),
        )
        .await;
    assert!(direct.to_string().contains("UTC"), "{direct}");
    // Thread B has the process's servers only.
    let b = s.start_thread(env.ws(), "never").await;
    let turn = s.start_turn(&b, "hello").await;
    s.finish_turn(&turn, "decline").await;
    let third = offered(&env, 2);
    assert!(third.contains(&"mcp__ev__echo".to_owned()), "{third:?}");
    assert!(
        !third.iter().any(|t| t.starts_with("mcp__tm__")),
        "{third:?}"
    );
    let err = s
        .err(
            "mcpServer/tool/call",
            json!({"threadId": b, "server": "tm", "tool": "get_current_time", "arguments": {}}),
        )
        .await;
    assert!(
        err["message"]
            .as_str()
            .unwrap()
            .contains("no MCP server named tm"),
        "{err}"
    );
    // A mistake in the config is refused, naming the key.
    let bad = s
        .err(
            "thread/start",
            json!({"config": {"mcp_servers.x.comand": "oops"}}),
        )
        .await;
    assert!(bad["message"].as_str().unwrap().contains("comand"), "{bad}");
    let out = s.close().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}
