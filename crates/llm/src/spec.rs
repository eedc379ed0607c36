//! What a configured provider is: its wire dialect ([`Dialect`], with the
//! names configuration uses) and how to reach it ([`ProviderSpec`]), and
//! the streaming endpoint built from a spec. A leaf: the dialect modules
//! and the provider factory ([`crate::provider`]) build on it; it knows
//! none of them.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, ErrorKind, Result};

/// Default for [`ChatCompletionsConfig::idle_timeout`].
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(120);
/// Default for [`ChatCompletionsConfig::connect_timeout`].
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(15);
/// Default for [`ChatCompletionsConfig::request_timeout`].
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(180);

/// A wire dialect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Dialect {
    /// OpenAI Chat Completions and compatibles (Ollama, vLLM, llama.cpp,
    /// LM Studio, OpenRouter, …): `POST {base}/chat/completions`.
    #[serde(
        rename = "openai-completions",
        alias = "openai-chat",
        alias = "chat-completions",
        alias = "completions"
    )]
    OpenAiCompletions,
    /// OpenAI Responses: `POST {base}/responses`.
    #[serde(rename = "openai-responses", alias = "responses")]
    OpenAiResponses,
    /// Anthropic Messages: `POST {base}/messages`.
    #[serde(rename = "anthropic-messages", alias = "anthropic", alias = "messages")]
    AnthropicMessages,
    /// A GGUF model run inside the keel process ([`crate::local`]); no HTTP.
    #[serde(rename = "local")]
    Local,
}

impl Dialect {
    /// The HTTP dialects.
    pub const ALL: [Dialect; 3] = [
        Dialect::OpenAiCompletions,
        Dialect::OpenAiResponses,
        Dialect::AnthropicMessages,
    ];

    /// Whether the model runs in-process rather than behind a URL.
    pub fn is_local(self) -> bool {
        self == Dialect::Local
    }

    /// The canonical name, as returned by [`crate::Provider::api`].
    pub const fn as_str(self) -> &'static str {
        match self {
            Dialect::OpenAiCompletions => "openai-completions",
            Dialect::OpenAiResponses => "openai-responses",
            Dialect::AnthropicMessages => "anthropic-messages",
            Dialect::Local => "local",
        }
    }

    /// The path appended to the base URL (empty for [`Dialect::Local`]).
    pub fn path(self) -> &'static str {
        match self {
            Dialect::OpenAiCompletions => "chat/completions",
            Dialect::OpenAiResponses => "responses",
            Dialect::AnthropicMessages => "messages",
            Dialect::Local => "",
        }
    }
}

impl std::fmt::Display for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Dialect {
    type Err = Error;

    /// Accepts the canonical names and the aliases of the module docs.
    fn from_str(s: &str) -> Result<Self> {
        serde_json::from_value(serde_json::Value::String(s.trim().to_owned())).map_err(|_| {
            Error::new(
                ErrorKind::BadRequest,
                format!(
                    "unknown dialect {s:?}: expected openai-completions, openai-responses, anthropic-messages or local"
                ),
            )
        })
    }
}

/// How to reach one configured provider. `Debug` never shows the key or
/// header values.
#[derive(Clone, PartialEq)]
pub struct ProviderSpec {
    /// Provider name as configured (`openai`, `anthropic`, `ollama`, …).
    pub name: String,
    pub dialect: Dialect,
    /// For example `https://api.openai.com/v1` (a trailing `/` is fine).
    pub base_url: String,
    /// Sent as `Authorization: Bearer` (OpenAI dialects) or `x-api-key`
    /// (Anthropic); none is sent when `None` or empty.
    pub api_key: Option<String>,
    /// Extra request headers; they replace default headers of the same
    /// name (for example `anthropic-version` or `anthropic-beta`).
    pub extra_headers: Vec<(String, String)>,
    /// Longest wait for the next bytes of a streaming body.
    pub idle_timeout: Duration,
    /// Longest wait for a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// Longest wait from sending the request to the response headers.
    pub request_timeout: Duration,
    /// Chat Completions only: send `reasoning_effort`. `None`: only for
    /// `api.openai.com`.
    pub supports_reasoning_effort: Option<bool>,
    /// Chat Completions only: send the system prompt as `developer`.
    /// `None`: only for `api.openai.com`.
    pub supports_developer_role: Option<bool>,
    /// [`Dialect::Local`] only: the model file and how to run it
    /// (`base_url` is not used).
    pub local: crate::local::settings::LocalSpec,
}

impl ProviderSpec {
    /// A spec with no key, no extra headers and default timeouts.
    pub fn new(name: impl Into<String>, dialect: Dialect, base_url: impl Into<String>) -> Self {
        ProviderSpec {
            name: name.into(),
            dialect,
            base_url: base_url.into(),
            api_key: None,
            extra_headers: Vec::new(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            supports_reasoning_effort: None,
            supports_developer_role: None,
            local: crate::local::settings::LocalSpec::default(),
        }
    }

    /// A spec for a local model (see [`crate::local`]).
    pub fn local(name: impl Into<String>, local: crate::local::settings::LocalSpec) -> Self {
        ProviderSpec {
            local,
            ..ProviderSpec::new(name, Dialect::Local, "")
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// `{base_url}/{dialect path}`.
    pub fn endpoint(&self) -> String {
        format!(
            "{}/{}",
            self.base_url.trim_end_matches('/'),
            self.dialect.path()
        )
    }

    /// Whether the base URL points at OpenAI itself.
    pub(crate) fn is_openai(&self) -> bool {
        reqwest::Url::parse(&self.base_url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
            })
            .unwrap_or(false)
    }
}

impl std::fmt::Debug for ProviderSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ProviderSpec")
            .field("name", &self.name)
            .field("dialect", &self.dialect)
            .field("base_url", &crate::error::redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("extra_headers", &header_names)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("supports_reasoning_effort", &self.supports_reasoning_effort)
            .field("supports_developer_role", &self.supports_developer_role)
            .field("local", &self.local)
            .finish()
    }
}

/// The streaming endpoint of `spec` on `client`, authenticating as `auth`
/// with these default headers (extra headers override them).
pub(crate) fn sse_endpoint(
    spec: &ProviderSpec,
    client: reqwest::Client,
    auth: crate::http::Auth,
    defaults: &[(&'static str, &str)],
) -> Result<crate::http::SseEndpoint> {
    let headers = crate::http::build_headers(
        &spec.name,
        spec.api_key.as_deref(),
        auth,
        defaults,
        &spec.extra_headers,
    )?;
    Ok(crate::http::SseEndpoint {
        client,
        url: spec.endpoint(),
        headers,
        request_timeout: spec.request_timeout,
        idle_timeout: spec.idle_timeout,
    })
}
