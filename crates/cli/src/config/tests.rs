//! Tests of configuration resolution: precedence, built-in providers,
//! profiles, the catalogue, scopes, masking.

use super::*;

fn global(home: &Path) -> GlobalArgs {
    GlobalArgs {
        home: Some(home.to_path_buf()),
        log_file: None,
        database: None,
        temporal: None,
    }
}

fn write(dir: &Path, text: &str) {
    std::fs::write(dir.join("config.toml"), text).unwrap();
}

fn args(provider: &str, model: &str) -> ModelArgs {
    ModelArgs {
        provider: Some(provider.into()),
        model: Some(model.into()),
        ..ModelArgs::default()
    }
}

#[test]
fn nothing_configured_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let err = resolve(&global(dir.path()), &ModelArgs::default()).unwrap_err();
    assert!(err.to_string().starts_with("no model configured"));
}

#[test]
fn flags_override_file_and_builtins_fill_in() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "[model]\nprovider = \"openai\"\nid = \"gpt-4.1\"\n[providers.lab]\nbase_url = \"http://127.0.0.1:9/v1/\"\nheaders = { Authorization = \"Bearer sekrit-123456789\" }\n",
    );
    let r = resolve(&global(dir.path()), &ModelArgs::default()).unwrap();
    assert_eq!(r.base_url, "https://api.openai.com/v1");
    assert_eq!(r.conf.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(r.conf.dialect, Dialect::OpenAiResponses);
    assert_eq!(r.matched, Match::Exact);
    assert!(r.warning.is_none());
    let info = r.model_info();
    assert_eq!(info.context_window, 1_047_576);
    assert_eq!(info.max_output_tokens, Some(32_768));
    assert!(info.pricing.input > 0.0);

    let r = resolve(&global(dir.path()), &args("lab", "qwen")).unwrap();
    assert_eq!(r.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(r.model, "qwen");
    assert_eq!(r.conf.api_key_env, None);
    assert_eq!(r.conf.dialect, Dialect::OpenAiCompletions);
    // Unknown: conservative defaults, a warning, no output limit sent.
    assert_eq!(r.matched, Match::Fallback);
    assert!(r.warning.as_deref().unwrap().contains("unknown model qwen"));
    assert_eq!(r.model_info().max_output_tokens, None);
    assert_eq!(r.model_info().context_window, 32_768);
    assert!(!mask_header("Authorization", "Bearer sekrit-123456789").contains("sekrit"));
}

#[test]
fn every_builtin_provider_works_out_of_the_box() {
    let dir = tempfile::tempdir().unwrap();
    let s = Settings::load(&global(dir.path())).unwrap();
    for (name, dialect, key) in [
        ("openai", Dialect::OpenAiResponses, Some("OPENAI_API_KEY")),
        (
            "anthropic",
            Dialect::AnthropicMessages,
            Some("ANTHROPIC_API_KEY"),
        ),
        (
            "openrouter",
            Dialect::OpenAiCompletions,
            Some("OPENROUTER_API_KEY"),
        ),
        ("ollama", Dialect::OpenAiCompletions, None),
        ("vllm", Dialect::OpenAiCompletions, None),
        ("lmstudio", Dialect::OpenAiCompletions, None),
        ("llamacpp", Dialect::OpenAiCompletions, None),
    ] {
        let r = s.resolve(&args(name, "some-model")).unwrap();
        assert_eq!(r.conf.dialect, dialect, "{name}");
        assert_eq!(r.conf.api_key_env.as_deref(), key, "{name}");
        assert!(r.base_url.starts_with("http"), "{name}");
    }
    // Local servers have a default entry: no warning for any model id.
    let r = s.resolve(&args("ollama", "qwen3-coder:30b")).unwrap();
    assert_eq!(r.matched, Match::ProviderDefault);
    assert!(r.warning.is_none());
    // OpenRouter finds the vendor's entry under its own id.
    let r = s
        .resolve(&args("openrouter", "anthropic/claude-sonnet-4.5"))
        .unwrap();
    assert_eq!(r.matched, Match::OtherProvider);
    assert_eq!(r.entry.context_window, 200_000);
    assert_eq!(r.model_info().api, "openai-completions");
}

#[test]
fn dialects_timeouts_and_models_from_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        r#"
[model]
provider = "gateway"
id = "house-model"
thinking = "high"

[providers.gateway]
dialect = "anthropic-messages"
base_url = "http://127.0.0.1:9/v1"
api_key_env = "GATEWAY_KEY"
idle_timeout_secs = 7
connect_timeout_secs = 3
request_timeout_secs = 11

[[models]]
provider = "gateway"
id = "house-model"
name = "House model"
context_window = 100000
max_output_tokens = 5000
thinking_levels = ["off", "low", "medium"]
cost = { input = 1.0, output = 2.0 }

[retry]
max_retries = 5
base_delay_ms = 10
"#,
    );
    let r = resolve(&global(dir.path()), &ModelArgs::default()).unwrap();
    assert_eq!(r.conf.dialect, Dialect::AnthropicMessages);
    let spec = r.conf.spec();
    assert_eq!(spec.idle_timeout, Duration::from_secs(7));
    assert_eq!(spec.connect_timeout, Duration::from_secs(3));
    assert_eq!(spec.request_timeout, Duration::from_secs(11));
    assert_eq!(r.matched, Match::Exact);
    let info = r.model_info();
    assert_eq!(info.name, "House model");
    assert_eq!(info.context_window, 100_000);
    assert_eq!(info.max_output_tokens, Some(5000));
    assert_eq!(info.pricing.output, 2.0);
    assert_eq!(info.api, "anthropic-messages");
    let (level, warning) = r.effective_thinking();
    assert_eq!(level, ThinkingLevel::Medium);
    assert!(warning.unwrap().contains("using medium"));
    assert_eq!(r.retry.max_retries, 5);
    assert_eq!(r.retry.base_delay, Duration::from_millis(10));
    assert!(r.retry.enabled);
}

