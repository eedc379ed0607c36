//! Operations a host submits to a session (`submit(Op)`).

use serde::{Deserialize, Serialize};

use crate::{ImageContent, InterruptMode, QueueMode, ThinkingLevel, TodoPhase};

/// A message from the user with optional images.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct UserInput {
    pub message: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageContent>,
}

impl UserInput {
    pub fn text(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            images: Vec::new(),
        }
    }
}

/// An operation submitted to a session. Ops are handled in submission order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// Start a run with this message (the session must be idle).
    Prompt(UserInput),
    /// Queue a steering message: delivered after the current tool calls.
    Steer(UserInput),
    /// Queue a follow-up message: delivered when the agent would stop.
    FollowUp(UserInput),
    /// Abort the running model call and tools.
    Abort,
    SetSteeringMode {
        mode: QueueMode,
    },
    SetFollowUpMode {
        mode: QueueMode,
    },
    SetInterruptMode {
        mode: InterruptMode,
    },
    /// Change the reasoning effort for the next model calls (logged).
    SetThinkingLevel {
        level: ThinkingLevel,
    },
    /// Name the session (logged); `None` clears the name.
    SetSessionName {
        name: Option<String>,
    },
    /// Replace the session's todo list.
    SetTodos {
        phases: Vec<TodoPhase>,
    },
    /// Flush the session and stop the session task.
    Shutdown,
}
