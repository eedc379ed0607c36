//! Opening the keel session a Claude SDK drives: the model (keel's
//! configuration, or the SDK's `ANTHROPIC_BASE_URL`/`ANTHROPIC_API_KEY`
//! when keel names no provider), the session file (`--resume`,
//! `--continue`, `--fork-session`, `--no-session-persistence`), the
//! approval gate with the SDK as its front end, the MCP servers
//! (`config.toml`'s and `--mcp-config`'s) and the tools the model sees
//! (`--tools`, `--disallowedTools`). It writes nothing to stdout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use keel_core::keel_approvals::Lifetime;
use keel_core::{EngineGate, Session};
use keel_protocol::{Message, ThinkingLevel};
use keel_session_store::{SessionStore, SessionTree, SessionWriter};
use serde_json::Value;

use super::args::ClaudeArgs;
use super::gate::{ClaudeFrontend, ClaudeGate, Policy, ToolRule, add_rule};
use super::peer::Peer;
use super::wire::keel_name;
use crate::GlobalArgs;
use crate::config::{ModelArgs, Resolved, resolve};
use crate::setup::{
    SessionSpec, approval_gate, build_provider, model_info, record_model, session_builder,
};

/// What the SDK's `initialize` adds to the command line.
#[derive(Debug, Clone, Default)]
pub struct HostConfig {
    /// Replaces keel's system prompt (when not empty).
    pub system_prompt: Option<String>,
    /// Follows keel's system prompt (the `claude_code` preset's `append`).
    pub append_system_prompt: Option<String>,
    pub json_schema: Option<Value>,
    /// `initialize`'s `mcpServers` (the SDK's default delivery), as
    /// `--mcp-config` values.
    pub mcp_config: Vec<String>,
    /// `initialize`'s `additionalDirectories`.
    pub add_dirs: Vec<String>,
    /// `initialize`'s `disallowedTools`.
    pub disallowed_tools: Vec<String>,
}

impl HostConfig {
    /// The command line's part.
    pub fn from_args(args: &ClaudeArgs) -> anyhow::Result<Self> {
        let json_schema = match &args.json_schema {
            Some(text) => {
                Some(serde_json::from_str(text).context("--json-schema is not a JSON schema")?)
            }
            None => None,
        };
        Ok(Self {
            system_prompt: args.system_prompt.clone(),
            append_system_prompt: args.append_system_prompt.clone(),
            json_schema,
            mcp_config: Vec::new(),
            add_dirs: Vec::new(),
            disallowed_tools: Vec::new(),
        })
    }

    /// `initialize`'s fields, over the command line's.
    pub fn take_initialize(&mut self, request: &Value) {
        let prompt = match request.get("systemPrompt") {
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Array(parts)) => Some(
                parts
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("\n\n"),
            ),
            _ => None,
        };
        if let Some(p) = prompt.filter(|p| !p.trim().is_empty()) {
            self.system_prompt = Some(p);
        }
        if let Some(a) = request.get("appendSystemPrompt").and_then(Value::as_str) {
            self.append_system_prompt = Some(a.to_owned());
        }
        if let Some(s) = request.get("jsonSchema").filter(|s| s.is_object()) {
            self.json_schema = Some(s.clone());
        }
        if let Some(servers) = request.get("mcpServers").filter(|s| s.is_object()) {
            self.mcp_config
                .push(serde_json::json!({"mcpServers": servers}).to_string());
        }
        let strings = |key: &str| -> Vec<String> {
            request
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        };
        self.add_dirs.extend(strings("additionalDirectories"));
        self.disallowed_tools.extend(strings("disallowedTools"));
    }
}

/// The model of the SDK's Anthropic settings when it names none.
const DEFAULT_CLAUDE_MODEL: &str = "claude-sonnet-4-5";

/// The model flags: keel's environment, else the SDK's Anthropic one.
fn model_args() -> ModelArgs {
    #[derive(Parser)]
    struct FromEnv {
        #[command(flatten)]
        model: ModelArgs,
    }
    let mut m = FromEnv::try_parse_from(["keel"])
        .map(|f| f.model)
        .unwrap_or_default();
    let base = std::env::var("ANTHROPIC_BASE_URL").ok();
    let key = std::env::var_os("ANTHROPIC_API_KEY").is_some();
    if m.provider.is_none()
        && m.profile.is_none()
        && m.model_path.is_none()
        && (base.is_some() || key)
    {
        m.provider = Some("anthropic".to_owned());
        if let Some(base) = base {
            m.base_url = Some(format!("{}/v1", base.trim_end_matches('/')));
        }
        m.api_key_env = Some("ANTHROPIC_API_KEY".to_owned());
    }
    m
}

