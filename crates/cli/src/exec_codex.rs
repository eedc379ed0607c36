//! `keel exec --experimental-json`: `keel exec` as `codex exec` answers
//! `@openai/codex-sdk` (its `codexPathOverride`).
//!
//! Owns the Codex options keel takes beside its own (`--config key=value`
//! overrides, `--output-schema`, `--image`, `--add-dir`, `resume <id>`,
//! and the ones accepted and ignored), what they map to in keel's terms
//! ([`apply`]), and the JSON lines ([`stream`]). The run itself is an
//! ordinary `keel exec` run in an ordinary session: the thread id is the
//! session id. It must not know how the run is driven (`crate::exec`).
//!
//! Mapping (each override keel does not know is one warning line):
//! - `openai_base_url` → `--base-url` with provider `openai` (the Responses
//!   API, as Codex), unless `--provider` says otherwise; `CODEX_API_KEY`
//!   (the SDK's `apiKey`) is the key when set;
//! - `model` → `--model`; `model_reasoning_effort` → `--thinking`
//!   (`none` → off; `max`/`ultra`/`persistent` → `xhigh`);
//! - `approval_policy` → `--approval-mode`: `never` → `money_only`,
//!   `untrusted` → `everything`, `on-request`/`on-failure` → `outside`
//!   (keel's gate still holds money and deletes: unattended, those become
//!   drafts the model is told of);
//! - `sandbox_mode` → `--sandbox`; `sandbox_workspace_write.network_access`
//!   → the sandbox's network; `--add-dir` → a writable root;
//! - `web_search = "disabled"` is what keel does anyway; other values warn.

pub mod stream;

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use base64::Engine;
use clap::{Args, Subcommand};
use keel_protocol::ImageContent;
use serde_json::Value;

use crate::approvals::ApprovalModeArg;
use crate::exec::ExecArgs;

// The Codex options of `keel exec`. (A plain comment: see `Command` in
// main.rs.)
#[derive(Debug, Args, Default, Clone)]
pub struct CodexArgs {
    /// Write Codex's `exec` JSON lines on stdout (`thread.started`,
    /// `turn.*`, `item.*`), as `codex exec --experimental-json` does, for
    /// hosts built on `@openai/codex-sdk`.
    #[arg(long, global = true)]
    pub experimental_json: bool,
    /// A Codex configuration override, `key=value` with a TOML value
    /// (with --experimental-json; see docs/clients.md for those keel maps).
    #[arg(long = "config", value_name = "KEY=VALUE", global = true)]
    pub config: Vec<String>,
    /// A JSON Schema file the final answer must follow (structured output).
    #[arg(long, value_name = "FILE", global = true)]
    pub output_schema: Option<PathBuf>,
    /// An image to send with the prompt (repeatable).
    #[arg(long = "image", short = 'i', value_name = "FILE", global = true)]
    pub images: Vec<PathBuf>,
    /// Another directory commands may write to (a sandbox writable root).
    #[arg(long = "add-dir", value_name = "DIR", global = true)]
    pub add_dirs: Vec<PathBuf>,
    /// Accepted for Codex's sake: keel does not need a git repository.
    #[arg(long, global = true, hide = true)]
    pub skip_git_repo_check: bool,
    /// Accepted for Codex's sake, and ignored.
    #[arg(long, global = true, hide = true)]
    pub thread_source: Option<String>,
    /// Accepted for Codex's sake, and ignored.
    #[arg(long, global = true, hide = true)]
    pub cyber_access_program: Option<String>,
}

// `keel exec resume <id>`: as `codex exec resume`. (A plain comment: a doc
// comment here would become `keel exec`'s about, see `Command` in main.rs.)
#[derive(Debug, Subcommand, Clone)]
pub enum ExecCommand {
    /// Resume the session (thread) `id`, then run the prompt.
    Resume {
        id: String,
        /// The prompt (default: stdin).
        prompt: Option<String>,
    },
}

/// What the Codex options ask beyond keel's flags.
#[derive(Debug, Default)]
pub struct CodexRun {
    pub output_schema: Option<Value>,
    pub images: Vec<ImageContent>,
    /// Sandbox network access asked for (`None`: as configured).
    pub network_access: Option<bool>,
    pub writable_roots: Vec<PathBuf>,
}

