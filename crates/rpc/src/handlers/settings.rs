//! `set_steering_mode`, `set_follow_up_mode`, `set_interrupt_mode`,
//! `set_thinking_level`, `cycle_thinking_level`, `set_model`,
//! `cycle_model`, `get_available_models`.
//!
//! Settings change this process's session only; nothing is written to the
//! user's configuration. Owns the wire shape of a model (from the model
//! catalogue, through [`ModelChoice`]). Thinking levels are clamped to what
//! the model supports; the responses say which level is in effect.

use keel_llm::catalog::FALLBACK_MAX_OUTPUT_TOKENS;
use keel_protocol::{Op, ThinkingLevel};
use serde_json::{Value, json};

use crate::factory::ModelChoice;
use crate::server::Server;
use crate::wire_errors::{self, WireError};

/// A model as hosts see it: pi's `Model` fields, from the catalogue entry
/// (`maxTokens` falls back to the catalogue's conservative default when the
/// model is unknown), plus keel's `thinkingLevels`.
pub(crate) fn model_wire(m: &ModelChoice) -> Value {
    let p = &m.info.pricing;
    let mut input = vec!["text"];
    if m.info.images {
        input.push("image");
    }
    let name = if m.info.name.is_empty() {
        &m.info.id
    } else {
        &m.info.name
    };
    json!({
        "id": m.info.id,
        "name": name,
        "api": m.info.api,
        "provider": m.info.provider,
        "baseUrl": m.base_url,
        "reasoning": m.info.reasoning(),
        "input": input,
        "cost": {
            "input": p.input,
            "output": p.output,
            "cacheRead": p.cache_read,
            "cacheWrite": p.cache_write,
        },
        "contextWindow": m.info.context_window,
        "maxTokens": m.info.max_output_tokens.unwrap_or(FALLBACK_MAX_OUTPUT_TOKENS),
        "thinkingLevels": supported_levels(&m.info),
    })
}

/// The thinking levels a model accepts, lowest first.
fn supported_levels(model: &keel_core::ModelInfo) -> Vec<ThinkingLevel> {
    if model.thinking_levels.is_empty() {
        ThinkingLevel::ALL.to_vec()
    } else {
        model.thinking_levels.clone()
    }
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

    /// Sets the level closest to `level` that the model supports. Data:
    /// `{"level"}` (the level in effect), with `requested` and `warning`
    /// when it differs from the one asked for.
    pub(super) async fn set_thinking_level(
        &self,
        level: ThinkingLevel,
    ) -> Result<Option<Value>, WireError> {
        let warning = self
            .model
            .as_ref()
            .and_then(|m| m.info.effective_thinking(level).1);
        self.apply(Op::SetThinkingLevel { level }).await?;
        let effective = self.handle().snapshot().thinking_level;
        let mut data = json!({"level": effective});
        if let Some(warning) = warning {
            data["requested"] = json!(level);
            data["warning"] = json!(warning);
        }
        Ok(Some(data))
    }

    /// The next level the model supports, wrapping around; `null` without a
    /// model or when the model does not reason.
    /// `{"levels":[…]}`: the levels the selected model takes (`["off"]`
    /// for a model without reasoning, or without a model).
    pub(super) fn get_available_thinking_levels(&self) -> Result<Option<Value>, WireError> {
        let levels = match &self.model {
            Some(model) if model.info.reasoning() => supported_levels(&model.info),
            _ => vec![ThinkingLevel::Off],
        };
        Ok(Some(json!({ "levels": levels })))
    }

    pub(super) async fn cycle_thinking_level(&self) -> Result<Option<Value>, WireError> {
        let Some(model) = &self.model else {
            return Ok(Some(Value::Null));
        };
        let levels = supported_levels(&model.info);
        if !model.info.reasoning() || levels.len() < 2 {
            return Ok(Some(Value::Null));
        }
        let current = self.handle().snapshot().thinking_level;
        let next = levels
            .iter()
            .position(|l| *l == current)
            .map_or(levels[0], |i| levels[(i + 1) % levels.len()]);
        self.apply(Op::SetThinkingLevel { level: next }).await?;
        Ok(Some(json!({"level": next})))
    }

    async fn switch_model(&mut self, choice: ModelChoice) -> Result<(), WireError> {
        let provider = self
            .factory
            .models()
            .provider(&choice.info)
            .map_err(|reason| {
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
        let source = self.factory.models();
        let Some(choice) = source
            .available()
            .into_iter()
            .find(|m| m.provider == provider && m.id == model_id)
            .map(|m| ModelChoice::of(source, m))
        else {
            return Err(wire_errors::model_not_found(provider, model_id));
        };
        self.switch_model(choice.clone()).await?;
        Ok(Some(model_wire(&choice)))
    }

    pub(super) async fn cycle_model(&mut self) -> Result<Option<Value>, WireError> {
        let source = self.factory.models();
        let (models, scoped) = source.cycle_models();
        let models = crate::factory::choices(source, models);
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
            "isScoped": scoped,
        })))
    }

    pub(super) fn get_available_models(&self) -> Result<Option<Value>, WireError> {
        let source = self.factory.models();
        let models: Vec<Value> = crate::factory::choices(source, source.available())
            .iter()
            .map(model_wire)
            .collect();
        Ok(Some(json!({"models": models})))
    }
}
