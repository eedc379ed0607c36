//! The sandbox through the real binary: `keel exec` (`exec.rs`), RPC mode
//! (`rpc.rs`) and the app-server (`app_server.rs`). Commands run behind
//! Landlock, seccomp and read-only mounts; the model is told what the
//! sandbox stopped; a person's yes widens the walls for that call only.

mod app_server;
mod exec;
mod rpc;

use std::path::{Path, PathBuf};

use keel_test_support::MockResponse;
use serde_json::{Value, json};

use super::Env;

/// Fails under `CI` when the kernel cannot confine; elsewhere says so.
#[allow(clippy::print_stderr)]
pub fn kernel_can_confine() -> bool {
    match keel_sandbox::probe().missing() {
        None => true,
        Some(missing) if std::env::var_os("CI").is_some() => {
            panic!("CI must run the sandbox tests, but this kernel lacks {missing}")
        }
        Some(missing) => {
            eprintln!("SKIPPED: this kernel lacks {missing}");
            false
        }
    }
}

/// Folders beside the workspace: one outside every writable root, and
/// the temp dir keel is given (`TMPDIR`).
pub struct Around {
    _dir: tempfile::TempDir,
    pub outside: PathBuf,
    pub tmp: PathBuf,
    /// A `$HOME` for keel and its commands.
    pub home: PathBuf,
}

impl Around {
    pub fn new() -> Around {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (outside, tmp, home) = (root.join("outside"), root.join("tmp"), root.join("home"));
        for d in [&outside, &tmp, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        Around {
            _dir: dir,
            outside,
            tmp,
            home,
        }
    }

    pub fn outside_entries(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

pub fn bash(id: &str, command: &str) -> MockResponse {
    keel_test_support::MockResponse::tool_calls(vec![keel_test_support::tool_call(
        id,
        "bash",
        json!({ "command": command }),
    )])
}

/// A python one-liner as a shell command (the approval analyser cannot
/// see what it touches; only the sandbox stands in its way).
pub fn python(code: &str) -> String {
    format!("python3 -c \"{code}\"")
}

/// A python one-liner that connects to 127.0.0.1:`port`.
pub fn connect(port: u16) -> String {
    python(&format!(
        "import socket; socket.create_connection(('127.0.0.1', {port}), 5).sendall(b'hi')"
    ))
}

/// The text the model was given as the result of call `id` (any request).
pub fn result_for(env: &Env, id: &str) -> String {
    for req in env.mock.requests().iter().rev() {
        let body = &req.body;
        for m in body["messages"].as_array().into_iter().flatten() {
            if m["role"] == "tool" && m["tool_call_id"] == id {
                return match &m["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
            }
        }
    }
    panic!("no result for {id} in any request")
}

pub fn ws_path(env: &Env) -> PathBuf {
    env.ws().canonicalize().unwrap()
}

pub fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}
