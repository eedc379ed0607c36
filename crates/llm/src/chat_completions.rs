//! The OpenAI Chat Completions dialect (`openai-completions`).
//!
//! This module owns [`ChatCompletionsProvider`] and its configuration: the
//! endpoint (`POST {base_url}/chat/completions`), the headers
//! (`Authorization: Bearer <key>` when a key is set, plus configured extra
//! headers), and wiring the request body ([`request`]) and the chunk decoder
//! (`stream`) to the shared HTTP plumbing. It serves OpenAI and the many
//! servers that copy its API (Ollama, vLLM, llama.cpp, OpenRouter, …), so it
//! must not assume any one vendor's extensions beyond the documented flags.
//! It does not compute cost, retry, or know about sessions.

pub mod request;
mod stream;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::{ModelRequest, ModelStream, Provider, Result, http};

pub use request::build_request_body;

/// The wire dialect name reported by [`Provider::api`].
pub const API: &str = crate::spec::Dialect::OpenAiCompletions.as_str();
pub use crate::spec::{DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_REQUEST_TIMEOUT};

/// How to reach one Chat Completions server. `Debug` never shows the key.
#[derive(Clone, PartialEq)]
pub struct ChatCompletionsConfig {
    /// Provider name as configured (`openai`, `ollama`, …).
    pub name: String,
    /// For example `https://api.openai.com/v1` (a trailing `/` is fine).
    pub base_url: String,
    pub api_key: Option<String>,
    /// Extra request headers; they replace default headers of the same name.
    pub extra_headers: Vec<(String, String)>,
    /// Longest wait for the next bytes of a streaming body.
    pub idle_timeout: Duration,
    /// Longest wait for a TCP/TLS connection (used by [`ChatCompletionsProvider::new`]'s client).
    pub connect_timeout: Duration,
    /// Longest wait from sending the request to the response headers.
    pub request_timeout: Duration,
    /// Send `reasoning_effort` when thinking is on.
    pub supports_reasoning_effort: bool,
    /// Send the system prompt with the `developer` role instead of `system`.
    pub supports_developer_role: bool,
}

impl ChatCompletionsConfig {
    /// A config with no key, no extra headers, default timeouts and neither
    /// reasoning effort nor the developer role.
    pub fn new(name: impl Into<String>, base_url: impl Into<String>) -> Self {
        ChatCompletionsConfig {
            name: name.into(),
            base_url: base_url.into(),
            api_key: None,
            extra_headers: Vec::new(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            supports_reasoning_effort: false,
            supports_developer_role: false,
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// `{base_url}/chat/completions`.
    pub fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

impl std::fmt::Debug for ChatCompletionsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ChatCompletionsConfig")
            .field("name", &self.name)
            .field("base_url", &crate::error::redact_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("extra_headers", &header_names)
            .field("idle_timeout", &self.idle_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("supports_reasoning_effort", &self.supports_reasoning_effort)
            .field("supports_developer_role", &self.supports_developer_role)
            .finish()
    }
}

/// A Chat Completions server.
#[derive(Debug, Clone)]
pub struct ChatCompletionsProvider {
    config: ChatCompletionsConfig,
    endpoint: http::SseEndpoint,
}

impl ChatCompletionsProvider {
    /// A provider with its own HTTP client (rustls, `connect_timeout`).
    pub fn new(config: ChatCompletionsConfig) -> Result<Self> {
        let client = http::build_client(config.connect_timeout)?;
        ChatCompletionsProvider::with_client(config, client)
    }

    /// A provider on a shared client (see [`crate::build_client`]); the
    /// client's connect timeout applies instead of `config.connect_timeout`.
    /// Fails if an extra header or the key is not a valid header value.
    pub fn with_client(config: ChatCompletionsConfig, client: reqwest::Client) -> Result<Self> {
        let headers = http::build_headers(
            &config.name,
            config.api_key.as_deref(),
            http::Auth::Bearer,
            &[],
            &config.extra_headers,
        )?;
        let endpoint = http::SseEndpoint {
            client,
            url: config.endpoint(),
            headers,
            request_timeout: config.request_timeout,
            idle_timeout: config.idle_timeout,
        };
        Ok(ChatCompletionsProvider { config, endpoint })
    }

    pub fn config(&self) -> &ChatCompletionsConfig {
        &self.config
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint.url
    }
}

#[async_trait::async_trait]
impl Provider for ChatCompletionsProvider {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn api(&self) -> &str {
        API
    }

    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream> {
        let body = request::request_body(&request, &self.config);
        tracing::debug!(
            provider = %self.config.name,
            model = %request.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "chat completions request"
        );
        let decoder = stream::ChunkDecoder::new(&self.endpoint.url);
        self.endpoint.stream(&body, decoder, cancel).await
    }
}
