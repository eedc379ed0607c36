//! Published client libraries, unmodified, driving the real binary: each
//! runs a script under `tests/clients/` (installed from the registries
//! with `npm ci` / `pip` there by `.ci/run`) against the mock model, and
//! the test checks what the client saw. Locally a client that is not
//! installed is skipped with a message; under `CI` that fails.

mod acp;
pub(crate) mod claude_agent_sdk;
mod claude_sdk_controls;
mod claude_sdk_mcp_set;
mod codex_sdk;
mod codex_ts_sdk;
mod pi_rpc;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::suite::Env;

/// Longest a client script may run.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

/// `crates/cli/tests/clients`.
pub fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// `scripts/keel-for-node.mjs` at the repository's root.
pub fn node_launcher() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/keel-for-node.mjs")
}

/// The environment a client script needs to run keel against `env`'s mock
/// model, in its workspace and home; `extra` is added.
pub fn keel_env(env: &Env, extra: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    let mut vars = vec![
        ("KEEL_BIN", env!("CARGO_BIN_EXE_keel").to_owned()),
        ("KEEL_TEST_WS", env.ws().display().to_string()),
        ("KEEL_HOME", env.home.path().display().to_string()),
        ("KEEL_BASE_URL", env.mock.base_url()),
        ("KEEL_MODEL", "mock-model".to_owned()),
    ];
    if let Some(db) = &env.db {
        vars.push(("KEEL_DATABASE_URL", db.url.clone()));
    }
    vars.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
    vars
}

/// Whether the npm package `name` is installed for the client scripts;
/// when it is not, says so (or fails under CI).
#[allow(clippy::print_stderr)]
pub fn npm_client(name: &str) -> bool {
    let installed = clients_dir().join("node_modules").join(name).is_dir();
    if !installed {
        let why =
            format!("{name} is not installed: run `npm ci --prefix crates/cli/tests/clients`");
        assert!(
            !keel_test_support::in_ci(),
            "{why}: CI must run the client tests"
        );
        eprintln!("SKIPPED: {why}");
    }
    installed
}

/// The Python that has the PyPI module `module` (`KEEL_TEST_PYTHON`, else
/// `tests/clients/.venv`); when none has it, says so (or fails under CI).
#[allow(clippy::print_stderr)]
pub fn pip_client(module: &str) -> Option<PathBuf> {
    let python = std::env::var_os("KEEL_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| clients_dir().join(".venv/bin/python"));
    let has = std::process::Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has {
        let why = format!(
            "{module} is not importable by {}: run `python3 -m venv crates/cli/tests/clients/.venv && crates/cli/tests/clients/.venv/bin/pip install -r crates/cli/tests/clients/requirements.txt`",
            python.display()
        );
        assert!(
            !keel_test_support::in_ci(),
            "{why}: CI must run the client tests"
        );
        eprintln!("SKIPPED: {why}");
        return None;
    }
    Some(python)
}

/// Runs `python SCRIPT` with `env` (see [`run_node`]).
pub async fn run_python(python: &Path, script: &str, env: &[(&str, String)]) -> Value {
    run_script(python.as_os_str(), script, env).await
}

/// Runs `node SCRIPT` with `env`, bounded by [`SCRIPT_TIMEOUT`], and
/// returns the JSON object it printed last.
pub async fn run_node(script: &str, env: &[(&str, String)]) -> Value {
    run_script(std::ffi::OsStr::new("node"), script, env).await
}

async fn run_script(program: &std::ffi::OsStr, script: &str, env: &[(&str, String)]) -> Value {
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg(clients_dir().join(script))
        .current_dir(clients_dir())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(SCRIPT_TIMEOUT, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{script} did not finish in {SCRIPT_TIMEOUT:?}"))
        .unwrap_or_else(|e| panic!("cannot run node {script}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let last = stdout.lines().rev().find(|l| l.starts_with('{'));
    match last.map(serde_json::from_str::<Value>) {
        Some(Ok(v)) => v,
        _ => panic!("{script} printed no result\nstdout:\n{stdout}\nstderr:\n{stderr}"),
    }
}
