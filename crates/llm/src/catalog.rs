//! The model catalogue: what keel knows about each model.
//!
//! This module owns [`ModelEntry`] (id, provider, dialect, context window,
//! max output, input modalities, thinking levels, prices), the
//! [`Catalog`] built from the built-in table and the user's `[[models]]`
//! entries ([`ModelConfig`]), lookups with their fallbacks
//! ([`Catalog::lookup`]), the clamp of a thinking level to what a model
//! supports ([`effective_thinking`], which reports the clamp), and pricing
//! of [`Usage`] ([`ModelCost`]). It does no I/O and does not know how the
//! CLI finds its configuration.
//!
//! Lookup of `(provider, id)`, first match wins (ids compare after
//! lowercasing, dropping a `vendor/` prefix and a date suffix such as
//! `-20250929` or `-2025-08-07`, and reading `.` as `-`, so
//! `anthropic/claude-sonnet-4.5` finds `claude-sonnet-4-5`):
//! 1. an entry (or alias) of that provider → [`Match::Exact`];
//! 2. an entry of another provider (a proxy such as OpenRouter, or an
//!    OpenAI-compatible provider under another name) → [`Match::OtherProvider`];
//! 3. the provider's default entry (id `*`, as built in for local servers)
//!    → [`Match::ProviderDefault`];
//! 4. conservative defaults ([`FALLBACK_CONTEXT_WINDOW`],
//!    [`FALLBACK_MAX_OUTPUT_TOKENS`], text only, no thinking, no price) with
//!    a warning → [`Match::Fallback`].
//!
//! The entry returned always carries the id and provider as requested (the
//! id the server knows).
//!
//! `config.toml` shape ([`ModelConfig`]; a user entry with the provider and
//! id of an existing entry changes only the fields it sets):
//!
//! ```toml
//! [[models]]
//! provider = "ollama"
//! id = "qwen3-coder:30b"
//! name = "Qwen3 Coder 30B"        # optional
//! api = "openai-completions"      # optional: the provider's dialect by default
//! context_window = 65536
//! max_output_tokens = 16384
//! input = ["text", "image"]
//! reasoning = true                # optional; implied by thinking_levels
//! thinking_levels = ["off", "low", "medium", "high"]
//! aliases = ["qwen3-coder"]
//! cost = { input = 0.0, output = 0.0, cache_read = 0.0, cache_write = 0.0 }  # USD per million tokens
//! ```

mod builtin;

use keel_protocol::{Cost, ThinkingLevel, Usage};
use serde::{Deserialize, Serialize};

use crate::spec::{Dialect, ProviderSpec};
use crate::{Error, ErrorKind, Result};

/// Context window of a model keel knows nothing about.
pub const FALLBACK_CONTEXT_WINDOW: u64 = 32_768;
/// Max output tokens of a model keel knows nothing about.
pub const FALLBACK_MAX_OUTPUT_TOKENS: u64 = 8_192;
/// Thinking levels of a user entry that says `reasoning = true` without
/// listing its levels.
pub const DEFAULT_REASONING_LEVELS: [ThinkingLevel; 5] = [
    ThinkingLevel::Off,
    ThinkingLevel::Minimal,
    ThinkingLevel::Low,
    ThinkingLevel::Medium,
    ThinkingLevel::High,
];

/// What a model accepts as input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputModality {
    Text,
    Image,
}

/// Prices in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelCost {
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

impl ModelCost {
    /// The cost of `usage` at these prices.
    pub fn cost(&self, usage: &Usage) -> Cost {
        const PER: f64 = 1_000_000.0;
        let input = usage.input as f64 * self.input / PER;
        let output = usage.output as f64 * self.output / PER;
        let cache_read = usage.cache_read as f64 * self.cache_read / PER;
        let cache_write = usage.cache_write as f64 * self.cache_write / PER;
        Cost {
            input,
            output,
            cache_read,
            cache_write,
            total: input + output + cache_read + cache_write,
        }
    }

    /// Fills `usage.cost` from its token counts.
    pub fn apply(&self, usage: &mut Usage) {
        usage.cost = self.cost(usage);
    }
}

