//! `set_steering_mode`, `set_follow_up_mode`, `set_interrupt_mode`,
//! `set_thinking_level`, `cycle_thinking_level`, `set_model`,
//! `cycle_model`, `get_available_models`.
//!
//! Settings change this process's session only; nothing is written to the
//! user's configuration. Owns the wire shape of a model.

use keel_protocol::{Op, ThinkingLevel};
use serde_json::{Value, json};

use crate::factory::ModelChoice;
use crate::server::Server;
use crate::wire_errors::{self, WireError};

/// A model as hosts see it (pi's `Model` fields that keel knows).
pub(crate) fn model_wire(m: &ModelChoice) -> Value {
    let p = &m.info.pricing;
    let mut v = json!({
        "id": m.info.id,
        "name": m.info.id,
        "api": m.info.api,
        "provider": m.info.provider,
        "baseUrl": m.base_url,
        "reasoning": true,
        "input": ["text", "image"],
        "cost": {
            "input": p.input,
            "output": p.output,
            "cacheRead": p.cache_read,
            "cacheWrite": p.cache_write,
        },
        "contextWindow": m.info.context_window,
    });
    if let Some(max) = m.info.max_output_tokens {
        v["maxTokens"] = json!(max);
    }
    v
}

impl Server {
    /// Submits a setting op (applied at once by the session).
    pub(super) async fn apply(&self, op: Op) -> Result<Option<Value>, WireError> {
        self.handle()
            .submit(op)
            .await
            .map_err(|e| wire_errors::from_core(&e))?;
        Ok(None)
    }

    pub(super) async fn set_thinking_level(
        &self,
        level: ThinkingLevel,
    ) -> Result<Option<Value>, WireError> {
        self.apply(Op::SetThinkingLevel { level }).await
    }

    pub(super) async fn cycle_thinking_level(&self) -> Result<Option<Value>, WireError> {
        if self.model.is_none() {
            return Ok(Some(Value::Null));
        }
        let current = self.handle().snapshot().thinking_level;
        let all = ThinkingLevel::ALL;
        let i = all.iter().position(|l| *l == current).unwrap_or(0);
        let next = all[(i + 1) % all.len()];
        self.apply(Op::SetThinkingLevel { level: next }).await?;
        Ok(Some(json!({"level": next})))
    }

    async fn switch_model(&mut self, choice: ModelChoice) -> Result<(), WireError> {
        let provider = self.factory.provider(&choice).map_err(|reason| {
            wire_errors::model_unavailable(&choice.info.provider, &choice.info.id, &reason)
        })?;
        self.handle()
            .set_model(choice.info.clone(), provider)
            .await
            .map_err(|e| wire_errors::from_core(&e))?;
        self.model = Some(choice);
        Ok(())
    }

    pub(super) async fn set_model(
        &mut self,
        provider: &str,
        model_id: &str,
    ) -> Result<Option<Value>, WireError> {
        let Some(choice) = self
            .factory
            .models()
            .into_iter()
            .find(|m| m.info.provider == provider && m.info.id == model_id)
        else {
            return Err(wire_errors::model_not_found(provider, model_id));
        };
        self.switch_model(choice.clone()).await?;
        Ok(Some(model_wire(&choice)))
    }

    pub(super) async fn cycle_model(&mut self) -> Result<Option<Value>, WireError> {
        let models = self.factory.models();
        if models.len() < 2 {
            return Ok(Some(Value::Null));
        }
        let current = self.model.as_ref().and_then(|cur| {
            models
                .iter()
                .position(|m| m.info.provider == cur.info.provider && m.info.id == cur.info.id)
        });
        let next = models[current.map_or(0, |i| (i + 1) % models.len())].clone();
        self.switch_model(next.clone()).await?;
        Ok(Some(json!({
            "model": model_wire(&next),
            "thinkingLevel": self.handle().snapshot().thinking_level,
            "isScoped": false,
        })))
    }

    pub(super) fn get_available_models(&self) -> Result<Option<Value>, WireError> {
        let models: Vec<Value> = self.factory.models().iter().map(model_wire).collect();
        Ok(Some(json!({"models": models})))
    }
}
