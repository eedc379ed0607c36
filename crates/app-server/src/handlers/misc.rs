//! The small read-only resources: `model/list`, `modelProvider/list`,
//! `config/read`, `account/read`, and honest empty `skills/list` /
//! `hooks/list` (keel has neither yet).

use keel_app_server_protocol::v2::{
    Account, ConfigReadParams, ConfigReadResponse, CwdsParams, GetAccountResponse, HooksListEntry,
    HooksListResponse, Model, ModelListParams, ModelListResponse, ModelProviderInfo,
    ModelProviderListResponse, PermissionProfileListParams, PermissionProfileListResponse,
    PermissionProfileSummary, ReasoningEffortOption, SkillsListEntry, SkillsListResponse,
};
use keel_core::ModelInfo;
use keel_core::keel_approvals::Mode;
use keel_protocol::ThinkingLevel;
use serde_json::{Map, json};

use crate::handlers::{Reply, RequestCtx, ok};
use crate::rpc_error::RpcError;

/// Codex's name of a keel thinking level.
fn effort_name(level: ThinkingLevel) -> &'static str {
    match level {
        ThinkingLevel::Off => "none",
        ThinkingLevel::Minimal => "minimal",
        ThinkingLevel::Low => "low",
        ThinkingLevel::Medium => "medium",
        ThinkingLevel::High => "high",
        ThinkingLevel::Xhigh => "xhigh",
    }
}

/// One catalogue model as `model/list` shows it.
fn model_entry(m: &ModelInfo, is_default: bool) -> Model {
    // Unknown levels (an empty list): every level is passed through.
    let levels: Vec<ThinkingLevel> = if m.thinking_levels.is_empty() {
        ThinkingLevel::ALL.to_vec()
    } else {
        m.thinking_levels.clone()
    };
    let default_effort = if levels.contains(&ThinkingLevel::Medium) {
        ThinkingLevel::Medium
    } else {
        levels.first().copied().unwrap_or(ThinkingLevel::Off)
    };
    let mut input_modalities = vec!["text".to_owned()];
    if m.images {
        input_modalities.push("image".to_owned());
    }
    Model {
        id: m.id.clone(),
        model: m.id.clone(),
        display_name: if m.name.is_empty() {
            m.id.clone()
        } else {
            m.name.clone()
        },
        description: format!(
            "{} via {} ({}k context)",
            m.id,
            m.provider,
            m.context_window / 1000
        ),
        hidden: false,
        is_default,
        default_reasoning_effort: effort_name(default_effort).to_owned(),
        supported_reasoning_efforts: levels
            .iter()
            .map(|l| ReasoningEffortOption {
                reasoning_effort: effort_name(*l).to_owned(),
                description: match l {
                    ThinkingLevel::Off => "no reasoning".to_owned(),
                    other => format!("{} reasoning", effort_name(*other)),
                },
            })
            .collect(),
        input_modalities,
        upgrade: None,
    }
}

/// `model/list`: the configured models (the first is the default), then
/// the model catalogue's models of every usable provider.
pub fn model_list(ctx: &mut RequestCtx, p: ModelListParams) -> Result<Reply, RpcError> {
    let models = ctx.runtime.models.available();
    let data: Vec<Model> = models
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            p.model_provider
                .as_deref()
                .is_none_or(|prov| prov == m.provider)
        })
        .map(|(i, m)| model_entry(m, i == 0))
        .collect();
    let (data, next_cursor) =
        crate::handlers::thread::page_all(data, p.cursor.as_deref(), p.limit)?;
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

/// `config/read`: keel's effective model settings, and the approval policy
/// the workspace's stored approval mode maps onto.
pub async fn config_read(ctx: &mut RequestCtx, p: ConfigReadParams) -> Result<Reply, RpcError> {
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
    let cwd = p
        .cwd
        .as_deref()
        .map(std::path::PathBuf::from)
        .filter(|c| c.is_absolute())
        .unwrap_or_else(|| ctx.runtime.config.default_cwd.clone());
    let policy = crate::approvals::default_policy(&ctx.runtime, &cwd).await;
    config.insert(
        "approval_policy".into(),
        serde_json::to_value(&policy).map_err(RpcError::internal)?,
    );
    let sandbox = &ctx.runtime.config.sandbox;
    config.insert("sandbox_mode".into(), json!(sandbox.mode.as_str()));
    config.insert(
        "sandbox_workspace_write".into(),
        json!({
            "writable_roots": sandbox.writable_roots,
            "network_access": sandbox.network_access,
            "exclude_tmpdir_env_var": sandbox.exclude_temp_dir,
            "exclude_slash_tmp": sandbox.exclude_temp_dir,
        }),
    );
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

/// `permissionProfile/list`: keel's approval modes, the profiles a client
/// can select with `permissions` on `thread/start`, `thread/resume` and
/// `turn/start` (see [`crate::approvals::mode_for_profile`]).
pub fn permission_profiles(p: PermissionProfileListParams) -> Result<Reply, RpcError> {
    if p.cursor.is_some() {
        return Err(RpcError::invalid("invalid cursor: the list has one page"));
    }
    let data = Mode::ALL
        .iter()
        .map(|mode| PermissionProfileSummary {
            id: mode.as_str().to_owned(),
            description: Some(format!(
                "keel approval mode: ask {}",
                mode.label().to_lowercase()
            )),
            allowed: true,
        })
        .collect();
    ok(&PermissionProfileListResponse {
        data,
        next_cursor: None,
    })
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
