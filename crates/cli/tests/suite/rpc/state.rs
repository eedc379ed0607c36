//! State and settings: get_state (with include), get_messages,
//! get_last_assistant_text, get_session_stats, queue modes, thinking,
//! session name, todos, models, and the commands keel does not support yet.

use keel_test_support::MockResponse;
use serde_json::{Value, json};

use crate::suite::Env;

#[tokio::test]
async fn get_state_has_the_full_payload() {
    let env = Env::new().await;
    let mut rpc = env.rpc(&[]).await;
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["model"]["id"], "mock-model");
    assert_eq!(s["model"]["provider"], "custom");
    assert_eq!(s["model"]["baseUrl"], env.mock.base_url());
    assert_eq!(s["thinkingLevel"], "off");
    assert_eq!(s["isStreaming"], false);
    assert_eq!(s["isCompacting"], false);
    assert_eq!(s["steeringMode"], "one-at-a-time");
    assert_eq!(s["followUpMode"], "one-at-a-time");
    assert_eq!(s["interruptMode"], "immediate");
    assert!(s["sessionFile"].as_str().unwrap().ends_with(".jsonl"));
    assert!(s["sessionId"].is_string());
    assert!(s.get("sessionName").is_none());
    assert_eq!(s["autoCompactionEnabled"], true);
    assert_eq!(s["messageCount"], 0);
    assert_eq!(s["queuedMessageCount"], 0);
    assert_eq!(s["todoPhases"], json!([]));
    assert_eq!(
        s["contextUsage"],
        // `mock-model` is not in the catalogue: conservative defaults.
        json!({"tokens": 0, "contextWindow": 32768, "percent": 0.0})
    );
    assert!(s.get("systemPrompt").is_none() && s.get("dumpTools").is_none());

    let s = rpc
        .ok(json!({"type": "get_state", "include": ["tools", "systemPrompt"]}))
        .await;
    let prompt = s["systemPrompt"][0].as_str().unwrap();
    assert!(prompt.contains(&env.ws().display().to_string()));
    let names: Vec<&str> = s["dumpTools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["read", "bash", "edit", "write", "grep", "find", "ls"]
    );
    let s = rpc
        .ok(json!({"type": "get_state", "include": ["dumpTools"]}))
        .await;
    assert!(s["dumpTools"].is_array());
    let r = rpc
        .call(json!({"type": "get_state", "include": ["everything"]}))
        .await;
    assert_eq!(r["success"], false);
}

#[tokio::test]
async fn messages_last_text_and_stats() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("The answer is 4."));
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("2+2?").await;
    let m = rpc.ok(json!({"type": "get_messages"})).await;
    let msgs = m["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[1]["role"], "assistant");
    let t = rpc.ok(json!({"type": "get_last_assistant_text"})).await;
    assert_eq!(t, json!({"text": "The answer is 4."}));
    let st = rpc.ok(json!({"type": "get_session_stats"})).await;
    assert_eq!(st["userMessages"], 1);
    assert_eq!(st["assistantMessages"], 1);
    assert_eq!(st["toolCalls"], 0);
    assert_eq!(st["totalMessages"], 2);
    assert_eq!(st["tokens"]["input"], 10);
    assert_eq!(st["tokens"]["output"], 5);
    assert_eq!(st["tokens"]["total"], 15);
    assert_eq!(st["contextUsage"]["tokens"], 15);
    assert!(st["sessionFile"].is_string());
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["messageCount"], 2);
    assert_eq!(s["sessionId"], st["sessionId"]);
}

