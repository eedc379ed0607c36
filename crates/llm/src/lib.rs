//! Model providers.
//!
//! This crate owns everything between keel and a model server: HTTP, SSE
//! parsing, idle timeouts, cancellation, and one module per wire dialect, all
//! normalised to one stream of [`ModelEvent`]s. It must not know about tools'
//! implementations, sessions or approvals: it sees tool *specs* and message
//! history, nothing more.
//!
//! Dialects: [`chat_completions`] (`openai-completions`), [`responses`]
//! (`openai-responses`), [`anthropic`] (`anthropic-messages`), and
//! [`local`] (`local`: a GGUF model in-process, feature `local`); the shared
//! plumbing (headers, send, SSE pump) is in the private `http` module,
//! what the providers built straight from a spec share in `spec_endpoint`,
//! and the shared history rules in `history`. [`provider`] turns a configured
//! [`ProviderSpec`] into a [`Provider`] ([`build_provider`]); [`catalog`]
//! knows models (limits, thinking levels, prices) and clamps thinking
//! levels ([`effective_thinking`]). Retrying is the caller's job:
//! [`Error::is_retryable`] and [`Error::retry_after`] say when and how long.
//!
//! Thinking signatures ([`ModelEvent::ThinkingDelta`]'s `signature`, stored
//! as a thinking block's `thinking_signature`) are dialect-specific and are
//! replayed only to the same dialect, provider and model: Anthropic's
//! signature string (or a JSON array of a run of thinking blocks), or the
//! Responses reasoning item as JSON (with its `encrypted_content`).

pub mod anthropic;
pub mod catalog;
pub mod chat_completions;
mod error;
mod history;
mod http;
pub mod local;
pub mod provider;
pub mod responses;
mod spec;
mod spec_endpoint;
pub mod sse;
#[cfg(test)]
mod stream_test_support;
mod unavailable;

use std::pin::Pin;

use futures::Stream;
use keel_protocol::{Message, StopReason, ThinkingLevel, ToolSpec, Usage};
use tokio_util::sync::CancellationToken;

pub use anthropic::AnthropicProvider;
pub use catalog::{
    Catalog, InputModality, ModelConfig, ModelCost, ModelEntry, ModelLookup, effective_thinking,
};
pub use chat_completions::{ChatCompletionsConfig, ChatCompletionsProvider};
pub use error::{Error, ErrorKind, Result, classify_http, parse_retry_after};
pub use history::MISSING_RESULT_TEXT;
pub use http::build_client;
pub use provider::{
    Dialect, ProviderPreset, ProviderSpec, WELL_KNOWN_PROVIDERS, build_provider,
    build_provider_with_client, well_known_provider,
};
pub use responses::ResponsesProvider;
pub use unavailable::UnavailableProvider;

/// The name a structured output's schema is sent under.
pub const OUTPUT_SCHEMA_NAME: &str = "output";

/// Everything one model call needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// Model id as the server knows it.
    pub model: String,
    pub system_prompt: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub thinking_level: ThinkingLevel,
    pub max_output_tokens: Option<u64>,
    /// A JSON Schema the final answer's text must follow (structured
    /// output), sent in each dialect's own field; `None` for free text.
    pub output_schema: Option<serde_json::Value>,
}

/// One normalised event of a streaming model response.
///
/// Text and thinking deltas append to the current block of their kind (a new
/// block starts whenever the kind changes). Tool calls are keyed by `index`,
/// the provider's index of the call within this response; their argument JSON
/// arrives in pieces through [`ModelEvent::ToolCallDelta`].
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// The response began. `response_id` is the server's id for it, if any.
    Start {
        response_id: Option<String>,
    },
    TextDelta(String),
    ThinkingDelta {
        delta: String,
        /// Opaque signature / encrypted reasoning to replay on later turns.
        signature: Option<String>,
    },
    ToolCallStart {
        index: u32,
        id: String,
        name: String,
    },
    ToolCallDelta {
        index: u32,
        delta: String,
    },
    /// Token usage (may arrive before `Finish`; the last one wins).
    Usage(Usage),
    /// The response completed normally.
    Finish {
        stop_reason: StopReason,
    },
}

/// The stream of one model call. It ends after `Finish` or with an error;
/// a stream that ends without `Finish` is reported as
/// [`ErrorKind::StreamCut`].
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent>> + Send>>;

/// A model server speaking one wire dialect.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// Provider name as configured (for example `openai`, `ollama`).
    fn name(&self) -> &str;
    /// The wire dialect, for example `openai-completions`.
    fn api(&self) -> &str;
    /// Sends the request and returns the event stream once the server has
    /// answered with a success status. Cancelling `cancel` ends the stream
    /// promptly with [`ErrorKind::Cancelled`].
    async fn stream(&self, request: ModelRequest, cancel: CancellationToken)
    -> Result<ModelStream>;
}
