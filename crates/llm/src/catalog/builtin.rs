//! The built-in model table.
//!
//! This module owns the data only: the OpenAI and Anthropic models keel
//! knows, with their limits, thinking levels and list prices (US dollars
//! per million tokens: input, output, cache read, cache write), the
//! defaults of local servers (id `*`: any model of that provider), and the
//! in-process models of the `local` provider (zero price). Prices
//! and limits are the vendors' published figures as of late 2025; users
//! correct or extend them with `[[models]]` in `config.toml`.

use keel_protocol::ThinkingLevel::{self, High, Low, Medium, Minimal, Off, Xhigh};

use crate::provider::Dialect::{
    self, AnthropicMessages, Local, OpenAiCompletions, OpenAiResponses,
};

/// One row of the table.
pub(super) struct Row {
    pub provider: &'static str,
    pub id: &'static str,
    pub name: &'static str,
    /// Other ids of the same model (dated snapshots are matched without
    /// listing them).
    pub aliases: &'static [&'static str],
    pub api: Dialect,
    pub context_window: u64,
    pub max_output_tokens: u64,
    pub images: bool,
    /// Supported levels; `[Off]` for models without reasoning.
    pub levels: &'static [ThinkingLevel],
    /// Input, output, cache read, cache write.
    pub cost: [f64; 4],
    /// See `ModelEntry::compact_tools`.
    pub compact_tools: bool,
}

const NO_REASONING: &[ThinkingLevel] = &[Off];
const O_SERIES: &[ThinkingLevel] = &[Low, Medium, High];
const GPT5: &[ThinkingLevel] = &[Minimal, Low, Medium, High];
const GPT51: &[ThinkingLevel] = &[Off, Low, Medium, High];
const CODEX_MAX: &[ThinkingLevel] = &[Low, Medium, High, Xhigh];
const GPT52: &[ThinkingLevel] = &[Off, Low, Medium, High, Xhigh];
const BUDGETS: &[ThinkingLevel] = &ThinkingLevel::ALL;

const fn openai(
    id: &'static str,
    name: &'static str,
    context_window: u64,
    max_output_tokens: u64,
    images: bool,
    levels: &'static [ThinkingLevel],
    cost: [f64; 4],
) -> Row {
    Row {
        provider: "openai",
        id,
        name,
        aliases: &[],
        api: OpenAiResponses,
        context_window,
        max_output_tokens,
        images,
        levels,
        cost,
        compact_tools: false,
    }
}

const fn claude(
    id: &'static str,
    name: &'static str,
    aliases: &'static [&'static str],
    max_output_tokens: u64,
    cost: [f64; 4],
) -> Row {
    Row {
        provider: "anthropic",
        id,
        name,
        aliases,
        api: AnthropicMessages,
        context_window: 200_000,
        max_output_tokens,
        images: true,
        levels: BUDGETS,
        cost,
        compact_tools: false,
    }
}

const fn local(provider: &'static str, name: &'static str) -> Row {
    Row {
        provider,
        id: "*",
        name,
        aliases: &[],
        api: OpenAiCompletions,
        context_window: 32_768,
        max_output_tokens: 8_192,
        images: false,
        levels: NO_REASONING,
        cost: [0.0; 4],
        compact_tools: false,
    }
}

/// A GGUF model run in-process (provider `local`, [`crate::local`]): the
/// context keel allocates by default, no price, and the compact tools (on
/// keel's task set, `benches/local_tasks.py`, the packaged Qwen models
/// pass more tasks with them; see the README). `[[models]]` with
/// `compact_tools = false` gives a bigger model the full ones.
const fn in_process(id: &'static str, name: &'static str) -> Row {
    Row {
        provider: "local",
        id,
        name,
        aliases: &[],
        api: Local,
        context_window: crate::local::DEFAULT_CONTEXT_SIZE as u64,
        max_output_tokens: crate::local::DEFAULT_MAX_OUTPUT_TOKENS as u64,
        images: false,
        levels: NO_REASONING,
        cost: [0.0; 4],
        compact_tools: true,
    }
}

