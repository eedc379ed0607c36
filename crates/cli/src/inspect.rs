//! `keel config show` and `keel models list`: the effective configuration
//! and the model catalogue, for people (and `--json` for scripts).
//!
//! Owns only printing; resolution is [`crate::config`]'s. Secrets are
//! masked: an API key is shown as `sk-a…wxyz (N chars)` and credential-like
//! header values likewise.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use keel_llm::ModelEntry;
use keel_llm::catalog::Match;
use serde_json::{Value, json};

use crate::GlobalArgs;
use crate::config::{ModelArgs, Settings, mask, mask_header};

// `keel models …`. (A plain comment: see `Command` in main.rs.)
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Print the model catalogue: built-in models and `[[models]]` of config.toml.
    List(ListArgs),
    /// Fetch the default local model (Qwen2.5-Coder 1.5B Instruct, Q4_K_M,
    /// Apache-2.0) into KEEL_HOME/models, checked by sha256.
    Pull(crate::models::PullArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this provider's models.
    #[arg(long)]
    pub provider: Option<String>,
    /// Print the entries as one JSON array.
    #[arg(long)]
    pub json: bool,
}

/// `keel models …`.
pub fn models(global: &GlobalArgs, command: ModelsCommand) -> anyhow::Result<ExitCode> {
    match command {
        ModelsCommand::List(args) => list(global, &args),
        ModelsCommand::Pull(args) => crate::models::pull_command(global, &args),
    }
}

fn list(global: &GlobalArgs, args: &ListArgs) -> anyhow::Result<ExitCode> {
    let settings = Settings::load(global)?;
    let entries: Vec<&ModelEntry> = settings
        .catalog
        .entries()
        .iter()
        .filter(|e| args.provider.as_deref().is_none_or(|p| e.provider == p))
        .collect();
    if args.json {
        let list: Vec<Value> = entries.iter().map(|e| entry_json(e)).collect();
        print_line(&serde_json::to_string_pretty(&list)?);
        return Ok(ExitCode::SUCCESS);
    }
    print_line(&format!(
        "{:<12} {:<28} {:<19} {:>9} {:>8} {:<11} {:<30} {:>8} {:>8}",
        "PROVIDER", "MODEL", "API", "CONTEXT", "MAX OUT", "INPUT", "THINKING", "$IN/M", "$OUT/M"
    ));
    for e in entries {
        let input: Vec<&str> = e
            .input
            .iter()
            .map(|m| match m {
                keel_llm::InputModality::Text => "text",
                keel_llm::InputModality::Image => "image",
            })
            .collect();
        let levels: Vec<&str> = e.thinking_levels.iter().map(|l| l.as_str()).collect();
        print_line(&format!(
            "{:<12} {:<28} {:<19} {:>9} {:>8} {:<11} {:<30} {:>8} {:>8}",
            e.provider,
            e.id,
            e.api.as_str(),
            e.context_window,
            e.max_output_tokens,
            input.join(","),
            levels.join(","),
            price(e.cost.input),
            price(e.cost.output),
        ));
    }
    Ok(ExitCode::SUCCESS)
}

fn price(p: f64) -> String {
    if p == 0.0 {
        "-".to_owned()
    } else {
        format!("{p:.2}")
    }
}

/// A catalogue entry as `models list --json` prints it.
fn entry_json(e: &ModelEntry) -> Value {
    let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
    v["reasoning"] = json!(e.reasoning());
    v
}

#[allow(clippy::print_stdout)]
fn print_line(text: &str) {
    println!("{text}");
}

