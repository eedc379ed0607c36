//! MCP servers through the real binary: published servers from npm
//! (`@modelcontextprotocol/server-everything`, over stdio and streamable
//! HTTP) and PyPI (`mcp-server-time`), installed by `.ci/run` under
//! `tests/clients/`, plus fault cases: a server that hangs at startup and
//! one killed in the middle of a call.

mod confined;
pub(crate) mod guarded;
mod oauth;
mod protocols;
mod threads;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::Env;
use super::approvals::result_text;
use super::clients::{clients_dir, npm_client};
use super::rpc::WAIT;

fn everything() -> Option<PathBuf> {
    npm_client("@modelcontextprotocol/server-everything")
        .then(|| clients_dir().join("node_modules/.bin/mcp-server-everything"))
}

fn time_server() -> Option<PathBuf> {
    let p = clients_dir().join(".venv/bin/mcp-server-time");
    if p.exists() {
        return Some(p);
    }
    super::clients::pip_client("mcp_server_time").map(|_| p)
}

fn call(id: &str, tool: &str, args: Value) -> MockResponse {
    MockResponse::tool_calls(vec![tool_call(id, tool, args)])
}

/// The text the model was given as the result of call `id`.
fn result_for(env: &Env, id: &str) -> String {
    super::sandbox::result_for(env, id)
}

/// The tool names of a request body the mock model received.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect()
}

/// The tool names offered in model request `i`.
fn offered(env: &Env, i: usize) -> Vec<String> {
    tool_names(&env.mock.requests()[i].body)
}

fn write_config(env: &Env, text: &str) {
    std::fs::write(env.home.path().join("config.toml"), text).unwrap();
}

#[tokio::test]
async fn tools_of_published_servers_reach_the_model_and_answer() {
    let (Some(everything), Some(time)) = (everything(), time_server()) else {
        return;
    };
    let env = Env::new().await;
    write_config(
        &env,
        &format!(
            "[mcp_servers.everything]\ncommand = {:?}\nargs = [\"stdio\"]\n\n\
             [mcp_servers.time]\ncommand = {:?}\nargs = [\"--local-timezone\", \"UTC\"]\n\n\
             [mcp_servers.hang]\ncommand = \"sleep\"\nargs = [\"300\"]\nstartup_timeout_sec = 1\n",
            everything.display().to_string(),
            time.display().to_string()
        ),
    );
    env.mock.push_all([
        call(
            "c1",
            "mcp__everything__echo",
            json!({"message": "hello over MCP"}),
        ),
        call(
            "c2",
            "mcp__time__get_current_time",
            json!({"timezone": "UTC"}),
        ),
        call(
            "c3",
            "mcp__everything__read_resource",
            json!({"uri": "demo://resource/static/document/architecture.md"}),
        ),
        call(
            "c4",
            "mcp__everything__read_resource",
            json!({"uri": "demo://resource/dynamic/text/7"}),
        ),
        MockResponse::text("done"),
    ]);
    let started = Instant::now();
    let run = env.exec().arg("use the servers").run().await.unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    // The hanging server delayed the run by its startup timeout, no more.
    assert!(started.elapsed() < Duration::from_secs(60));
    let first = &env.mock.requests()[0].body;
    let offered = tool_names(first);
    assert!(
        offered.contains(&"mcp__everything__echo".to_owned()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"mcp__time__convert_time".to_owned()),
        "{offered:?}"
    );
    assert!(!offered.iter().any(|n| n.starts_with("mcp__hang__")));
    assert!(
        result_for(&env, "c1").contains("hello over MCP"),
        "{}",
        result_for(&env, "c1")
    );
    // Resources are one read tool per server, naming what it lists.
    let read = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "mcp__everything__read_resource")
        .expect("a read_resource tool");
    assert!(
        read["function"]["description"]
            .as_str()
            .unwrap()
            .contains("demo://resource/static/document/architecture.md"),
        "{read}"
    );
    // Templates are named too, and a URI filled in from one reads.
    assert!(
        read["function"]["description"]
            .as_str()
            .unwrap()
            .contains("demo://resource/dynamic/text/{resourceId}"),
        "{read}"
    );
    assert!(
        result_for(&env, "c4").contains("Resource 7: This is a plaintext resource"),
        "{}",
        result_for(&env, "c4")
    );
    assert!(
        result_for(&env, "c3").contains("Architecture"),
        "{}",
        result_for(&env, "c3")
    );
    let t = result_for(&env, "c2");
    assert!(t.contains("\"timezone\"") && t.contains("UTC"), "{t}");
    // `keel mcp list` shows the same, with the failed server and why.
    let list = env
        .keel()
        .args(["mcp", "list", "--json"])
        .run()
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&list.stdout).unwrap();
    let by_name = |n: &str| {
        v.as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == n)
            .cloned()
            .unwrap()
    };
    assert_eq!(by_name("everything")["state"], "ready");
    assert_eq!(by_name("hang")["state"], "failed");
    assert!(
        by_name("hang")["error"]
            .as_str()
            .unwrap()
            .contains("within 1s")
    );
    let echo = by_name("everything")["toolNames"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__everything__echo")
        .cloned()
        .unwrap();
    assert_eq!(echo["class"], "read", "echo is annotated read-only");
}