/// One model as keel knows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelEntry {
    /// The id the server knows (`*` for a provider's default entry).
    pub id: String,
    /// A name for people.
    pub name: String,
    pub provider: String,
    /// The dialect this provider serves the model with.
    pub api: Dialect,
    pub context_window: u64,
    pub max_output_tokens: u64,
    pub input: Vec<InputModality>,
    /// Supported thinking levels, lowest first; `[off]` when the model does
    /// not reason; without `off` when it always does.
    pub thinking_levels: Vec<ThinkingLevel>,
    pub cost: ModelCost,
    /// Other ids that name this model.
    pub aliases: Vec<String>,
    /// Offer the model the compact form of each tool (first sentences,
    /// required parameters only): for small local models.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub compact_tools: bool,
}

impl ModelEntry {
    /// Whether the model can reason at all.
    pub fn reasoning(&self) -> bool {
        self.thinking_levels
            .iter()
            .any(|l| *l != ThinkingLevel::Off)
    }

    pub fn supports_images(&self) -> bool {
        self.input.contains(&InputModality::Image)
    }

    /// See [`effective_thinking`].
    pub fn effective_thinking(&self, requested: ThinkingLevel) -> (ThinkingLevel, Option<String>) {
        effective_thinking(self, requested)
    }

    fn from_row(row: &builtin::Row) -> Self {
        let mut input = vec![InputModality::Text];
        if row.images {
            input.push(InputModality::Image);
        }
        let [input_cost, output, cache_read, cache_write] = row.cost;
        ModelEntry {
            id: row.id.to_owned(),
            name: row.name.to_owned(),
            provider: row.provider.to_owned(),
            api: row.api,
            context_window: row.context_window,
            max_output_tokens: row.max_output_tokens,
            input,
            thinking_levels: row.levels.to_vec(),
            cost: ModelCost {
                input: input_cost,
                output,
                cache_read,
                cache_write,
            },
            aliases: row.aliases.iter().map(|a| (*a).to_owned()).collect(),
            compact_tools: row.compact_tools,
        }
    }

    /// Conservative defaults for an unknown model.
    fn fallback(provider: &str, id: &str, api: Dialect) -> Self {
        ModelEntry {
            id: id.to_owned(),
            name: id.to_owned(),
            provider: provider.to_owned(),
            api,
            context_window: FALLBACK_CONTEXT_WINDOW,
            max_output_tokens: FALLBACK_MAX_OUTPUT_TOKENS,
            input: vec![InputModality::Text],
            thinking_levels: vec![ThinkingLevel::Off],
            cost: ModelCost::default(),
            aliases: Vec::new(),
            compact_tools: false,
        }
    }
}

fn rank(level: ThinkingLevel) -> usize {
    ThinkingLevel::ALL
        .iter()
        .position(|l| *l == level)
        .unwrap_or(0)
}

/// The thinking level to use with `model` when `requested` is asked for,
/// and a warning when it differs: the highest supported level not above the
/// request, else the lowest supported one (a model that always reasons runs
/// at its lowest level when `off` is asked for).
pub fn effective_thinking(
    model: &ModelEntry,
    requested: ThinkingLevel,
) -> (ThinkingLevel, Option<String>) {
    let levels = &model.thinking_levels;
    if levels.is_empty() || levels.contains(&requested) {
        return (requested, None);
    }
    let below = levels
        .iter()
        .filter(|l| rank(**l) < rank(requested))
        .max_by_key(|l| rank(**l));
    let lowest = levels.iter().min_by_key(|l| rank(**l));
    let Some(&chosen) = below.or(lowest) else {
        return (requested, None);
    };
    let id = &model.id;
    let warning = if !model.reasoning() {
        format!(
            "model {id} does not support thinking; thinking level {} ignored",
            requested.as_str()
        )
    } else if requested == ThinkingLevel::Off {
        format!(
            "model {id} always reasons; using thinking level {} instead of off",
            chosen.as_str()
        )
    } else {
        format!(
            "model {id} does not support thinking level {}; using {}",
            requested.as_str(),
            chosen.as_str()
        )
    };
    (chosen, Some(warning))
}

/// How a lookup found its entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// An entry (or alias) of the requested provider.
    Exact,
    /// The same model under another provider.
    OtherProvider,
    /// The provider's default entry (id `*`).
    ProviderDefault,
    /// Nothing matched: conservative defaults.
    Fallback,
}

/// The answer of [`Catalog::lookup`].
#[derive(Debug, Clone, PartialEq)]
pub struct ModelLookup {
    pub entry: ModelEntry,
    pub matched: Match,
    /// Set for [`Match::Fallback`]: a sentence to show the user.
    pub warning: Option<String>,
}

