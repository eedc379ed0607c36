//! Moving the KV cache between the llama.cpp context and the prompt cache
//! on disk ([`super::prompt_cache`]).
//!
//! Owns three steps of the engine: restoring a fresh context from the
//! saved prompt sharing the longest start with the new one (its tokens must spell the
//! saved text exactly, else the entry is discarded and the context
//! cleared), evaluating and saving the fixed part of a prompt (system
//! prompt and tools) when nothing saved begins it, and saving the whole
//! conversation after a final answer (so `--continue` in a new process
//! starts where this one stopped). A failed save costs nothing but the
//! next process's time. It must not decide what is fixed in a prompt.

use std::time::Instant;

use llama_cpp_2::token::LlamaToken;
use tokio_util::sync::CancellationToken;

use super::engine::Loaded;
use super::prompt_cache::PromptStore;
use crate::Result;

/// The fewest tokens worth saving.
const MIN_SAVED_TOKENS: usize = 32;

impl Loaded<'_> {
    /// The text of each of `tokens`.
    pub(super) fn pieces(&self, tokens: &[LlamaToken]) -> Vec<Vec<u8>> {
        let vocab = self.model.vocab();
        tokens
            .iter()
            .map(|t| vocab.token_to_piece(*t, true, None))
            .collect()
    }

    /// Loads the saved prompt sharing the longest start with `prompt` into
    /// the empty context (what differs is dropped before evaluation); how
    /// many tokens it holds now (0: nothing usable).
    pub(super) fn restore(&mut self, store: &PromptStore, prompt: &str) -> usize {
        let Some(saved) = store.best(prompt.as_bytes()) else {
            tracing::info!("prompt cache: nothing saved begins this prompt");
            return 0;
        };
        let started = Instant::now();
        let n_ctx = self.ctx.n_ctx() as usize;
        let tokens = match self.ctx.state_seq_load_file(&saved.state, 0, n_ctx) {
            Ok((tokens, _)) => tokens,
            Err(e) => {
                tracing::warn!(file = %saved.state.display(), error = %e, "prompt cache file unusable; removed (it is rebuilt)");
                store.discard(&saved);
                self.ctx.clear_kv_cache();
                return 0;
            }
        };
        let pieces = self.pieces(&tokens);
        if tokens.is_empty() || pieces.concat() != saved.text {
            tracing::warn!(file = %saved.state.display(), "prompt cache file does not match its text; removed (it is rebuilt)");
            store.discard(&saved);
            self.ctx.clear_kv_cache();
            return 0;
        }
        self.cache.push(&tokens, &pieces, &saved.text);
        store.used(&saved);
        tracing::info!(
            tokens = tokens.len(),
            secs = started.elapsed().as_secs_f64(),
            "prompt cache hit"
        );
        tokens.len()
    }

    /// Makes the context hold exactly `fixed` (keeping what it already
    /// holds of it, evaluating the rest) and saves it; the tokens
    /// evaluated.
    pub(super) fn warm(
        &mut self,
        store: &PromptStore,
        fixed: &str,
        cancel: &CancellationToken,
    ) -> Result<usize> {
        let (mut k, mut start) = self.cache.plan(fixed.as_bytes());
        if !self.keep(k) {
            (k, start) = (0, 0);
        }
        let rest = &fixed.as_bytes()[start..];
        let tokens = self.model.vocab().tokenize(rest, false, true);
        if k + tokens.len() < MIN_SAVED_TOKENS {
            return Ok(0);
        }
        let pieces = self.pieces(&tokens);
        self.eval(&tokens, cancel)?;
        self.cache.push(&tokens, &pieces, rest);
        self.save(store, "the system prompt and tools");
        Ok(tokens.len())
    }

    /// Saves everything the context holds (after a final answer).
    pub(super) fn save_conversation(&self, store: &PromptStore) {
        if self.cache.len() >= MIN_SAVED_TOKENS && !store.has(self.cache.text()) {
            self.save(store, "the conversation");
        }
    }

    fn save(&self, store: &PromptStore, what: &str) {
        let started = Instant::now();
        let tokens = self.cache.tokens();
        let saved = store.save(self.cache.text(), |path| {
            self.ctx
                .state_seq_save_file(path, 0, tokens)
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
        match saved {
            Ok(()) => tracing::info!(
                tokens = tokens.len(),
                secs = started.elapsed().as_secs_f64(),
                "prompt cache: saved {what}"
            ),
            Err(e) => tracing::warn!(error = %e, "prompt cache: cannot save {what}"),
        }
    }
}
