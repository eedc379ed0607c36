//! The seam through which a sandbox confines the processes a tool starts.
//!
//! Owns [`SandboxSpec`] (the session's policy, what an approval added for
//! one call, and the workspace the policy's roots start from) and the
//! [`Confiner`] trait a sandbox implements: it prepares a command so that
//! the child confines itself between fork and exec. The process backends
//! call it; the tools never see it. It must not know how confinement works
//! (that is the `keel-sandbox` crate) nor anything about approvals.

use std::path::PathBuf;

use keel_protocol::{SandboxGrant, SandboxPolicy};

use crate::error::Result;

/// What one process runs under.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SandboxSpec {
    /// The session's policy.
    pub policy: SandboxPolicy,
    /// What a person's yes to this call added, for this call only.
    pub grant: SandboxGrant,
    /// The workspace root (writable under `workspace-write`).
    pub workspace: PathBuf,
}

impl SandboxSpec {
    /// The spec of `policy` in `workspace`, with nothing granted.
    pub fn new(policy: SandboxPolicy, workspace: impl Into<PathBuf>) -> Self {
        Self {
            policy,
            grant: SandboxGrant::default(),
            workspace: workspace.into(),
        }
    }

    /// Whether the process runs behind walls (not `danger-full-access`,
    /// by policy or by grant).
    pub fn confines(&self) -> bool {
        !self.policy.is_unconfined() && !self.grant.unconfined
    }

    /// Whether the process may open network sockets.
    pub fn network(&self) -> bool {
        !self.confines() || self.policy.network_access || self.grant.network
    }
}

/// Confines a process: called on the command before it is spawned.
pub trait Confiner: Send + Sync + std::fmt::Debug {
    /// Arranges for the child of `command` to run under `spec`. Fails
    /// (and the command must not run) when the spec cannot be enforced.
    fn confine(&self, command: &mut tokio::process::Command, spec: &SandboxSpec) -> Result<()>;
}
