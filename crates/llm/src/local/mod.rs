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
mod prompt_cache;
pub mod resources;
pub(crate) mod settings;
pub mod template;
mod unescape;

#[cfg(feature = "local")]
mod disk_state;
#[cfg(feature = "local")]
mod engine;
#[cfg(feature = "local")]
mod provider;
#[cfg(feature = "local")]
mod sampler;

pub use grammar::GrammarMode;
pub use prompt_cache::DEFAULT_LIMIT as DEFAULT_PROMPT_CACHE_LIMIT;
#[cfg(feature = "local")]
pub use provider::LocalProvider;
pub use resources::default_threads;
pub use settings::{DEFAULT_CONTEXT_SIZE, DEFAULT_MAX_OUTPUT_TOKENS, LocalSpec};

/// The dialect name, as returned by [`crate::Provider::api`].
pub const API: &str = crate::spec::Dialect::Local.as_str();
/// Whether this build can run local models (the `local` feature).
pub const AVAILABLE: bool = cfg!(feature = "local");

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
