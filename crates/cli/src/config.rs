//! Configuration: `$KEEL_HOME/config.toml`, overridden by a profile,
//! overridden by `KEEL_*` environment variables and flags.
//!
//! ```toml
//! [model]
//! provider = "anthropic"     # a built-in provider or one under [providers]
//! id = "claude-sonnet-4-5"
//! thinking = "medium"        # off|minimal|low|medium|high|xhigh
//!
//! [providers.work-vllm]
//! dialect = "openai-completions"  # or openai-responses, anthropic-messages
//! base_url = "http://10.0.0.5:8000/v1"
//! api_key_env = "WORK_VLLM_KEY"   # the key itself is read from the environment, never stored
//! headers = { "X-Team" = "infra" }
//! idle_timeout_secs = 120
//!
//! [profiles.local]           # selected with --profile local / KEEL_PROFILE=local
//! provider = "ollama"
//! id = "qwen3-coder:30b"
//!
//! [[models]]                 # catalogue entries (see keel_llm::catalog)
//! provider = "ollama"
//! id = "qwen3-coder:30b"
//! context_window = 65536
//!
//! [retry]
//! max_retries = 3
//! base_delay_ms = 2000
//! max_delay_ms = 30000
//!
//! [compaction]               # see config::compaction
//! reserve_tokens = 16384
//! keep_recent_tokens = 20000
//!
//! [approvals]                # see config::approvals
//! store = "postgres://keel@127.0.0.1:5432/keel"   # default: $KEEL_HOME/keel.db
//! expire_after = "7d"        # how long a held call waits (the default)
//!
//! [approvals.expire_after_by_class]
//! money = "1h"
//! ```
//!
//! This module owns the file's shape, loading it ([`Settings`]), and
//! resolving the provider and model a run uses ([`Resolved`]) and the
//! models a host may switch between ([`Scope`]). The built-in providers
//! are `keel_llm`'s presets ([`well_known_provider`]); the model catalogue
//! is `keel_llm`'s built-in table merged with `[[models]]`. API keys are
//! only ever read from the environment variable a provider names; they are
//! never written to config, sessions or logs. Printing the configuration
//! lives in [`crate::inspect`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use keel_core::{CompactionSettings, ModelInfo, RetryPolicy};
use keel_llm::catalog::Match;
use keel_llm::{
    Catalog, Dialect, ModelConfig, ModelEntry, ProviderSpec, WELL_KNOWN_PROVIDERS,
    well_known_provider,
};
use keel_protocol::ThinkingLevel;
use serde::Deserialize;

use crate::GlobalArgs;

mod approvals;
mod compaction;
mod mask;
mod sandbox;
mod shell_env;
pub use approvals::{ApprovalsSection, expiry_lines, store_line};
pub use compaction::CompactionSection;
pub use mask::{mask, mask_header};
pub use sandbox::{SandboxSection, SandboxSettings};

// Flags that pick the model and provider. (A plain comment: see `Command`
// in main.rs.)
#[derive(Debug, Clone, Default, Args)]
pub struct ModelArgs {
    /// Model id, as the provider knows it.
    #[arg(long, short = 'm', env = "KEEL_MODEL")]
    pub model: Option<String>,
    /// Provider: openai, anthropic, openrouter, ollama, vllm, lmstudio, llamacpp, or one from config.toml.
    #[arg(long, env = "KEEL_PROVIDER")]
    pub provider: Option<String>,
    /// Base URL of the provider's API (e.g. http://127.0.0.1:8000/v1).
    #[arg(long, env = "KEEL_BASE_URL")]
    pub base_url: Option<String>,
    /// Name of the environment variable that holds the API key.
    #[arg(long, env = "KEEL_API_KEY_ENV")]
    pub api_key_env: Option<String>,
    /// Thinking level: off, minimal, low, medium, high, xhigh.
    #[arg(long, env = "KEEL_THINKING")]
    pub thinking: Option<String>,
    /// A [profiles.NAME] of config.toml to use.
    #[arg(long, env = "KEEL_PROFILE")]
    pub profile: Option<String>,
    /// A GGUF model file to run in-process (implies --provider local).
    #[arg(long, env = "KEEL_MODEL_PATH")]
    pub model_path: Option<PathBuf>,
    /// Threads of a local model (default: all cores of a 1–2-core machine,
    /// else cores − 1; fewer while other processes keep the cores busy).
    #[arg(long, env = "KEEL_THREADS")]
    pub threads: Option<u32>,
}

