//! Helpers shared by the unit tests: temp stores, sample messages, timeouts.
//! Knows nothing beyond this crate's public API.

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use keel_protocol::{AssistantMessage, ContentBlock, Message, ToolResultMessage, UserMessage};
use tempfile::TempDir;

use crate::{EntryBody, SessionStore};

/// Fails the test instead of hanging.
pub(crate) async fn within<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), future)
        .await
        .expect("timed out")
}

/// A store in a fresh temp dir, and a workspace path inside it.
pub(crate) fn temp_store() -> (TempDir, SessionStore, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = SessionStore::new(dir.path().join("sessions"));
    let cwd = dir.path().join("work").join("proj");
    (dir, store, cwd)
}

pub(crate) fn user(text: &str) -> Message {
    Message::User(UserMessage {
        content: vec![ContentBlock::text(text)],
        timestamp: 1,
    })
}

pub(crate) fn assistant(text: &str) -> Message {
    Message::Assistant(AssistantMessage {
        content: vec![
            ContentBlock::text(text),
            ContentBlock::ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: serde_json::json!({"command": "ls"}),
            },
        ],
        api: "openai-completions".into(),
        provider: "mock".into(),
        model: "m".into(),
        usage: Default::default(),
        stop_reason: Default::default(),
        error_message: None,
        error_kind: None,
        timestamp: 2,
        response_id: None,
    })
}

pub(crate) fn tool_result(text: &str) -> Message {
    Message::ToolResult(ToolResultMessage {
        tool_call_id: "c1".into(),
        tool_name: "bash".into(),
        content: vec![ContentBlock::text(text)],
        details: Some(serde_json::json!({"exitCode": 0})),
        is_error: false,
        timestamp: 3,
    })
}

pub(crate) fn msg(message: Message) -> EntryBody {
    EntryBody::Message { message }
}

/// The text of a user or assistant message.
pub(crate) fn text_of(message: &Message) -> String {
    let blocks = match message {
        Message::User(m) => &m.content,
        Message::Assistant(m) => &m.content,
        Message::ToolResult(m) => &m.content,
    };
    blocks
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
