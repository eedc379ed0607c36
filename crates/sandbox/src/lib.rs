//! Linux confinement of the processes keel's tools start.
//!
//! This crate owns the walls a command runs behind: what a
//! [`SandboxSpec`] means on this machine ([`plan`]: writable roots, the
//! `.git`/`.keel`/keel-home folders kept read-only inside them, network on
//! or off, keel's secret folders hidden), building them (Landlock for the
//! file system, seccomp for network system calls, a private mount
//! namespace for the read-only and hidden folders, `PR_SET_NO_NEW_PRIVS`) and applying them in the child between
//! fork and exec, so keel itself is never confined. [`Sandbox`] plugs in as
//! the [`Confiner`] of the `tools` process backends; [`probe`] says what
//! the kernel supports; [`refusal`] tells a command the sandbox stopped
//! from one that failed on its own. It fails closed: a policy that cannot
//! be enforced is an error, unless the configuration allows running
//! unconfined. It must not know approvals, the wire or sessions.

mod denial;
mod error;
#[cfg(target_os = "linux")]
mod linux;
mod plan;
mod probe;

use std::path::{Path, PathBuf};

use keel_tools::{Confiner, SandboxSpec};

pub use denial::{Refusal, refusal};
pub use error::{Error, Result};
pub use plan::{PROTECTED_NAMES, Plan, WRITABLE_DEVICES, may_write, plan};
pub use probe::{MIN_LANDLOCK_ABI, Support, probe};

/// The sandbox of one keel process: what stays protected beyond the
/// workspace's own `.git` and `.keel` (keel's home), and whether a kernel
/// that cannot confine may run commands unconfined.
#[derive(Debug, Clone)]
pub struct Sandbox {
    protected: Vec<PathBuf>,
    allow_unconfined: bool,
    temp_dir: PathBuf,
}

impl Sandbox {
    /// A sandbox that keeps `protected` (keel's home) read-only and fails
    /// closed.
    pub fn new(protected: Vec<PathBuf>) -> Self {
        Self {
            protected,
            allow_unconfined: false,
            temp_dir: std::env::temp_dir(),
        }
    }

    /// Lets commands run unconfined (with a warning in the log) where the
    /// kernel cannot confine them, instead of refusing to run them.
    pub fn allow_unconfined(mut self, allow: bool) -> Self {
        self.allow_unconfined = allow;
        self
    }

    /// Uses `dir` as the temp dir writable under `workspace-write`
    /// (default: the system's, `$TMPDIR` or `/tmp`).
    pub fn with_temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = dir.into();
        self
    }

    /// The temp dir writable under `workspace-write`.
    pub fn temp_dir(&self) -> &Path {
        &self.temp_dir
    }

    /// The walls of `spec` here.
    pub fn plan(&self, spec: &SandboxSpec) -> Plan {
        plan(spec, &self.temp_dir, &self.protected)
    }

    /// Whether keel may write the file `path` itself for a call under
    /// `spec` (the built-in `write` and `edit`).
    pub fn may_write(&self, spec: &SandboxSpec, path: &Path) -> bool {
        may_write(spec, path, &self.temp_dir, &self.protected)
    }

    /// Builds the walls of `spec` for `command`, or says why it cannot.
    pub fn prepare(&self, command: &mut tokio::process::Command, spec: &SandboxSpec) -> Result<()> {
        self.prepare_on(command, spec, probe())
    }

    /// [`Self::prepare`] on a kernel that supports `support`.
    fn prepare_on(
        &self,
        command: &mut tokio::process::Command,
        spec: &SandboxSpec,
        support: Support,
    ) -> Result<()> {
        if !spec.confines() {
            return Ok(());
        }
        if let Some(missing) = support.missing() {
            return self.unconfined(format!(
                "this kernel cannot confine commands: missing {missing}"
            ));
        }
        create_granted_files(spec);
        let mut plan = self.plan(spec);
        if !plan.read_only.is_empty() && !support.mount_namespace {
            let list: Vec<String> = plan
                .read_only
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            if !self.allow_unconfined {
                return Err(Error::Unsupported(format!(
                    "cannot keep {} read-only: this kernel lets no process make a mount \
                     namespace (user namespaces are off)",
                    list.join(", ")
                )));
            }
            tracing::warn!(folders = %list.join(", "), "no mount namespace: these stay writable");
            plan.read_only.clear();
        }
        if !plan.hidden.is_empty() && !support.mount_namespace {
            let list: Vec<String> = plan
                .hidden
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            if !self.allow_unconfined {
                return Err(Error::Unsupported(format!(
                    "cannot hide {} (keel's secrets) from commands: this kernel lets no process \
                     make a mount namespace (user namespaces are off)",
                    list.join(", ")
                )));
            }
            tracing::warn!(folders = %list.join(", "), "no mount namespace: commands can read these");
            plan.hidden.clear();
        }
        self.install(command, &plan, support)
    }

    #[cfg(target_os = "linux")]
    fn install(
        &self,
        command: &mut tokio::process::Command,
        plan: &Plan,
        support: Support,
    ) -> Result<()> {
        let abi = support.landlock_abi.unwrap_or(0);
        let here = std::env::current_dir()
            .map_err(|e| Error::Setup(format!("cannot read the current folder: {e}")))?;
        let cwd = match command.as_std().get_current_dir() {
            Some(dir) => here.join(dir),
            None => here,
        };
        let prepared = linux::prepare(plan, abi, support.mount_namespace, &cwd)?;
        linux::install(command, prepared);
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    fn install(&self, _: &mut tokio::process::Command, _: &Plan, _: Support) -> Result<()> {
        self.unconfined("the sandbox is only built on Linux".to_owned())
    }

    fn unconfined(&self, why: String) -> Result<()> {
        if self.allow_unconfined {
            tracing::warn!(reason = %why, "running a command unconfined ([sandbox] allow_unconfined)");
            Ok(())
        } else {
            Err(Error::Unsupported(format!(
                "{why}. Run with --sandbox danger-full-access, or set `allow_unconfined = true` \
                 under [sandbox] in config.toml, to run commands without walls"
            )))
        }
    }
}

