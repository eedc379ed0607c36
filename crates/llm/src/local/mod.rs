//! The `local` dialect: a GGUF model run inside the keel process.
//!
//! With the cargo feature `local`, [`LocalProvider`] runs llama.cpp (through
//! `llama-cpp-2`) on a dedicated thread per model file (never an async
//! worker), loads the model on the first request, renders the model's own
//! chat template ([`template`]) with the offered tools, constrains the
//! output with a grammar built from the tools' JSON Schemas ([`grammar`]:
//! plain text or valid calls, per [`GrammarMode`]), splits it into text and
//! calls ([`parse`]) and streams the same normalised [`crate::ModelEvent`]s
//! as the HTTP dialects. The KV cache is kept between requests: only the
//! part of the prompt after the longest prefix already decoded is evaluated
//! (compared as text, see `kv`). Threads and memory checks are in
//! [`resources`]. Cancellation is checked between prompt
//! batches and between generated tokens; usage is counted in tokens (reused
//! cache tokens as `cache_read`). A model that asks again for the very call
//! whose result it just got is made to answer in text instead.
//!
//! Without the feature the pure parts (templates, grammars, parsing) are
//! still here and tested, and [`crate::build_provider`] says how to build
//! a keel that has the dialect. This module does not know where model
//! files come from: the caller passes a path ([`LocalSpec::model_path`]).

pub mod grammar;
mod kv;
pub mod parse;
pub mod resources;
pub mod template;

#[cfg(feature = "local")]
mod engine;
#[cfg(feature = "local")]
mod provider;

use std::path::PathBuf;

pub use grammar::GrammarMode;
#[cfg(feature = "local")]
pub use provider::LocalProvider;
pub use resources::default_threads;

/// The dialect name, as returned by [`crate::Provider::api`].
pub const API: &str = "local";
/// Context size (tokens) when none is configured.
pub const DEFAULT_CONTEXT_SIZE: u32 = 8192;
/// Output tokens per response when the request sets no limit.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u32 = 2048;
/// Whether this build can run local models (the `local` feature).
pub const AVAILABLE: bool = cfg!(feature = "local");

/// How to run a local model: the `local` part of a
/// [`crate::ProviderSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct LocalSpec {
    /// The GGUF file.
    pub model_path: PathBuf,
    /// Context size in tokens (the KV cache is allocated for all of it).
    pub context_size: u32,
    /// Threads for generation and prompt evaluation; `None`: chosen when
    /// the model is loaded ([`resources::threads_now`]).
    pub threads: Option<u32>,
    /// How tool calls are constrained.
    pub grammar: GrammarMode,
    /// Sampling temperature; `0` decodes greedily (reproducible).
    pub temperature: f32,
    /// Seed of the sampler when `temperature > 0`.
    pub seed: u32,
}

impl Default for LocalSpec {
    fn default() -> Self {
        LocalSpec {
            model_path: PathBuf::new(),
            context_size: DEFAULT_CONTEXT_SIZE,
            threads: None,
            grammar: GrammarMode::Auto,
            temperature: 0.0,
            seed: 0x6b65_656c,
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
    /// ([`resources::threads_now`]).
    pub fn effective_threads(&self) -> u32 {
        self.threads
            .filter(|t| *t > 0)
            .unwrap_or_else(default_threads)
    }
}

/// The provider for `spec` (which must have the local dialect).
#[cfg(feature = "local")]
pub(crate) fn build(
    spec: &crate::ProviderSpec,
) -> crate::Result<std::sync::Arc<dyn crate::Provider>> {
    Ok(std::sync::Arc::new(LocalProvider::new(
        spec.name.clone(),
        spec.local.clone(),
    )?))
}

/// Without the `local` feature: an error saying how to get it.
#[cfg(not(feature = "local"))]
pub(crate) fn build(
    _spec: &crate::ProviderSpec,
) -> crate::Result<std::sync::Arc<dyn crate::Provider>> {
    Err(crate::Error::new(
        crate::ErrorKind::BadRequest,
        "this keel was built without local models: rebuild with `cargo build --release -p keel-cli --features local` (scripts/quickstart.sh does)",
    ))
}
