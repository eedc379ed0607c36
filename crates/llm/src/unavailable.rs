//! A provider that fails every call with one reason: what a session gets
//! when no model is configured, or the configured one cannot be set up, so
//! the reason reaches the host when it prompts instead of at startup.
//! It must not know why the model is missing.

use tokio_util::sync::CancellationToken;

use crate::{Error, ErrorKind, ModelRequest, ModelStream, Provider, Result};

/// Fails every call with its reason ([`ErrorKind::Other`], not retried).
#[derive(Debug, Clone)]
pub struct UnavailableProvider {
    reason: String,
}

impl UnavailableProvider {
    pub fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
        }
    }
}

#[async_trait::async_trait]
impl Provider for UnavailableProvider {
    fn name(&self) -> &str {
        "unavailable"
    }
    fn api(&self) -> &str {
        "none"
    }
    async fn stream(
        &self,
        _request: ModelRequest,
        _cancel: CancellationToken,
    ) -> Result<ModelStream> {
        Err(Error::new(ErrorKind::Other, self.reason.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_call_fails_with_the_reason() {
        let p = UnavailableProvider::new("no model configured");
        let request = ModelRequest {
            model: String::new(),
            system_prompt: String::new(),
            messages: Vec::new(),
            tools: Vec::new(),
            thinking_level: keel_protocol::ThinkingLevel::Off,
            max_output_tokens: None,
            output_schema: None,
        };
        let Err(e) = p.stream(request, CancellationToken::new()).await else {
            panic!("a stream");
        };
        assert_eq!(e.kind, ErrorKind::Other);
        assert_eq!(e.message, "no model configured");
    }
}
