//! Test modules, one per dialect, the scenarios every dialect runs
//! (`dialects`), plus shared helpers.

mod anthropic;
mod chat_completions;
mod dialects;
mod responses;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use keel_llm::{
    Dialect, ModelEvent, ModelRequest, ModelStream, Provider, ProviderSpec, Result, build_provider,
};
use keel_protocol::{
    AssistantMessage, ContentBlock, Message, StopReason, ThinkingLevel, Usage, UserMessage,
};
use keel_test_support::MockModelServer;
use tokio_util::sync::CancellationToken;

/// Upper bound for any single await in these tests.
pub const T: Duration = Duration::from_secs(10);

/// A one-message request.
pub fn request(prompt: &str) -> ModelRequest {
    ModelRequest {
        model: "mock-model".into(),
        system_prompt: "You are a test.".into(),
        messages: vec![Message::User(UserMessage {
            content: vec![ContentBlock::text(prompt)],
            timestamp: 0,
        })],
        tools: Vec::new(),
        thinking_level: ThinkingLevel::Off,
        max_output_tokens: None,
        output_schema: None,
    }
}

/// Every item of the stream, up to and including the first error.
pub async fn collect(mut stream: ModelStream) -> Vec<Result<ModelEvent>> {
    let all = async {
        let mut items = Vec::new();
        while let Some(item) = stream.next().await {
            items.push(item);
        }
        items
    };
    tokio::time::timeout(T, all)
        .await
        .expect("stream did not end")
}

/// The concatenated text deltas.
pub fn text_of(items: &[Result<ModelEvent>]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::TextDelta(t)) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The concatenated argument deltas of tool call `index`.
pub fn args_of(items: &[Result<ModelEvent>], index: u32) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(ModelEvent::ToolCallDelta { index: i, delta }) if *i == index => {
                Some(delta.as_str())
            }
            _ => None,
        })
        .collect()
}

/// The `ToolCallStart` events, in order.
pub fn starts_of(items: &[Result<ModelEvent>]) -> Vec<ModelEvent> {
    items
        .iter()
        .filter_map(|i| match i {
            Ok(e @ ModelEvent::ToolCallStart { .. }) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// The last usage event.
pub fn usage_of(items: &[Result<ModelEvent>]) -> Option<Usage> {
    items.iter().rev().find_map(|i| match i {
        Ok(ModelEvent::Usage(u)) => Some(*u),
        _ => None,
    })
}

/// The key every test provider is configured with (it must never show up
/// in an error).
pub const SECRET_KEY: &str = "sk-test-secret-key";

/// A provider of `dialect` on the mock, through the factory.
pub fn provider_for(server: &MockModelServer, dialect: Dialect) -> Arc<dyn Provider> {
    build_provider(&spec_for(server, dialect)).expect("provider")
}

/// The spec [`provider_for`] uses (named `mock`).
pub fn spec_for(server: &MockModelServer, dialect: Dialect) -> ProviderSpec {
    ProviderSpec::new("mock", dialect, server.base_url()).with_api_key(SECRET_KEY)
}

/// Calls `provider.stream`, bounded by [`T`].
pub async fn start_with(
    provider: &dyn Provider,
    request: ModelRequest,
    cancel: CancellationToken,
) -> Result<ModelStream> {
    tokio::time::timeout(T, provider.stream(request, cancel))
        .await
        .expect("stream() hung")
}

/// The assistant message the events describe, assembled the way the core
/// does (a delta extends the open block of its kind, a signature replaces
/// the open thinking block's, tool calls by index).
pub fn assemble(items: &[Result<ModelEvent>], api: &str, model: &str) -> AssistantMessage {
    let mut content: Vec<ContentBlock> = Vec::new();
    let mut calls: Vec<(u32, usize, String)> = Vec::new();
    let mut stop_reason = StopReason::Error;
    for item in items.iter().flatten() {
        match item.clone() {
            ModelEvent::TextDelta(delta) => match content.last_mut() {
                Some(ContentBlock::Text { text }) => text.push_str(&delta),
                _ => content.push(ContentBlock::text(delta)),
            },
            ModelEvent::ThinkingDelta { delta, signature } => match content.last_mut() {
                Some(ContentBlock::Thinking {
                    thinking,
                    thinking_signature,
                }) => {
                    thinking.push_str(&delta);
                    if signature.is_some() {
                        *thinking_signature = signature;
                    }
                }
                _ => content.push(ContentBlock::Thinking {
                    thinking: delta,
                    thinking_signature: signature,
                }),
            },
            ModelEvent::ToolCallStart { index, id, name } => {
                calls.push((index, content.len(), String::new()));
                content.push(ContentBlock::ToolCall {
                    id,
                    name,
                    arguments: serde_json::json!({}),
                });
            }
            ModelEvent::ToolCallDelta { index, delta } => {
                if let Some(call) = calls.iter_mut().find(|c| c.0 == index) {
                    call.2.push_str(&delta);
                }
            }
            ModelEvent::Finish { stop_reason: s } => stop_reason = s,
            ModelEvent::Start { .. } | ModelEvent::Usage(_) => {}
        }
    }
    for (_, at, raw) in calls {
        if let Some(ContentBlock::ToolCall { arguments, .. }) = content.get_mut(at) {
            *arguments = serde_json::from_str(&raw).unwrap_or(serde_json::Value::String(raw));
        }
    }
    AssistantMessage {
        content,
        api: api.into(),
        provider: "mock".into(),
        model: model.into(),
        usage: usage_of(items).unwrap_or_default(),
        stop_reason,
        error_message: None,
        error_kind: None,
        timestamp: 0,
        response_id: None,
    }
}