#[tokio::test]
async fn mcp_tools_pass_the_gate_by_their_class_and_rules_stay_per_tool() {
    let Some(everything) = everything() else {
        return;
    };
    let env = Env::new().await;
    write_config(
        &env,
        &format!(
            "[mcp_servers.ev]\ncommand = {:?}\nargs = [\"stdio\"]\n\
             tool_classes = {{ \"get-sum\" = \"send\", echo = \"send\", \"get-env\" = \"money\" }}\n",
            everything.display().to_string()
        ),
    );
    env.mock.push_all([
        call("c1", "mcp__ev__get-sum", json!({"a": 2, "b": 3})),
        MockResponse::text("one"),
        call("c2", "mcp__ev__get-sum", json!({"a": 4, "b": 5})),
        MockResponse::text("two"),
        call("c3", "mcp__ev__echo", json!({"message": "sibling"})),
        MockResponse::text("three"),
        call("c4", "mcp__ev__get-env", json!({})),
        MockResponse::text("four"),
        call("c5", "mcp__ev__get-tiny-image", json!({})),
        MockResponse::text("five"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["mcpServers"][0]["name"], "ev", "{state}");
    assert_eq!(state["mcpServers"][0]["state"], "ready");
    // Configured as send: held; "always" saves a rule for this one tool.
    rpc.send(json!({"type": "prompt", "message": "one"})).await;
    let req = rpc.approval_request().await;
    assert_eq!(req["toolName"], "mcp__ev__get-sum");
    assert_eq!(req["class"], "send");
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "approve_always", json!({})).await;
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(result_text(&end).contains('5'), "{end}");
    rpc.event("agent_end").await;
    // The same tool runs unasked now.
    rpc.send(json!({"type": "prompt", "message": "two"})).await;
    let end = rpc.tool_end("c2").await;
    assert!(result_text(&end).contains('9'), "{end}");
    rpc.event("agent_end").await;
    // Its sibling is not covered by that rule.
    rpc.send(json!({"type": "prompt", "message": "three"}))
        .await;
    let req = rpc.approval_request().await;
    assert_eq!(req["toolName"], "mcp__ev__echo", "{req}");
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "approve", json!({})).await;
    rpc.tool_end("c3").await;
    rpc.event("agent_end").await;
    // Money: held, never offered always-allow; declined, it does not run.
    rpc.send(json!({"type": "prompt", "message": "four"})).await;
    let req = rpc.approval_request().await;
    assert_eq!(
        (req["toolName"].clone(), req["class"].clone()),
        (json!("mcp__ev__get-env"), json!("money"))
    );
    assert_eq!(req["always"], Value::Null);
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "decline", json!({"note": "no env"})).await;
    let end = rpc.tool_end("c4").await;
    assert!(result_text(&end).contains("no env"), "{end}");
    rpc.event("agent_end").await;
    // Annotated read-only: runs unasked, and an image comes back as one.
    rpc.send(json!({"type": "prompt", "message": "five"})).await;
    let end = rpc.tool_end("c5").await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(
        end["result"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["type"] == "image"),
        "{end}"
    );
    rpc.event("agent_end").await;
    let asked = rpc
        .frames
        .iter()
        .filter(|f| f["type"] == "approval_request")
        .count();
    assert_eq!(asked, 3);
}

/// The pids of processes whose environment holds `marker`.
fn pids_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        if let Ok(env) = std::fs::read(entry.path().join("environ"))
            && String::from_utf8_lossy(&env).contains(marker)
        {
            out.push(pid);
        }
    }
    out
}

