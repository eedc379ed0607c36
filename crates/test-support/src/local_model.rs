//! Where the tests of the in-process local model find the small model
//! (Qwen2.5-Coder 0.5B, fetched by `keel models pull --small`), and the one
//! rule for checks that need something a machine may lack: skipped with a
//! message on a developer's machine, a failure under CI. It must not know
//! how models are fetched or run.

use std::path::PathBuf;

/// The small model's file name, as `keel models pull --small` writes it.
pub const SMALL_MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

/// Whether this run is CI (`CI` set, as CI services do), where a check
/// that cannot run must fail instead of being skipped.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The small model: `KEEL_TEST_MODEL`, else `$KEEL_HOME/models/…`, else
/// `~/.keel/models/…`. `None` (with a `SKIPPED:` line) when it is in none
/// of them; under CI that panics instead.
pub fn small_local_model() -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(p) = std::env::var_os("KEEL_TEST_MODEL") {
        candidates.push(PathBuf::from(p));
    }
    if let Some(h) = std::env::var_os("KEEL_HOME") {
        candidates.push(PathBuf::from(h).join("models").join(SMALL_MODEL_FILE));
    }
    if let Some(h) = std::env::var_os("HOME") {
        candidates.push(PathBuf::from(h).join(".keel/models").join(SMALL_MODEL_FILE));
    }
    let found = candidates.iter().find(|p| p.is_file()).cloned();
    if found.is_none() {
        let why = format!(
            "the small local model is not there (tried {candidates:?}); run `keel models pull --small` or set KEEL_TEST_MODEL"
        );
        assert!(!in_ci(), "{why}: CI must run the local-model tests");
        eprintln!("SKIPPED: {why}");
    }
    found
}