/// `keel config show`.
pub fn show(global: &GlobalArgs, args: &ModelArgs) -> anyhow::Result<()> {
    let settings = Settings::load(global)?;
    let exists = settings.config_path.exists();
    print_line(&format!("home = {:?}", settings.home.display().to_string()));
    print_line(&format!(
        "config_file = {:?}{}",
        settings.config_path.display().to_string(),
        if exists { "" } else { "  # not present" }
    ));
    print_line(&format!(
        "sessions_dir = {:?}",
        keel_session_store::SessionStore::for_home(&settings.home)
            .root()
            .display()
            .to_string()
    ));
    print_line(&crate::cluster::sessions_line(&settings.home));
    print_line(&crate::config::store_line(&settings.home));
    print_line(&crate::cluster::show_line(global));
    for line in crate::config::expiry_lines(&settings.file.approvals) {
        print_line(&line);
    }
    if let Some(url) = settings
        .file
        .approvals
        .notify
        .as_ref()
        .and_then(|t| t.get("webhook"))
        .and_then(|v| v.as_str())
    {
        // The path of a webhook URL is often its secret: only the host shows.
        let host = url
            .split("://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or("?");
        print_line(&format!(
            "approvals.notify = {:?}  # the rest of the URL is not shown",
            host
        ));
    }
    match settings.file.sandbox.settings(None) {
        Ok(s) => print_line(&format!(
            "sandbox = {{ mode = {:?}, network_access = {}, writable_roots = {:?}, allow_unconfined = {} }}",
            s.policy.mode.as_str(),
            s.policy.network_access,
            s.policy
                .writable_roots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>(),
            s.allow_unconfined
        )),
        Err(e) => print_line(&format!("# [sandbox]: {e}")),
    }
    let r = match settings.resolve(args) {
        Ok(r) => r,
        Err(e) => {
            print_line(&format!("\n# {e}"));
            return Ok(());
        }
    };
    if let Some(p) = &r.profile {
        print_line(&format!("profile = {p:?}"));
    }
    print_line("");
    print_line("[model]");
    print_line(&format!("provider = {:?}", r.provider));
    print_line(&format!("id = {:?}", r.model));
    let (effective, warning) = r.effective_thinking();
    match warning {
        Some(w) => print_line(&format!(
            "thinking = {:?}  # runs at {}: {w}",
            r.thinking.as_str(),
            effective.as_str()
        )),
        None => print_line(&format!("thinking = {:?}", r.thinking.as_str())),
    }
    print_line("");
    print_line(&format!("[providers.{}]", r.provider));
    print_line(&format!("dialect = {:?}", r.conf.dialect.as_str()));
    if r.conf.dialect.is_local() {
        crate::models::show_local(&r);
    } else {
        print_line(&format!("base_url = {:?}", r.base_url));
        match &r.conf.api_key_env {
            Some(name) => {
                let state = match r.api_key() {
                    Some(key) => format!("set, {}", mask(&key)),
                    None => "not set".to_owned(),
                };
                print_line(&format!("api_key_env = {name:?}  # {state}"));
            }
            None => print_line("# no API key (none needed)"),
        }
        for (k, v) in &r.conf.headers {
            print_line(&format!("headers.{k} = {:?}", mask_header(k, v)));
        }
        print_line(&format!(
            "idle_timeout_secs = {}",
            r.conf.idle_timeout.as_secs()
        ));
        print_line(&format!(
            "connect_timeout_secs = {}",
            r.conf.connect_timeout.as_secs()
        ));
        print_line(&format!(
            "request_timeout_secs = {}",
            r.conf.request_timeout.as_secs()
        ));
    }
    print_line("");
    let source = match r.matched {
        Match::Exact => "the catalogue's entry",
        Match::OtherProvider => "the catalogue's entry of the same model under another provider",
        Match::ProviderDefault => "the provider's defaults",
        Match::Fallback => "unknown model: conservative defaults",
    };
    print_line(&format!("[catalog]  # {source}"));
    let e = &r.entry;
    print_line(&format!("name = {:?}", e.name));
    print_line(&format!("context_window = {}", e.context_window));
    let limit = if r.limit_known {
        ""
    } else {
        "  # not sent to the server"
    };
    print_line(&format!(
        "max_output_tokens = {}{limit}",
        e.max_output_tokens
    ));
    let input: Vec<String> = e
        .input
        .iter()
        .map(|m| serde_json::to_string(m).unwrap_or_default())
        .collect();
    print_line(&format!("input = [{}]", input.join(", ")));
    let levels: Vec<String> = e
        .thinking_levels
        .iter()
        .map(|l| format!("{:?}", l.as_str()))
        .collect();
    print_line(&format!("thinking_levels = [{}]", levels.join(", ")));
    print_line(&format!(
        "cost = {{ input = {}, output = {}, cache_read = {}, cache_write = {} }}  # USD per million tokens",
        e.cost.input, e.cost.output, e.cost.cache_read, e.cost.cache_write
    ));
    if let Some(w) = &r.warning {
        print_line(&format!("# {w}"));
    }
    print_line("");
    print_line("[retry]");
    print_line(&format!("enabled = {}", r.retry.enabled));
    print_line(&format!("max_retries = {}", r.retry.max_retries));
    print_line(&format!(
        "base_delay_ms = {}",
        r.retry.base_delay.as_millis()
    ));
    print_line(&format!("max_delay_ms = {}", r.retry.max_delay.as_millis()));
    print_line("");
    print_line("[compaction]");
    print_line(&format!("enabled = {}", r.compaction.enabled));
    print_line(&format!("reserve_tokens = {}", r.compaction.reserve_tokens));
    print_line(&format!(
        "keep_recent_tokens = {}",
        r.compaction.keep_recent_tokens
    ));
    print_line(&format!(
        "# compacts above {} of the model's {} tokens",
        r.compaction.threshold(r.entry.context_window),
        r.entry.context_window
    ));
    Ok(())
}