/// A `[[models]]` entry of `config.toml` (see the module docs).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub provider: String,
    pub id: String,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub api: Option<Dialect>,
    #[serde(default)]
    pub context_window: Option<u64>,
    #[serde(default, alias = "max_output")]
    pub max_output_tokens: Option<u64>,
    #[serde(default)]
    pub input: Option<Vec<InputModality>>,
    #[serde(default)]
    pub reasoning: Option<bool>,
    #[serde(default)]
    pub thinking_levels: Option<Vec<ThinkingLevel>>,
    #[serde(default)]
    pub cost: Option<ModelCost>,
    #[serde(default)]
    pub aliases: Option<Vec<String>>,
    /// See [`ModelEntry::compact_tools`].
    #[serde(default)]
    pub compact_tools: Option<bool>,
}

impl ModelConfig {
    /// Applies the fields this entry sets to `entry`.
    fn apply(&self, entry: &mut ModelEntry) {
        if let Some(name) = &self.name {
            entry.name = name.clone();
        }
        if let Some(api) = self.api {
            entry.api = api;
        }
        if let Some(n) = self.context_window {
            entry.context_window = n;
        }
        if let Some(n) = self.max_output_tokens {
            entry.max_output_tokens = n;
        }
        if let Some(input) = &self.input {
            entry.input = input.clone();
        }
        match (&self.thinking_levels, self.reasoning) {
            (Some(levels), _) => {
                let mut levels = levels.clone();
                levels.sort_by_key(|l| rank(*l));
                levels.dedup();
                entry.thinking_levels = levels;
            }
            (None, Some(true)) if !entry.reasoning() => {
                entry.thinking_levels = DEFAULT_REASONING_LEVELS.to_vec();
            }
            (None, Some(false)) => entry.thinking_levels = vec![ThinkingLevel::Off],
            (None, _) => {}
        }
        if let Some(cost) = self.cost {
            entry.cost = cost;
        }
        if let Some(aliases) = &self.aliases {
            entry.aliases = aliases.clone();
        }
        if let Some(compact) = self.compact_tools {
            entry.compact_tools = compact;
        }
    }

    fn validate(&self) -> Result<()> {
        let invalid = |what: &str| {
            Err(Error::new(
                ErrorKind::BadRequest,
                format!(
                    "invalid [[models]] entry {:?} (provider {:?}): {what}",
                    self.id, self.provider
                ),
            ))
        };
        if self.id.trim().is_empty() {
            return invalid("id is empty");
        }
        if self.provider.trim().is_empty() {
            return invalid("provider is empty");
        }
        if self.context_window == Some(0) {
            return invalid("context_window is 0");
        }
        if self.max_output_tokens == Some(0) {
            return invalid("max_output_tokens is 0");
        }
        if self.thinking_levels.as_ref().is_some_and(Vec::is_empty) {
            return invalid("thinking_levels is empty");
        }
        if let Some(c) = self.cost
            && [c.input, c.output, c.cache_read, c.cache_write]
                .iter()
                .any(|p| !p.is_finite() || *p < 0.0)
        {
            return invalid("prices must be finite and not negative");
        }
        Ok(())
    }
}

/// The lookup key of an id (see the module docs).
fn canonical(id: &str) -> String {
    let id = id.trim().to_ascii_lowercase();
    let id = id.rsplit('/').next().unwrap_or("");
    strip_date(id).replace('.', "-")
}

/// `id` without a trailing `-YYYYMMDD` or `-YYYY-MM-DD`.
fn strip_date(id: &str) -> &str {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if let Some((head, tail)) = id.rsplit_once('-')
        && tail.len() == 8
        && digits(tail)
        && tail.starts_with("20")
    {
        return head;
    }
    let parts: Vec<&str> = id.rsplitn(4, '-').collect();
    if let [day, month, year, head] = parts.as_slice()
        && year.len() == 4
        && month.len() == 2
        && day.len() == 2
        && [day, month, year].iter().all(|p| digits(p))
        && year.starts_with("20")
    {
        return head;
    }
    id
}

/// Known models: the built-in table plus user entries.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    entries: Vec<ModelEntry>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog::builtin()
    }
}

impl Catalog {
    /// The built-in models (see the `builtin` module).
    pub fn builtin() -> Self {
        Catalog {
            entries: builtin::ROWS.iter().map(ModelEntry::from_row).collect(),
        }
    }

