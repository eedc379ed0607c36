//! The Anthropic Messages dialect (`anthropic-messages`).
//!
//! This module owns [`AnthropicProvider`]: the endpoint
//! (`POST {base_url}/messages`, with a base URL such as
//! `https://api.anthropic.com/v1`), the headers (`x-api-key: <key>` when a
//! key is set, `anthropic-version: 2023-06-01`, plus configured extra
//! headers, which may replace the version or add `anthropic-beta`), and
//! wiring the request body ([`request`]) and the event decoder (`stream`) to
//! the shared HTTP plumbing. HTTP 529 and `overloaded_error` events are
//! [`crate::ErrorKind::ServerOverloaded`] (the shared classification). It
//! does not compute cost, retry, or clamp thinking levels.

pub mod request;
mod stream;

use tokio_util::sync::CancellationToken;

use crate::spec::{Dialect, ProviderSpec};
use crate::spec_endpoint::{SpecEndpoint, Wiring};
use crate::{ModelRequest, ModelStream, Provider, Result, http};

pub use request::build_request_body;

/// The wire dialect name reported by [`Provider::api`].
pub const API: &str = crate::spec::Dialect::AnthropicMessages.as_str();
/// The `anthropic-version` header sent by default.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

const WIRING: Wiring = Wiring {
    dialect: Dialect::AnthropicMessages,
    auth: http::Auth::Header("x-api-key"),
    defaults: &[("anthropic-version", ANTHROPIC_VERSION)],
    label: "anthropic messages",
};

/// An Anthropic Messages server.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    inner: SpecEndpoint,
}

impl AnthropicProvider {
    /// A provider with its own HTTP client (rustls, `connect_timeout`).
    /// `spec.dialect` is ignored: this is the Messages dialect.
    pub fn new(spec: ProviderSpec) -> Result<Self> {
        SpecEndpoint::new(spec, &WIRING).map(|inner| AnthropicProvider { inner })
    }

    /// A provider on a shared client (see [`crate::build_client`]). Fails if
    /// an extra header or the key is not a valid header value.
    pub fn with_client(spec: ProviderSpec, client: reqwest::Client) -> Result<Self> {
        SpecEndpoint::with_client(spec, client, &WIRING).map(|inner| AnthropicProvider { inner })
    }

    pub fn spec(&self) -> &ProviderSpec {
        &self.inner.spec
    }

    /// The URL requests are posted to.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint.url
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.inner.spec.name
    }

    fn api(&self) -> &str {
        API
    }

    async fn stream(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelStream> {
        let body = build_request_body(&request, &self.inner.spec.name);
        let decoder = stream::MessagesDecoder::new(self.endpoint());
        self.inner.stream(&request, &body, decoder, cancel).await
    }
}
