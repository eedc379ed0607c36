//! Per-session configuration: the model, the workspace, queue modes.

use std::path::PathBuf;

use keel_protocol::{InterruptMode, Message, QueueMode, ThinkingLevel, Usage};

/// Price per million tokens, in US dollars.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelPricing {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

impl ModelPricing {
    /// Fills `usage.cost` from the token counts.
    pub fn apply(&self, usage: &mut Usage) {
        const PER: f64 = 1_000_000.0;
        usage.cost.input = usage.input as f64 * self.input / PER;
        usage.cost.output = usage.output as f64 * self.output / PER;
        usage.cost.cache_read = usage.cache_read as f64 * self.cache_read / PER;
        usage.cost.cache_write = usage.cache_write as f64 * self.cache_write / PER;
        usage.cost.total =
            usage.cost.input + usage.cost.output + usage.cost.cache_read + usage.cost.cache_write;
    }
}

/// The model a session talks to.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// Model id as the server knows it.
    pub id: String,
    /// Provider name as configured.
    pub provider: String,
    /// Wire dialect, e.g. `openai-completions`.
    pub api: String,
    pub context_window: u64,
    pub max_output_tokens: Option<u64>,
    pub pricing: ModelPricing,
}

/// Everything that shapes one session's behaviour (not its dependencies).
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub session_id: String,
    /// Path of the session file, if persisted.
    pub session_file: Option<PathBuf>,
    /// The workspace root.
    pub cwd: PathBuf,
    pub model: ModelInfo,
    pub thinking_level: ThinkingLevel,
    /// Overrides the generated system prompt when set.
    pub system_prompt: Option<String>,
    /// Project instructions (e.g. AGENTS.md) appended to the system prompt.
    pub project_context: Option<String>,
    /// Where tools save full outputs that were truncated.
    pub scratch_dir: PathBuf,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    pub interrupt_mode: InterruptMode,
    /// History restored from a session file.
    pub initial_messages: Vec<Message>,
}

impl SessionConfig {
    /// A configuration with defaults for everything but the essentials.
    pub fn new(session_id: impl Into<String>, cwd: impl Into<PathBuf>, model: ModelInfo) -> Self {
        Self {
            session_id: session_id.into(),
            session_file: None,
            cwd: cwd.into(),
            model,
            thinking_level: ThinkingLevel::Off,
            system_prompt: None,
            project_context: None,
            scratch_dir: std::env::temp_dir().join("keel-tool-output"),
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            interrupt_mode: InterruptMode::Immediate,
            initial_messages: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pricing_is_per_million() {
        let p = ModelPricing {
            input: 2.0,
            output: 8.0,
            cache_read: 0.5,
            cache_write: 0.0,
        };
        let mut u = Usage {
            input: 1_000_000,
            output: 500_000,
            cache_read: 2_000_000,
            ..Usage::default()
        };
        p.apply(&mut u);
        assert!((u.cost.input - 2.0).abs() < 1e-9);
        assert!((u.cost.output - 4.0).abs() < 1e-9);
        assert!((u.cost.cache_read - 1.0).abs() < 1e-9);
        assert!((u.cost.total - 7.0).abs() < 1e-9);
    }
}