/// Maps the Codex options of `args` onto keel's (see the module docs);
/// returns what is left to apply, and warns of what is ignored through
/// `warn`.
pub fn apply(args: &mut ExecArgs, warn: &mut dyn FnMut(&str)) -> anyhow::Result<CodexRun> {
    let mut run = CodexRun::default();
    if let Some(ExecCommand::Resume { id, prompt }) = args.resume.take() {
        args.session = Some(id);
        if prompt.is_some() {
            args.prompt = prompt;
        }
    }
    for raw in std::mem::take(&mut args.codex.config) {
        let Some((key, value)) = raw.split_once('=') else {
            bail!("--config {raw}: expected key=value");
        };
        let (key, value) = (key.trim(), toml_value(value.trim()));
        let text = value.as_str().map(str::to_owned);
        match (key, text) {
            ("openai_base_url", Some(url)) => {
                args.model.base_url = Some(url);
                if args.model.provider.is_none() {
                    args.model.provider = Some("openai".to_owned());
                }
            }
            ("model", Some(model)) => {
                args.model.model.get_or_insert(model);
            }
            ("model_reasoning_effort", Some(effort)) => {
                let level = match effort.as_str() {
                    "none" => "off",
                    "max" | "ultra" | "persistent" => {
                        warn(&format!(
                            "model_reasoning_effort {effort:?} is xhigh in keel"
                        ));
                        "xhigh"
                    }
                    other => other,
                };
                args.model.thinking = Some(level.to_owned());
            }
            ("approval_policy", Some(policy)) => {
                args.approval_mode = Some(match policy.as_str() {
                    "never" => ApprovalModeArg::MoneyOnly,
                    "untrusted" => ApprovalModeArg::Everything,
                    "on-request" | "on-failure" => ApprovalModeArg::Outside,
                    other => bail!(
                        "approval_policy {other:?}: use never, on-request, on-failure or untrusted"
                    ),
                });
            }
            ("sandbox_mode", Some(mode)) => {
                args.sandbox.get_or_insert(mode);
            }
            ("sandbox_workspace_write.network_access", _) => match value.as_bool() {
                Some(on) => run.network_access = Some(on),
                None => bail!("sandbox_workspace_write.network_access: expected true or false"),
            },
            ("web_search", Some(mode)) if mode == "disabled" => {}
            (key, _) => warn(&format!("--config {key} is not used by keel; ignored")),
        }
    }
    if args.model.base_url.is_some()
        && args.model.api_key_env.is_none()
        && std::env::var_os("CODEX_API_KEY").is_some()
    {
        args.model.api_key_env = Some("CODEX_API_KEY".to_owned());
    }
    if let Some(program) = &args.codex.cyber_access_program {
        warn(&format!(
            "--cyber-access-program {program} is not used by keel; ignored"
        ));
    }
    if let Some(path) = &args.codex.output_schema {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the output schema {}", path.display()))?;
        let schema: Value = serde_json::from_str(&text)
            .with_context(|| format!("the output schema {} is not JSON", path.display()))?;
        if !schema.is_object() {
            bail!("the output schema {} must be a JSON object", path.display());
        }
        run.output_schema = Some(schema);
    }
    for path in &args.codex.images {
        run.images.push(image(path)?);
    }
    for dir in &args.codex.add_dirs {
        run.writable_roots.push(
            std::path::absolute(dir).with_context(|| format!("--add-dir {}", dir.display()))?,
        );
    }
    Ok(run)
}

/// A TOML value as Codex reads `--config` values: a bare word that is not
/// TOML is a string.
fn toml_value(text: &str) -> Value {
    match format!("v = {text}").parse::<toml::Table>() {
        Ok(mut table) => table
            .remove("v")
            .and_then(|v| serde_json::to_value(v).ok())
            .unwrap_or(Value::Null),
        Err(_) => Value::String(text.to_owned()),
    }
}

fn image(path: &Path) -> anyhow::Result<ImageContent> {
    let bytes =
        std::fs::read(path).with_context(|| format!("cannot read the image {}", path.display()))?;
    Ok(ImageContent {
        kind: "image".to_owned(),
        data: base64::engine::general_purpose::STANDARD.encode(bytes),
        mime_type: keel_app_server::handlers::turn::mime_of(path).to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_values_are_toml_or_bare_strings() {
        assert_eq!(
            toml_value("\"http://x/v1\""),
            Value::String("http://x/v1".into())
        );
        assert_eq!(toml_value("true"), Value::Bool(true));
        assert_eq!(toml_value("high"), Value::String("high".into()));
    }
}
