//! The `[shell_environment_policy]` section of `config.toml`: what the
//! environment of a command keel runs holds beyond the default (keel's own
//! environment less anything that looks like a secret; see
//! `keel_tools::child_env`).
//!
//! ```toml
//! [shell_environment_policy]
//! exclude = ["AWS_*", "HISTFILE"]   # also dropped (`*` any run, any case)
//! include = ["GITHUB_TOKEN"]        # passed even though it looks secret
//! set = { CI = "1" }                # set for every command
//! ```

use std::collections::BTreeMap;

use keel_tools::EnvPolicy;
use serde::Deserialize;

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellEnvSection {
    #[serde(default)]
    pub exclude: Vec<String>,
    #[serde(default)]
    pub include: Vec<String>,
    #[serde(default)]
    pub set: BTreeMap<String, String>,
}

impl ShellEnvSection {
    pub fn policy(&self) -> EnvPolicy {
        EnvPolicy {
            keep_secrets: false,
            exclude: self.exclude.clone(),
            include: self.include.clone(),
            set: self.set.clone(),
        }
    }
}