pub(super) const ROWS: &[Row] = &[
    openai(
        "gpt-4.1",
        "GPT-4.1",
        1_047_576,
        32_768,
        true,
        NO_REASONING,
        [2.0, 8.0, 0.5, 0.0],
    ),
    openai(
        "gpt-4.1-mini",
        "GPT-4.1 mini",
        1_047_576,
        32_768,
        true,
        NO_REASONING,
        [0.4, 1.6, 0.1, 0.0],
    ),
    openai(
        "gpt-4.1-nano",
        "GPT-4.1 nano",
        1_047_576,
        32_768,
        true,
        NO_REASONING,
        [0.1, 0.4, 0.025, 0.0],
    ),
    openai(
        "gpt-4o",
        "GPT-4o",
        128_000,
        16_384,
        true,
        NO_REASONING,
        [2.5, 10.0, 1.25, 0.0],
    ),
    openai(
        "gpt-4o-mini",
        "GPT-4o mini",
        128_000,
        16_384,
        true,
        NO_REASONING,
        [0.15, 0.6, 0.075, 0.0],
    ),
    openai(
        "o3",
        "o3",
        200_000,
        100_000,
        true,
        O_SERIES,
        [2.0, 8.0, 0.5, 0.0],
    ),
    openai(
        "o3-mini",
        "o3-mini",
        200_000,
        100_000,
        false,
        O_SERIES,
        [1.1, 4.4, 0.55, 0.0],
    ),
    openai(
        "o4-mini",
        "o4-mini",
        200_000,
        100_000,
        true,
        O_SERIES,
        [1.1, 4.4, 0.275, 0.0],
    ),
    openai(
        "gpt-5",
        "GPT-5",
        400_000,
        128_000,
        true,
        GPT5,
        [1.25, 10.0, 0.125, 0.0],
    ),
    openai(
        "gpt-5-mini",
        "GPT-5 mini",
        400_000,
        128_000,
        true,
        GPT5,
        [0.25, 2.0, 0.025, 0.0],
    ),
    openai(
        "gpt-5-nano",
        "GPT-5 nano",
        400_000,
        128_000,
        true,
        GPT5,
        [0.05, 0.4, 0.005, 0.0],
    ),
    openai(
        "gpt-5-codex",
        "GPT-5-Codex",
        400_000,
        128_000,
        true,
        O_SERIES,
        [1.25, 10.0, 0.125, 0.0],
    ),
    openai(
        "gpt-5.1",
        "GPT-5.1",
        400_000,
        128_000,
        true,
        GPT51,
        [1.25, 10.0, 0.125, 0.0],
    ),
    openai(
        "gpt-5.1-codex",
        "GPT-5.1-Codex",
        400_000,
        128_000,
        true,
        O_SERIES,
        [1.25, 10.0, 0.125, 0.0],
    ),
    openai(
        "gpt-5.1-codex-mini",
        "GPT-5.1-Codex mini",
        400_000,
        128_000,
        true,
        O_SERIES,
        [0.25, 2.0, 0.025, 0.0],
    ),
    openai(
        "gpt-5.1-codex-max",
        "GPT-5.1-Codex-Max",
        400_000,
        128_000,
        true,
        CODEX_MAX,
        [1.25, 10.0, 0.125, 0.0],
    ),
    openai(
        "gpt-5.2",
        "GPT-5.2",
        400_000,
        128_000,
        true,
        GPT52,
        [1.75, 14.0, 0.175, 0.0],
    ),
    claude(
        "claude-opus-4-5",
        "Claude Opus 4.5",
        &[],
        64_000,
        [5.0, 25.0, 0.5, 6.25],
    ),
    claude(
        "claude-opus-4-1",
        "Claude Opus 4.1",
        &[],
        32_000,
        [15.0, 75.0, 1.5, 18.75],
    ),
    claude(
        "claude-opus-4-0",
        "Claude Opus 4",
        &["claude-opus-4"],
        32_000,
        [15.0, 75.0, 1.5, 18.75],
    ),
    claude(
        "claude-sonnet-4-5",
        "Claude Sonnet 4.5",
        &[],
        64_000,
        [3.0, 15.0, 0.3, 3.75],
    ),
    claude(
        "claude-sonnet-4-0",
        "Claude Sonnet 4",
        &["claude-sonnet-4"],
        64_000,
        [3.0, 15.0, 0.3, 3.75],
    ),
    claude(
        "claude-haiku-4-5",
        "Claude Haiku 4.5",
        &[],
        64_000,
        [1.0, 5.0, 0.1, 1.25],
    ),
    local("ollama", "Ollama model"),
    local("vllm", "vLLM model"),
    local("lmstudio", "LM Studio model"),
    local("llamacpp", "llama.cpp model"),
    in_process(
        "qwen2.5-coder-1.5b-instruct",
        "Qwen2.5-Coder 1.5B Instruct (Q4_K_M, in-process)",
    ),
    in_process(
        "qwen2.5-coder-0.5b-instruct",
        "Qwen2.5-Coder 0.5B Instruct (Q4_K_M, in-process)",
    ),
    in_process("*", "Local GGUF model (in-process)"),
];
