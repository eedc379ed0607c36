//! keel end to end with the small local model (feature `local`): one
//! grammar-constrained tool call that really runs in `keel exec`; the
//! local model as the default when nothing is configured (`keel exec`,
//! `--mode rpc`, `app-server`); stopping a generation with SIGINT.
//!
//! Needs the small model (`keel models pull --small`): `KEEL_TEST_MODEL`
//! names the file, else `$KEEL_HOME/models/` and `~/.keel/models/` are
//! tried; without it the test says so on stderr and passes without
//! running (`.ci/run` provides the model). No network.
#![cfg(feature = "local")]

// In a `cfg(test)` module: the workspace lints allow unwrap/expect there.
#[cfg(test)]
mod exec {
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    use keel_test_support::small_local_model as small_model;

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
                // Writes in the workspace run; one outside it is held
                // (a draft: no terminal), so a confused model leaves
                // nothing behind outside the temp dirs.
                "--approval-mode",
                "outside",
                "--model-path",
            ])
            .arg(&model)
            // "./" and "relative": without them the small model often
            // writes `/tmp/hello.txt` (the workspace is a temp dir).
            .arg(
                "Use the write tool to create the file ./hello.txt (relative path) containing \
                 the text: hi there",
            )
            .current_dir(ws.path())
            .env("KEEL_HOME", home.path())
            // A fixed thread count: keel's default depends on how busy the
            // cores are, and a different count can change what is sampled.
            .env("KEEL_THREADS", "2")
            .env_remove("KEEL_PROVIDER")
            .env_remove("KEEL_MODEL")
            // A user's terminal: no log filter of their own.
            .env_remove("RUST_LOG")
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
        // llama.cpp's own warnings (about the model file's vocabulary) stay
        // in the log: nothing but keel's lines reaches the terminal.
        assert!(
            !stderr.contains("WARN") && !stderr.contains("llama"),
            "stderr:\n{stderr}"
        );
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

    use keel_test_support::{KeelChild, KeelCommand};
    use serde_json::{Value, json};

    /// Longest wait for a model-driven step (the debug build on a busy
    /// 2-core machine evaluates the first prompt in about a minute).
    const SLOW: Duration = Duration::from_secs(600);

    /// A home where nothing is configured but the small model sits under
    /// the default model's file name, with a short context and short
    /// answers (`[providers.local]` only tunes the provider: no model or
    /// provider is chosen there).
    fn home_with_default_model(model: &std::path::Path) -> tempfile::TempDir {
        let home = tempfile::tempdir().unwrap();
        let models = home.path().join("models");
        std::fs::create_dir_all(&models).unwrap();
        std::os::unix::fs::symlink(
            model,
            models.join("qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
        )
        .unwrap();
        std::fs::write(
            home.path().join("config.toml"),
            "[providers.local]\ncontext_size = 4096\nmax_output_tokens = 24\n",
        )
        .unwrap();
        home
    }

    fn keel(home: &std::path::Path, ws: &std::path::Path) -> KeelCommand {
        KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
            .home(home)
            .cwd(ws)
            .timeout(SLOW)
    }

    async fn next_json(child: &mut KeelChild, pred: impl Fn(&Value) -> bool) -> Value {
        let line = child
            .wait_for_stdout(SLOW, |l| {
                serde_json::from_str::<Value>(l).is_ok_and(|v| pred(&v))
            })
            .await
            .unwrap();
        serde_json::from_str(&line).unwrap()
    }

    #[tokio::test]
    async fn with_nothing_configured_exec_and_rpc_use_the_local_model() {
        let Some(model) = small_model() else { return };
        let home = home_with_default_model(&model);
        let ws = tempfile::tempdir().unwrap();
        let out = keel(home.path(), ws.path())
            .args([
                "exec",
                "--json",
                "--no-session",
                "Reply with one word: ready",
            ])
            .run()
            .await
            .unwrap();
        assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
        let lines = out.json_lines().unwrap();
        let end = lines
            .iter()
            .rev()
            .find(|l| l["type"] == "agent_end")
            .unwrap();
        let answer = end["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(answer["provider"], "local", "{answer}");
        assert_eq!(answer["api"], "local", "{answer}");
        assert_eq!(answer["model"], "qwen2.5-coder-1.5b-instruct", "{answer}");

        // RPC: the state names it, the catalogue offers it at zero price.
        let mut rpc = keel(home.path(), ws.path())
            .args(["--mode", "rpc", "--no-session"])
            .spawn()
            .await
            .unwrap();
        rpc.send_line(r#"{"id": "s", "type": "get_state"}"#)
            .await
            .unwrap();
        let state = next_json(&mut rpc, |v| v["id"] == "s").await;
        assert_eq!(state["data"]["model"]["provider"], "local", "{state}");
        rpc.send_line(r#"{"id": "m", "type": "get_available_models"}"#)
            .await
            .unwrap();
        let models = next_json(&mut rpc, |v| v["id"] == "m").await;
        let local = models["data"]["models"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["provider"] == "local" && m["id"] == "qwen2.5-coder-1.5b-instruct")
            .cloned()
            .unwrap_or_else(|| panic!("no local model in {models}"));
        assert_eq!(local["contextWindow"], 4096, "{local}");
        for price in ["input", "output", "cacheRead", "cacheWrite"] {
            assert_eq!(local["cost"][price].as_f64(), Some(0.0), "{local}");
        }
        rpc.close_stdin();
        let out = rpc.wait().await.unwrap();
        assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);

        // app-server: a thread started with no model runs on it.
        let mut server = keel(home.path(), ws.path())
            .args(["app-server"])
            .spawn()
            .await
            .unwrap();
        let init = json!({"id": 1, "method": "initialize",
            "params": {"clientInfo": {"name": "t", "version": "1"}}});
        server.send_line(&init.to_string()).await.unwrap();
        next_json(&mut server, |v| v["id"] == 1).await;
        server
            .send_line(r#"{"method": "initialized"}"#)
            .await
            .unwrap();
        server
            .send_line(r#"{"id": 2, "method": "thread/start", "params": {}}"#)
            .await
            .unwrap();
        let started = next_json(&mut server, |v| v["id"] == 2).await;
        assert_eq!(started["result"]["modelProvider"], "local", "{started}");
        assert_eq!(
            started["result"]["model"], "qwen2.5-coder-1.5b-instruct",
            "{started}"
        );
        server.close_stdin();
        server.wait().await.unwrap();
    }

    /// The last assistant message of an `exec --json` run.
    fn answer_of(out: &keel_test_support::KeelOutput) -> Value {
        let lines = out.json_lines().unwrap();
        let end = lines
            .iter()
            .rev()
            .find(|l| l["type"] == "agent_end")
            .cloned()
            .unwrap_or_else(|| panic!("no agent_end: {}", out.stderr));
        end["messages"].as_array().unwrap().last().unwrap().clone()
    }

    #[tokio::test]
    async fn the_next_process_starts_from_the_prompt_cache_and_continue_from_its_conversation() {
        let Some(model) = small_model() else { return };
        let home = home_with_default_model(&model);
        // Text answers (no call first): each run is one model call.
        std::fs::write(
            home.path().join("config.toml"),
            "[providers.local]\ncontext_size = 4096\nmax_output_tokens = 24\ngrammar = \"auto\"\n",
        )
        .unwrap();
        let ws = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            keel(home.path(), ws.path())
                .env("RUST_LOG", "keel_llm=info")
                .env("KEEL_THREADS", "2")
                .args(["exec", "--json"])
                .args(args.iter().copied())
        };
        let cold = run(&["--no-session", "Reply with one word: ready"])
            .run()
            .await
            .unwrap();
        assert_eq!(cold.code(), Some(0), "{}", cold.stderr);
        assert!(
            cold.stderr
                .contains("prompt cache: saved the system prompt and tools"),
            "{}",
            cold.stderr
        );
        let cold_answer = answer_of(&cold);
        assert_eq!(cold_answer["usage"]["cacheRead"], 0, "{cold_answer}");
        let warm = run(&["--no-session", "Reply with one word: ready"])
            .run()
            .await
            .unwrap();
        assert_eq!(warm.code(), Some(0), "{}", warm.stderr);
        assert!(warm.stderr.contains("prompt cache hit"), "{}", warm.stderr);
        let warm_answer = answer_of(&warm);
        // `--json` shows the hit: the prompt came from the cache.
        let read = warm_answer["usage"]["cacheRead"].as_u64().unwrap();
        assert!(read > 500, "{warm_answer}");
        assert!(
            warm_answer["usage"]["input"].as_u64().unwrap() < 50,
            "{warm_answer}"
        );
        assert_eq!(warm_answer["content"], cold_answer["content"]);

        // A session, then `--continue` in a new process: it starts from the
        // saved conversation, so only the new request is evaluated.
        let first = run(&["Reply with one word: ready"]).run().await.unwrap();
        assert_eq!(first.code(), Some(0), "{}", first.stderr);
        let total = answer_of(&first)["usage"]["totalTokens"].as_u64().unwrap();
        let next = run(&["--continue", "Reply with one word: done"])
            .run()
            .await
            .unwrap();
        assert_eq!(next.code(), Some(0), "{}", next.stderr);
        let answer = answer_of(&next);
        let read = answer["usage"]["cacheRead"].as_u64().unwrap();
        assert!(read + 8 >= total, "read {read} of {total}: {answer}");
    }

    /// Keel in `mode_args` (`exec …`) on the small model,
    /// free to write long text.
    fn counting(
        model: &std::path::Path,
        ws: &std::path::Path,
        home: &std::path::Path,
        mode_args: &[&str],
    ) -> KeelCommand {
        std::fs::write(
            home.join("config.toml"),
            "[providers.local]\ncontext_size = 4096\ngrammar = \"off\"\n",
        )
        .unwrap();
        keel(home, ws)
            .args(mode_args.iter().copied())
            .args(["--model-path", &model.display().to_string()])
    }

    const COUNT: &str = "Count from 1 to 1000, one number per line, and nothing else.";

    #[tokio::test]
    async fn sigint_stops_exec_mid_generation() {
        let Some(model) = small_model() else { return };
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let mut child = counting(&model, ws.path(), home.path(), &["exec", "--json"])
            .arg(COUNT)
            .env("RUST_LOG", "keel_llm=info")
            .spawn()
            .await
            .unwrap();
        // Once the model is loaded llama.cpp works on the call: it
        // evaluates keel's ~2,000-token prompt (seconds for the small
        // model), then generates. The interrupt lands in that work,
        // whatever the model would have answered.
        child
            .wait_for_stderr(SLOW, |l| l.contains("local model loaded"))
            .await
            .unwrap();
        child.signal("INT").await.unwrap();
        let out = child.wait().await.unwrap();
        assert_eq!(out.code(), Some(130), "stderr: {}", out.stderr);
        let last: Value = serde_json::from_str(out.stdout.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "agent_end", "{last}");
        let answer = last["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(answer["stopReason"], "aborted", "{answer}");
    }

    #[tokio::test]
    async fn rpc_abort_stops_the_model_and_the_session_goes_on() {
        let Some(model) = small_model() else { return };
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let mut rpc = counting(
            &model,
            ws.path(),
            home.path(),
            &["--mode", "rpc", "--rpc-flat-events"],
        )
        .env("RUST_LOG", "keel_llm=info")
        .spawn()
        .await
        .unwrap();
        next_json(&mut rpc, |v| v["type"] == "ready").await;
        let prompt = json!({"id": "p", "type": "prompt", "message": COUNT});
        rpc.send_line(&prompt.to_string()).await.unwrap();
        rpc.wait_for_stderr(SLOW, |l| l.contains("local model loaded"))
            .await
            .unwrap();
        rpc.send_line(r#"{"id": "a", "type": "abort"}"#)
            .await
            .unwrap();
        let end = next_json(&mut rpc, |v| v["type"] == "agent_end").await;
        let answer = end["messages"].as_array().unwrap().last().unwrap();
        assert_eq!(answer["stopReason"], "aborted", "{answer}");
        next_json(&mut rpc, |v| v["id"] == "a" && v["success"] == true).await;
        // The process still serves: the state says nothing runs.
        rpc.send_line(r#"{"id": "s", "type": "get_state"}"#)
            .await
            .unwrap();
        let state = next_json(&mut rpc, |v| v["id"] == "s").await;
        assert_eq!(state["data"]["isStreaming"], false, "{state}");
        rpc.close_stdin();
        let out = rpc.wait().await.unwrap();
        assert_eq!(out.code(), Some(0), "stderr: {}", out.stderr);
    }
}