#[tokio::test]
async fn a_server_killed_mid_call_fails_that_call_cleanly_and_is_started_again() {
    let Some(everything) = everything() else {
        return;
    };
    let env = Env::new().await;
    let marker = format!("KEEL_MCP_TEST_{}", std::process::id());
    write_config(
        &env,
        &format!(
            "[mcp_servers.ev]\ncommand = {:?}\nargs = [\"stdio\"]\nenv = {{ {marker} = \"1\" }}\n",
            everything.display().to_string()
        ),
    );
    env.mock.push_all([
        call(
            "c1",
            "mcp__ev__trigger-long-running-operation",
            json!({"duration": 30, "steps": 30}),
        ),
        MockResponse::text("interrupted"),
        call("c2", "mcp__ev__echo", json!({"message": "back again"})),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "long"})).await;
    rpc.wait_for("the call started", |f| {
        super::rpc::event(f).is_some_and(|e| e["type"] == "tool_execution_start")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pids = pids_with(&format!("{marker}=1"));
    assert!(!pids.is_empty(), "the server is not running");
    for pid in &pids {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], true, "{end}");
    assert!(result_text(&end).contains("MCP server ev"), "{end}");
    rpc.event("agent_end").await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["mcpServers"][0]["state"], "failed", "{state}");
    // The next call starts it again.
    rpc.send(json!({"type": "prompt", "message": "again"}))
        .await;
    let end = rpc.tool_end("c2").await;
    assert_eq!(end["isError"], false, "{end}");
    assert!(result_text(&end).contains("back again"), "{end}");
    rpc.event("agent_end").await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(state["mcpServers"][0]["state"], "ready", "{state}");
    assert!(tokio::time::timeout(WAIT, async {}).await.is_ok());
}

#[tokio::test]
async fn a_streamable_http_server_with_a_bearer_token_works_and_the_token_stays_out() {
    let Some(everything) = everything() else {
        return;
    };
    let env = Env::new().await;
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = tokio::process::Command::new(&everything)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(server.stderr.take().unwrap()).lines();
        tokio::time::timeout(WAIT, async {
            while let Ok(Some(l)) = lines.next_line().await {
                if l.contains("listening") {
                    break;
                }
            }
        })
        .await
        .expect("the HTTP server did not start");
    }
    let token = "tok-very-secret-4242";
    write_config(
        &env,
        &format!(
            "[mcp_servers.web]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\
             bearer_token_env_var = \"WEB_MCP_TOKEN\"\nhttp_headers = {{ \"X-Team\" = \"infra\" }}\n"
        ),
    );
    env.mock.push_all([
        call("c1", "mcp__web__echo", json!({"message": "over http"})),
        MockResponse::text("done"),
    ]);
    let run = env
        .exec()
        .env("WEB_MCP_TOKEN", token)
        .env("RUST_LOG", "debug")
        .arg("go")
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert!(
        result_for(&env, "c1").contains("over http"),
        "{}",
        result_for(&env, "c1")
    );
    assert!(!run.stderr.contains(token), "the token reached the log");
    assert!(!run.stdout.contains(token));
    let mut files = vec![env.home.path().to_path_buf()];
    while let Some(dir) = files.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                files.push(p);
            } else if let Ok(text) = std::fs::read(&p) {
                assert!(
                    !String::from_utf8_lossy(&text).contains(token),
                    "the token is in {}",
                    p.display()
                );
            }
        }
    }
    let export = env
        .keel()
        .args(["sessions", "export", "--html", "-o", "out.html"])
        .run()
        .await
        .unwrap();
    assert_eq!(export.code(), Some(0), "{}", export.stderr);
    let html = std::fs::read_to_string(env.ws().join("out.html")).unwrap_or_default();
    assert!(!html.contains(token));
    let _ = server.kill().await;
}