/// The model the session starts with: `--model` picks the configured
/// provider's model, unless `KEEL_MODEL` pins one (a model the provider
/// cannot take leaves the configuration's own).
pub fn resolve_model(global: &GlobalArgs, args: &ClaudeArgs) -> anyhow::Result<Resolved> {
    let margs = model_args();
    let anthropic = margs.provider.as_deref() == Some("anthropic");
    let mut resolved = match (&margs.model, &args.model) {
        (None, Some(model)) => {
            let asked = ModelArgs {
                model: Some(model.clone()),
                ..margs.clone()
            };
            match resolve(global, &asked) {
                Ok(r) => r,
                // The configuration's own model, when the SDK's is not one
                // its provider can take.
                Err(e) => resolve(global, &margs).map_err(|_| e)?,
            }
        }
        (None, None) if anthropic => resolve(
            global,
            &ModelArgs {
                model: Some(DEFAULT_CLAUDE_MODEL.to_owned()),
                ..margs.clone()
            },
        )?,
        _ => resolve(global, &margs)?,
    };
    let saved = || saved_effort(&resolved.home, &resolved.model);
    if let Some(level) = thinking(args).or_else(|| saved().map(|e| effort_level(&e))) {
        resolved.thinking = level;
    }
    Ok(resolved)
}

/// `--thinking`, `--max-thinking-tokens` and `--effort` as keel's level.
fn thinking(args: &ClaudeArgs) -> Option<ThinkingLevel> {
    if args.thinking.as_deref() == Some("disabled") {
        return Some(ThinkingLevel::Off);
    }
    if let Some(effort) = &args.effort {
        return Some(effort_level(effort));
    }
    args.max_thinking_tokens.map(level_for_tokens)
}

/// keel's level for one of Claude's effort levels.
fn effort_level(effort: &str) -> ThinkingLevel {
    match effort {
        "low" => ThinkingLevel::Low,
        "medium" => ThinkingLevel::Medium,
        "high" => ThinkingLevel::High,
        _ => ThinkingLevel::Xhigh,
    }
}

/// Where `updateSettings()` keeps each model's default effort:
/// `{"modelSettings": {"<model>": {"effortLevel": "high"}}}`.
fn settings_file(home: &Path) -> std::path::PathBuf {
    home.join("claude").join("settings.json")
}

/// The effort `updateSettings()` saved for `model`.
fn saved_effort(home: &Path, model: &str) -> Option<String> {
    let text = std::fs::read_to_string(settings_file(home)).ok()?;
    let v: Value = serde_json::from_str(&text).ok()?;
    v.pointer(&format!(
        "/modelSettings/{}/effortLevel",
        model.replace('~', "~0").replace('/', "~1")
    ))
    .and_then(Value::as_str)
    .map(str::to_owned)
}

/// Saves `effort` as `model`'s default effort (owner-only file, replaced
/// whole). `max` is for one session, as in Claude Code: not saved.
pub fn save_effort(home: &Path, model: &str, effort: &str) -> Result<(), String> {
    match effort {
        "low" | "medium" | "high" | "xhigh" => {}
        "max" => return Ok(()),
        other => {
            return Err(format!(
                "unknown effort level `{other}`: use low, medium, high, xhigh or max"
            ));
        }
    }
    let file = settings_file(home);
    let mut v: Value = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .filter(Value::is_object)
        .unwrap_or_else(|| serde_json::json!({}));
    let models = v.as_object_mut().map(|m| {
        m.entry("modelSettings")
            .or_insert_with(|| serde_json::json!({}))
    });
    let Some(Value::Object(models)) = models else {
        return Err(format!("{} holds no modelSettings object", file.display()));
    };
    models.insert(model.to_owned(), serde_json::json!({"effortLevel": effort}));
    let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
    keel_session_store::home_files::replace_file(&file, text.as_bytes(), true)
        .map_err(|e| format!("cannot write {}: {e}", file.display()))
}

