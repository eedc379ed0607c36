//! The small read-only resources: `model/list`, `modelProvider/list`,
//! `config/read`, `account/read`, and honest empty `skills/list` /
//! `hooks/list` (keel has neither yet).

use keel_app_server_protocol::v2::{
    Account, ConfigReadParams, ConfigReadResponse, CwdsParams, GetAccountResponse, HooksListEntry,
    HooksListResponse, Model, ModelListParams, ModelListResponse, ModelProviderInfo,
    ModelProviderListResponse, ReasoningEffortOption, SkillsListEntry, SkillsListResponse,
};
use serde_json::{Map, Value, json};

use crate::dispatch::{Reply, RequestCtx, ok};
use crate::rpc_error::RpcError;

const EFFORTS: [&str; 6] = ["minimal", "low", "medium", "high", "xhigh", "none"];

pub fn model_list(ctx: &mut RequestCtx, p: ModelListParams) -> Result<Reply, RpcError> {
    let models = ctx.runtime.models.models();
    let mut data: Vec<Model> = models
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            p.model_provider
                .as_deref()
                .is_none_or(|prov| prov == m.provider)
        })
        .map(|(i, m)| Model {
            id: m.id.clone(),
            model: m.id.clone(),
            display_name: m.id.clone(),
            description: format!("{} via {}", m.id, m.provider),
            hidden: false,
            is_default: i == 0,
            default_reasoning_effort: "medium".to_owned(),
            supported_reasoning_efforts: EFFORTS[..5]
                .iter()
                .map(|e| ReasoningEffortOption {
                    reasoning_effort: (*e).to_owned(),
                    description: format!("{e} reasoning"),
                })
                .collect(),
            input_modalities: vec!["text".to_owned(), "image".to_owned()],
            upgrade: None,
        })
        .collect();
    let start = p
        .cursor
        .as_deref()
        .and_then(|c| c.parse::<usize>().ok())
        .unwrap_or(0);
    let limit = p
        .limit
        .map(|l| l as usize)
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let total = data.len();
    data = data.into_iter().skip(start).take(limit).collect();
    let next_cursor = (start + data.len() < total).then(|| (start + data.len()).to_string());
    ok(&ModelListResponse { data, next_cursor })
}

pub fn model_provider_list(ctx: &mut RequestCtx) -> Result<Reply, RpcError> {
    let models = ctx.runtime.models.models();
    let mut data: Vec<ModelProviderInfo> = Vec::new();
    for m in &models {
        if data.iter().any(|p| p.id == m.provider) {
            continue;
        }
        data.push(ModelProviderInfo {
            id: m.provider.clone(),
            name: m.provider.clone(),
            can_edit: false,
            base_url: ctx.runtime.models.base_url(m),
        });
    }
    ok(&ModelProviderListResponse {
        default_provider_id: models
            .first()
            .map(|m| m.provider.clone())
            .unwrap_or_default(),
        data,
        can_change_default: false,
    })
}

pub fn config_read(ctx: &mut RequestCtx, _p: ConfigReadParams) -> Result<Reply, RpcError> {
    let models = ctx.runtime.models.models();
    let mut config = Map::new();
    let default = models.first();
    config.insert("model".into(), json!(default.map(|m| m.id.clone())));
    config.insert(
        "model_provider".into(),
        json!(default.map(|m| m.provider.clone())),
    );
    config.insert(
        "model_context_window".into(),
        json!(default.map(|m| m.context_window)),
    );
    config.insert("approval_policy".into(), json!("on-request"));
    config.insert("sandbox_mode".into(), json!("danger-full-access"));
    let file = ctx.runtime.config.home.join("config.toml");
    let mut origins = Map::new();
    if file.exists() {
        for key in ["model", "model_provider"] {
            origins.insert(
                key.into(),
                json!({"name": {"type": "user", "file": file.display().to_string()}, "version": "1"}),
            );
        }
    }
    let _ = Value::Null;
    ok(&ConfigReadResponse {
        config,
        origins,
        layers: None,
    })
}

pub fn account_read(ctx: &mut RequestCtx) -> Result<Reply, RpcError> {
    ok(&GetAccountResponse {
        account: ctx.runtime.models.has_api_key().then_some(Account::ApiKey),
        requires_openai_auth: false,
        user_id: None,
    })
}

fn cwds(ctx: &RequestCtx, p: CwdsParams) -> Vec<String> {
    if p.cwds.is_empty() {
        vec![ctx.runtime.config.default_cwd.display().to_string()]
    } else {
        p.cwds
    }
}

pub fn skills_list(ctx: &mut RequestCtx, p: CwdsParams) -> Result<Reply, RpcError> {
    let data = cwds(ctx, p)
        .into_iter()
        .map(|cwd| SkillsListEntry {
            cwd,
            skills: Vec::new(),
            errors: Vec::new(),
        })
        .collect();
    ok(&SkillsListResponse { data })
}

pub fn hooks_list(ctx: &mut RequestCtx, p: CwdsParams) -> Result<Reply, RpcError> {
    let data = cwds(ctx, p)
        .into_iter()
        .map(|cwd| HooksListEntry {
            cwd,
            hooks: Vec::new(),
            warnings: Vec::new(),
            errors: Vec::new(),
        })
        .collect();
    ok(&HooksListResponse { data })
}
