//! Codex's sandbox policies onto keel's, and back.
//!
//! Owns the mapping between the wire's `SandboxMode`/`SandboxPolicy` (all
//! variants of the schema) and core's [`keel_protocol::SandboxPolicy`],
//! which the session enforces: `readOnly` and `workspaceWrite` keep their
//! meaning (writable roots, network access; the two temp-dir exclusions
//! both take keel's one temp dir out), `dangerFullAccess` has no walls,
//! and `externalSandbox` (the client confines keel itself) adds none
//! either. It must not know how the sandbox is enforced.

use std::path::PathBuf;

use keel_app_server_protocol::v2::{SandboxMode, SandboxPolicy};
use keel_protocol as kp;

/// keel's policy for a `thread/start` sandbox mode, over the server's
/// configured policy (its writable roots and network setting).
pub fn from_mode(mode: SandboxMode, configured: &kp::SandboxPolicy) -> kp::SandboxPolicy {
    kp::SandboxPolicy {
        mode: match mode {
            SandboxMode::ReadOnly => kp::SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite => kp::SandboxMode::WorkspaceWrite,
            SandboxMode::DangerFullAccess => kp::SandboxMode::DangerFullAccess,
        },
        ..configured.clone()
    }
}

/// keel's policy for a wire policy.
pub fn from_wire(policy: &SandboxPolicy) -> kp::SandboxPolicy {
    match policy {
        SandboxPolicy::DangerFullAccess | SandboxPolicy::ExternalSandbox { .. } => {
            kp::SandboxPolicy::of(kp::SandboxMode::DangerFullAccess)
        }
        SandboxPolicy::ReadOnly { network_access } => kp::SandboxPolicy {
            network_access: *network_access,
            ..kp::SandboxPolicy::of(kp::SandboxMode::ReadOnly)
        },
        SandboxPolicy::WorkspaceWrite {
            writable_roots,
            network_access,
            exclude_tmpdir_env_var,
            exclude_slash_tmp,
        } => kp::SandboxPolicy {
            mode: kp::SandboxMode::WorkspaceWrite,
            writable_roots: writable_roots.iter().map(PathBuf::from).collect(),
            network_access: *network_access,
            exclude_temp_dir: *exclude_tmpdir_env_var || *exclude_slash_tmp,
        },
    }
}

/// The wire's policy for keel's.
pub fn to_wire(policy: &kp::SandboxPolicy) -> SandboxPolicy {
    match policy.mode {
        kp::SandboxMode::DangerFullAccess => SandboxPolicy::DangerFullAccess,
        kp::SandboxMode::ReadOnly => SandboxPolicy::ReadOnly {
            network_access: policy.network_access,
        },
        kp::SandboxMode::WorkspaceWrite => SandboxPolicy::WorkspaceWrite {
            writable_roots: policy
                .writable_roots
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            network_access: policy.network_access,
            exclude_tmpdir_env_var: policy.exclude_temp_dir,
            exclude_slash_tmp: policy.exclude_temp_dir,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_wire_variant_maps_and_round_trips() {
        for v in [
            json!({"type": "dangerFullAccess"}),
            json!({"type": "readOnly", "networkAccess": true}),
            json!({"type": "workspaceWrite", "writableRoots": ["/srv"], "networkAccess": false,
                   "excludeTmpdirEnvVar": false, "excludeSlashTmp": false}),
        ] {
            let wire: SandboxPolicy = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(serde_json::to_value(to_wire(&from_wire(&wire))).unwrap(), v);
        }
        let ext: SandboxPolicy =
            serde_json::from_value(json!({"type": "externalSandbox", "networkAccess": "enabled"}))
                .unwrap();
        assert!(from_wire(&ext).is_unconfined());
        let ro = from_mode(SandboxMode::ReadOnly, &kp::SandboxPolicy::default());
        assert_eq!(ro.mode, kp::SandboxMode::ReadOnly);
    }
}
