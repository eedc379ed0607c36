//! `[sandbox]` of `config.toml` and `--sandbox`: what commands may touch.
//!
//! ```toml
//! [sandbox]
//! mode = "workspace-write"     # read-only | workspace-write | danger-full-access
//! writable_roots = ["/srv/cache"]  # writable beside the workspace and the temp dir
//! network_access = false       # commands may open network sockets
//! allow_unconfined = false     # on a kernel that cannot confine: run anyway (default: refuse)
//! ```
//!
//! This module owns the section's shape and how it and the `--sandbox`
//! flag become the policy sessions get (the flag wins over the file). It
//! must not know how the sandbox is enforced.

use std::path::PathBuf;

use anyhow::bail;
use keel_protocol::{SandboxMode, SandboxPolicy};
use serde::Deserialize;

/// `[sandbox]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSection {
    pub mode: Option<String>,
    #[serde(default)]
    pub writable_roots: Vec<PathBuf>,
    pub network_access: Option<bool>,
    pub allow_unconfined: Option<bool>,
}

/// The policy and what to do where the kernel cannot enforce it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SandboxSettings {
    pub policy: SandboxPolicy,
    pub allow_unconfined: bool,
}

/// Parses a mode named on the command line or in the file.
pub fn parse_mode(text: &str) -> anyhow::Result<SandboxMode> {
    match SandboxMode::parse(text) {
        Some(m) => Ok(m),
        None => bail!(
            "unknown sandbox mode {text:?}: use read-only, workspace-write or danger-full-access"
        ),
    }
}

impl SandboxSection {
    /// The settings sessions get; `flag` (`--sandbox`) overrides `mode`.
    pub fn settings(&self, flag: Option<&str>) -> anyhow::Result<SandboxSettings> {
        let mode = match flag.or(self.mode.as_deref()) {
            Some(text) => parse_mode(text)?,
            None => SandboxMode::default(),
        };
        for root in &self.writable_roots {
            if !root.is_absolute() {
                bail!(
                    "[sandbox] writable_roots: {} is not an absolute path",
                    root.display()
                );
            }
        }
        Ok(SandboxSettings {
            policy: SandboxPolicy {
                mode,
                writable_roots: self.writable_roots.clone(),
                network_access: self.network_access.unwrap_or(false),
                exclude_temp_dir: false,
            },
            allow_unconfined: self.allow_unconfined.unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_and_the_default_is_workspace_write_without_network() {
        let d = SandboxSection::default().settings(None).unwrap();
        assert_eq!(d.policy, SandboxPolicy::default());
        assert!(!d.allow_unconfined);
        let file: SandboxSection = toml::from_str(
            "mode = \"read-only\"\nwritable_roots = [\"/srv\"]\nnetwork_access = true",
        )
        .unwrap();
        let s = file.settings(None).unwrap();
        assert_eq!(s.policy.mode, SandboxMode::ReadOnly);
        assert!(s.policy.network_access);
        let s = file.settings(Some("danger-full-access")).unwrap();
        assert_eq!(s.policy.mode, SandboxMode::DangerFullAccess);
        assert!(file.settings(Some("open")).is_err());
        let rel: SandboxSection = toml::from_str("writable_roots = [\"rel\"]").unwrap();
        assert!(rel.settings(None).is_err());
    }
}
