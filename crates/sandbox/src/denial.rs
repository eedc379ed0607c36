//! Telling a command the sandbox stopped from one that failed on its own.
//!
//! Owns [`refusal`]: from a failed command's output and the plan it ran
//! under, what the sandbox most likely refused — network access (when the
//! network was off and the output shows a refused socket, connection or
//! name lookup) and the paths a write was refused on that lie outside the
//! writable roots or in a protected folder. A denial on a path the plan
//! allowed is the file system's own answer, not the sandbox's. The kernel
//! does not say why a call failed, so this reads the messages programs
//! print (the same approach Codex takes); it errs towards silence. It must
//! not know approvals.

use std::path::{Path, PathBuf};

use keel_protocol::SandboxGrant;

use crate::plan::{Plan, real_or_parent};

/// What errors look like when a permission was refused.
const DENIED: &[&str] = &[
    "permission denied",
    "operation not permitted",
    "read-only file system",
    "eacces",
    "eperm",
    "erofs",
];

/// Words that tie a refusal to the network.
const NETWORK_WORDS: &[&str] = &[
    "socket", "connect", "network", "/dev/tcp", "/dev/udp", "urlopen", "http", "curl", "wget",
];

/// Words that stand before `: Permission denied` without being a path
/// (the system call or the program that failed).
const NOT_PATHS: &[&str] = &[
    "connect",
    "socket",
    "bind",
    "listen",
    "sendto",
    "sendmsg",
    "open",
    "openat",
    "write",
    "read",
    "mount",
    "umount",
    "unshare",
    "chroot",
    "ptrace",
    "kill",
    "ioctl",
    "exec",
    "execve",
    "setns",
    "fork",
    "clone",
    "io_uring_setup",
];

/// Failed name lookups (their sockets were refused).
const LOOKUP_FAILED: &[&str] = &[
    "temporary failure in name resolution",
    "could not resolve host",
    "name or service not known",
    "failed to resolve",
];

/// What the sandbox refused a command.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Refusal {
    /// A network socket or connection.
    pub network: bool,
    /// Writes outside the writable roots (or into a protected folder).
    pub paths: Vec<PathBuf>,
}

impl Refusal {
    /// The grant that would let the command through.
    pub fn grant(&self) -> SandboxGrant {
        SandboxGrant {
            network: self.network,
            writable: self.paths.clone(),
            unconfined: false,
        }
    }

    /// What was refused, in words.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if self.network {
            parts.push("network access (the network is off)".to_owned());
        }
        for p in &self.paths {
            parts.push(format!(
                "writing {} (outside the writable roots, or read-only)",
                p.display()
            ));
        }
        parts.join("; ")
    }
}

/// What the sandbox refused a command that printed `output` while running
/// in `cwd` under `plan`; `None` when nothing points at the sandbox.
pub fn refusal(output: &str, cwd: &Path, plan: &Plan) -> Option<Refusal> {
    let lower = output.to_lowercase();
    let denied = DENIED.iter().any(|d| lower.contains(d));
    let mut found = Refusal::default();
    if !plan.network {
        let lookup = LOOKUP_FAILED.iter().any(|w| lower.contains(w));
        let net_denied = denied && NETWORK_WORDS.iter().any(|w| lower.contains(w));
        found.network = lookup || net_denied;
    }
    if denied {
        for line in output.lines() {
            let l = line.to_lowercase();
            if !DENIED.iter().any(|d| l.contains(d)) {
                continue;
            }
            for candidate in path_candidates(line) {
                if candidate.starts_with("/dev/tcp") || candidate.starts_with("/dev/udp") {
                    continue;
                }
                let full = cwd.join(&candidate);
                let Some(real) = real_or_parent(&full) else {
                    continue;
                };
                let writable = plan.writable.iter().any(|r| real.starts_with(r));
                let protected = plan.read_only.iter().find(|r| real.starts_with(r));
                let refused = match protected {
                    Some(folder) => Some(folder.clone()),
                    None => (!writable).then_some(real),
                };
                if let Some(p) = refused
                    && !found.paths.contains(&p)
                {
                    found.paths.push(p);
                }
            }
        }
    }
    (found.network || !found.paths.is_empty()).then_some(found)
}

