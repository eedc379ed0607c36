//! Test modules, one per dialect, plus shared helpers.

mod chat_completions;

use std::time::Duration;

use futures::StreamExt;
use keel_llm::{ModelEvent, ModelRequest, ModelStream, Result};
use keel_protocol::{ContentBlock, Message, ThinkingLevel, UserMessage};

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