impl Confiner for Sandbox {
    fn confine(
        &self,
        command: &mut tokio::process::Command,
        spec: &SandboxSpec,
    ) -> keel_tools::Result<()> {
        self.prepare(command, spec)
            .map_err(|e| keel_tools::Error::Sandbox(e.to_string()))
    }
}

/// A granted path that does not exist yet is created empty, so the grant
/// covers that one file and not its whole folder.
fn create_granted_files(spec: &SandboxSpec) {
    for p in &spec.grant.writable {
        if !p.exists()
            && p.parent().is_some_and(Path::is_dir)
            && let Err(e) = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p)
        {
            tracing::debug!(path = %p.display(), error = %e, "cannot create a granted file");
        }
    }
}

/// What `keel sandbox check` prints: one line per capability.
pub fn report() -> Vec<(String, bool)> {
    let s = probe();
    vec![
        (
            match s.landlock_abi {
                Some(v) => format!(
                    "Landlock ABI {v} (needs {MIN_LANDLOCK_ABI} or later, or 1 with mount namespaces)"
                ),
                None => "Landlock: not available".to_owned(),
            },
            s.landlock_abi.is_some_and(|v| {
                v >= MIN_LANDLOCK_ABI
                    || (s.mount_namespace && v >= probe::MIN_LANDLOCK_ABI_WITH_MOUNTS)
            }),
        ),
        (
            format!(
                "seccomp filters: {}",
                if s.seccomp {
                    "available"
                } else {
                    "not available"
                }
            ),
            s.seccomp,
        ),
        (
            format!(
                "mount namespaces (read-only .git/.keel inside writable roots): {}",
                if s.mount_namespace {
                    "available"
                } else {
                    "not available"
                }
            ),
            s.mount_namespace,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::{SandboxMode, SandboxPolicy};

    const NOTHING: Support = Support {
        landlock_abi: None,
        seccomp: false,
        mount_namespace: false,
    };

    #[test]
    fn a_kernel_that_cannot_confine_refuses_unless_allowed() {
        let dir = tempfile::tempdir().unwrap();
        let spec = SandboxSpec::new(SandboxPolicy::of(SandboxMode::WorkspaceWrite), dir.path());
        let mut cmd = tokio::process::Command::new("true");
        let err = Sandbox::new(Vec::new())
            .prepare_on(&mut cmd, &spec, NOTHING)
            .unwrap_err()
            .to_string();
        assert!(err.contains("missing Landlock"), "{err}");
        assert!(err.contains("allow_unconfined"), "{err}");
        let allowed = Sandbox::new(Vec::new()).allow_unconfined(true);
        assert!(allowed.prepare_on(&mut cmd, &spec, NOTHING).is_ok());
        // No walls asked for: nothing to enforce, nothing refused.
        let full = SandboxSpec::new(SandboxPolicy::of(SandboxMode::DangerFullAccess), dir.path());
        assert!(
            Sandbox::new(Vec::new())
                .prepare_on(&mut cmd, &full, NOTHING)
                .is_ok()
        );
    }

    #[test]
    fn protected_folders_without_a_mount_namespace_refuse() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        let spec = SandboxSpec::new(SandboxPolicy::of(SandboxMode::WorkspaceWrite), dir.path());
        let no_ns = Support {
            landlock_abi: Some(7),
            seccomp: true,
            mount_namespace: false,
        };
        let mut cmd = tokio::process::Command::new("true");
        let err = Sandbox::new(Vec::new())
            .prepare_on(&mut cmd, &spec, no_ns)
            .unwrap_err()
            .to_string();
        assert!(err.contains(".git") && err.contains("read-only"), "{err}");
    }
}