/// The file `config.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub model: ModelSection,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSection>,
    #[serde(default)]
    pub profiles: BTreeMap<String, ProfileSection>,
    /// `[[models]]`: catalogue entries.
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    #[serde(default)]
    pub retry: RetrySection,
    #[serde(default)]
    pub compaction: CompactionSection,
    /// `[approvals]`: where the approvals database lives, when held calls
    /// expire.
    #[serde(default)]
    pub approvals: ApprovalsSection,
    /// `[sandbox]`: what commands may touch.
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// `[mcp_servers.NAME]`: MCP servers whose tools sessions get (Codex's
    /// keys; docs/mcp.md).
    #[serde(default)]
    pub mcp_servers: BTreeMap<String, keel_mcp::McpServerConfig>,
    /// `[shell_environment_policy]`: what commands' environments hold.
    #[serde(default)]
    pub shell_environment_policy: shell_env::ShellEnvSection,
    /// `[store]`: the one database for everything durable (docs/deploy.md).
    #[serde(default)]
    #[allow(dead_code, reason = "read by keel_approvals::StoreLocation")]
    pub store: crate::cluster::StoreSection,
    /// `[temporal]`: the cluster `keel worker` and the front-ends use.
    #[serde(default)]
    pub temporal: crate::cluster::TemporalSection,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    pub provider: Option<String>,
    pub id: Option<String>,
    pub thinking: Option<String>,
}

/// `[profiles.NAME]`: overrides `[model]` and the provider's address.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileSection {
    pub provider: Option<String>,
    #[serde(alias = "model")]
    pub id: Option<String>,
    pub thinking: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    /// `openai-completions`, `openai-responses` or `anthropic-messages`
    /// (default: the built-in provider's, else `openai-completions`).
    pub dialect: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub idle_timeout_secs: Option<u64>,
    pub connect_timeout_secs: Option<u64>,
    pub request_timeout_secs: Option<u64>,
    /// Overrides the catalogue for every model of this provider.
    pub context_window: Option<u64>,
    /// Overrides the catalogue for every model of this provider.
    pub max_output_tokens: Option<u64>,
    /// Chat Completions: send `reasoning_effort` (default: only to OpenAI).
    pub supports_reasoning_effort: Option<bool>,
    /// Chat Completions: system prompt as `developer` (default: only OpenAI).
    pub supports_developer_role: Option<bool>,
    /// `local` dialect: the GGUF file (default: the model's file under
    /// KEEL_HOME/models, see `keel models pull`).
    pub model_path: Option<PathBuf>,
    /// `local` dialect: context size in tokens (default 8192).
    pub context_size: Option<u32>,
    /// `local` dialect: threads (default: see `keel_llm::local::LocalSpec`).
    pub threads: Option<u32>,
    /// `local` dialect: `auto` (text or a tool call), `required` or `off`.
    pub grammar: Option<String>,
    /// `local` dialect: sampling temperature (default 0: greedy).
    pub temperature: Option<f32>,
    /// `local` dialect: most MiB of evaluated prompts kept under
    /// KEEL_HOME/cache/prompts (default 2048; 0: none).
    pub prompt_cache_mb: Option<u64>,
}

/// `[retry]`: automatic retries of failed model calls.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySection {
    pub enabled: Option<bool>,
    pub max_retries: Option<u32>,
    pub base_delay_ms: Option<u64>,
    pub max_delay_ms: Option<u64>,
}