#[test]
fn profiles_override_the_model_section() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        r#"
[model]
provider = "openai"
id = "gpt-4.1"

[profiles.local]
provider = "ollama"
id = "qwen3-coder:30b"
thinking = "low"

[profiles.remote-box]
provider = "vllm"
model = "big"
base_url = "http://gpu-box:8000/v1"
"#,
    );
    let g = global(dir.path());
    let r = resolve(&g, &ModelArgs::default()).unwrap();
    assert_eq!(
        (r.provider.as_str(), r.model.as_str()),
        ("openai", "gpt-4.1")
    );
    let with = |p: &str| ModelArgs {
        profile: Some(p.into()),
        ..ModelArgs::default()
    };
    let r = resolve(&g, &with("local")).unwrap();
    assert_eq!(
        (r.provider.as_str(), r.model.as_str()),
        ("ollama", "qwen3-coder:30b")
    );
    assert_eq!(r.thinking, ThinkingLevel::Low);
    assert_eq!(r.profile.as_deref(), Some("local"));
    let r = resolve(&g, &with("remote-box")).unwrap();
    assert_eq!(r.base_url, "http://gpu-box:8000/v1");
    // Flags still win over the profile.
    let mut a = with("local");
    a.model = Some("other".into());
    assert_eq!(resolve(&g, &a).unwrap().model, "other");
    let err = resolve(&g, &with("nope")).unwrap_err().to_string();
    assert!(err.contains("unknown profile \"nope\""), "{err}");
    assert!(err.contains("local, remote-box"), "{err}");
}

