//! `keel exec` end to end with the small local model (feature `local`):
//! one grammar-constrained tool call that really runs.
//!
//! Needs the small model (`keel models pull --small`): `KEEL_TEST_MODEL`
//! names the file, else `$KEEL_HOME/models/` and `~/.keel/models/` are
//! tried; without it the test says so on stderr and passes without
//! running (`.ci/run` provides the model). No network.
#![cfg(feature = "local")]

// In a `cfg(test)` module: the workspace lints allow unwrap/expect there.
#[cfg(test)]
mod exec {
    use std::path::PathBuf;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    const SMALL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";

    fn small_model() -> Option<PathBuf> {
        let mut candidates = Vec::new();
        if let Some(p) = std::env::var_os("KEEL_TEST_MODEL") {
            candidates.push(PathBuf::from(p));
        }
        if let Some(h) = std::env::var_os("KEEL_HOME") {
            candidates.push(PathBuf::from(h).join("models").join(SMALL_FILE));
        }
        if let Some(h) = std::env::var_os("HOME") {
            candidates.push(PathBuf::from(h).join(".keel/models").join(SMALL_FILE));
        }
        let found = candidates.iter().find(|p| p.is_file()).cloned();
        if found.is_none() {
            eprintln!(
                "SKIPPED: the small local model is not there (tried {candidates:?}); run `keel models pull --small` or set KEEL_TEST_MODEL"
            );
        }
        found
    }

    #[test]
    fn exec_runs_a_grammar_constrained_tool_call() {
        let Some(model) = small_model() else { return };
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        // The answer to the request must be a call (the grammar), and the
        // context is small so a confused model cannot go on for long.
        std::fs::write(
            home.path().join("config.toml"),
            "[providers.local]\ngrammar = \"call-first\"\ncontext_size = 4096\n",
        )
        .unwrap();
        let started = Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args([
                "exec",
                "--no-session",
                "--approval-mode",
                "money_only",
                "--model-path",
            ])
            .arg(&model)
            .arg("Use the write tool to create the file hello.txt containing the text: hi there")
            .current_dir(ws.path())
            .env("KEEL_HOME", home.path())
            .env_remove("KEEL_PROVIDER")
            .env_remove("KEEL_MODEL")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Bounded: a small model may keep going after the call; the call is
        // what this test is about.
        let deadline = Duration::from_secs(600);
        loop {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            if started.elapsed() > deadline {
                let _ = child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let stdout = String::from_utf8_lossy(&out.stdout);
        // The tool ran: the renderer announced it and the file is there.
        assert!(
            stderr.contains("→ write"),
            "stderr:\n{stderr}\nstdout:\n{stdout}"
        );
        let written: Vec<_> = std::fs::read_dir(ws.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        let hello = ws.path().join("hello.txt");
        assert!(hello.is_file(), "files: {written:?}\nstderr:\n{stderr}");
        let text = std::fs::read_to_string(&hello).unwrap();
        assert!(text.contains("hi there"), "hello.txt: {text:?}");
        assert!(
            out.status.success(),
            "exit {:?}\nstderr:\n{stderr}",
            out.status
        );
    }

    #[test]
    fn a_missing_model_file_is_one_clear_line() {
        let home = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_keel"))
            .args([
                "exec",
                "--no-session",
                "--model-path",
                "/nonexistent/model.gguf",
                "hi",
            ])
            .env("KEEL_HOME", home.path())
            .env_remove("KEEL_PROVIDER")
            .env_remove("KEEL_MODEL")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("/nonexistent/model.gguf"), "{stderr}");
        assert!(stderr.contains("keel models pull"), "{stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    }
}
