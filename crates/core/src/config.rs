//! Per-session configuration: the model (with what the catalogue knows
//! about it), the workspace, queue modes, retries, compaction.

use std::path::PathBuf;

use keel_llm::{InputModality, ModelCost, ModelEntry};
use keel_protocol::{InterruptMode, Message, QueueMode, ThinkingLevel, Usage};

pub use crate::retry::RetryPolicy;

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

impl From<ModelCost> for ModelPricing {
    fn from(c: ModelCost) -> Self {
        ModelPricing {
            input: c.input,
            output: c.output,
            cache_read: c.cache_read,
            cache_write: c.cache_write,
        }
    }
}

/// The model a session talks to.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelInfo {
    /// Model id as the server knows it.
    pub id: String,
    /// A name for people (the id when the catalogue has none).
    pub name: String,
    /// Provider name as configured.
    pub provider: String,
    /// Wire dialect, e.g. `openai-completions`.
    pub api: String,
    pub context_window: u64,
    pub max_output_tokens: Option<u64>,
    pub pricing: ModelPricing,
    /// Supported thinking levels, lowest first (`[off]`: no reasoning).
    /// Empty: unknown, every level is passed through unchanged.
    pub thinking_levels: Vec<ThinkingLevel>,
    /// Whether the model accepts images.
    pub images: bool,
    /// Offer it the compact form of each tool
    /// (`keel_llm::ModelEntry::compact_tools`).
    pub compact_tools: bool,
}

impl ModelInfo {
    /// What the session knows from a catalogue entry.
    pub fn from_entry(entry: &ModelEntry) -> Self {
        ModelInfo {
            id: entry.id.clone(),
            name: entry.name.clone(),
            provider: entry.provider.clone(),
            api: entry.api.as_str().to_owned(),
            context_window: entry.context_window,
            max_output_tokens: Some(entry.max_output_tokens),
            pricing: entry.cost.into(),
            thinking_levels: entry.thinking_levels.clone(),
            images: entry.supports_images(),
            compact_tools: entry.compact_tools,
        }
    }

    /// Whether the model can reason at all (unknown counts as yes).
    pub fn reasoning(&self) -> bool {
        self.thinking_levels.is_empty()
            || self
                .thinking_levels
                .iter()
                .any(|l| *l != ThinkingLevel::Off)
    }

    /// The level the model really runs at when `requested` is asked for,
    /// and a sentence when that differs (see [`keel_llm::effective_thinking`]).
    pub fn effective_thinking(&self, requested: ThinkingLevel) -> (ThinkingLevel, Option<String>) {
        if self.thinking_levels.is_empty() {
            return (requested, None);
        }
        let entry = ModelEntry {
            id: self.id.clone(),
            name: self.name.clone(),
            provider: self.provider.clone(),
            api: keel_llm::Dialect::OpenAiCompletions,
            context_window: self.context_window,
            max_output_tokens: self.max_output_tokens.unwrap_or_default(),
            input: vec![InputModality::Text],
            thinking_levels: self.thinking_levels.clone(),
            cost: ModelCost::default(),
            aliases: Vec::new(),
            compact_tools: self.compact_tools,
        };
        keel_llm::effective_thinking(&entry, requested)
    }
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
    /// History restored from a session file (ignored when `history` is set).
    pub initial_messages: Vec<Message>,
    /// The entry tree restored from a session file: the loop keeps it in
    /// memory, builds the context from its active branch (compactions
    /// applied) and branches in it.
    pub history: Option<keel_session_store::SessionTree>,
    /// Automatic retries of failed model calls.
    pub retry: RetryPolicy,
    /// When and how the conversation is compacted.
    pub compaction: CompactionSettings,
    /// The sandbox policy the session's commands run under (`None`: no
    /// sandbox, for sessions built without one).
    pub sandbox: Option<keel_protocol::SandboxPolicy>,
    /// Sync the log once a turn's new user messages are in it, before the
    /// model is called (a durable driver: a try that dies mid-stream must
    /// find the prompt stored, not send it again). Off: the log is synced
    /// at `turn_end`, as in-process turns need.
    pub sync_prompts: bool,
    /// The last place in the session's shared event log its host has seen
    /// (a host that reconnects): a watch of runs elsewhere passes on what
    /// comes after it (see [`crate::RunsElsewhere::watch`]).
    pub log_seen: Option<u64>,
    /// A JSON Schema the run's final answer must follow (structured
    /// output): sent with every model call of the session's runs.
    pub output_schema: Option<serde_json::Value>,
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
            history: None,
            retry: RetryPolicy::default(),
            compaction: CompactionSettings::default(),
            sandbox: None,
            sync_prompts: false,
            log_seen: None,
            output_schema: None,
        }
    }
}

/// When and how the conversation is compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// Compact automatically (threshold and overflow).
    pub enabled: bool,
    /// Room kept free in the window: compaction starts once the context is
    /// larger than `context_window - reserve_tokens` (the reserve is capped
    /// at a quarter of the window). It also bounds the summary's length.
    pub reserve_tokens: u64,
    /// About how many tokens of the newest messages stay as they are
    /// (capped at a quarter of the window).
    pub keep_recent_tokens: u64,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            reserve_tokens: 16_384,
            keep_recent_tokens: 20_000,
        }
    }
}

impl CompactionSettings {
    /// The context size above which compaction starts (0: never).
    pub fn threshold(&self, window: u64) -> u64 {
        if window == 0 {
            return 0;
        }
        window - self.reserve_tokens.min(window / 4)
    }

    pub(crate) fn keep_budget(&self, window: u64) -> u64 {
        if window == 0 {
            self.keep_recent_tokens
        } else {
            self.keep_recent_tokens.min(window / 4)
        }
    }

    pub(crate) fn summary_tokens(&self, window: u64) -> u64 {
        let reserve = if window == 0 {
            self.reserve_tokens
        } else {
            self.reserve_tokens.min(window / 4)
        };
        (reserve * 4 / 5).max(256)
    }
}

/// How many reminders a run sends at most when RPC-style reminders are on.
pub const DEFAULT_TODO_REMINDERS: u32 = 3;

/// What the todo list does when the agent is about to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TodoPolicy {
    /// Reminders per run while tasks are unfinished (0: none).
    pub max_reminders: u32,
    /// Empty the list once every task is done.
    pub auto_clear: bool,
}

impl TodoPolicy {
    /// No reminders, no clearing: the list only holds what it is given.
    pub const OFF: Self = Self {
        max_reminders: 0,
        auto_clear: false,
    };
    /// The behaviour of the RPC protocol: up to
    /// [`DEFAULT_TODO_REMINDERS`] reminders per run, cleared when done.
    pub const REMIND: Self = Self {
        max_reminders: DEFAULT_TODO_REMINDERS,
        auto_clear: true,
    };
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

    #[test]
    fn model_info_from_the_catalogue_clamps_thinking() {
        let catalog = keel_llm::Catalog::builtin();
        let entry = catalog.lookup("openai", "gpt-4.1").entry;
        let info = ModelInfo::from_entry(&entry);
        assert_eq!(info.context_window, entry.context_window);
        assert_eq!(info.pricing.input, entry.cost.input);
        assert!(!info.reasoning());
        let (level, warning) = info.effective_thinking(ThinkingLevel::High);
        assert_eq!(level, ThinkingLevel::Off);
        assert!(warning.unwrap().contains("does not support thinking"));
        let unknown = ModelInfo::default();
        assert_eq!(
            unknown.effective_thinking(ThinkingLevel::High),
            (ThinkingLevel::High, None)
        );
    }
}
