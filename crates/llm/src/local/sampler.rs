//! Picking the next token, with the tool grammar checked cheaply.
//!
//! llama.cpp's grammar sampler, put in a chain, checks every token of the
//! vocabulary (150,000 for Qwen) against the grammar at every step: on two
//! cores that halves generation speed. [`Sampler`] does what llama.cpp's
//! own tools do instead: it picks a token without the grammar, asks the
//! grammar about that one token, and only when the grammar refuses it
//! applies the grammar to the whole vocabulary and picks again. With
//! greedy decoding the result is the same token either way (the grammar
//! only removes tokens, so an allowed best token is the best allowed one).
//! It owns no model state beyond the samplers.

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use crate::{Error, ErrorKind, Result};

/// The samplers of one generation.
pub(super) struct Sampler {
    /// Greedy, or top-k/top-p/temperature/seeded when `temperature > 0`.
    pick: LlamaSampler,
    grammar: Option<LlamaSampler>,
}

impl Sampler {
    /// Samplers for `grammar` (GBNF, rule `root`) at `temperature`.
    pub fn new(
        model: &LlamaModel,
        grammar: Option<&str>,
        temperature: f32,
        seed: u32,
    ) -> Result<Self> {
        let grammar = match grammar {
            Some(g) => Some(LlamaSampler::grammar(model, g, "root").map_err(|e| {
                Error::new(
                    ErrorKind::BadRequest,
                    format!("cannot build the tool-call grammar ({e}); set [providers.local] grammar = \"off\" to go without"),
                )
            })?),
            None => None,
        };
        let pick = if temperature > 0.0 {
            LlamaSampler::chain_simple([
                LlamaSampler::top_k(40),
                LlamaSampler::top_p(0.9, 1),
                LlamaSampler::temp(temperature),
                LlamaSampler::dist(seed),
            ])
        } else {
            LlamaSampler::greedy()
        };
        Ok(Sampler { pick, grammar })
    }

    /// The next token after the last evaluation of `ctx` (accepted by the
    /// grammar, which moves on past it).
    pub fn sample(&mut self, ctx: &LlamaContext<'_>) -> LlamaToken {
        let token = self.pick.sample(ctx, -1);
        let Some(grammar) = self.grammar.as_mut() else {
            return token;
        };
        let mut one = LlamaTokenDataArray::new(vec![LlamaTokenData::new(token, 0.0, 0.0)], false);
        grammar.apply(&mut one);
        let allowed = one.data.first().is_some_and(|d| d.logit().is_finite());
        let token = if allowed {
            token
        } else {
            let mut all = ctx.token_data_array();
            grammar.apply(&mut all);
            all.apply_sampler(&mut self.pick);
            all.selected_token().unwrap_or(token)
        };
        grammar.accept(token);
        token
    }
}