/// keel's thinking level for a thinking budget in tokens.
pub fn level_for_tokens(tokens: u64) -> ThinkingLevel {
    match tokens {
        0 => ThinkingLevel::Off,
        1..=2048 => ThinkingLevel::Low,
        2049..=16384 => ThinkingLevel::Medium,
        _ => ThinkingLevel::High,
    }
}

/// An opened session and what was opened with it.
pub struct Opened {
    pub session: Session,
    pub writer: Option<SessionWriter>,
    pub mcp: Option<Arc<keel_mcp::McpServers>>,
    pub resolved: Resolved,
    pub engine_gate: Arc<EngineGate>,
}

type Files = (Option<SessionWriter>, Vec<Message>, Option<SessionTree>);

async fn session_file(args: &ClaudeArgs, cwd: &Path, resolved: &Resolved) -> anyhow::Result<Files> {
    if args.no_session_persistence {
        return Ok((None, Vec::new(), None));
    }
    let store = SessionStore::for_home(&resolved.home);
    let existing = match (&args.resume, args.continue_) {
        (Some(id), _) => Some(store.resolve(cwd, id).await?),
        (None, true) => store.latest(cwd).await?.map(|s| s.path),
        (None, false) => None,
    };
    if args.session_id.is_some() && existing.is_some() && !args.fork_session {
        anyhow::bail!("--session-id with --resume or --continue needs --fork-session");
    }
    let Some(path) = existing else {
        let writer = match &args.session_id {
            Some(id) => store.create_as(cwd, id).await?,
            None => store.create(cwd, None).await?,
        };
        record_model(&writer, &resolved.provider, &resolved.model).await?;
        return Ok((Some(writer), Vec::new(), None));
    };
    let loaded = keel_session_store::load(&path)
        .await
        .with_context(|| format!("cannot load session {}", path.display()))?;
    if args.fork_session {
        let branch: Vec<keel_session_store::Entry> =
            loaded.tree().branch_to(None).into_iter().cloned().collect();
        let (writer, mut tree) = store
            .create_branch(cwd, Some(loaded.path.display().to_string()), branch)
            .await?;
        let history = tree.context().messages;
        tree.push(record_model(&writer, &resolved.provider, &resolved.model).await?);
        return Ok((Some(writer), history, Some(tree)));
    }
    let (writer, history, tree) = crate::setup::reopen_with_model(loaded, resolved).await?;
    Ok((Some(writer), history, Some(tree)))
}

/// `--mcp-config` values (JSON, or a file holding it) as keel's servers.
fn mcp_config(
    values: &[String],
    home: &Path,
) -> anyhow::Result<BTreeMap<String, keel_mcp::McpServerConfig>> {
    let mut out = BTreeMap::new();
    for value in values {
        let text = if value.trim_start().starts_with('{') {
            value.clone()
        } else {
            std::fs::read_to_string(value)
                .with_context(|| format!("--mcp-config: cannot read {value}"))?
        };
        let parsed: Value = serde_json::from_str(&text).context("--mcp-config is not JSON")?;
        let servers = parsed.get("mcpServers").and_then(Value::as_object);
        for (name, s) in servers.into_iter().flatten() {
            if s.get("type").and_then(Value::as_str) == Some("sdk") {
                // Reached over the control channel (`super::sdk_mcp`).
                continue;
            }
            let config = super::mcp_set::server_config(name, s, home)
                .map_err(|e| anyhow::anyhow!("--mcp-config: {e}"))?;
            out.insert(name.clone(), config);
        }
    }
    Ok(out)
}

/// Everything needed to open the session.
pub struct Request<'a> {
    pub global: &'a GlobalArgs,
    pub args: &'a ClaudeArgs,
    pub cwd: &'a Path,
    pub host: &'a HostConfig,
    pub policy: Arc<Policy>,
    pub peer: Arc<Peer>,
    pub mcp_set: &'a Arc<super::mcp_set::McpSet>,
}

