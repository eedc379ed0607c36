//! What the providers built straight from a [`ProviderSpec`] share (the
//! Responses and Anthropic Messages dialects): the spec with its SSE
//! endpoint (URL, key, default and extra headers, timeouts), building them
//! on an own or a shared client, and posting one request body.
//!
//! Each dialect module keeps its request body, its event decoder and the
//! [`Wiring`] of its headers; this module must not know any wire format.

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::http::{self, SseDecoder};
use crate::spec::{Dialect, ProviderSpec};
use crate::{ModelRequest, ModelStream, Result};

/// How one dialect presents itself on the wire.
#[derive(Debug)]
pub(crate) struct Wiring {
    /// Forced onto the spec (whatever it said).
    pub dialect: Dialect,
    /// How the key is sent.
    pub auth: http::Auth,
    /// Headers sent unless an extra header of the same name replaces them.
    pub defaults: &'static [(&'static str, &'static str)],
    /// Names the request in debug logs (`"{label} request"`).
    pub label: &'static str,
}

/// A spec and the endpoint built from it.
#[derive(Debug, Clone)]
pub(crate) struct SpecEndpoint {
    pub spec: ProviderSpec,
    pub endpoint: http::SseEndpoint,
    label: &'static str,
}

impl SpecEndpoint {
    /// With its own HTTP client (rustls, `spec.connect_timeout`).
    pub fn new(spec: ProviderSpec, wiring: &Wiring) -> Result<Self> {
        let client = http::build_client(spec.connect_timeout)?;
        SpecEndpoint::with_client(spec, client, wiring)
    }

    /// On a shared client. Fails if an extra header or the key is not a
    /// valid header value.
    pub fn with_client(
        mut spec: ProviderSpec,
        client: reqwest::Client,
        wiring: &Wiring,
    ) -> Result<Self> {
        spec.dialect = wiring.dialect;
        let endpoint = crate::spec::sse_endpoint(&spec, client, wiring.auth, wiring.defaults)?;
        Ok(SpecEndpoint {
            spec,
            endpoint,
            label: wiring.label,
        })
    }

    /// Posts `body` (built from `request`) and streams the answer through
    /// `decoder`.
    pub async fn stream<D: SseDecoder>(
        &self,
        request: &ModelRequest,
        body: &Value,
        decoder: D,
        cancel: CancellationToken,
    ) -> Result<ModelStream> {
        tracing::debug!(
            provider = %self.spec.name,
            model = %request.model,
            messages = request.messages.len(),
            tools = request.tools.len(),
            "{} request",
            self.label
        );
        self.endpoint.stream(body, decoder, cancel).await
    }
}