#[test]
fn bad_config_and_unknown_provider_are_clear() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "[model\n");
    let err = resolve(&global(dir.path()), &ModelArgs::default()).unwrap_err();
    assert!(format!("{err:#}").contains("invalid"));
    write(dir.path(), "");
    let err = resolve(&global(dir.path()), &args("nope", "x")).unwrap_err();
    assert!(err.to_string().contains("unknown provider \"nope\""));
    write(
        dir.path(),
        "[providers.x]\nbase_url = \"http://h/v1\"\ndialect = \"gemini\"\n",
    );
    let err = resolve(&global(dir.path()), &args("x", "m")).unwrap_err();
    assert!(err.to_string().contains("unknown dialect"), "{err}");
    write(
        dir.path(),
        "[[models]]\nprovider = \"x\"\nid = \"m\"\ncontext_window = 0\n",
    );
    let err = resolve(&global(dir.path()), &args("x", "m")).unwrap_err();
    assert!(err.to_string().contains("context_window is 0"), "{err}");
}

#[test]
fn scope_lists_configured_then_catalogue_models_of_usable_providers() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        r#"
[providers.lab]
base_url = "http://127.0.0.1:9/v1"

[[models]]
provider = "lab"
id = "lab-a"

[[models]]
provider = "lab"
id = "lab-b"

[[models]]
provider = "openai"
id = "not-usable-without-a-key"
"#,
    );
    let s = Settings::load(&global(dir.path())).unwrap();
    let scope = s
        .scope(&args("lab", "lab-b"), &["lab-c".into(), "lab/lab-a".into()])
        .unwrap();
    let ids = |v: &[Resolved]| v.iter().map(|r| r.model.clone()).collect::<Vec<_>>();
    assert_eq!(ids(&scope.scoped), ["lab-b", "lab-c", "lab-a"]);
    assert!(scope.explicit);
    let lab = |v: &[Resolved]| {
        v.iter()
            .filter(|r| r.provider == "lab")
            .map(|r| r.model.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(lab(&scope.available), ["lab-b", "lab-c", "lab-a"]);
    // A provider that needs a key is listed only when the key is set.
    let openai = scope.available.iter().any(|r| r.provider == "openai");
    assert_eq!(
        openai,
        std::env::var("OPENAI_API_KEY").is_ok_and(|k| !k.is_empty())
    );
    let scope = s.scope(&args("lab", "lab-b"), &[]).unwrap();
    assert!(!scope.explicit);
    assert_eq!(lab(&scope.available), ["lab-b", "lab-a"]);
    assert!(
        s.scope(&ModelArgs::default(), &[])
            .unwrap()
            .scoped
            .is_empty()
    );
}

#[test]
fn masks_secrets() {
    assert_eq!(mask("short"), "*** (5 chars)");
    let m = mask("sk-1234567890abcdef");
    assert!(m.starts_with("sk-1…cdef"));
    assert!(!m.contains("567890"));
    assert_eq!(mask_header("X-Team", "infra"), "infra");
    assert!(mask_header("x-api-key", "abcdefghijklmnop").starts_with("abcd…"));
}

#[test]
fn the_approvals_store_is_read_and_shown_without_its_password() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "[approvals]\nstore = \"postgres://keel:hunter2@127.0.0.1:5432/keel\"\n",
    );
    let settings = Settings::load(&global(dir.path())).unwrap();
    assert_eq!(
        settings.file.approvals.store.as_deref(),
        Some("postgres://keel:hunter2@127.0.0.1:5432/keel")
    );
    // The environment variables win over the file; only check the file's
    // line where the developer has set neither.
    if std::env::var_os(keel_core::keel_approvals::STORE_ENV).is_none()
        && std::env::var_os(keel_core::keel_approvals::DATABASE_ENV).is_none()
    {
        let line = store_line(dir.path());
        assert_eq!(
            line,
            "approvals_store = \"postgres://keel:***@127.0.0.1:5432/keel\"  # postgres, from [approvals] store in config.toml"
        );
    }
    write(dir.path(), "[approvals]\nstores = \"sqlite\"\n");
    let err = Settings::load(&global(dir.path())).unwrap_err();
    assert!(err.to_string().contains("stores"), "{err}");
}