pub async fn open(req: Request<'_>, warn: &mut dyn FnMut(&str)) -> anyhow::Result<Opened> {
    let Request {
        global,
        args,
        cwd,
        host,
        policy,
        peer,
        mcp_set,
    } = req;
    let resolved = resolve_model(global, args)?;
    if let Some(w) = &resolved.warning {
        warn(w);
    }
    let provider = build_provider(&resolved)?;
    let settings = crate::config::Settings::load(global)?.file;
    let mut sandbox = settings.sandbox.settings(None)?;
    sandbox
        .policy
        .writable_roots
        .extend(args.add_dir.iter().chain(&host.add_dirs).map(PathBuf::from));
    let (writer, history, tree) = session_file(args, cwd, &resolved).await?;
    let engine_gate = approval_gate(&resolved.home, cwd, None).await;
    engine_gate.set_frontend(Arc::new(ClaudeFrontend {
        engine: engine_gate.engine().ok().cloned(),
        policy: policy.clone(),
        peer: peer.clone(),
    }));
    let asker: Arc<dyn keel_tools::Asker> =
        Arc::new(super::elicit::SdkAsker { peer: peer.clone() });
    let gate = Arc::new(ClaudeGate {
        inner: engine_gate.clone(),
        policy: policy.clone(),
        peer,
    });
    let mut servers = keel_mcp::workspace::servers_for(&resolved.home, &settings.mcp_servers, cwd);
    servers.extend(mcp_config(&args.mcp_config, &resolved.home)?);
    servers.extend(mcp_config(&host.mcp_config, &resolved.home)?);
    let mcp = crate::setup::start_mcp(&servers, cwd).await;
    let builder = session_builder(SessionSpec {
        cwd,
        home: &resolved.home,
        model: model_info(&resolved),
        provider,
        thinking: resolved.thinking,
        writer: writer.as_ref(),
        history,
        tree,
        retry: resolved.retry,
        compaction: resolved.compaction,
        gate,
        sandbox,
        extra_tools: crate::setup::mcp_tools(mcp.as_ref()),
        elsewhere: None,
        fence: None,
        sync_prompts: false,
        output_schema: host.json_schema.clone(),
        log_seen: None,
    });
    let session = builder
        .system_prompt(host.system_prompt.clone())
        .developer_instructions(host.append_system_prompt.as_deref())
        .asker(Some(asker))
        .spawn();
    let handle = session.handle();
    // The tools the model sees: `--tools`, less what is disallowed.
    let only: Option<Vec<String>> = args
        .tools
        .as_ref()
        .map(|t| t.iter().map(|n| keel_name(n)).collect());
    let removed: Vec<String> = args
        .disallowed_tools
        .iter()
        .map(|t| ToolRule::parse(t))
        .filter(|r| r.content.is_none())
        .map(|r| r.tool)
        .collect();
    let tools: Vec<_> = handle
        .tools()
        .into_iter()
        .filter(|t| {
            let name = t.name();
            let builtin = !name.starts_with(keel_mcp::TOOL_PREFIX);
            !removed.iter().any(|r| r == name)
                && (!builtin || only.as_ref().is_none_or(|o| o.iter().any(|n| n == name)))
        })
        .collect();
    handle.set_tools(tools);
    if let Some(servers) = &mcp {
        mcp_set.follow(servers, session.handle());
    }
    // `allowedTools`: always-allow rules of this session.
    let session_id = session.snapshot().session_id;
    if let Ok(engine) = engine_gate.engine() {
        for text in &args.allowed_tools {
            let lifetime = Lifetime::Session {
                session_id: session_id.clone(),
            };
            if let Err(e) = add_rule(engine, cwd, text, lifetime).await {
                warn(&format!("--allowedTools {text}: {e}"));
            }
        }
    }
    Ok(Opened {
        session,
        writer,
        mcp,
        resolved,
        engine_gate,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_effort_is_kept_per_model_and_owner_only() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        assert_eq!(saved_effort(home.path(), "m/one"), None);
        save_effort(home.path(), "m/one", "high").unwrap();
        save_effort(home.path(), "two", "low").unwrap();
        save_effort(home.path(), "two", "max").unwrap();
        assert_eq!(saved_effort(home.path(), "m/one").as_deref(), Some("high"));
        assert_eq!(
            saved_effort(home.path(), "two").as_deref(),
            Some("low"),
            "max is not kept"
        );
        let err = save_effort(home.path(), "two", "loud").unwrap_err();
        assert!(err.contains("loud"), "{err}");
        let mode = std::fs::metadata(settings_file(home.path()))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(effort_level("high"), ThinkingLevel::High);
    }
}
