//! `keel exec` behind the sandbox.

use std::net::TcpListener;

use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use super::{Around, bash, connect, kernel_can_confine, python, read, result_for, ws_path};
use crate::suite::Env;

#[tokio::test]
async fn workspace_write_lets_the_workspace_be_written_and_nothing_else() {
    if !kernel_can_confine() {
        return;
    }
    let env = Env::new().await;
    let around = Around::new();
    let ws = ws_path(&env);
    std::fs::create_dir_all(ws.join(".git")).unwrap();
    std::fs::write(ws.join(".git/config"), "[core]\n").unwrap();
    std::os::unix::fs::symlink(&around.outside, ws.join("link")).unwrap();
    let out = around.outside.display().to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let calls = [
        (
            "c1",
            "echo in > inside.txt && echo t > $TMPDIR/t.txt".to_owned(),
        ),
        ("c2", python(&format!("open('{out}/x', 'w').write('x')"))),
        ("c3", python("open('link/y', 'w').write('y')")),
        ("c4", python("open('.git/config', 'a').write('x')")),
        (
            "c5",
            python(&format!("open('/proc/self/root{out}/z', 'w')")),
        ),
        ("c6", format!("echo {out}/w | xargs touch")),
        (
            "c7",
            format!("sh -c 'python3 -c \"open(\\\"{out}/v\\\", \\\"w\\\")\"'"),
        ),
        ("c8", python("open('../outside-of-ws', 'w')")),
        ("c9", connect(port)),
        (
            "c10",
            python("import os; open(os.path.expanduser('~/.profile-x'), 'w')"),
        ),
    ];
    let mut script: Vec<MockResponse> = calls.iter().map(|(id, c)| bash(id, c)).collect();
    script.push(MockResponse::text("done"));
    env.mock.push_all(script);
    let run = env
        .exec()
        .env("TMPDIR", around.tmp.display().to_string())
        .env("HOME", around.home.display().to_string())
        .args(["--approval-mode", "money_only", "go"])
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert_eq!(read(&ws.join("inside.txt")), "in\n");
    assert_eq!(read(&around.tmp.join("t.txt")), "t\n");
    assert_eq!(around.outside_entries(), Vec::<String>::new());
    assert_eq!(read(&ws.join(".git/config")), "[core]\n");
    assert!(!ws.parent().unwrap().join("outside-of-ws").exists());
    assert!(
        !around.home.join(".profile-x").exists(),
        "$HOME was written"
    );
    assert!(listener.accept().is_err(), "a connection got through");
    for (id, _) in &calls[1..] {
        let text = result_for(&env, id);
        assert!(
            text.contains("Blocked by the sandbox (workspace-write, network off)"),
            "{id}: {text}"
        );
    }
    assert!(result_for(&env, "c2").contains(&format!("writing {out}/x")));
    assert!(result_for(&env, "c4").contains(&format!("writing {}", ws.join(".git").display())));
    assert!(
        result_for(&env, "c9").contains("network access"),
        "{}",
        result_for(&env, "c9")
    );
    // money_only does not ask about network: it was not run again.
    assert!(
        result_for(&env, "c9").contains("nobody was asked"),
        "{}",
        result_for(&env, "c9")
    );
}

#[tokio::test]
async fn read_only_refuses_every_write_and_danger_full_access_none() {
    if !kernel_can_confine() {
        return;
    }
    let env = Env::new().await;
    let around = Around::new();
    let ws = ws_path(&env);
    env.mock.push_all([
        bash("c1", "echo x > a.txt"),
        MockResponse::tool_calls(vec![tool_call(
            "c2",
            "write",
            json!({"path": "b.txt", "content": "b"}),
        )]),
        MockResponse::text("done"),
    ]);
    let run = env
        .exec()
        .args([
            "--sandbox",
            "read-only",
            "--approval-mode",
            "money_only",
            "go",
        ])
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert!(!ws.join("a.txt").exists() && !ws.join("b.txt").exists());
    assert!(
        result_for(&env, "c1").contains("Blocked by the sandbox (read-only"),
        "{}",
        result_for(&env, "c1")
    );
    let c2 = result_for(&env, "c2");
    assert!(
        c2.contains(&format!("writing {}", ws.join("b.txt").display())),
        "{c2}"
    );

    let out = around.outside.display().to_string();
    env.mock.push_all([
        bash(
            "d1",
            &python(&format!("open('{out}/free', 'w').write('ok')")),
        ),
        MockResponse::text("done"),
    ]);
    let run = env
        .exec()
        .args([
            "--sandbox",
            "danger-full-access",
            "--approval-mode",
            "money_only",
            "go",
        ])
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert_eq!(read(&around.outside.join("free")), "ok");
}

#[tokio::test]
async fn the_config_file_sets_the_policy_and_sandbox_check_reports_it() {
    let env = Env::new().await;
    std::fs::write(
        env.home.path().join("config.toml"),
        "[sandbox]\nmode = \"read-only\"\nnetwork_access = true\n",
    )
    .unwrap();
    let out = env.keel().args(["sandbox", "check"]).run().await.unwrap();
    assert!(
        out.stdout.contains("policy: read-only (network on)"),
        "{}",
        out.stdout
    );
    if keel_sandbox::probe().missing().is_none() {
        assert_eq!(out.code(), Some(0), "{}", out.stdout);
        assert!(
            out.stdout.contains("commands are confined here"),
            "{}",
            out.stdout
        );
    } else {
        assert_eq!(out.code(), Some(1));
    }
    std::fs::write(
        env.home.path().join("config.toml"),
        "[sandbox]\nmode = \"open\"\n",
    )
    .unwrap();
    let bad = env.exec().arg("hi").run().await.unwrap();
    assert_eq!(bad.code(), Some(2));
    assert!(
        bad.stderr.contains("unknown sandbox mode \"open\""),
        "{}",
        bad.stderr
    );
}
