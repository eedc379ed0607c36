//! Where a front-end's models come from ([`ModelSource`]): the configured
//! models, a provider for one, what the catalogue knows, and how turns on
//! them are retried and compacted. The binary implements it from its
//! configuration; RPC mode and the app-server (and next the Temporal
//! worker) only ask. It must not know configuration files or the wire.

use std::sync::Arc;

use keel_llm::Provider;

use crate::config::{CompactionSettings, ModelInfo};
use crate::retry::RetryPolicy;

/// The one line that says how to configure a model, when none is.
pub const NO_MODEL_HINT: &str =
    "no model configured: set KEEL_PROVIDER and KEEL_MODEL (or [model] in $KEEL_HOME/config.toml)";

/// The models a front-end may use (see the module docs).
pub trait ModelSource: Send + Sync {
    /// The configured models; the first is the default. Empty when no
    /// model is configured (front-ends still answer; turns fail).
    fn models(&self) -> Vec<ModelInfo>;

    /// A provider for `model`, or why there is none.
    fn provider(&self, model: &ModelInfo) -> Result<Arc<dyn Provider>, String>;

    /// One line telling a person how to configure a model.
    fn no_model_hint(&self) -> String {
        NO_MODEL_HINT.to_owned()
    }

    /// The base URL of a model's provider, if known.
    fn base_url(&self, model: &ModelInfo) -> Option<String> {
        let _ = model;
        None
    }

    /// Whether an API key is configured.
    fn has_api_key(&self) -> bool {
        false
    }

    /// How failed model calls are retried.
    fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::default()
    }

    /// When sessions summarise their conversation (`[compaction]`).
    fn compaction(&self) -> CompactionSettings {
        CompactionSettings::default()
    }

    /// Every model a client may pick: [`ModelSource::models`] first, then
    /// the catalogue's models of the usable providers.
    fn available(&self) -> Vec<ModelInfo> {
        self.models()
    }

    /// The models a host cycles through, and whether they are a scope the
    /// user chose rather than every configured model.
    fn cycle_models(&self) -> (Vec<ModelInfo>, bool) {
        (self.models(), false)
    }

    /// What the catalogue knows about `id` served by `provider` (a
    /// configured provider), with a warning for a model it does not know;
    /// `None` when the provider is not configured.
    fn lookup(&self, provider: &str, id: &str) -> Option<(ModelInfo, Option<String>)> {
        let _ = (provider, id);
        None
    }
}
