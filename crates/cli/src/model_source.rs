//! The binary's [`ModelSource`]: the models the configuration resolves
//! (`[model]`, `KEEL_*`, flags, `--models`, `[providers]`), a provider for
//! each, retries and compaction as configured. RPC mode and the app-server
//! get the same one.

use std::sync::Arc;

use keel_core::{CompactionSettings, ModelInfo, ModelSource, RetryPolicy};
use keel_llm::Provider;

use crate::config::{NO_MODEL_HINT, Resolved, Scope};
use crate::setup::{build_provider, model_info};

/// The configured models (see the module docs).
pub struct CliModels {
    scope: Scope,
    retry: RetryPolicy,
    compaction: CompactionSettings,
}

impl CliModels {
    /// The models of `scope`; turns are retried as the configured model
    /// says (else `retry`).
    pub fn new(scope: Scope, retry: RetryPolicy, compaction: CompactionSettings) -> Self {
        let retry = scope.scoped.first().map(|m| m.retry).unwrap_or(retry);
        Self {
            scope,
            retry,
            compaction,
        }
    }

    /// The resolved configuration for `model`: an exact match, else the
    /// first of its provider with the id replaced.
    fn resolved(&self, model: &ModelInfo) -> Option<Resolved> {
        let list = &self.scope.available;
        if let Some(r) = list
            .iter()
            .find(|r| r.provider == model.provider && r.model == model.id)
        {
            return Some(r.clone());
        }
        list.iter()
            .find(|r| r.provider == model.provider)
            .map(|r| r.for_model(&model.id))
    }
}

fn infos(list: &[Resolved]) -> Vec<ModelInfo> {
    list.iter().map(model_info).collect()
}

impl ModelSource for CliModels {
    fn models(&self) -> Vec<ModelInfo> {
        infos(&self.scope.scoped)
    }

    fn provider(&self, model: &ModelInfo) -> Result<Arc<dyn Provider>, String> {
        let r = self
            .resolved(model)
            .ok_or_else(|| format!("provider {:?} is not configured", model.provider))?;
        build_provider(&r).map_err(|e| format!("{e:#}"))
    }

    fn no_model_hint(&self) -> String {
        NO_MODEL_HINT.to_owned()
    }

    fn base_url(&self, model: &ModelInfo) -> Option<String> {
        self.resolved(model).map(|r| r.base_url)
    }

    fn has_api_key(&self) -> bool {
        self.scope.scoped.iter().any(|r| r.api_key().is_some())
    }

    fn retry_policy(&self) -> RetryPolicy {
        self.retry
    }

    fn compaction(&self) -> CompactionSettings {
        self.compaction
    }

    fn available(&self) -> Vec<ModelInfo> {
        infos(&self.scope.available)
    }

    fn cycle_models(&self) -> (Vec<ModelInfo>, bool) {
        if self.scope.explicit {
            (self.models(), true)
        } else {
            (self.available(), false)
        }
    }

    fn lookup(&self, provider: &str, id: &str) -> Option<(ModelInfo, Option<String>)> {
        let scoped = &self.scope.scoped;
        let r = scoped
            .iter()
            .find(|r| r.provider == provider && r.model == id)
            .cloned()
            .or_else(|| {
                scoped
                    .iter()
                    .find(|r| r.provider == provider)
                    .map(|r| r.for_model(id))
            })?;
        Some((model_info(&r), r.warning.clone()))
    }
}
