//! How to run a local model ([`LocalSpec`]), with its defaults: the
//! `local` part of a [`crate::ProviderSpec`]. A leaf, built in every
//! build (the engine itself is behind the `local` feature).

use std::path::PathBuf;

use super::grammar::GrammarMode;
use super::resources::default_threads;

/// Context size (tokens) when none is configured.
pub const DEFAULT_CONTEXT_SIZE: u32 = 8192;
/// Output tokens per response when the request sets no limit.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 2048;
/// How to run a local model: the `local` part of a
/// [`crate::ProviderSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSpec {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// Context size in tokens (the KV cache is allocated for all of it).
    pub context_size: u32,
    /// Threads for generation and prompt evaluation; `None`: chosen when
    /// the model is loaded ([`super::resources::threads_now`]).
    pub threads: Option<u32>,
    /// How tool calls are constrained.
    pub grammar: GrammarMode,
    /// Sampling temperature; `0` decodes greedily (reproducible).
    pub temperature: f32,
    /// Seed of the sampler when `temperature > 0`.
    pub seed: u32,
    /// Where evaluated prompts are kept for later processes (see
    /// `prompt_cache`); `None`: nowhere.
    pub prompt_cache: Option<PathBuf>,
    /// Most bytes the prompt cache may hold (all models together).
    pub prompt_cache_limit: u64,
}

impl Default for LocalSpec {
    fn default() -> Self {
        LocalSpec {
            model_path: PathBuf::new(),
            context_size: DEFAULT_CONTEXT_SIZE,
            threads: None,
            // Measured best on keel's task set (benches/local_tasks.py):
            // small models asked a question explain the tools instead of
            // calling them.
            grammar: GrammarMode::CallFirst,
            temperature: 0.0,
            seed: 0x6b65_656c,
            prompt_cache: None,
            prompt_cache_limit: super::prompt_cache::DEFAULT_LIMIT,
        }
    }
}

impl LocalSpec {
    /// A spec for `model_path` with the defaults.
    pub fn new(model_path: impl Into<PathBuf>) -> Self {
        LocalSpec {
            model_path: model_path.into(),
            ..LocalSpec::default()
        }
    }

    /// The threads to use on an idle machine: the configured number, else
    /// [`default_threads`]. Without a configured number the engine uses
    /// fewer when other processes keep cores busy as the model is loaded
    /// ([`super::resources::threads_now`]).
    pub fn effective_threads(&self) -> u32 {
        self.threads
            .filter(|t| *t > 0)
            .unwrap_or_else(default_threads)
    }
}
