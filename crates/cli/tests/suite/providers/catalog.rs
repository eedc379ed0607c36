//! Configuration and the catalogue end to end: `config show`, `models
//! list`, profiles, unknown models, thinking clamps, model switching from
//! the catalogue in RPC mode, and the RPC retry controls.

use serde_json::{Value, json};

use super::{Dialect, KEY, KEY_ENV, config_toml, events, prompt};
use crate::suite::Env;

#[tokio::test]
async fn config_show_names_the_dialect_and_the_catalogue_entry() {
    for d in [Dialect::Completions, Dialect::Responses, Dialect::Anthropic] {
        let env = Env::for_dialect(d).await;
        let out = env.keyed().args(["config", "show"]).run().await.unwrap();
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        let s = &out.stdout;
        assert!(s.contains(&format!("dialect = \"{}\"", d.name())), "{s}");
        assert!(s.contains("[catalog]  # the catalogue's entry"), "{s}");
        assert!(s.contains("name = \"Mock Model\""), "{s}");
        assert!(s.contains("context_window = 50000"), "{s}");
        assert!(s.contains("max_output_tokens = 2000"), "{s}");
        assert!(s.contains("cost = { input = 3, output = 15,"), "{s}");
        assert!(
            s.contains(&format!("api_key_env = \"{KEY_ENV}\"  # set, mock…6789")),
            "{s}"
        );
        assert!(!s.contains(KEY), "secrets are masked: {s}");
        assert!(
            s.contains("[retry]\nenabled = true\nmax_retries = 3"),
            "{s}"
        );
    }
    // A built-in provider, nothing configured.
    let env = Env::new().await;
    let out = env
        .keel()
        .args([
            "config",
            "show",
            "--provider",
            "anthropic",
            "--model",
            "claude-sonnet-4-5",
        ])
        .run()
        .await
        .unwrap();
    assert!(
        out.stdout.contains("dialect = \"anthropic-messages\""),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("api_key_env = \"ANTHROPIC_API_KEY\"  # not set")
    );
    assert!(
        out.stdout.contains("context_window = 200000"),
        "{}",
        out.stdout
    );
}

#[tokio::test]
async fn models_list_prints_the_catalogue() {
    let env = Env::for_dialect(Dialect::Anthropic).await;
    let out = env.keel().args(["models", "list"]).run().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    for id in ["gpt-4.1", "claude-sonnet-4-5", "mock-model"] {
        assert!(out.stdout.contains(id), "{id}: {}", out.stdout);
    }
    let out = env
        .keel()
        .args(["models", "list", "--json"])
        .run()
        .await
        .unwrap();
    let list: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    let mock = list.iter().find(|m| m["id"] == "mock-model").unwrap();
    assert_eq!(mock["provider"], "mock");
    assert_eq!(mock["context_window"], 50000);
    assert_eq!(mock["cost"]["output"], 15.0);
    let out = env
        .keel()
        .args(["models", "list", "--json", "--provider", "anthropic"])
        .run()
        .await
        .unwrap();
    let list: Vec<Value> = serde_json::from_str(&out.stdout).unwrap();
    assert!(!list.is_empty());
    assert!(list.iter().all(|m| m["provider"] == "anthropic"));
    assert!(list.iter().all(|m| m["api"] == "anthropic-messages"));
}