impl RetrySection {
    fn policy(&self) -> RetryPolicy {
        let d = RetryPolicy::default();
        RetryPolicy {
            enabled: self.enabled.unwrap_or(d.enabled),
            max_retries: self.max_retries.unwrap_or(d.max_retries),
            base_delay: self
                .base_delay_ms
                .map(Duration::from_millis)
                .unwrap_or(d.base_delay),
            max_delay: self
                .max_delay_ms
                .map(Duration::from_millis)
                .unwrap_or(d.max_delay),
        }
    }
}

/// Everything loaded once: the home, the file and the catalogue.
#[derive(Debug, Clone)]
pub struct Settings {
    pub home: PathBuf,
    pub config_path: PathBuf,
    pub file: Arc<ConfigFile>,
    pub catalog: Arc<Catalog>,
    pub retry: RetryPolicy,
    pub compaction: CompactionSettings,
}

/// How to reach one provider, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConf {
    pub name: String,
    pub dialect: Dialect,
    pub base_url: String,
    pub api_key_env: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub idle_timeout: Duration,
    pub connect_timeout: Duration,
    pub request_timeout: Duration,
    pub supports_reasoning_effort: Option<bool>,
    pub supports_developer_role: Option<bool>,
    /// `local` dialect: how to run the model (an empty path: the model's
    /// file under KEEL_HOME/models).
    pub local: keel_llm::local::LocalSpec,
    /// `[providers.NAME]` overrides of the catalogue.
    context_window: Option<u64>,
    max_output_tokens: Option<u64>,
}

impl ProviderConf {
    /// The API key, read from the environment now.
    pub fn api_key(&self) -> Option<String> {
        if let Some(name) = self.api_key_env.as_deref() {
            // Whatever its name, the key's variable stays with keel.
            keel_tools::child_env::treat_as_secret(name);
        }
        self.api_key_env
            .as_deref()
            .and_then(|name| std::env::var(name).ok())
            .filter(|k| !k.is_empty())
    }

    /// Whether calls can be made: no key needed, or the key is set.
    pub fn usable(&self) -> bool {
        if self.dialect.is_local() {
            return keel_llm::local::AVAILABLE;
        }
        self.api_key_env.is_none() || self.api_key().is_some()
    }

    /// What `keel_llm::build_provider` needs (with the key, read now).
    pub fn spec(&self) -> ProviderSpec {
        let mut spec = ProviderSpec::new(self.name.clone(), self.dialect, self.base_url.clone());
        spec.api_key = self.api_key();
        spec.extra_headers = self.headers.clone().into_iter().collect();
        spec.idle_timeout = self.idle_timeout;
        spec.connect_timeout = self.connect_timeout;
        spec.request_timeout = self.request_timeout;
        spec.supports_reasoning_effort = self.supports_reasoning_effort;
        spec.supports_developer_role = self.supports_developer_role;
        spec.local = self.local.clone();
        spec
    }
}

/// The provider and model a run will use, fully resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub home: PathBuf,
    /// Provider name.
    pub provider: String,
    /// Model id as the server knows it.
    pub model: String,
    pub base_url: String,
    pub conf: ProviderConf,
    /// The catalogue entry (conservative defaults for an unknown model).
    pub entry: ModelEntry,
    /// How the catalogue found it.
    pub matched: Match,
    /// Set for an unknown model: one sentence for the user.
    pub warning: Option<String>,
    /// Whether the entry's output limit is worth sending (the model is
    /// known or the user set the limit).
    pub limit_known: bool,
    /// The thinking level asked for (the session clamps it).
    pub thinking: ThinkingLevel,
    pub retry: RetryPolicy,
    /// `[compaction]`: when sessions summarise their conversation.
    pub compaction: CompactionSettings,
    pub profile: Option<String>,
    catalog: Arc<Catalog>,
    user_limits: Arc<Vec<ModelConfig>>,
}

impl Resolved {
    /// The API key, read from the environment now.
    pub fn api_key(&self) -> Option<String> {
        self.conf.api_key()
    }

