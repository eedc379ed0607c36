//! Configuration: `$KEEL_HOME/config.toml`, overridden by `KEEL_*`
//! environment variables, overridden by flags.
//!
//! ```toml
//! [model]
//! provider = "openai"        # a built-in provider or one under [providers]
//! id = "gpt-4.1"
//! thinking = "off"           # off|minimal|low|medium|high|xhigh
//!
//! [providers.work-vllm]
//! dialect = "openai-completions"
//! base_url = "http://10.0.0.5:8000/v1"
//! api_key_env = "WORK_VLLM_KEY"   # the key itself is read from the environment, never stored
//! headers = { "X-Team" = "infra" }
//! idle_timeout_secs = 120
//! context_window = 32768
//! ```
//!
//! API keys are only ever read from the environment variable a provider
//! names; they are never written to config, sessions or logs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use keel_protocol::ThinkingLevel;
use serde::Deserialize;

use crate::GlobalArgs;

/// Flags that pick the model and provider.
#[derive(Debug, Clone, Default, Args)]
pub struct ModelArgs {
    /// Model id, as the provider knows it.
    #[arg(long, short = 'm', env = "KEEL_MODEL")]
    pub model: Option<String>,
    /// Provider: openai, openrouter, ollama, vllm, lmstudio, llamacpp, or one from config.toml.
    #[arg(long, env = "KEEL_PROVIDER")]
    pub provider: Option<String>,
    /// Base URL of an OpenAI-compatible server (e.g. http://127.0.0.1:8000/v1).
    #[arg(long, env = "KEEL_BASE_URL")]
    pub base_url: Option<String>,
    /// Name of the environment variable that holds the API key.
    #[arg(long, env = "KEEL_API_KEY_ENV")]
    pub api_key_env: Option<String>,
    /// Thinking level: off, minimal, low, medium, high, xhigh.
    #[arg(long, env = "KEEL_THINKING")]
    pub thinking: Option<String>,
}

/// The file `config.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub model: ModelSection,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderSection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    pub provider: Option<String>,
    pub id: Option<String>,
    pub thinking: Option<String>,
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderSection {
    pub dialect: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    pub idle_timeout_secs: Option<u64>,
    pub context_window: Option<u64>,
    pub max_output_tokens: Option<u64>,
}

/// A provider keel knows without configuration.
struct BuiltinProvider {
    name: &'static str,
    base_url: &'static str,
    api_key_env: Option<&'static str>,
}

const BUILTIN_PROVIDERS: &[BuiltinProvider] = &[
    BuiltinProvider {
        name: "openai",
        base_url: "https://api.openai.com/v1",
        api_key_env: Some("OPENAI_API_KEY"),
    },
    BuiltinProvider {
        name: "openrouter",
        base_url: "https://openrouter.ai/api/v1",
        api_key_env: Some("OPENROUTER_API_KEY"),
    },
    BuiltinProvider {
        name: "ollama",
        base_url: "http://127.0.0.1:11434/v1",
        api_key_env: None,
    },
    BuiltinProvider {
        name: "vllm",
        base_url: "http://127.0.0.1:8000/v1",
        api_key_env: None,
    },
    BuiltinProvider {
        name: "lmstudio",
        base_url: "http://127.0.0.1:1234/v1",
        api_key_env: None,
    },
    BuiltinProvider {
        name: "llamacpp",
        base_url: "http://127.0.0.1:8080/v1",
        api_key_env: None,
    },
];

/// The provider and model a run will use, fully resolved.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub home: PathBuf,
    pub provider: String,
    pub dialect: String,
    pub model: String,
    pub base_url: String,
    pub api_key_env: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub idle_timeout_secs: u64,
    pub context_window: u64,
    pub max_output_tokens: Option<u64>,
    pub thinking: ThinkingLevel,
}

