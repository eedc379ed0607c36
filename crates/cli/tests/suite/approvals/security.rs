//! Attacks a hostile model tries through the real binary: writes outside
//! the workspace (tools and shell, through `..`, `~`, symlinks and output
//! flags of read-only programs), swapping keel's approvals database, code
//! through a symlink to `.git` or repository config, and reading keel's
//! secrets through a command.

use std::path::Path;

use keel_test_support::{MockResponse, tool_call};
use serde_json::{Value, json};

use super::result_text;
use crate::suite::Env;
use crate::suite::rpc::Rpc;

fn call(id: &str, tool: &str, args: Value) -> MockResponse {
    MockResponse::tool_calls(vec![tool_call(id, tool, args)])
}

/// A folder beside the workspace, and its path as `../name` from it.
fn sibling() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let rel = format!("../{}", dir.path().file_name().unwrap().to_string_lossy());
    (dir, rel)
}

/// Declines every call in `calls`, in order, checking each one was held
/// with at least `send` (none ran unasked: a call that ran would leave the
/// next request naming another call).
async fn decline_each(rpc: &mut Rpc, calls: &[(String, &str)]) {
    for (id, what) in calls {
        let req = rpc.approval_request().await;
        assert_eq!(req["toolCallId"], id.as_str(), "{what} ran unasked: {req}");
        let class = req["class"].as_str().unwrap();
        assert!(class == "send" || class == "money", "{what}: {class}");
        assert!(req["always"].is_null(), "{what}: offers a rule: {req}");
        let rid = req["id"].as_str().unwrap().to_owned();
        rpc.decide(&rid, "decline", json!({})).await;
        let end = rpc.tool_end(id).await;
        assert_eq!(end["isError"], true, "{what}");
    }
}

fn empty(dir: &Path) -> bool {
    std::fs::read_dir(dir).unwrap().next().is_none()
}

#[tokio::test]
async fn writes_outside_the_workspace_and_into_keel_home_are_held() {
    let env = Env::new().await;
    let (outside, rel) = sibling();
    let fake_home = tempfile::tempdir().unwrap();
    std::fs::write(env.ws().join("a.txt"), "a\n").unwrap();
    std::fs::write(env.ws().join("evil.db"), "not a db").unwrap();
    std::os::unix::fs::symlink(outside.path(), env.ws().join("link")).unwrap();
    let keel_home = env.home.path().display().to_string();
    let mut attacks: Vec<(String, Value)> = vec![
        (
            "write ~/.bashrc".into(),
            json!({"tool": "write", "path": "~/.bashrc", "content": "x"}),
        ),
        (
            "write ../outside".into(),
            json!({"tool": "write", "path": format!("{rel}/a.txt"), "content": "x"}),
        ),
        (
            "write KEEL_HOME/config.toml".into(),
            json!({"tool": "write", "path": format!("{keel_home}/config.toml"), "content": "x"}),
        ),
        (
            "write through a symlink".into(),
            json!({"tool": "write", "path": "link/b.txt", "content": "x"}),
        ),
        (
            "edit ../outside".into(),
            json!({"tool": "edit", "path": format!("{rel}/f"), "oldText": "a", "newText": "b"}),
        ),
    ];
    for cmd in [
        "echo hi >> ~/.bashrc".to_owned(),
        format!("echo x | tee {rel}/t.txt"),
        format!("cp a.txt {rel}/"),
        format!("touch {rel}/touched"),
        format!("mkdir {rel}/d"),
        format!("mv a.txt {rel}/"),
        format!("ln -s a.txt {rel}/l"),
        format!("sort -o {rel}/s.txt a.txt"),
        format!("uniq a.txt {rel}/u.txt"),
        format!("xxd a.txt {rel}/x.txt"),
        format!("find . -fprint {rel}/f.txt"),
        format!("git diff --output={rel}/g.txt"),
        "echo x > link/c.txt".to_owned(),
        format!("cd {rel} && touch y"),
        format!("mv evil.db {keel_home}/keel.db"),
    ] {
        attacks.push((cmd.clone(), json!({"tool": "bash", "command": cmd})));
    }
    let mut script = Vec::new();
    let mut ids = Vec::new();
    for (i, (what, a)) in attacks.iter().enumerate() {
        let id = format!("c{i}");
        let mut args = a.clone();
        let tool = args["tool"].as_str().unwrap().to_owned();
        args.as_object_mut().unwrap().remove("tool");
        script.push(call(&id, &tool, args));
        ids.push((id, what.as_str()));
    }
    script.push(MockResponse::text("done"));
    env.mock.push_all(script);
    let mut rpc = Rpc::start(
        env.rpc_cmd()
            .env("HOME", fake_home.path().display().to_string()),
    )
    .await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    decline_each(&mut rpc, &ids).await;
    rpc.event("agent_end").await;
    assert!(empty(outside.path()), "something was written outside");
    assert!(empty(fake_home.path()), "~/.bashrc was written");
    assert!(env.ws().join("a.txt").exists());
    assert!(!env.home.path().join("config.toml").exists());
}

