//! The OpenAI Responses dialect (`openai-responses`).
//!
//! This module owns [`ResponsesProvider`]: the endpoint
//! (`POST {base_url}/responses`), the headers (`Authorization: Bearer <key>`
//! when a key is set, plus configured extra headers), and wiring the request
//! body ([`request`]) and the event decoder (`stream`) to the shared HTTP
//! plumbing. Requests are stateless (`store: false`): the whole history is
//! sent every time, with encrypted reasoning carried in thinking blocks'
//! signatures. It does not compute cost, retry, or clamp thinking levels
//! (the catalogue does, before the request is built).

pub mod request;
mod stream;

use tokio_util::sync::CancellationToken;

use crate::spec::{Dialect, ProviderSpec};
use crate::spec_endpoint::{SpecEndpoint, Wiring};
use crate::{ModelRequest, ModelStream, Provider, Result, http};

pub use request::build_request_body;

/// The wire dialect name reported by [`Provider::api`].
pub const API: &str = crate::spec::Dialect::OpenAiResponses.as_str();

const WIRING: Wiring = Wiring {
    dialect: Dialect::OpenAiResponses,
    auth: http::Auth::Bearer,
    defaults: &[],
    label: "responses",
};

/// An OpenAI Responses server.
#[derive(Debug, Clone)]
pub struct ResponsesProvider {
    inner: SpecEndpoint,
}

impl ResponsesProvider {
    /// A provider with its own HTTP client (rustls, `connect_timeout`).
    /// `spec.dialect` is ignored: this is the Responses dialect.
    pub fn new(spec: ProviderSpec) -> Result<Self> {
        SpecEndpoint::new(spec, &WIRING).map(|inner| ResponsesProvider { inner })
    }

    /// A provider on a shared client (see [`crate::build_client`]). Fails if
    /// an extra header or the key is not a valid header value.
    pub fn with_client(spec: ProviderSpec, client: reqwest::Client) -> Result<Self> {
        SpecEndpoint::with_client(spec, client, &WIRING).map(|inner| ResponsesProvider { inner })
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
impl Provider for ResponsesProvider {
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
        let decoder = stream::ResponsesDecoder::new(self.endpoint());
        self.inner.stream(&request, &body, decoder, cancel).await
    }
}
