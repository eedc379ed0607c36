//! Unit tests of the catalogue: lookups, merging, clamping, pricing.

use super::*;
use keel_protocol::ThinkingLevel::{High, Low, Medium, Minimal, Off, Xhigh};

#[test]
fn builtin_entries_are_sane_and_unique() {
    let catalog = Catalog::builtin();
    let mut seen = std::collections::HashSet::new();
    for e in catalog.entries() {
        assert!(
            seen.insert((e.provider.clone(), canonical(&e.id))),
            "duplicate {}",
            e.id
        );
        assert!(e.context_window > e.max_output_tokens, "{}", e.id);
        assert!(!e.thinking_levels.is_empty(), "{}", e.id);
        assert!(e.input.contains(&InputModality::Text));
    }
    for id in [
        "gpt-4.1",
        "gpt-4.1-mini",
        "gpt-4o",
        "gpt-4o-mini",
        "o3",
        "o4-mini",
        "gpt-5",
        "gpt-5-mini",
    ] {
        assert_eq!(catalog.lookup("openai", id).matched, Match::Exact, "{id}");
    }
    for id in [
        "claude-sonnet-4-5",
        "claude-opus-4-1",
        "claude-haiku-4-5",
        "claude-sonnet-4-0",
    ] {
        let l = catalog.lookup("anthropic", id);
        assert_eq!(l.matched, Match::Exact, "{id}");
        assert_eq!(l.entry.api, Dialect::AnthropicMessages);
        assert!(l.entry.reasoning() && l.entry.supports_images());
    }
    assert_eq!(catalog.models_of("anthropic").count(), 6);
    assert_eq!(
        catalog.models_of("ollama").count(),
        0,
        "default entries are not models"
    );
}

#[test]
fn ids_match_across_dates_vendor_prefixes_dots_and_aliases() {
    let catalog = Catalog::builtin();
    for (provider, id, expect_id, matched) in [
        (
            "anthropic",
            "claude-sonnet-4-5-20250929",
            "claude-sonnet-4-5",
            Match::Exact,
        ),
        (
            "anthropic",
            "claude-sonnet-4-20250514",
            "claude-sonnet-4-0",
            Match::Exact,
        ),
        ("openai", "gpt-4.1-2025-04-14", "gpt-4.1", Match::Exact),
        ("openai", "GPT-5", "gpt-5", Match::Exact),
        (
            "openrouter",
            "anthropic/claude-sonnet-4.5",
            "claude-sonnet-4-5",
            Match::OtherProvider,
        ),
        (
            "work-proxy",
            "gpt-5-mini",
            "gpt-5-mini",
            Match::OtherProvider,
        ),
    ] {
        let l = catalog.lookup(provider, id);
        assert_eq!(l.matched, matched, "{provider}/{id}");
        assert_eq!(l.warning, None);
        // The entry carries the id and provider as requested.
        assert_eq!(l.entry.id, id);
        assert_eq!(l.entry.provider, provider);
        let original = catalog
            .entries()
            .iter()
            .find(|e| e.id == expect_id)
            .unwrap();
        assert_eq!(l.entry.cost, original.cost, "{provider}/{id}");
    }
    assert_eq!(strip_date("gpt-5-mini"), "gpt-5-mini");
    assert_eq!(strip_date("model-12345678"), "model-12345678");
}

#[test]
fn local_defaults_and_unknown_fallback() {
    let catalog = Catalog::builtin();
    let l = catalog.lookup("ollama", "qwen3-coder:30b");
    assert_eq!(l.matched, Match::ProviderDefault);
    assert_eq!(l.warning, None);
    assert_eq!(l.entry.id, "qwen3-coder:30b");
    assert_eq!(l.entry.cost, ModelCost::default());
    assert_eq!(l.entry.api, Dialect::OpenAiCompletions);

    let l = catalog.lookup("anthropic", "claude-future-9");
    assert_eq!(l.matched, Match::Fallback);
    assert_eq!(
        l.entry.api,
        Dialect::AnthropicMessages,
        "dialect of the provider"
    );
    assert_eq!(l.entry.context_window, FALLBACK_CONTEXT_WINDOW);
    assert_eq!(l.entry.max_output_tokens, FALLBACK_MAX_OUTPUT_TOKENS);
    assert!(!l.entry.reasoning());
    let warning = l.warning.unwrap();
    assert!(
        warning.contains("unknown model claude-future-9"),
        "{warning}"
    );
    assert!(warning.contains("[[models]]"), "{warning}");

    let l = Catalog::empty().lookup("mystery", "m");
    assert_eq!(l.entry.api, Dialect::OpenAiCompletions);
    let spec = ProviderSpec::new("mystery", Dialect::OpenAiResponses, "http://h/v1");
    assert_eq!(
        Catalog::empty().lookup_for(&spec, "m").entry.api,
        Dialect::OpenAiResponses
    );
}

