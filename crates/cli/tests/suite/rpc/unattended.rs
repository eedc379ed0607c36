//! `negotiate_unattended`: refusal of partial declarations, then scopes,
//! the action allowlist and the budget enforced, failing closed, with an
//! audit line per decision.

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use crate::suite::Env;

fn declaration(max_tokens: u64, max_tool_calls: u64) -> Value {
    json!({"actor": "openclaw/hermes",
        "budget": {"max_tokens": max_tokens, "max_tool_calls": max_tool_calls,
            "max_wall_time_ms": 3_600_000, "max_cost_usd": 20},
        "scopes": ["prompt"],
        "action_allowlist": ["bash.readonly"]})
}

fn code(r: &Value) -> &str {
    r["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn scopes_allowlist_and_tool_budget_fail_closed() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![
            tool_call("c1", "bash", json!({"command": "ls"})),
            tool_call("c2", "bash", json!({"command": "rm -rf victim"})),
            tool_call("c3", "write", json!({"path": "x.txt", "content": "x"})),
            tool_call("c4", "bash", json!({"command": "pwd"})),
            tool_call("c5", "bash", json!({"command": "ls"})),
        ]),
        MockResponse::text("done"),
    ]);
    std::fs::write(env.ws().join("victim"), "keep me").unwrap();
    let mut rpc = env.rpc(&[]).await;
    let r = rpc.call(json!({"type": "negotiate_unattended"})).await;
    assert_eq!(
        (r["success"].as_bool(), code(&r)),
        (Some(false), "unattended_refused")
    );
    let mut partial = declaration(1_000_000, 2);
    partial["budget"]
        .as_object_mut()
        .unwrap()
        .remove("max_wall_time_ms");
    let r = rpc
        .call(json!({"type": "negotiate_unattended", "declaration": partial}))
        .await;
    assert_eq!(code(&r), "unattended_refused");
    assert!(
        r["error"]["problems"]
            .to_string()
            .contains("max_wall_time_ms")
    );
    // Still attended: everything is allowed.
    rpc.ok(json!({"type": "set_steering_mode", "mode": "all"}))
        .await;

    let d = rpc
        .ok(json!({"type": "negotiate_unattended", "declaration": declaration(1_000_000, 2)}))
        .await;
    assert_eq!(d["status"], "accepted");
    assert_eq!(d["actor"], "openclaw/hermes");
    let r = rpc.call(json!({"type": "bash", "command": "ls"})).await;
    assert_eq!(code(&r), "scope_denied");
    assert_eq!(r["error"]["scope"], "bash");
    let r = rpc
        .call(json!({"type": "set_interrupt_mode", "mode": "wait"}))
        .await;
    assert_eq!(code(&r), "scope_denied");
    rpc.ok(json!({"type": "get_state"})).await;

    rpc.prompt_and_wait("work").await;
    let ends: Vec<Value> = rpc
        .events()
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end")
        .cloned()
        .collect();
    let outcome: Vec<(bool, String)> = ends
        .iter()
        .map(|e| {
            let text = e["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default();
            let code = ["action_denied", "budget_exhausted"]
                .into_iter()
                .find(|c| text.contains(c))
                .unwrap_or("");
            (e["isError"].as_bool().unwrap(), code.to_owned())
        })
        .collect();
    assert_eq!(
        outcome,
        [
            (false, String::new()),
            (true, "action_denied".into()),
            (true, "action_denied".into()),
            (false, String::new()),
            (true, "budget_exhausted".into()),
        ]
    );
    assert!(env.ws().join("victim").exists());
    assert!(!env.ws().join("x.txt").exists());

    let audit = env.home_file_text("rpc/audit.jsonl").await;
    assert!(!audit.is_empty(), "no audit log");
    let lines: Vec<Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .any(|l| l["subject"] == "negotiation" && l["decision"] == "deny")
    );
    assert!(
        lines
            .iter()
            .any(|l| l["subject"] == "negotiation" && l["decision"] == "allow")
    );
    assert!(
        lines
            .iter()
            .any(|l| l["name"] == "bash" && l["code"] == "scope_denied")
    );
    let tool_lines = lines.iter().filter(|l| l["subject"] == "tool").count();
    assert_eq!(tool_lines, 5, "one line per tool decision");
    assert!(
        lines
            .iter()
            .all(|l| l["actor"].is_string() && l["ts"].is_string())
    );
}

#[tokio::test]
async fn token_budget_aborts_the_run_and_refuses_more_prompts() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call("c1", "bash", json!({"command": "ls"}))]),
        // Stalls: only an abort ends this run.
        MockResponse::text("never reached").stall_after(1),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "negotiate_unattended", "declaration": declaration(10, 100)}))
        .await;
    let end = rpc.prompt_and_wait("go").await;
    assert!(!end.to_string().contains("never reached"), "{end}");
    let r = rpc.call(json!({"type": "prompt", "message": "more"})).await;
    assert_eq!(r["success"], false);
    assert_eq!(code(&r), "budget_exhausted");
    assert_eq!(r["error"]["budget"], "max_tokens");
}

#[tokio::test]
async fn readonly_bash_refuses_commands_that_hide_a_write() {
    let env = Env::new().await;
    let attempts = [
        ("ok1", "cat victim"),
        ("ok2", "grep -c keep victim | head -1"),
        ("b1", "ls && rm -rf victim"),
        ("b2", "echo $(rm victim)"),
        ("b3", "echo `rm victim`"),
        ("b4", "bash -c 'rm victim'"),
        ("b5", "LD_PRELOAD=/nonexistent.so cat victim"),
        ("b6", "cat victim > copy"),
        ("b7", "ls\nrm victim"),
        ("b8", "find . -name victim -delete"),
        ("b9", "ls | xargs rm"),
        ("b10", "eval 'rm victim'"),
    ];
    env.mock.push_all([
        MockResponse::tool_calls(
            attempts
                .iter()
                .map(|(id, cmd)| tool_call(id, "bash", json!({"command": cmd})))
                .collect(),
        ),
        MockResponse::text("done"),
    ]);
    std::fs::write(env.ws().join("victim"), "keep me").unwrap();
    let mut rpc = env.rpc(&[]).await;
    rpc.ok(json!({"type": "negotiate_unattended", "declaration": declaration(1_000_000, 100)}))
        .await;
    rpc.prompt_and_wait("try").await;
    for (id, cmd) in attempts {
        let end = rpc
            .events()
            .into_iter()
            .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("no end for {id}"));
        let text = end["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        let denied = text.contains("action_denied");
        assert_eq!(denied, id.starts_with('b'), "{cmd:?}: {end}");
        assert_eq!(end["isError"], denied, "{cmd:?}: {end}");
    }
    assert_eq!(
        std::fs::read_to_string(env.ws().join("victim")).unwrap(),
        "keep me"
    );
    assert!(!env.ws().join("copy").exists());
    rpc.finish().await;
}
