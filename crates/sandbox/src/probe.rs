//! What this kernel can enforce.
//!
//! Owns [`Support`] and [`probe`]: the Landlock ABI version, whether seccomp
//! filters can be installed, and whether a mount namespace can be made (how
//! `.git` and friends become read-only inside a writable root). Probed
//! once per process, without confining keel itself: the checks that need a
//! confined process run in a short-lived child. It must not know policies.

use std::sync::OnceLock;

/// The lowest Landlock ABI keel confines with on its own (kernel 6.2:
/// truncation is covered, renames and links across folders are checked).
pub const MIN_LANDLOCK_ABI: i32 = 3;
/// The lowest Landlock ABI keel confines with when it can also make a
/// mount namespace (kernel 5.13): the read-only mounts refuse what ABI 1
/// does not cover (truncating, and metadata, outside the writable roots).
pub const MIN_LANDLOCK_ABI_WITH_MOUNTS: i32 = 1;

/// What the kernel supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// Landlock's ABI version (`None`: not available).
    pub landlock_abi: Option<i32>,
    /// seccomp filters can be installed.
    pub seccomp: bool,
    /// A process can get its own mount namespace (directly, or in a user
    /// namespace).
    pub mount_namespace: bool,
}

impl Support {
    /// What is missing to confine a command, in words; `None` when nothing.
    pub fn missing(&self) -> Option<String> {
        let mut missing = Vec::new();
        match self.landlock_abi {
            None => missing.push(
                "Landlock (Linux 6.2 or later with CONFIG_SECURITY_LANDLOCK and `landlock` \
                 in the `lsm=` list)"
                    .to_owned(),
            ),
            Some(v) if v < MIN_LANDLOCK_ABI && !self.mount_namespace => missing.push(format!(
                "Landlock ABI {MIN_LANDLOCK_ABI} or later, or mount namespaces (this kernel \
                 has ABI {v} and lets no process make a mount namespace)"
            )),
            Some(v) if v < MIN_LANDLOCK_ABI_WITH_MOUNTS => {
                missing.push(format!("Landlock (this kernel reports ABI {v})"))
            }
            Some(_) => {}
        }
        if !self.seccomp {
            missing.push("seccomp filters (CONFIG_SECCOMP_FILTER)".to_owned());
        }
        (!missing.is_empty()).then(|| missing.join("; "))
    }
}

/// What this kernel supports (probed once).
pub fn probe() -> Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    *SUPPORT.get_or_init(probe_now)
}

#[cfg(target_os = "linux")]
fn probe_now() -> Support {
    Support {
        landlock_abi: crate::linux::landlock_abi(),
        seccomp: crate::linux::seccomp_available(),
        mount_namespace: crate::linux::mount_namespace_available(),
    }
}

#[cfg(not(target_os = "linux"))]
fn probe_now() -> Support {
    Support {
        landlock_abi: None,
        seccomp: false,
        mount_namespace: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_names_what_is_missing() {
        let none = Support {
            landlock_abi: None,
            seccomp: false,
            mount_namespace: false,
        };
        let m = none.missing().unwrap();
        assert!(m.contains("Landlock") && m.contains("seccomp"), "{m}");
        let old = Support {
            landlock_abi: Some(1),
            seccomp: true,
            mount_namespace: false,
        };
        assert!(old.missing().unwrap().contains("ABI 3"));
        // ABI 1 is enough when the read-only mounts cover the rest.
        let with_mounts = Support {
            mount_namespace: true,
            ..old
        };
        assert_eq!(with_mounts.missing(), None);
        let ok = Support {
            landlock_abi: Some(7),
            ..with_mounts
        };
        assert_eq!(ok.missing(), None);
    }
}
