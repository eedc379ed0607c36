//! The sandbox policy a session's commands run under, and what one approved
//! call adds to it.
//!
//! Pure data: [`SandboxMode`] (Codex's names: `read-only`,
//! `workspace-write`, `danger-full-access`), [`SandboxPolicy`] (the mode, the
//! extra writable roots, network on or off) and [`SandboxGrant`] (what a
//! person's yes to one call widens: network, some paths, or no walls).
//! Enforcing them is the `keel-sandbox` crate's business.
//!
//! Wire shape (`get_state.sandbox`, session config):
//! `{"mode":"workspace-write","writableRoots":["/abs"],"networkAccess":false}`.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// How far commands may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// Nothing may be written (but `/dev/null` and the like); no network
    /// unless the policy turns it on.
    ReadOnly,
    /// The workspace, the temp dir and the configured roots may be written
    /// (their `.git`, `.keel` and keel's home stay read-only); no network
    /// unless the policy turns it on. The default.
    #[default]
    WorkspaceWrite,
    /// No walls at all.
    DangerFullAccess,
}

impl SandboxMode {
    pub const ALL: [SandboxMode; 3] = [
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::DangerFullAccess,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::DangerFullAccess => "danger-full-access",
        }
    }

    /// Parses Codex's names (`_` accepted for `-`).
    pub fn parse(text: &str) -> Option<SandboxMode> {
        match text.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "read-only" => Some(SandboxMode::ReadOnly),
            "workspace-write" => Some(SandboxMode::WorkspaceWrite),
            "danger-full-access" => Some(SandboxMode::DangerFullAccess),
            _ => None,
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The policy in force for a session's commands.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxPolicy {
    pub mode: SandboxMode,
    /// Writable beside the workspace and the temp dir (`workspace-write`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable_roots: Vec<PathBuf>,
    /// Commands may open network sockets.
    #[serde(default)]
    pub network_access: bool,
    /// The temp dir is not writable (`workspace-write`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exclude_temp_dir: bool,
}

impl SandboxPolicy {
    /// The policy of `mode` with no extra roots and no network.
    pub fn of(mode: SandboxMode) -> Self {
        Self {
            mode,
            writable_roots: Vec::new(),
            network_access: false,
            exclude_temp_dir: false,
        }
    }

    /// Whether commands run with no walls.
    pub fn is_unconfined(&self) -> bool {
        self.mode == SandboxMode::DangerFullAccess
    }
}

/// What a person's yes to one call adds to the policy, for that call only.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxGrant {
    /// Network sockets are allowed (an approved `send`).
    #[serde(default)]
    pub network: bool,
    /// These paths become writable (an approved write outside the roots).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub writable: Vec<PathBuf>,
    /// No walls (a decision that said `danger-full-access`).
    #[serde(default)]
    pub unconfined: bool,
}

impl SandboxGrant {
    /// Adds what `other` grants (paths once each).
    pub fn widen(&mut self, other: SandboxGrant) {
        self.network |= other.network;
        self.unconfined |= other.unconfined;
        for p in other.writable {
            if !self.writable.contains(&p) {
                self.writable.push(p);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.network && self.writable.is_empty() && !self.unconfined
    }

    /// What the grant adds, in words (`"network access"`, `"writing /x"`).
    pub fn describe(&self) -> String {
        if self.unconfined {
            return "no sandbox (danger-full-access)".to_owned();
        }
        let mut parts = Vec::new();
        if self.network {
            parts.push("network access".to_owned());
        }
        for p in &self.writable {
            parts.push(format!("writing {}", p.display()));
        }
        if parts.is_empty() {
            "nothing".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_wire_shape_and_mode_names() {
        let p = SandboxPolicy::default();
        assert_eq!(
            serde_json::to_value(&p).unwrap(),
            serde_json::json!({"mode": "workspace-write", "networkAccess": false})
        );
        for m in SandboxMode::ALL {
            assert_eq!(SandboxMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(
            SandboxMode::parse("Danger_Full_Access"),
            Some(SandboxMode::DangerFullAccess)
        );
        assert_eq!(SandboxMode::parse("open"), None);
    }

    #[test]
    fn grants_say_what_they_add() {
        assert!(SandboxGrant::default().is_empty());
        let g = SandboxGrant {
            network: true,
            writable: vec![PathBuf::from("/x")],
            unconfined: false,
        };
        assert_eq!(g.describe(), "network access, writing /x");
        let mut w = g.clone();
        w.widen(SandboxGrant {
            writable: vec![PathBuf::from("/x"), PathBuf::from("/y")],
            unconfined: true,
            ..SandboxGrant::default()
        });
        assert_eq!(w.writable, vec![PathBuf::from("/x"), PathBuf::from("/y")]);
        assert!(w.network && w.unconfined);
    }
}
