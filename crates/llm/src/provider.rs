//! Choosing and building a provider from configuration.
//!
//! This module owns [`Dialect`] (the wire dialect a provider speaks, with its
//! configuration names), [`ProviderSpec`] (everything needed to reach one
//! configured provider, whatever its dialect), [`build_provider`] (the
//! factory the CLI calls) and the presets of well-known providers
//! ([`well_known_provider`]). It does not read configuration files or the
//! environment: the CLI resolves `[providers.<name>]` (and `api_key_env`)
//! into a [`ProviderSpec`].
//!
//! Dialect names (as in `config.toml` and [`crate::Provider::api`]):
//! `openai-completions` (aliases `openai-chat`, `chat-completions`,
//! `completions`), `openai-responses` (alias `responses`),
//! `anthropic-messages` (aliases `anthropic`, `messages`), `local` (a GGUF
//! model in-process, [`crate::local`]; runs only in builds with the
//! `local` feature, elsewhere [`build_provider`] says how to get it).

use std::sync::Arc;

use crate::anthropic::AnthropicProvider;
use crate::chat_completions::{ChatCompletionsConfig, ChatCompletionsProvider};
use crate::responses::ResponsesProvider;
use crate::{Provider, Result};

pub use crate::spec::{Dialect, ProviderSpec};

impl From<&ProviderSpec> for ChatCompletionsConfig {
    fn from(spec: &ProviderSpec) -> Self {
        let openai = spec.is_openai();
        ChatCompletionsConfig {
            name: spec.name.clone(),
            base_url: spec.base_url.clone(),
            api_key: spec.api_key.clone(),
            extra_headers: spec.extra_headers.clone(),
            idle_timeout: spec.idle_timeout,
            connect_timeout: spec.connect_timeout,
            request_timeout: spec.request_timeout,
            supports_reasoning_effort: spec.supports_reasoning_effort.unwrap_or(openai),
            supports_developer_role: spec.supports_developer_role.unwrap_or(openai),
        }
    }
}

/// The provider for `spec`, with its own HTTP client. Fails (with
/// [`ErrorKind::BadRequest`]) when the key or an extra header is not a valid
/// header value, or when the client cannot be built.
pub fn build_provider(spec: &ProviderSpec) -> Result<Arc<dyn Provider>> {
    if spec.dialect.is_local() {
        return crate::local::build(spec);
    }
    let client = crate::http::build_client(spec.connect_timeout)?;
    build_provider_with_client(spec, client)
}

/// Like [`build_provider`], on a shared client (see [`crate::build_client`]).
pub fn build_provider_with_client(
    spec: &ProviderSpec,
    client: reqwest::Client,
) -> Result<Arc<dyn Provider>> {
    Ok(match spec.dialect {
        Dialect::OpenAiCompletions => Arc::new(ChatCompletionsProvider::with_client(
            ChatCompletionsConfig::from(spec),
            client,
        )?),
        Dialect::OpenAiResponses => Arc::new(ResponsesProvider::with_client(spec.clone(), client)?),
        Dialect::AnthropicMessages => {
            Arc::new(AnthropicProvider::with_client(spec.clone(), client)?)
        }
        Dialect::Local => return crate::local::build(spec),
    })
}

/// Defaults for a provider keel knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderPreset {
    pub name: &'static str,
    pub dialect: Dialect,
    pub base_url: &'static str,
    /// The environment variable holding the key (`None`: no key needed).
    pub api_key_env: Option<&'static str>,
}

impl ProviderPreset {
    /// A [`ProviderSpec`] from this preset (no key: the caller reads
    /// `api_key_env`).
    pub fn spec(&self) -> ProviderSpec {
        ProviderSpec::new(self.name, self.dialect, self.base_url)
    }
}

/// The providers that work without configuration beyond a key.
pub const WELL_KNOWN_PROVIDERS: &[ProviderPreset] = &[
    ProviderPreset {
        name: "openai",
        dialect: Dialect::OpenAiResponses,
        base_url: "https://api.openai.com/v1",
        api_key_env: Some("OPENAI_API_KEY"),
    },
    ProviderPreset {
        name: "anthropic",
        dialect: Dialect::AnthropicMessages,
        base_url: "https://api.anthropic.com/v1",
        api_key_env: Some("ANTHROPIC_API_KEY"),
    },
    ProviderPreset {
        name: "openrouter",
        dialect: Dialect::OpenAiCompletions,
        base_url: "https://openrouter.ai/api/v1",
        api_key_env: Some("OPENROUTER_API_KEY"),
    },
    ProviderPreset {
        name: "ollama",
        dialect: Dialect::OpenAiCompletions,
        base_url: "http://127.0.0.1:11434/v1",
        api_key_env: None,
    },
    ProviderPreset {
        name: "vllm",
        dialect: Dialect::OpenAiCompletions,
        base_url: "http://127.0.0.1:8000/v1",
        api_key_env: None,
    },
    ProviderPreset {
        name: "lmstudio",
        dialect: Dialect::OpenAiCompletions,
        base_url: "http://127.0.0.1:1234/v1",
        api_key_env: None,
    },
    ProviderPreset {
        name: "llamacpp",
        dialect: Dialect::OpenAiCompletions,
        base_url: "http://127.0.0.1:8080/v1",
        api_key_env: None,
    },
    // A GGUF model in-process ([`crate::local`]); no URL. The model file
    // comes with the spec ([`ProviderSpec::local`]).
    ProviderPreset {
        name: "local",
        dialect: Dialect::Local,
        base_url: "",
        api_key_env: None,
    },
];