impl Resolved {
    /// The API key, read from the environment now.
    pub fn api_key(&self) -> Option<String> {
        self.api_key_env
            .as_deref()
            .and_then(|name| std::env::var(name).ok())
            .filter(|k| !k.is_empty())
    }
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
pub const NO_MODEL_HINT: &str = "no model configured: set KEEL_PROVIDER and KEEL_MODEL (or --provider/--model, or [model] in $KEEL_HOME/config.toml), e.g. --provider openai --model gpt-4.1 with OPENAI_API_KEY set";

/// Resolves flags > env (through clap) > config file > built-ins.
pub fn resolve(global: &GlobalArgs, args: &ModelArgs) -> anyhow::Result<Resolved> {
    match resolve_optional(global, args)? {
        Some(r) => Ok(r),
        None => bail!(NO_MODEL_HINT),
    }
}

/// Like [`resolve`], but no model configured at all is `Ok(None)` (any
/// other problem is still an error).
pub fn resolve_optional(global: &GlobalArgs, args: &ModelArgs) -> anyhow::Result<Option<Resolved>> {
    let home = home_dir(global)?;
    let config_path = home.join("config.toml");
    let file = load_file(&config_path)?;

    let model = args
        .model
        .clone()
        .or(file.model.id.clone())
        .filter(|m| !m.is_empty());
    let mut provider = args.provider.clone().or(file.model.provider.clone());
    if provider.is_none() && args.base_url.is_some() {
        provider = Some("custom".to_owned());
    }
    let (Some(model), Some(provider)) = (model, provider) else {
        return Ok(None);
    };

    let section = file.providers.get(&provider).cloned().unwrap_or_default();
    let builtin = BUILTIN_PROVIDERS.iter().find(|b| b.name == provider);
    let base_url = args
        .base_url
        .clone()
        .or(section.base_url.clone())
        .or(builtin.map(|b| b.base_url.to_owned()));
    let Some(base_url) = base_url else {
        bail!(
            "unknown provider {provider:?}: use one of {} or add [providers.{provider}] with base_url to {}",
            BUILTIN_PROVIDERS
                .iter()
                .map(|b| b.name)
                .collect::<Vec<_>>()
                .join(", "),
            config_path.display()
        );
    };
    let dialect = section
        .dialect
        .clone()
        .unwrap_or_else(|| "openai-completions".to_owned());
    if dialect != "openai-completions" {
        bail!(
            "provider {provider:?}: dialect {dialect:?} is not supported yet (supported: openai-completions)"
        );
    }
    let thinking_text = args.thinking.clone().or(file.model.thinking.clone());
    let thinking = match thinking_text {
        None => ThinkingLevel::Off,
        Some(t) => serde_json::from_value(serde_json::Value::String(t.clone())).map_err(|_| {
            anyhow::anyhow!(
                "invalid thinking level {t:?}: use off, minimal, low, medium, high or xhigh"
            )
        })?,
    };
    Ok(Some(Resolved {
        home,

        api_key_env: args
            .api_key_env
            .clone()
            .or(section.api_key_env.clone())
            .or(builtin.and_then(|b| b.api_key_env.map(str::to_owned))),
        provider,
        dialect,
        model,
        base_url: base_url.trim_end_matches('/').to_owned(),
        headers: section.headers.clone(),
        idle_timeout_secs: section.idle_timeout_secs.unwrap_or(120),
        context_window: section.context_window.unwrap_or(128_000),
        max_output_tokens: section.max_output_tokens,
        thinking,
    }))
}

/// `keel config show`.
#[allow(clippy::print_stdout)]
pub fn show(global: &GlobalArgs, args: &ModelArgs) -> anyhow::Result<()> {
    let home = home_dir(global)?;
    let config_path = home.join("config.toml");
    let exists = config_path.exists();
    println!("home = {:?}", home.display().to_string());
    println!(
        "config_file = {:?}{}",
        config_path.display().to_string(),
        if exists { "" } else { "  # not present" }
    );
    println!(
        "sessions_dir = {:?}",
        home.join("sessions").display().to_string()
    );
    match resolve(global, args) {
        Ok(r) => {
            println!();
            println!("[model]");
            println!("provider = {:?}", r.provider);
            println!("id = {:?}", r.model);
            println!("thinking = {:?}", r.thinking.as_str());
            println!();
            println!("[providers.{}]", r.provider);
            println!("dialect = {:?}", r.dialect);
            println!("base_url = {:?}", r.base_url);
            match &r.api_key_env {
                Some(name) => {
                    let state = match r.api_key() {
                        Some(key) => format!("set, {}", mask(&key)),
                        None => "not set".to_owned(),
                    };
                    println!("api_key_env = {name:?}  # {state}");
                }
                None => println!("# no API key (none needed)"),
            }
            for (k, v) in &r.headers {
                println!("headers.{k} = {:?}", mask_header(k, v));
            }
            println!("idle_timeout_secs = {}", r.idle_timeout_secs);
            println!("context_window = {}", r.context_window);
        }
        Err(e) => println!("\n# {e}"),
    }
    Ok(())
}

/// `sk-abc…wxyz` → `sk-a…wxyz (N chars)`; short keys are fully hidden.
pub fn mask(secret: &str) -> String {
    let n = secret.chars().count();
    if n < 12 {
        return format!("*** ({n} chars)");
    }
    let head: String = secret.chars().take(4).collect();
    let tail: String = secret.chars().skip(n - 4).collect();
    format!("{head}…{tail} ({n} chars)")
}

fn mask_header(name: &str, value: &str) -> String {
    let lower = name.to_ascii_lowercase();
    if lower.contains("auth") || lower.contains("key") || lower.contains("token") {
        mask(value)
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn global(home: &Path) -> GlobalArgs {
        GlobalArgs {
            home: Some(home.to_path_buf()),
            log_file: None,
        }
    }

    #[test]
    fn nothing_configured_says_what_to_set() {
        let dir = tempfile::tempdir().unwrap();
        let err = resolve(&global(dir.path()), &ModelArgs::default()).unwrap_err();
        assert!(err.to_string().starts_with("no model configured"));
    }

    #[test]
    fn flags_override_file_and_builtins_fill_in() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.toml"),
            "[model]\nprovider = \"openai\"\nid = \"gpt-4.1\"\n[providers.local]\nbase_url = \"http://127.0.0.1:9/v1/\"\nheaders = { Authorization = \"Bearer sekrit-123456789\" }\n",
        )
        .unwrap();
        let r = resolve(&global(dir.path()), &ModelArgs::default()).unwrap();
        assert_eq!(r.base_url, "https://api.openai.com/v1");
        assert_eq!(r.api_key_env.as_deref(), Some("OPENAI_API_KEY"));
        let args = ModelArgs {
            provider: Some("local".into()),
            model: Some("qwen".into()),
            ..ModelArgs::default()
        };
        let r = resolve(&global(dir.path()), &args).unwrap();
        assert_eq!(r.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(r.model, "qwen");
        assert_eq!(r.api_key_env, None);
        assert!(!mask_header("Authorization", "Bearer sekrit-123456789").contains("sekrit"));
    }

    #[test]
    fn bad_config_and_unknown_provider_are_clear() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "[model\n").unwrap();
        let err = resolve(&global(dir.path()), &ModelArgs::default()).unwrap_err();
        assert!(format!("{err:#}").contains("invalid"));
        std::fs::write(dir.path().join("config.toml"), "").unwrap();
        let args = ModelArgs {
            provider: Some("nope".into()),
            model: Some("x".into()),
            ..ModelArgs::default()
        };
        let err = resolve(&global(dir.path()), &args).unwrap_err();
        assert!(err.to_string().contains("unknown provider \"nope\""));
    }

    #[test]
    fn masks_secrets() {
        assert_eq!(mask("short"), "*** (5 chars)");
        let m = mask("sk-1234567890abcdef");
        assert!(m.starts_with("sk-1…cdef"));
        assert!(!m.contains("567890"));
    }
}