    /// A catalogue with no entries (every lookup falls back).
    pub fn empty() -> Self {
        Catalog {
            entries: Vec::new(),
        }
    }

    /// The built-in models with `models` merged in.
    pub fn with_user_models(models: &[ModelConfig]) -> Result<Self> {
        let mut catalog = Catalog::builtin();
        catalog.merge(models)?;
        Ok(catalog)
    }

    /// Every entry, built-in first, in table order.
    pub fn entries(&self) -> &[ModelEntry] {
        &self.entries
    }

    /// The concrete models of one provider (default entries excluded), for
    /// `get_available_models` and model cycling.
    pub fn models_of<'a>(&'a self, provider: &'a str) -> impl Iterator<Item = &'a ModelEntry> {
        self.entries
            .iter()
            .filter(move |e| e.provider == provider && e.id != "*")
    }

    /// Merges user entries: one with the provider and id (or alias) of an
    /// existing entry changes the fields it sets; another is added, its
    /// unset fields taken from the provider's default entry, else the
    /// conservative defaults (its dialect from the provider's other
    /// entries, else Chat Completions). Fails on an invalid entry, naming it;
    /// nothing is merged then.
    pub fn merge(&mut self, models: &[ModelConfig]) -> Result<()> {
        models.iter().try_for_each(ModelConfig::validate)?;
        for config in models {
            if let Some(at) = self.position(&config.provider, &config.id) {
                config.apply(&mut self.entries[at]);
                continue;
            }
            let mut entry = match self.position(&config.provider, "*") {
                Some(at) => self.entries[at].clone(),
                None => ModelEntry::fallback(
                    &config.provider,
                    &config.id,
                    self.provider_dialect(&config.provider),
                ),
            };
            entry.id = config.id.clone();
            entry.name = config.id.clone();
            config.apply(&mut entry);
            self.entries.push(entry);
        }
        Ok(())
    }

    fn position(&self, provider: &str, id: &str) -> Option<usize> {
        if id == "*" {
            return self
                .entries
                .iter()
                .position(|e| e.provider == provider && e.id == "*");
        }
        let key = canonical(id);
        self.entries.iter().position(|e| {
            e.provider == provider
                && e.id != "*"
                && (canonical(&e.id) == key || e.aliases.iter().any(|a| canonical(a) == key))
        })
    }

    /// The dialect of a provider's entries, else Chat Completions.
    fn provider_dialect(&self, provider: &str) -> Dialect {
        self.entries
            .iter()
            .find(|e| e.provider == provider)
            .map(|e| e.api)
            .unwrap_or(Dialect::OpenAiCompletions)
    }

    /// The entry of `(provider, id)` with the fallbacks of the module docs.
    pub fn lookup(&self, provider: &str, id: &str) -> ModelLookup {
        let found = |entry: &ModelEntry, matched: Match| {
            let mut entry = entry.clone();
            entry.id = id.to_owned();
            entry.provider = provider.to_owned();
            ModelLookup {
                entry,
                matched,
                warning: None,
            }
        };
        if let Some(at) = self.position(provider, id) {
            return found(&self.entries[at], Match::Exact);
        }
        let key = canonical(id);
        if let Some(entry) = self.entries.iter().find(|e| {
            e.id != "*"
                && (canonical(&e.id) == key || e.aliases.iter().any(|a| canonical(a) == key))
        }) {
            return found(entry, Match::OtherProvider);
        }
        if let Some(at) = self.position(provider, "*") {
            return found(&self.entries[at], Match::ProviderDefault);
        }
        let warning = format!(
            "unknown model {id} (provider {provider}): assuming a {FALLBACK_CONTEXT_WINDOW}-token \
             context, {FALLBACK_MAX_OUTPUT_TOKENS} output tokens, text only, no thinking and no \
             price; add a [[models]] entry to config.toml to correct this"
        );
        ModelLookup {
            entry: ModelEntry::fallback(provider, id, self.provider_dialect(provider)),
            matched: Match::Fallback,
            warning: Some(warning),
        }
    }

    /// [`Catalog::lookup`] for a configured provider: the entry's dialect is
    /// the provider's (the wire it really speaks).
    pub fn lookup_for(&self, spec: &ProviderSpec, id: &str) -> ModelLookup {
        let mut lookup = self.lookup(&spec.name, id);
        lookup.entry.api = spec.dialect;
        lookup
    }
}

#[cfg(test)]
mod tests;