    /// The same provider with another model.
    pub fn for_model(&self, id: &str) -> Resolved {
        model_of(
            &self.home,
            &self.catalog,
            &self.user_limits,
            self.conf.clone(),
            id,
            self.thinking,
            (self.retry, self.compaction),
            self.profile.clone(),
        )
    }

    /// What the session knows about the model.
    pub fn model_info(&self) -> ModelInfo {
        let mut info = ModelInfo::from_entry(&self.entry);
        info.api = self.conf.dialect.as_str().to_owned();
        if !self.limit_known {
            info.max_output_tokens = None;
        }
        info
    }

    /// The thinking level the model runs at, and a warning when that is not
    /// the one asked for.
    pub fn effective_thinking(&self) -> (ThinkingLevel, Option<String>) {
        self.entry.effective_thinking(self.thinking)
    }
}

/// The models a host may switch between.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// The configured model first, then `--models`.
    pub scoped: Vec<Resolved>,
    /// `scoped`, then every catalogue model of the configured provider,
    /// of `[providers]` and of built-in providers whose key is set.
    pub available: Vec<Resolved>,
    /// Whether `--models` named models (then `cycle_model` stays in them).
    pub explicit: bool,
}

/// `$KEEL_HOME`, else `~/.keel`.
pub fn home_dir(global: &GlobalArgs) -> anyhow::Result<PathBuf> {
    if let Some(h) = &global.home {
        return Ok(h.clone());
    }
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home).join(".keel")),
        _ => bail!("cannot find a home directory: set KEEL_HOME"),
    }
}