#[tokio::test]
async fn app_server_threads_get_mcp_tools_as_mcp_tool_call_items() {
    let Some(everything) = everything() else {
        return;
    };
    let env = Env::new().await;
    write_config(
        &env,
        &format!(
            "[mcp_servers.ev]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            everything.display().to_string()
        ),
    );
    env.mock.push_all([
        call("c1", "mcp__ev__echo", json!({"message": "from a thread"})),
        call(
            "c2",
            "mcp__ev__trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
        ),
        MockResponse::text("done"),
    ]);
    let mut s = env.initialized(false).await;
    let list = s.ok("mcpServerStatus/list", json!({})).await;
    let ev = &list["data"][0];
    assert_eq!(ev["name"], "ev", "{list}");
    assert_eq!(ev["runtimeStatus"], "connected");
    assert_eq!(ev["authStatus"], "unsupported");
    assert!(ev["tools"]["echo"]["inputSchema"].is_object(), "{list}");
    let thread = s.start_thread(env.ws(), "never").await;
    let turn = s.start_turn(&thread, "echo").await;
    let done = s.finish_turn(&turn, "decline").await;
    assert_eq!(done["status"], "completed", "{done}");
    let item = s
        .seen("item/completed")
        .into_iter()
        .map(|n| n["params"]["item"].clone())
        .find(|i| i["type"] == "mcpToolCall")
        .expect("an mcpToolCall item");
    assert_eq!(
        (item["server"].clone(), item["tool"].clone()),
        (json!("ev"), json!("echo"))
    );
    assert_eq!(item["status"], "completed", "{item}");
    assert!(
        item["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("from a thread"),
        "{item}"
    );
    // The server's progress reaches the client while the tool runs.
    let progress = s.seen("item/mcpToolCall/progress");
    assert!(!progress.is_empty(), "no progress notification");
    assert_eq!(progress[0]["params"]["itemId"], "c2", "{progress:?}");
    assert!(
        progress[0]["params"]["message"]
            .as_str()
            .unwrap()
            .contains("/3"),
        "{progress:?}"
    );
    // A client may read a server's resource itself.
    let res = s
        .ok(
            "mcpServer/resource/read",
            json!({"server": "ev", "uri": "demo://resource/static/document/architecture.md"}),
        )
        .await;
    assert!(
        res["contents"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Architecture"),
        "{res}"
    );
    let listed = s.ok("mcpServerStatus/list", json!({})).await;
    assert!(
        listed
            .to_string()
            .contains("demo://resource/static/document/architecture.md"),
        "resources are listed"
    );
    let templates = listed["data"][0]["resourceTemplates"].to_string();
    assert!(
        templates.contains("demo://resource/dynamic/text/{resourceId}"),
        "{templates}"
    );
    // A client may call a server's tool itself.
    let direct = s
        .ok(
            "mcpServer/tool/call",
            json!({"threadId": thread, "server": "ev", "tool": "get-sum", "arguments": {"a": 20, "b": 22}}),
        )
        .await;
    assert_eq!(direct["isError"], false, "{direct}");
    assert!(
        direct["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("42"),
        "{direct}"
    );
    let e = s
        .err(
            "mcpServer/tool/call",
            json!({"threadId": "nope", "server": "ev", "tool": "echo"}),
        )
        .await;
    assert!(e["message"].as_str().unwrap().contains("nope"), "{e}");
    s.close().await;
}

#[tokio::test]
async fn an_rpc_host_sets_the_mcp_servers_of_its_sessions() {
    let Some(everything) = everything() else {
        return;
    };
    let env = Env::new().await;
    env.mock.push_all([
        call(
            "c1",
            "mcp__host__echo",
            json!({"message": "set by the host"}),
        ),
        MockResponse::text("done"),
        MockResponse::text("no tools now"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    let bad = rpc
        .call(json!({"type": "set_mcp_servers", "servers": {"x": {"comand": "typo"}}}))
        .await;
    assert_eq!(bad["success"], false, "{bad}");
    assert!(bad["error"].as_str().unwrap().contains("comand"), "{bad}");
    let set = rpc
        .ok(json!({"type": "set_mcp_servers", "servers": {
            "host": {"command": everything.display().to_string(), "args": ["stdio"]}
        }}))
        .await;
    assert_eq!(set["servers"][0]["state"], "ready", "{set}");
    rpc.send(json!({"type": "prompt", "message": "echo"})).await;
    let end = rpc.tool_end("c1").await;
    assert!(result_text(&end).contains("set by the host"), "{end}");
    rpc.event("agent_end").await;
    // Setting none removes the servers and their tools.
    rpc.ok(json!({"type": "set_mcp_servers", "servers": {}}))
        .await;
    let state = rpc.ok(json!({"type": "get_state"})).await;
    assert!(state.get("mcpServers").is_none(), "{state}");
    rpc.send(json!({"type": "prompt", "message": "again"}))
        .await;
    rpc.event("agent_end").await;
    let last = env.mock.last_request().unwrap().body;
    let names = tool_names(&last);
    assert!(!names.iter().any(|n| n.starts_with("mcp__")), "{names:?}");
    assert!(names.contains(&"bash".to_owned()));
}

#[tokio::test]
async fn app_server_reload_starts_the_configured_servers_for_loaded_threads() {
    let Some(everything) = everything() else {
        return;
    };
    let env = Env::new().await;
    env.mock.push_all([
        call(
            "c1",
            "mcp__late__echo",
            json!({"message": "after a reload"}),
        ),
        MockResponse::text("done"),
    ]);
    let mut s = env.initialized(false).await;
    let thread = s.start_thread(env.ws(), "never").await;
    let none = s.ok("mcpServerStatus/list", json!({})).await;
    assert_eq!(none["data"], json!([]));
    write_config(
        &env,
        &format!(
            "[mcp_servers.late]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            everything.display().to_string()
        ),
    );
    s.ok("config/mcpServer/reload", Value::Null).await;
    let updates = s.seen("mcpServer/startupStatus/updated");
    let statuses: Vec<Value> = updates
        .iter()
        .map(|n| n["params"]["status"].clone())
        .collect();
    assert_eq!(
        statuses,
        vec![json!("starting"), json!("ready")],
        "{updates:?}"
    );
    // The thread loaded before the reload gets the new server's tools.
    let turn = s.start_turn(&thread, "echo").await;
    s.finish_turn(&turn, "decline").await;
    let item = s
        .seen("item/completed")
        .into_iter()
        .map(|n| n["params"]["item"].clone())
        .find(|i| i["type"] == "mcpToolCall")
        .expect("an mcpToolCall item");
    assert_eq!(item["status"], "completed", "{item}");
    s.close().await;
}

#[tokio::test]
async fn a_workspace_names_servers_that_start_only_once_trusted() {
    let Some(everything) = everything() else {
        return;
    };
    let env = Env::new().await;
    std::fs::create_dir_all(env.ws().join(".keel")).unwrap();
    std::fs::write(
        env.ws().join(".keel/config.toml"),
        format!(
            "[mcp_servers.team]\ncommand = {:?}\nargs = [\"stdio\"]\n",
            everything.display().to_string()
        ),
    )
    .unwrap();
    let offered = |env: &Env| tool_names(&env.mock.last_request().unwrap().body);
    env.mock.push_all([MockResponse::text("untrusted")]);
    let run = env.exec().arg("hi").run().await.unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert!(run.stderr.contains("keel mcp trust"), "{}", run.stderr);
    assert!(!offered(&env).iter().any(|n| n.starts_with("mcp__team__")));
    let trust = env.keel().args(["mcp", "trust"]).run().await.unwrap();
    assert_eq!(trust.code(), Some(0), "{}", trust.stderr);
    assert!(trust.stdout.contains("team:"), "{}", trust.stdout);
    env.mock.push_all([MockResponse::text("trusted")]);
    let run = env.exec().arg("hi").run().await.unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert!(offered(&env).contains(&"mcp__team__echo".to_owned()));
}

#[tokio::test]
async fn a_changed_tool_list_is_offered_from_the_next_model_call() {
    let Some(python) = super::clients::pip_client("mcp") else {
        return;
    };
    let env = Env::new().await;
    let script = clients_dir().join("list_changing_server.py");
    write_config(
        &env,
        &format!(
            "[mcp_servers.lock]\ncommand = {:?}\nargs = [{:?}]\ndefault_class = \"read\"\n",
            python.display().to_string(),
            script.display().to_string()
        ),
    );
    env.mock.push_all([
        call("c1", "mcp__lock__unlock", json!({})),
        call("c2", "mcp__lock__secret", json!({})),
        MockResponse::text("done"),
    ]);
    let run = env.exec().arg("unlock it").run().await.unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    let names = |i: usize| offered(&env, i);
    assert!(!names(0).contains(&"mcp__lock__secret".to_owned()));
    assert!(
        names(1).contains(&"mcp__lock__secret".to_owned()),
        "{:?}",
        names(1)
    );
    assert!(
        result_for(&env, "c2").contains("the secret tool ran"),
        "{}",
        result_for(&env, "c2")
    );
}