#[tokio::test]
async fn a_profile_selects_provider_and_model() {
    let env = Env::new().await;
    let config = format!(
        "{}\n[providers.claude-like]\ndialect = \"anthropic-messages\"\nbase_url = \"{}\"\napi_key_env = \"{KEY_ENV}\"\n\n[profiles.messages]\nprovider = \"claude-like\"\nid = \"profile-model\"\n",
        config_toml(&env, Dialect::Completions),
        env.mock.base_url()
    );
    std::fs::write(env.home.path().join("config.toml"), config).unwrap();
    env.mock.push_all([
        Dialect::Completions.text("default"),
        Dialect::Anthropic.text("from the profile"),
        Dialect::Anthropic.text("from the profile again"),
    ]);
    let out = env.exec_configured().arg("hi").run().await.unwrap();
    assert_eq!(out.stdout, "default\n", "{}", out.stderr);
    assert_eq!(
        env.mock.last_request().unwrap().path,
        "/v1/chat/completions"
    );

    let out = env
        .exec_configured()
        .args(["--profile", "messages", "hi"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.stdout, "from the profile\n", "{}", out.stderr);
    let req = env.mock.last_request().unwrap();
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.body["model"], "profile-model");
    assert_eq!(req.header("x-api-key"), Some(KEY));

    let out = env
        .exec_configured()
        .env("KEEL_PROFILE", "messages")
        .arg("hi")
        .run()
        .await
        .unwrap();
    assert_eq!(out.stdout, "from the profile again\n", "{}", out.stderr);

    let out = env
        .exec_configured()
        .args(["--profile", "nope", "hi"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(
        out.stderr.contains("unknown profile \"nope\""),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn an_unknown_model_runs_with_one_warning_line() {
    let env = Env::new().await;
    env.mock.push(Dialect::Completions.text("fine"));
    let out = env.exec().arg("hi").run().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "fine\n");
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(
        lines[0].starts_with("keel: warning: unknown model mock-model (provider custom)"),
        "{}",
        lines[0]
    );
    // Conservative defaults: no output limit is sent.
    assert!(
        env.mock
            .last_request()
            .unwrap()
            .body
            .get("max_tokens")
            .is_none()
    );
}

fn clamped_config(env: &Env) -> String {
    format!(
        "{}\n[[models]]\nprovider = \"mock\"\nid = \"small-thinker\"\nthinking_levels = [\"off\", \"low\"]\n",
        config_toml(env, Dialect::Anthropic)
    )
}

#[tokio::test]
async fn a_clamped_thinking_level_is_reported() {
    let env = Env::new().await;
    std::fs::write(env.home.path().join("config.toml"), clamped_config(&env)).unwrap();
    env.mock.push(Dialect::Anthropic.text("ok"));
    let out = env
        .exec_configured()
        .args(["--model", "small-thinker", "--thinking", "high", "hi"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        out.stderr.trim(),
        "keel: warning: model small-thinker does not support thinking level high; using low"
    );
    // Low is Anthropic's smallest budget.
    let req = env.mock.last_request().unwrap();
    assert_eq!(req.body["thinking"]["type"], "enabled", "{}", req.body);

    let mut rpc = env.rpc_configured(&["--model", "small-thinker"]).await;
    let d = rpc
        .ok(json!({"type": "set_thinking_level", "level": "high"}))
        .await;
    assert_eq!(d["level"], "low");
    assert_eq!(d["requested"], "high");
    assert!(d["warning"].as_str().unwrap().contains("using low"));
    let ev = rpc.announced("thinking_level_changed");
    assert_eq!(ev["level"], "low");
    let c = rpc.ok(json!({"type": "cycle_thinking_level"})).await;
    assert_eq!(c, json!({"level": "off"}));
    let c = rpc.ok(json!({"type": "cycle_thinking_level"})).await;
    assert_eq!(c, json!({"level": "low"}));
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["thinkingLevel"], "low");
    assert_eq!(s["model"]["thinkingLevels"], json!(["off", "low"]));
    assert_eq!(s["model"]["reasoning"], true);
    rpc.finish().await;
}

#[tokio::test]
async fn rpc_models_come_from_the_catalogue() {
    let env = Env::new().await;
    let config = format!(
        "{}\n[[models]]\nprovider = \"mock\"\nid = \"mock-model-2\"\nname = \"Mock Two\"\ncontext_window = 8000\ninput = [\"text\", \"image\"]\nreasoning = true\n",
        config_toml(&env, Dialect::Responses)
    );
    std::fs::write(env.home.path().join("config.toml"), config).unwrap();
    env.mock.push(Dialect::Responses.text("from two"));
    let mut rpc = env.rpc_configured(&[]).await;
    let s = rpc.ok(json!({"type": "get_state"})).await;
    let m = &s["model"];
    assert_eq!(m["id"], "mock-model");
    assert_eq!(m["name"], "Mock Model");
    assert_eq!(m["api"], "openai-responses");
    assert_eq!(m["provider"], "mock");
    assert_eq!(m["baseUrl"], env.mock.base_url());
    assert_eq!(m["reasoning"], false);
    assert_eq!(m["input"], json!(["text"]));
    assert_eq!(
        m["cost"],
        json!({"input": 3.0, "output": 15.0, "cacheRead": 0.3, "cacheWrite": 3.75})
    );
    assert_eq!(m["contextWindow"], 50000);
    assert_eq!(m["maxTokens"], 2000);
    assert_eq!(s["contextUsage"]["contextWindow"], 50000);

    let list = rpc.ok(json!({"type": "get_available_models"})).await;
    let ids: Vec<&str> = list["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["provider"] == "mock")
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["mock-model", "mock-model-2"]);
    let d = rpc
        .ok(json!({"type": "set_model", "provider": "mock", "modelId": "mock-model-2"}))
        .await;
    assert_eq!(d["name"], "Mock Two");
    assert_eq!(d["contextWindow"], 8000);
    assert_eq!(d["input"], json!(["text", "image"]));
    assert_eq!(d["reasoning"], true);
    rpc.ok(prompt("hi")).await;
    rpc.event("agent_end").await;
    assert_eq!(
        env.mock.last_request().unwrap().body["model"],
        "mock-model-2"
    );
    let stats = rpc.ok(json!({"type": "get_session_stats"})).await;
    assert_eq!(stats["contextUsage"]["contextWindow"], 8000);
    // Not scoped: cycling goes through every available model.
    let c = rpc.ok(json!({"type": "cycle_model"})).await;
    assert_eq!(c["isScoped"], false);
    rpc.finish().await;

    // Scoped with --models: cycling stays in the scope.
    let mut rpc = env.rpc_configured(&["--models", "mock-model-2"]).await;
    let c = rpc.ok(json!({"type": "cycle_model"})).await;
    assert_eq!(c["isScoped"], true);
    assert_eq!(c["model"]["id"], "mock-model-2");
    let c = rpc.ok(json!({"type": "cycle_model"})).await;
    assert_eq!(c["model"]["id"], "mock-model");
    rpc.finish().await;
}

#[tokio::test]
async fn set_auto_retry_false_fails_at_once() {
    let env = Env::for_dialect(Dialect::Completions).await;
    env.mock.push(Dialect::Completions.rate_limited());
    let mut rpc = env.rpc_configured(&[]).await;
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["autoRetryEnabled"], true);
    assert_eq!(
        rpc.ok(json!({"type": "set_auto_retry", "enabled": false}))
            .await,
        Value::Null
    );
    let s = rpc.ok(json!({"type": "get_state"})).await;
    assert_eq!(s["autoRetryEnabled"], false);
    rpc.ok(prompt("hi")).await;
    let end = rpc.event("agent_end").await;
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["errorKind"], "rateLimitExceeded");
    assert!(!rpc.event_types().contains(&"auto_retry_start"));
    assert_eq!(env.mock.request_count(), 1);
    let r = rpc.call(json!({"type": "set_auto_retry"})).await;
    assert_eq!(r["success"], false, "enabled is required");
    rpc.finish().await;
}

/// A home whose retries wait long enough for a host to act during the wait.
async fn slow_retry_env() -> Env {
    let env = Env::new().await;
    let config = config_toml(&env, Dialect::Anthropic)
        .replace("base_delay_ms = 50", "base_delay_ms = 20000")
        .replace("max_delay_ms = 5000", "max_delay_ms = 30000");
    std::fs::write(env.home.path().join("config.toml"), config).unwrap();
    env.mock
        .push(Dialect::Anthropic.error(529, "overloaded_error", "Overloaded"));
    env
}

#[tokio::test]
async fn abort_retry_ends_the_run_with_the_last_error() {
    let env = slow_retry_env().await;
    let mut rpc = env.rpc_configured(&[]).await;
    rpc.ok(prompt("hi")).await;
    let start = rpc.event("auto_retry_start").await;
    assert_eq!(start["errorKind"], "serverOverloaded");
    assert!(start["delayMs"].as_u64().unwrap() >= 10_000);
    assert_eq!(rpc.ok(json!({"type": "abort_retry"})).await, Value::Null);
    let end = rpc.event("agent_end").await;
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["stopReason"], "error");
    assert_eq!(last["errorKind"], "serverOverloaded");
    let evs = events(&rpc);
    let retry_end = evs.iter().find(|e| e["type"] == "auto_retry_end").unwrap();
    assert_eq!(retry_end["success"], false);
    assert!(retry_end["finalError"].as_str().unwrap().contains("529"));
    assert_eq!(env.mock.request_count(), 1);
    rpc.finish().await;
}

#[tokio::test]
async fn abort_during_the_backoff_ends_the_run_aborted() {
    let env = slow_retry_env().await;
    let mut rpc = env.rpc_configured(&[]).await;
    rpc.ok(prompt("hi")).await;
    rpc.event("auto_retry_start").await;
    let r = rpc.call(json!({"type": "abort"})).await;
    assert_eq!(r["success"], true);
    let types = rpc.event_types();
    assert_eq!(types.iter().filter(|t| **t == "agent_end").count(), 1);
    let end = events(&rpc)
        .into_iter()
        .find(|e| e["type"] == "agent_end")
        .unwrap();
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["stopReason"], "aborted");
    assert_eq!(env.mock.request_count(), 1);
    rpc.finish().await;
}