#[tokio::test]
async fn modes_thinking_name_and_todos_apply_to_this_session() {
    let env = Env::new().await;
    // A catalogue entry that supports every thinking level.
    let config = "[[models]]\nprovider = \"custom\"\nid = \"mock-model\"\nthinking_levels = [\"off\", \"minimal\", \"low\", \"medium\", \"high\", \"xhigh\"]\n";
    std::fs::write(env.home.path().join("config.toml"), config).unwrap();
    let mut rpc = env.rpc(&[]).await;
    for cmd in [
        json!({"type": "set_steering_mode", "mode": "all"}),
        json!({"type": "set_follow_up_mode", "mode": "all"}),
        json!({"type": "set_interrupt_mode", "mode": "wait"}),
    ] {
        assert_eq!(rpc.ok(cmd).await, Value::Null);
    }
    let d = rpc
        .ok(json!({"type": "set_thinking_level", "level": "high"}))
        .await;
    assert_eq!(d, json!({"level": "high"}));
    let ev = rpc.announced("thinking_level_changed");
    assert_eq!(ev["level"], "high");
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["steeringMode"], "all");
    assert_eq!(s["followUpMode"], "all");
    assert_eq!(s["interruptMode"], "wait");
    assert_eq!(s["thinkingLevel"], "high");
    let c = rpc.ok(json!({"type": "cycle_thinking_level"})).await;
    assert_eq!(c, json!({"level": "xhigh"}));
    let c = rpc.ok(json!({"type": "cycle_thinking_level"})).await;
    assert_eq!(c, json!({"level": "off"}));
    let r = rpc
        .call(json!({"type": "set_thinking_level", "level": "huge"}))
        .await;
    assert_eq!(r["success"], false);

    let r = rpc
        .call(json!({"type": "set_session_name", "name": "  "}))
        .await;
    assert_eq!(r["error"], "Session name cannot be empty");
    rpc.ok(json!({"type": "set_session_name", "name": "probe-session"}))
        .await;
    let ev = rpc.announced("session_info_changed");
    assert_eq!(ev["name"], "probe-session");
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["sessionName"], "probe-session");

    let phases = json!([{"id": "phase-1", "name": "Evaluation", "tasks": [
        {"id": "task-1", "content": "Map the read tool surface", "status": "in_progress"},
        {"content": "Exercise edit operations", "status": "pending"}]}]);
    let d = rpc.ok(json!({"type": "set_todos", "phases": phases})).await;
    assert_eq!(d["todoPhases"][0]["tasks"][1]["id"], "task-2");
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["todoPhases"], d["todoPhases"]);
    let r = rpc
        .call(json!({"type": "set_todos", "phases": [{"tasks": [{"content": "x", "status": "done"}]}]}))
        .await;
    assert_eq!(r["success"], false);

    // Nothing was written to the user's configuration.
    assert_eq!(
        std::fs::read_to_string(env.home.path().join("config.toml")).unwrap(),
        config
    );
}

#[tokio::test]
async fn models_from_configuration() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("from model two"));
    let mut rpc = env.rpc(&["--models", "mock-model-2"]).await;
    let m = rpc.ok(json!({"type": "get_available_models"})).await;
    let ids: Vec<&str> = m["models"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mock-model", "mock-model-2"]);
    let r = rpc
        .call(json!({"type": "set_model", "provider": "custom", "modelId": "nope"}))
        .await;
    assert_eq!(r["error"], "Model not found: custom/nope");
    let r = rpc
        .call(json!({"type": "set_model", "provider": "custom"}))
        .await;
    assert_eq!(r["success"], false);
    let d = rpc
        .ok(json!({"type": "set_model", "provider": "custom", "modelId": "mock-model-2"}))
        .await;
    assert_eq!(d["id"], "mock-model-2");
    let ev = rpc.announced("model_changed");
    assert_eq!(ev["modelId"], "mock-model-2");
    rpc.prompt_and_wait("hi").await;
    assert_eq!(
        env.mock.last_request().unwrap().body["model"],
        "mock-model-2"
    );
    let c = rpc.ok(json!({"type": "cycle_model"})).await;
    assert_eq!(c["model"]["id"], "mock-model");
    assert_eq!(c["isScoped"], true, "--models scopes the cycle");
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["model"]["id"], "mock-model");
}