/// Words of `line` that look like paths: quoted text, words with a `/`,
/// and the field before the error in `prog: PATH: Permission denied`.
fn path_candidates(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let lower = line.to_lowercase();
    if let Some(at) = DENIED.iter().filter_map(|d| lower.find(d)).min()
        && let Some(before) = line.get(..at)
        && let Some(field) = before.trim_end().strip_suffix(':')
    {
        let field = field.rsplit(": ").next().unwrap_or(field).trim();
        if !field.is_empty() && !field.contains(' ') && !NOT_PATHS.contains(&field) {
            out.push(field.to_owned());
        }
    }
    let quotes = [('\'', '\''), ('"', '"'), ('‘', '’'), ('`', '\'')];
    for (open, close) in quotes {
        let mut rest = line;
        while let Some(start) = rest.find(open) {
            let after = &rest[start + open.len_utf8()..];
            let Some(end) = after.find(close) else {
                break;
            };
            let inner = &after[..end];
            if !inner.is_empty() && !inner.contains(' ') {
                out.push(inner.to_owned());
            }
            rest = &after[end + close.len_utf8()..];
        }
    }
    for word in line.split_whitespace() {
        let w = word.trim_matches(|c: char| {
            matches!(
                c,
                ':' | ',' | ';' | '\'' | '"' | '‘' | '’' | '`' | '(' | ')'
            )
        });
        if w.contains('/') && !w.contains("://") && !out.iter().any(|o| o == w) {
            out.push(w.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(ws: &Path) -> Plan {
        Plan {
            writable: vec![ws.to_path_buf()],
            read_only: vec![ws.join(".git")],
            hidden: Vec::new(),
            network: false,
        }
    }

    #[test]
    fn a_refused_write_outside_names_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        let r = refusal(
            "touch: cannot touch '/etc/keel-test': Permission denied\n",
            &ws,
            &plan(&ws),
        )
        .unwrap();
        assert_eq!(r.paths, vec![PathBuf::from("/etc/keel-test")]);
        assert!(!r.network);
        let r = refusal(
            "bash: line 1: /etc/x.txt: Permission denied",
            &ws,
            &plan(&ws),
        )
        .unwrap();
        assert_eq!(r.paths, vec![PathBuf::from("/etc/x.txt")]);
        // A relative path, under a read-only policy.
        let ro = Plan::default();
        let r = refusal("bash: line 1: a.txt: Read-only file system", &ws, &ro).unwrap();
        assert_eq!(r.paths, vec![ws.join("a.txt")]);
    }

    #[test]
    fn a_write_into_git_names_the_protected_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join(".git")).unwrap();
        let r = refusal(
            "touch: cannot touch '.git/hooks-x': Read-only file system",
            &ws,
            &plan(&ws),
        )
        .unwrap();
        assert_eq!(r.paths, vec![ws.join(".git")]);
    }

    #[test]
    fn network_refusals_and_lookups_are_the_network() {
        let ws = Path::new("/");
        let p = Plan::default();
        for out in [
            "bash: connect: Operation not permitted\nbash: /dev/tcp/127.0.0.1/80: Operation not permitted",
            "PermissionError: [Errno 1] Operation not permitted\n  in socket.create_connection",
            "curl: (6) Could not resolve host: example.com",
        ] {
            let r = refusal(out, ws, &p).unwrap_or_else(|| panic!("{out}"));
            assert!(r.network, "{out}");
            assert!(r.paths.is_empty(), "{out}: {r:?}");
        }
        let on = Plan {
            network: true,
            ..Plan::default()
        };
        assert_eq!(
            refusal("bash: connect: Operation not permitted", ws, &on),
            None
        );
    }

    #[test]
    fn failures_that_are_not_the_sandbox_stay_silent() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().canonicalize().unwrap();
        assert_eq!(refusal("error: test failed", &ws, &plan(&ws)), None);
        // Denied inside the writable root: the file system's own answer.
        let inside = format!("cat: {}/secret: Permission denied", ws.display());
        assert_eq!(refusal(&inside, &ws, &plan(&ws)), None);
    }
}