#[test]
fn user_entries_override_and_extend() {
    let toml_text = r#"
        [[models]]
        provider = "anthropic"
        id = "claude-sonnet-4-5-20250929"
        context_window = 1000000

        [[models]]
        provider = "ollama"
        id = "qwen3:32b"
        input = ["text", "image"]
        thinking_levels = ["high", "off", "low", "low"]
        compact_tools = true

        [[models]]
        provider = "corp"
        id = "big-model"
        api = "openai-responses"
        max_output = 4096
        reasoning = true
        cost = { input = 1.5, output = 6.0 }
        aliases = ["big"]
    "#;
    #[derive(serde::Deserialize)]
    struct File {
        models: Vec<ModelConfig>,
    }
    let file: File = toml::from_str(toml_text).unwrap();
    let catalog = Catalog::with_user_models(&file.models).unwrap();

    let sonnet = catalog.lookup("anthropic", "claude-sonnet-4-5").entry;
    assert_eq!(sonnet.context_window, 1_000_000);
    assert_eq!(
        sonnet.max_output_tokens, 64_000,
        "unset fields keep their value"
    );
    assert_eq!(sonnet.cost.input, 3.0);

    let qwen = catalog.lookup("ollama", "qwen3:32b");
    assert_eq!(qwen.matched, Match::Exact);
    assert_eq!(qwen.entry.thinking_levels, [Off, Low, High]);
    assert!(qwen.entry.supports_images());
    assert!(qwen.entry.compact_tools);
    assert!(!sonnet.compact_tools);
    assert_eq!(
        qwen.entry.context_window, 32_768,
        "from the provider default"
    );

    let big = catalog.lookup("corp", "big");
    assert_eq!(big.matched, Match::Exact);
    assert_eq!(big.entry.api, Dialect::OpenAiResponses);
    assert_eq!(big.entry.max_output_tokens, 4096);
    assert_eq!(big.entry.thinking_levels, DEFAULT_REASONING_LEVELS);
    assert_eq!(
        big.entry.cost,
        ModelCost {
            input: 1.5,
            output: 6.0,
            cache_read: 0.0,
            cache_write: 0.0
        }
    );
    assert_eq!(catalog.models_of("corp").count(), 1);
}

#[test]
fn invalid_user_entries_are_rejected_by_name() {
    let bad = ModelConfig {
        provider: "p".into(),
        id: "m".into(),
        context_window: Some(0),
        ..ModelConfig::default()
    };
    let mut catalog = Catalog::builtin();
    let before = catalog.clone();
    let err = catalog.merge(&[bad]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::BadRequest);
    assert!(
        err.message.contains("\"m\"") && err.message.contains("context_window"),
        "{err}"
    );
    assert_eq!(catalog, before);
    let unknown_field =
        toml::from_str::<ModelConfig>("provider = \"p\"\nid = \"m\"\ncontext = 5\n");
    assert!(unknown_field.is_err(), "typos are reported");
    let negative = ModelConfig {
        provider: "p".into(),
        id: "m".into(),
        cost: Some(ModelCost {
            input: -1.0,
            ..ModelCost::default()
        }),
        ..ModelConfig::default()
    };
    assert!(catalog.merge(&[negative]).is_err());
}

#[test]
fn thinking_is_clamped_and_the_clamp_reported() {
    let catalog = Catalog::builtin();
    let entry = |provider: &str, id: &str| catalog.lookup(provider, id).entry;

    let gpt41 = entry("openai", "gpt-4.1");
    assert_eq!(effective_thinking(&gpt41, Off), (Off, None));
    let (level, warning) = effective_thinking(&gpt41, High);
    assert_eq!(level, Off);
    assert!(warning.unwrap().contains("does not support thinking"));

    let o3 = entry("openai", "o3");
    let (level, warning) = effective_thinking(&o3, Off);
    assert_eq!(level, Low);
    assert!(warning.unwrap().contains("always reasons"));
    assert_eq!(effective_thinking(&o3, Minimal).0, Low);
    let (level, warning) = effective_thinking(&o3, Xhigh);
    assert_eq!(level, High);
    assert_eq!(
        warning.as_deref(),
        Some("model o3 does not support thinking level xhigh; using high")
    );

    let gpt5 = entry("openai", "gpt-5");
    assert_eq!(effective_thinking(&gpt5, Minimal), (Minimal, None));
    assert_eq!(effective_thinking(&gpt5, Off).0, Minimal);

    let gpt51 = entry("openai", "gpt-5.1");
    assert_eq!(effective_thinking(&gpt51, Minimal).0, Off, "nearest below");
    assert_eq!(
        entry("openai", "gpt-5.1-codex-max").effective_thinking(Xhigh),
        (Xhigh, None)
    );

    let sonnet = entry("anthropic", "claude-sonnet-4-5");
    for level in ThinkingLevel::ALL {
        assert_eq!(effective_thinking(&sonnet, level), (level, None));
    }
    assert_eq!(effective_thinking(&entry("x", "unknown"), Medium).0, Off);
}

#[test]
fn usage_is_priced_per_million_tokens() {
    let sonnet = Catalog::builtin()
        .lookup("anthropic", "claude-sonnet-4-5")
        .entry;
    let mut usage = Usage {
        input: 1_000_000,
        output: 200_000,
        cache_read: 2_000_000,
        cache_write: 400_000,
        total_tokens: 3_600_000,
        ..Usage::default()
    };
    sonnet.cost.apply(&mut usage);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(usage.cost.input, 3.0));
    assert!(close(usage.cost.output, 3.0));
    assert!(close(usage.cost.cache_read, 0.6));
    assert!(close(usage.cost.cache_write, 1.5));
    assert!(close(usage.cost.total, 8.1));
    assert_eq!(ModelCost::default().cost(&usage), Cost::default());
}