/// The preset of a well-known provider, by name (case-insensitive).
pub fn well_known_provider(name: &str) -> Option<&'static ProviderPreset> {
    WELL_KNOWN_PROVIDERS
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorKind;

    #[test]
    fn dialect_names_and_aliases() {
        for d in Dialect::ALL {
            assert_eq!(d.as_str().parse::<Dialect>().unwrap(), d);
            assert_eq!(
                serde_json::to_value(d).unwrap(),
                serde_json::json!(d.as_str())
            );
        }
        assert_eq!(
            "responses".parse::<Dialect>().unwrap(),
            Dialect::OpenAiResponses
        );
        assert_eq!(
            "anthropic".parse::<Dialect>().unwrap(),
            Dialect::AnthropicMessages
        );
        assert_eq!(
            "chat-completions".parse::<Dialect>().unwrap(),
            Dialect::OpenAiCompletions
        );
        let err = "gemini".parse::<Dialect>().unwrap_err();
        assert!(err.message.contains("unknown dialect"), "{err}");
    }

    #[test]
    fn endpoints_and_redacted_debug() {
        let spec = ProviderSpec::new("a", Dialect::AnthropicMessages, "http://h/v1/")
            .with_api_key("sk-ant-secret");
        assert_eq!(spec.endpoint(), "http://h/v1/messages");
        let mut spec2 = spec.clone();
        spec2.extra_headers = vec![("x-secret".into(), "hidden-value".into())];
        let debug = format!("{spec2:?}");
        assert!(!debug.contains("sk-ant-secret"), "{debug}");
        assert!(!debug.contains("hidden-value"), "{debug}");
        assert!(debug.contains("x-secret"));
        let spec = ProviderSpec::new("o", Dialect::OpenAiResponses, "https://api.openai.com/v1");
        assert_eq!(spec.endpoint(), "https://api.openai.com/v1/responses");
    }

    #[test]
    fn completions_flags_default_to_openai_only() {
        let openai =
            ProviderSpec::new("o", Dialect::OpenAiCompletions, "https://api.openai.com/v1");
        let cfg = ChatCompletionsConfig::from(&openai);
        assert!(cfg.supports_reasoning_effort && cfg.supports_developer_role);
        let mut local = ProviderSpec::new("l", Dialect::OpenAiCompletions, "http://127.0.0.1:1/v1");
        let cfg = ChatCompletionsConfig::from(&local);
        assert!(!cfg.supports_reasoning_effort && !cfg.supports_developer_role);
        local.supports_reasoning_effort = Some(true);
        assert!(ChatCompletionsConfig::from(&local).supports_reasoning_effort);
    }

    #[test]
    fn factory_builds_each_dialect_and_rejects_bad_headers() {
        for d in Dialect::ALL {
            let spec = ProviderSpec::new("p", d, "http://127.0.0.1:9/v1").with_api_key("k");
            let p = build_provider(&spec).unwrap();
            assert_eq!(p.api(), d.as_str());
            assert_eq!(p.name(), "p");
        }
        let mut spec = ProviderSpec::new("p", Dialect::AnthropicMessages, "http://h/v1");
        spec.api_key = Some("bad\nkey-secret".into());
        let err = build_provider(&spec).err().unwrap();
        assert_eq!(err.kind, ErrorKind::BadRequest);
        assert!(!err.message.contains("key-secret"));
    }

    #[test]
    fn local_dialect_name_preset_and_catalogue() {
        assert_eq!("local".parse::<Dialect>().unwrap(), Dialect::Local);
        assert_eq!(Dialect::Local.as_str(), "local");
        assert!(Dialect::Local.is_local() && !Dialect::OpenAiResponses.is_local());
        let preset = well_known_provider("local").unwrap();
        assert_eq!(preset.dialect, Dialect::Local);
        assert_eq!(preset.api_key_env, None);
        let l = crate::Catalog::builtin().lookup("local", "qwen2.5-coder-1.5b-instruct");
        assert_eq!(l.matched, crate::catalog::Match::Exact);
        assert_eq!(l.entry.api, Dialect::Local);
        assert_eq!(l.entry.context_window, 8192);
        assert_eq!(l.entry.cost, crate::ModelCost::default());
        let any = crate::Catalog::builtin().lookup("local", "my-own.gguf");
        assert_eq!(any.matched, crate::catalog::Match::ProviderDefault);
    }

    #[cfg(not(feature = "local"))]
    #[test]
    fn local_without_the_feature_says_how_to_build_it() {
        let spec = ProviderSpec::local("local", crate::local::LocalSpec::new("/m.gguf"));
        let err = build_provider(&spec).err().unwrap();
        assert!(err.message.contains("--features local"), "{err}");
    }

    #[test]
    fn presets() {
        let p = well_known_provider("OpenAI").unwrap();
        assert_eq!(p.dialect, Dialect::OpenAiResponses);
        assert_eq!(p.spec().endpoint(), "https://api.openai.com/v1/responses");
        assert_eq!(
            well_known_provider("anthropic").unwrap().spec().endpoint(),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(well_known_provider("ollama").unwrap().api_key_env, None);
        assert!(well_known_provider("nope").is_none());
    }
}