#[tokio::test]
async fn an_outside_write_is_held_even_in_money_only() {
    let env = Env::new().await;
    let (outside, rel) = sibling();
    env.mock.push_all([
        call("c1", "bash", json!({"command": format!("touch {rel}/x")})),
        call(
            "c2",
            "write",
            json!({"path": format!("{rel}/y"), "content": "y"}),
        ),
        call("c3", "bash", json!({"command": "touch inside.txt"})),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&["--approval-mode", "money_only"]).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    decline_each(
        &mut rpc,
        &[
            ("c1".into(), "touch outside"),
            ("c2".into(), "write outside"),
        ],
    )
    .await;
    let end = rpc.tool_end("c3").await;
    assert_eq!(end["isError"], false, "{end}");
    rpc.event("agent_end").await;
    assert!(empty(outside.path()));
    assert!(env.ws().join("inside.txt").exists());
}

fn git(ws: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .args(args)
        .current_dir(ws)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(ok.status.success(), "git {args:?}: {ok:?}");
}

#[tokio::test]
async fn a_committed_symlink_to_git_and_repository_config_cannot_run_code() {
    let env = Env::new().await;
    let ws = env.ws();
    git(ws, &["init", "-q"]);
    std::os::unix::fs::symlink(".git", ws.join("gitlink")).unwrap();
    std::fs::write(ws.join("evil.sh"), "touch pwned\n").unwrap();
    git(ws, &["add", "gitlink", "evil.sh"]);
    git(
        ws,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "x",
        ],
    );
    // A config that a compromise already left behind: a read-only git must
    // still not run it.
    let cfg = ws.join(".git/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str("[core]\n\tfsmonitor = sh evil.sh\n[diff]\n\texternal = sh evil.sh\n");
    // Drivers the repository names itself (through an include, too).
    text.push_str("[include]\n\tpath = drivers.cfg\n");
    std::fs::write(&cfg, text).unwrap();
    std::fs::write(
        ws.join(".git/drivers.cfg"),
        "[filter \"x\"]\n\tclean = sh evil.sh\n\tprocess = sh evil.sh\n\
         [diff \"x\"]\n\ttextconv = sh evil.sh\n\tcommand = sh evil.sh\n",
    )
    .unwrap();
    std::fs::write(ws.join(".git/info/attributes"), "* filter=x diff=x\n").unwrap();
    std::fs::write(ws.join("evil.sh"), "touch pwned\n#changed\n").unwrap();
    env.mock.push_all([
        call(
            "c1",
            "write",
            json!({"path": "gitlink/config", "content": "[core]\n\tfsmonitor = sh evil.sh\n"}),
        ),
        call(
            "c2",
            "bash",
            json!({"command": "echo '[core] fsmonitor = sh evil.sh' >> gitlink/config"}),
        ),
        call("c3", "bash", json!({"command": "git status && git diff"})),
        call(
            "c4",
            "bash",
            json!({"command": "git log -p -1; git show HEAD"}),
        ),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    decline_each(
        &mut rpc,
        &[
            ("c1".into(), "write gitlink/config"),
            ("c2".into(), "append to gitlink/config"),
        ],
    )
    .await;
    // `git status` runs (fsmonitor off); `git diff` refuses the external
    // diff program instead of running it.
    let text = result_text(&rpc.tool_end("c3").await);
    assert!(text.contains("modified:   evil.sh"), "{text}");
    rpc.tool_end("c4").await;
    rpc.event("agent_end").await;
    assert!(
        !ws.join("pwned").exists(),
        "repository config ran a program"
    );
}

#[tokio::test]
async fn the_provider_key_never_reaches_a_command_or_the_model() {
    let env = Env::new().await;
    let secret = "sk-keel-test-secret-0123456789";
    env.mock.push_all([
        call(
            "c1",
            "bash",
            json!({"command": "printenv OPENAI_API_KEY; echo \"[$OPENAI_API_KEY]\""}),
        ),
        call(
            "c2",
            "bash",
            json!({"command": r"tr '\0' '\n' < /proc/$PPID/environ | grep OPENAI_API_KEY"}),
        ),
        call("c3", "read", json!({"path": "/proc/self/environ"})),
        MockResponse::text("done"),
    ]);
    let mut rpc = Rpc::start(
        env.rpc_cmd()
            .env("OPENAI_API_KEY", secret)
            .args(["--approval-mode", "money_only"]),
    )
    .await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    let first = result_text(&rpc.tool_end("c1").await);
    assert_eq!(
        first.trim(),
        "[]",
        "the key was in the command's environment"
    );
    let second = result_text(&rpc.tool_end("c2").await);
    assert_eq!(second.trim(), "OPENAI_API_KEY=[redacted]", "{second}");
    let third = result_text(&rpc.tool_end("c3").await);
    assert!(!third.contains(secret), "{third}");
    rpc.event("agent_end").await;
    let frames = serde_json::to_string(&rpc.frames).unwrap();
    assert!(!frames.contains(secret), "the key reached stdout");
    for body in env.mock.requests() {
        assert!(
            !body.body.to_string().contains(secret),
            "the key reached the model"
        );
    }
    for f in env.session_files().await {
        assert!(
            !env.session_text(&f).await.contains(secret),
            "the key is in the session"
        );
    }
}

fn mkfifo(path: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(ok.success());
}

#[tokio::test]
async fn devices_and_fifos_are_refused_and_keel_keeps_answering() {
    let env = Env::new().await;
    mkfifo(&env.ws().join("fifo"));
    env.mock.push_all([
        call("c1", "read", json!({"path": "/dev/zero"})),
        call("c2", "read", json!({"path": "fifo"})),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    let zero = rpc.tool_end("c1").await;
    assert_eq!(zero["isError"], true);
    assert!(result_text(&zero).contains("character device"), "{zero}");
    let fifo = rpc.tool_end("c2").await;
    assert!(result_text(&fifo).contains("FIFO"), "{fifo}");
    rpc.event("agent_end").await;
    let r = rpc
        .call(json!({"type": "export_html", "outputPath": "fifo"}))
        .await;
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("FIFO"), "{r}");
    // Still serving.
    rpc.ok(json!({"type": "get_state"})).await;
}

#[tokio::test]
async fn always_allow_covers_what_the_card_said_and_no_more() {
    let env = Env::new().await;
    env.mock.push_all([
        call("c1", "bash", json!({"command": "keel-acme test"})),
        call("c2", "bash", json!({"command": "keel-acme test --quiet"})),
        call("c3", "bash", json!({"command": "keel-acme tests"})),
        call("c4", "bash", json!({"command": "keel-acme test2"})),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    let req = rpc.approval_request().await;
    assert_eq!(
        req["always"]["scope"],
        json!({"kind": "command", "prefix": ["keel-acme", "test"]}),
        "{req}"
    );
    assert!(
        req["always"]["label"]
            .as_str()
            .unwrap()
            .contains("keel-acme test"),
        "{req}"
    );
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "approve_always", json!({})).await;
    rpc.tool_end("c1").await;
    rpc.tool_end("c2").await;
    for c in ["c3", "c4"] {
        let req = rpc.approval_request().await;
        assert_eq!(req["toolCallId"], c, "{req}");
        let id = req["id"].as_str().unwrap().to_owned();
        rpc.decide(&id, "decline", json!({})).await;
    }
    rpc.event("agent_end").await;
}

#[tokio::test]
async fn a_frame_with_a_key_given_twice_is_refused() {
    let env = Env::new().await;
    let mut rpc = env.rpc(&[]).await;
    rpc.send_raw(r#"{"type":"get_state","type":"bash","command":"touch pwned"}"#)
        .await;
    let r = rpc.next().await;
    assert_eq!(r["command"], "parse", "{r}");
    assert_eq!(r["success"], false);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("duplicate key \"type\""),
        "{r}"
    );
    rpc.ok(json!({"type": "get_state"})).await;
    assert!(!env.ws().join("pwned").exists());
}

#[tokio::test]
async fn one_oversize_provider_event_ends_the_turn_with_a_clear_error() {
    use keel_test_support::SseEvent;
    let env = Env::new().await;
    let huge = "x".repeat(17 * 1024 * 1024);
    env.mock.push(MockResponse::sse(vec![SseEvent::data(huge)]));
    let mut rpc = env.rpc(&[]).await;
    let end = rpc.prompt_and_wait("go").await;
    let last = end["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["stopReason"], "error");
    let msg = last["errorMessage"].as_str().unwrap();
    assert!(msg.contains("larger than 16 MiB"), "{msg}");
    let longest = rpc
        .frames
        .iter()
        .map(|f| f.to_string().len())
        .max()
        .unwrap();
    assert!(
        longest < 1024 * 1024,
        "a frame of {longest} bytes was written"
    );
    rpc.ok(json!({"type": "get_state"})).await;
}

#[tokio::test]
async fn a_provider_error_cannot_drive_the_terminal() {
    let env = Env::new().await;
    env.mock.push(MockResponse::error(
        400,
        json!({"error": {"message": "bad \u{1b}[2J\u{1b}]0;owned\u{7} request"}}),
    ));
    let cmd = format!(
        "{} exec --base-url {} --model mock-model hi",
        env!("CARGO_BIN_EXE_keel"),
        env.mock.base_url()
    );
    // `script` gives keel a terminal on stdout and stderr.
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        tokio::process::Command::new("script")
            .args(["-qec", &cmd, "/dev/null"])
            .env("KEEL_HOME", env.home.path())
            .current_dir(env.ws())
            .stdin(std::process::Stdio::null())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("bad [2J]0;owned request"), "{text:?}");
    assert!(
        !text.contains("\u{1b}[2J") && !text.contains('\u{7}'),
        "{text:?}"
    );
}

#[tokio::test]
async fn a_database_moved_over_keels_own_is_refused_until_trusted() {
    let env = Env::new().await;
    if env.db.is_some() {
        // About the SQLite file in the home; there is none with a shared database.
        return;
    }
    let ok = env
        .keel()
        .args(["approvals", "mode", "outside"])
        .run()
        .await
        .unwrap();
    assert!(ok.status.success(), "{}", ok.stderr);
    // Someone prepares a database that runs everything, and moves it over.
    let other = tempfile::tempdir().unwrap();
    let ok = env
        .keel()
        .home(other.path())
        .args(["approvals", "mode", "money_only"])
        .run()
        .await
        .unwrap();
    assert!(ok.status.success(), "{}", ok.stderr);
    let db = env.home.path().join("keel.db");
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(env.home.path().join(format!("keel.db{suffix}")));
    }
    std::fs::copy(
        other.path().join("keel.db"),
        env.home.path().join("evil.db"),
    )
    .unwrap();
    std::fs::rename(env.home.path().join("evil.db"), &db).unwrap();

    env.mock.push_all([
        call(
            "c1",
            "bash",
            json!({"command": "keel-test-unknown-program"}),
        ),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    let end = rpc.tool_end("c1").await;
    assert_eq!(end["isError"], true);
    let text = result_text(&end);
    assert!(text.contains("not the one keel wrote"), "{text}");
    rpc.event("agent_end").await;
    drop(rpc);

    let trusted = env
        .keel()
        .args(["approvals", "trust-store"])
        .run()
        .await
        .unwrap();
    assert!(trusted.status.success(), "{}", trusted.stderr);
    let mode = env.keel().args(["approvals", "mode"]).run().await.unwrap();
    assert!(mode.status.success(), "{}", mode.stderr);
    assert!(mode.stdout.contains("money_only"), "{}", mode.stdout);
}

#[tokio::test]
async fn keel_processes_started_together_in_a_new_home_all_get_the_gate() {
    // Hosts start several keel processes at once; some end at once (their
    // stdin closed, or killed) while they open the approvals database. The
    // database of each new home must still be keel's own for every process
    // then and after: none may find it locked or half-made ("every tool call
    // is denied").
    let env = Env::new().await;
    if env.db.is_some() {
        return;
    }
    for round in 0..8u64 {
        let home = tempfile::tempdir().unwrap();
        let mut killed = Vec::new();
        for _ in 0..2 {
            let rpc = env
                .keel()
                .home(home.path())
                .args(["--mode", "rpc", "--base-url", &env.mock.base_url()])
                .args(["--model", "mock-model"])
                .spawn()
                .await
                .unwrap();
            killed.push(rpc);
        }
        let ended = (0..3).map(|_| {
            env.keel()
                .home(home.path())
                .args(["--mode", "rpc", "--base-url", &env.mock.base_url()])
                .args(["--model", "mock-model"])
                .stdin("")
                .run()
        });
        let modes = (0..3).map(|_| {
            env.keel()
                .home(home.path())
                .args(["approvals", "mode"])
                .run()
        });
        let killer = async {
            tokio::time::sleep(std::time::Duration::from_millis(3 * round)).await;
            // Dropping a child kills it (SIGKILL), wherever its start is.
            drop(std::mem::take(&mut killed));
        };
        let (ended, modes, ()) = tokio::join!(
            futures::future::join_all(ended),
            futures::future::join_all(modes),
            killer
        );
        for out in ended.into_iter().chain(modes) {
            let out = out.unwrap();
            assert!(out.status.success(), "round {round}: {}", out.stderr);
            assert!(
                !out.stderr.contains("approvals database"),
                "round {round}: {}",
                out.stderr
            );
        }
        let after = env
            .keel()
            .home(home.path())
            .args(["approvals", "mode"])
            .run()
            .await
            .unwrap();
        assert!(after.status.success(), "round {round}: {}", after.stderr);
    }
}

#[tokio::test]
async fn request_ids_are_echoed_exactly_as_sent() {
    let env = Env::new().await;
    let mut rpc = env.rpc(&[]).await;
    for id in [
        "123456789012345678901234567890",
        "1e5",
        "-0.0",
        "1.50",
        "\"s\"",
        "{\"n\": [1, 2.50]}",
    ] {
        rpc.send_raw(&format!(r#"{{"id":{id},"type":"get_state"}}"#))
            .await;
        let line = rpc
            .child
            .wait_for_stdout(crate::suite::rpc::WAIT, |l| l.contains("\"get_state\""))
            .await
            .unwrap();
        assert!(
            line.starts_with(&format!(r#"{{"id":{id},"type":"response""#)),
            "{id}: {line}"
        );
    }
}

#[tokio::test]
async fn a_key_under_any_configured_name_stays_with_keel() {
    let env = Env::new().await;
    let secret = "custom-cred-value-0123456789";
    env.mock.push_all([
        call("c1", "bash", json!({"command": "echo \"[$TEAM_LLM_CRED]\"; tr '\\0' '\\n' < /proc/$PPID/environ | grep TEAM_LLM_CRED"})),
        MockResponse::text("done"),
    ]);
    let mut rpc = Rpc::start(env.rpc_cmd().env("TEAM_LLM_CRED", secret).args([
        "--api-key-env",
        "TEAM_LLM_CRED",
        "--approval-mode",
        "money_only",
    ]))
    .await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    let text = result_text(&rpc.tool_end("c1").await);
    assert_eq!(text.trim(), "[]\nTEAM_LLM_CRED=[redacted]", "{text}");
    rpc.event("agent_end").await;
    assert!(!serde_json::to_string(&rpc.frames).unwrap().contains(secret));
}

#[tokio::test]
async fn the_shell_environment_policy_of_config_toml_applies() {
    let env = Env::new().await;
    std::fs::write(
        env.home.path().join("config.toml"),
        "[shell_environment_policy]\nexclude = [\"keel_test_drop*\"]\ninclude = [\"KEEL_TEST_PASS_TOKEN\"]\nset = { KEEL_TEST_SET = \"on\" }\n",
    )
    .unwrap();
    env.mock.push_all([
        call("c1", "bash", json!({"command": "echo \"[$KEEL_TEST_DROP_ME][$KEEL_TEST_PASS_TOKEN][$KEEL_TEST_SET]\""})),
        MockResponse::text("done"),
    ]);
    let mut rpc = Rpc::start(
        env.rpc_cmd()
            .env("KEEL_TEST_DROP_ME", "x")
            .env("KEEL_TEST_PASS_TOKEN", "tok"),
    )
    .await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    let text = result_text(&rpc.tool_end("c1").await);
    assert_eq!(text.trim(), "[][tok][on]", "{text}");
    rpc.event("agent_end").await;
}

/// A held write is judged on the file its path resolves to; a symlink on
/// that path swapped while the call waits (by a command running in the
/// background, say) must not move the approved write elsewhere.
#[tokio::test]
async fn a_symlink_swapped_while_a_write_waits_does_not_move_the_write() {
    let env = Env::new().await;
    let (outside, _rel) = sibling();
    let inner = env.ws().join("inner");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(inner.join("e.txt"), "old\n").unwrap();
    std::os::unix::fs::symlink("inner", env.ws().join("link")).unwrap();
    env.mock.push_all([
        call(
            "c1",
            "write",
            json!({"path": "link/w.txt", "content": "new"}),
        ),
        call(
            "c2",
            "edit",
            json!({"path": "link/e.txt", "oldText": "old", "newText": "new"}),
        ),
        MockResponse::text("done"),
    ]);
    let mut rpc = env.rpc(&["--approval-mode", "everything"]).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    for id in ["c1", "c2"] {
        let req = rpc.approval_request().await;
        assert_eq!(req["toolCallId"], id, "{req}");
        assert_eq!(req["class"], "write", "{req}");
        // The swap: `link` now points out of the workspace.
        std::fs::remove_file(env.ws().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), env.ws().join("link")).unwrap();
        std::fs::write(outside.path().join("e.txt"), "old\n").unwrap();
        let rid = req["id"].as_str().unwrap().to_owned();
        rpc.decide(&rid, "approve", json!({})).await;
        let end = rpc.tool_end(id).await;
        assert_eq!(end["isError"], false, "{id}: {end}");
        // Back inside for the next call.
        std::fs::remove_file(env.ws().join("link")).unwrap();
        std::os::unix::fs::symlink("inner", env.ws().join("link")).unwrap();
    }
    rpc.event("agent_end").await;
    assert_eq!(std::fs::read_to_string(inner.join("w.txt")).unwrap(), "new");
    assert_eq!(
        std::fs::read_to_string(inner.join("e.txt")).unwrap(),
        "new\n"
    );
    assert!(!outside.path().join("w.txt").exists(), "written outside");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("e.txt")).unwrap(),
        "old\n",
        "edited outside"
    );
}