pub fn load_file(path: &Path) -> anyhow::Result<ConfigFile> {
    match std::fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| {
            let at = e
                .span()
                .map(|span| {
                    let before = &text[..span.start.min(text.len())];
                    let line = before.matches('\n').count() + 1;
                    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
                    format!(" at line {line}, column {col}")
                })
                .unwrap_or_default();
            anyhow::anyhow!("invalid {}{at}: {}", path.display(), e.message().trim())
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// What to set when no model is configured, in one line.
/// (The offline local model needs a keel built with the `local` feature.)
pub const NO_MODEL_HINT: &str = if keel_llm::local::AVAILABLE {
    "no model configured: set KEEL_PROVIDER and KEEL_MODEL (or --provider/--model, or [model] in $KEEL_HOME/config.toml), e.g. --provider openai --model gpt-4.1 with OPENAI_API_KEY set, or run `keel models pull` for the offline local model"
} else {
    "no model configured: set KEEL_PROVIDER and KEEL_MODEL (or --provider/--model, or [model] in $KEEL_HOME/config.toml), e.g. --provider openai --model gpt-4.1 with OPENAI_API_KEY set; for the offline local model build keel with `--features local` (scripts/quickstart.sh does) and run `keel models pull`"
};

/// The provider name used for `--base-url` without `--provider`.
pub const CUSTOM_PROVIDER: &str = "custom";

fn parse_thinking(text: &str) -> anyhow::Result<ThinkingLevel> {
    serde_json::from_value(serde_json::Value::String(text.trim().to_owned())).map_err(|_| {
        anyhow::anyhow!(
            "invalid thinking level {text:?}: use off, minimal, low, medium, high or xhigh"
        )
    })
}

impl Settings {
    /// Reads `$KEEL_HOME/config.toml` (absent: defaults) and builds the
    /// catalogue.
    pub fn load(global: &GlobalArgs) -> anyhow::Result<Settings> {
        let home = home_dir(global)?;
        let config_path = home.join("config.toml");
        let file = load_file(&config_path)?;
        let catalog = Catalog::with_user_models(&file.models)
            .map_err(|e| anyhow::anyhow!("{}: {e}", config_path.display()))?;
        file.approvals
            .check()
            .map_err(|e| anyhow::anyhow!("{}: {e}", config_path.display()))?;
        keel_core::keel_approvals::NotifySettings::for_home(&home)?;
        keel_tools::child_env::configure(file.shell_environment_policy.policy());
        // The file tools never read the MCP sign-in tokens.
        keel_tools::keep_out([home.join(keel_mcp::oauth::CREDENTIALS_DIR)]);
        // MCP servers that ask for walls get the sandbox commands get.
        keel_mcp::confine_with(Arc::new(
            keel_sandbox::Sandbox::new(vec![home.clone()])
                .allow_unconfined(file.sandbox.allow_unconfined.unwrap_or(false)),
        ));
        Ok(Settings {
            retry: file.retry.policy(),
            compaction: file.compaction.settings(),
            home,
            config_path,
            catalog: Arc::new(catalog),
            file: Arc::new(file),
        })
    }

    fn profile(&self, args: &ModelArgs) -> anyhow::Result<Option<(String, ProfileSection)>> {
        let Some(name) = args
            .profile
            .as_deref()
            .map(str::trim)
            .filter(|n| !n.is_empty())
        else {
            return Ok(None);
        };
        match self.file.profiles.get(name) {
            Some(p) => Ok(Some((name.to_owned(), p.clone()))),
            None => {
                let known: Vec<&str> = self.file.profiles.keys().map(String::as_str).collect();
                bail!(
                    "unknown profile {name:?}: {} defines {}",
                    self.config_path.display(),
                    if known.is_empty() {
                        "no [profiles]".to_owned()
                    } else {
                        known.join(", ")
                    }
                )
            }
        }
    }

    /// Whether `name` runs its models in-process (the `local` dialect).
    fn is_local(&self, name: &str) -> bool {
        match self
            .file
            .providers
            .get(name)
            .and_then(|s| s.dialect.as_deref())
        {
            Some(d) => d.parse::<Dialect>().is_ok_and(Dialect::is_local),
            None => well_known_provider(name).is_some_and(|p| p.dialect.is_local()),
        }
    }

    /// The names of every provider keel can reach: configured ones, then
    /// the built-in ones.
    pub fn provider_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.file.providers.keys().cloned().collect();
        for p in WELL_KNOWN_PROVIDERS {
            if !names.iter().any(|n| n == p.name) {
                names.push(p.name.to_owned());
            }
        }
        names
    }

    /// How to reach `name`: `[providers.NAME]` over the built-in preset,
    /// with `base_url`/`api_key_env` overrides (flags, profile) on top.
    pub fn provider(
        &self,
        name: &str,
        base_url: Option<String>,
        api_key_env: Option<String>,
    ) -> anyhow::Result<ProviderConf> {
        let section = self.file.providers.get(name).cloned().unwrap_or_default();
        let preset = well_known_provider(name);
        let Some(base_url) = base_url
            .or(section.base_url.clone())
            .or(preset.map(|p| p.base_url.to_owned()))
        else {
            bail!(
                "unknown provider {name:?}: use one of {} or add [providers.{name}] with base_url to {}",
                WELL_KNOWN_PROVIDERS
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", "),
                self.config_path.display()
            );
        };
        let dialect = match &section.dialect {
            Some(d) => d.parse::<Dialect>().map_err(|e| {
                anyhow::anyhow!("[providers.{name}] in {}: {e}", self.config_path.display())
            })?,
            // A section that gives the in-process provider's name a URL
            // means a server (a pre-`local` configuration).
            None => match preset {
                Some(p) if !(p.dialect.is_local() && section.base_url.is_some()) => p.dialect,
                _ => Dialect::OpenAiCompletions,
            },
        };
        let secs = |s: Option<u64>, default: Duration| s.map_or(default, Duration::from_secs);
        let defaults = ProviderSpec::new(name, dialect, "");
        let local = if dialect.is_local() {
            crate::models::local_spec(&section).map_err(|e| {
                anyhow::anyhow!("[providers.{name}] in {}: {e}", self.config_path.display())
            })?
        } else {
            keel_llm::local::LocalSpec::default()
        };
        Ok(ProviderConf {
            name: name.to_owned(),
            dialect,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key_env: api_key_env
                .or(section.api_key_env.clone())
                .or(preset.and_then(|p| p.api_key_env.map(str::to_owned)))
                .filter(|v| !v.trim().is_empty()),
            headers: section.headers.clone(),
            idle_timeout: secs(section.idle_timeout_secs, defaults.idle_timeout),
            connect_timeout: secs(section.connect_timeout_secs, defaults.connect_timeout),
            request_timeout: secs(section.request_timeout_secs, defaults.request_timeout),
            supports_reasoning_effort: section.supports_reasoning_effort,
            supports_developer_role: section.supports_developer_role,
            context_window: section
                .context_window
                .or(dialect.is_local().then_some(u64::from(local.context_size))),
            local,
            max_output_tokens: section.max_output_tokens,
        })
    }

    /// `model` of `provider` as configured in the file (no flag overrides).
    pub fn model(
        &self,
        provider: &str,
        model: &str,
        thinking: ThinkingLevel,
    ) -> anyhow::Result<Resolved> {
        let conf = self.provider(provider, None, None)?;
        Ok(self.model_with(conf, model, thinking, None))
    }

    fn model_with(
        &self,
        conf: ProviderConf,
        model: &str,
        thinking: ThinkingLevel,
        profile: Option<String>,
    ) -> Resolved {
        model_of(
            &self.home,
            &self.catalog,
            &Arc::new(self.file.models.clone()),
            conf,
            model,
            thinking,
            (self.retry, self.compaction),
            profile,
        )
    }

    /// Resolves flags > env (through clap) > profile > `[model]` >
    /// built-ins; `Ok(None)` when no model is configured at all (any other
    /// problem is an error).
    pub fn resolve_optional(&self, args: &ModelArgs) -> anyhow::Result<Option<Resolved>> {
        let profile = self.profile(args)?;
        let p = profile.as_ref().map(|(_, p)| p.clone()).unwrap_or_default();
        let model = args
            .model
            .clone()
            .or(p.id.clone())
            .or(self.file.model.id.clone())
            .filter(|m| !m.trim().is_empty());
        let mut provider = args
            .provider
            .clone()
            .or(p.provider.clone())
            .or(self.file.model.provider.clone())
            .filter(|m| !m.trim().is_empty());
        if provider.is_none() && (args.base_url.is_some() || p.base_url.is_some()) {
            provider = Some(CUSTOM_PROVIDER.to_owned());
        }
        let (model, provider) = crate::models::with_local_default(
            &self.home,
            model,
            provider,
            args.model_path.is_some(),
            |p| self.is_local(p),
        );
        let (Some(model), Some(provider)) = (model, provider) else {
            return Ok(None);
        };
        let thinking = match args.thinking.clone().or(p.thinking.clone()).or(self
            .file
            .model
            .thinking
            .clone())
        {
            None => ThinkingLevel::Off,
            Some(t) => parse_thinking(&t)?,
        };
        let mut conf = self.provider(
            &provider,
            args.base_url.clone().or(p.base_url.clone()),
            args.api_key_env.clone().or(p.api_key_env.clone()),
        )?;
        if let Some(path) = &args.model_path {
            if !conf.dialect.is_local() {
                bail!("--model-path needs a local provider, not {provider:?}");
            }
            conf.local.model_path = path.clone();
        }
        crate::models::apply_threads(&mut conf, args.threads)?;
        Ok(Some(self.model_with(
            conf,
            model.trim(),
            thinking,
            profile.map(|(n, _)| n),
        )))
    }

    /// Like [`Settings::resolve_optional`], failing with [`NO_MODEL_HINT`].
    pub fn resolve(&self, args: &ModelArgs) -> anyhow::Result<Resolved> {
        match self.resolve_optional(args)? {
            Some(r) => Ok(r),
            None => bail!(NO_MODEL_HINT),
        }
    }

    /// The configured model, the `extra` ones (`provider/id`, or an `id` of
    /// the configured provider) and every catalogue model of a usable
    /// provider.
    pub fn scope(&self, args: &ModelArgs, extra: &[String]) -> anyhow::Result<Scope> {
        let Some(main) = self.resolve_optional(args)? else {
            return Ok(Scope::default());
        };
        let names = self.provider_names();
        let mut scoped = vec![main.clone()];
        let same = |a: &Resolved, b: &Resolved| a.provider == b.provider && a.model == b.model;
        for spec in extra.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
            let r = match spec.split_once('/') {
                Some((p, id)) if p != main.provider && names.iter().any(|n| n == p) => {
                    self.model(p, id, main.thinking)?
                }
                Some((p, id)) if p == main.provider => main.for_model(id),
                _ => main.for_model(spec),
            };
            if !r.model.is_empty() && !scoped.iter().any(|s| same(s, &r)) {
                scoped.push(r);
            }
        }
        let mut available = scoped.clone();
        for name in names {
            let conf = if name == main.provider {
                main.conf.clone()
            } else {
                // Configured providers, and built-in ones whose key is set
                // (a keyless built-in, such as a local server, only when it
                // is configured).
                match self.provider(&name, None, None) {
                    Ok(c)
                        if c.usable()
                            && (self.file.providers.contains_key(&name)
                                || c.api_key_env.is_some()) =>
                    {
                        c
                    }
                    _ => continue,
                }
            };
            let ids: Vec<String> = self
                .catalog
                .models_of(&name)
                .map(|e| e.id.clone())
                .collect();
            for id in ids {
                let r = self.model_with(conf.clone(), &id, main.thinking, main.profile.clone());
                if !available.iter().any(|s| same(s, &r)) {
                    available.push(r);
                }
            }
        }
        Ok(Scope {
            explicit: scoped.len() > 1,
            scoped,
            available,
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn model_of(
    home: &Path,
    catalog: &Arc<Catalog>,
    user: &Arc<Vec<ModelConfig>>,
    conf: ProviderConf,
    model: &str,
    thinking: ThinkingLevel,
    (retry, compaction): (RetryPolicy, CompactionSettings),
    profile: Option<String>,
) -> Resolved {
    let lookup = catalog.lookup_for(&conf.spec_without_key(), model);
    let mut entry = lookup.entry;
    let user_limit = user.iter().any(|m| {
        m.provider == conf.name
            && m.max_output_tokens.is_some()
            && (m.id.eq_ignore_ascii_case(model)
                || m.aliases
                    .as_ref()
                    .is_some_and(|a| a.iter().any(|x| x.eq_ignore_ascii_case(model))))
    });
    if let Some(n) = conf.context_window {
        entry.context_window = n;
    }
    if let Some(n) = conf.max_output_tokens {
        entry.max_output_tokens = n;
    }
    let limit_known = conf.max_output_tokens.is_some()
        || user_limit
        || matches!(lookup.matched, Match::Exact | Match::OtherProvider)
            && !matches!(
                Catalog::builtin().lookup(&conf.name, model).matched,
                Match::ProviderDefault | Match::Fallback
            );
    Resolved {
        home: home.to_path_buf(),
        provider: conf.name.clone(),
        model: model.to_owned(),
        base_url: conf.base_url.clone(),
        entry,
        matched: lookup.matched,
        warning: lookup.warning,
        limit_known,
        thinking,
        retry,
        compaction,
        profile,
        catalog: catalog.clone(),
        user_limits: user.clone(),
        conf,
    }
}

impl ProviderConf {
    /// A spec for catalogue lookups (the key is not read).
    fn spec_without_key(&self) -> ProviderSpec {
        ProviderSpec::new(self.name.clone(), self.dialect, self.base_url.clone())
    }
}

/// Loads the settings and resolves `args` ([`Settings::resolve`]).
pub fn resolve(global: &GlobalArgs, args: &ModelArgs) -> anyhow::Result<Resolved> {
    Settings::load(global)?.resolve(args)
}

#[cfg(test)]
mod tests;
