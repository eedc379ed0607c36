//! Approvals on a real PostgreSQL server (started by the test, see
//! `keel_test_support::PostgresServer`): a `keel exec` configured with the
//! server in `config.toml` holds a call; a `keel approvals` process with
//! another home, pointed at the same server by
//! `KEEL_APPROVALS_DATABASE_URL`, sees it and approves it with an
//! always-allow rule; a second run is let through by that rule, and the
//! rule's fields (created from, matches) say so. No `keel.db` is written.

use keel_test_support::{KeelCommand, MockResponse, PostgresServer, tool_call};
use serde_json::{Value, json};

use crate::suite::Env;

/// `keel approvals <args…>` from a second home that knows the store only
/// through the environment.
async fn decider(env: &Env, home: &std::path::Path, url: &str, args: &[&str]) -> Value {
    let out = KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
        .home(home)
        .cwd(env.ws())
        .env("KEEL_APPROVALS_DATABASE_URL", url)
        .arg("approvals")
        .args(args.iter().copied())
        .arg("--json")
        .run()
        .await
        .unwrap();
    assert_eq!(
        out.code(),
        Some(0),
        "keel approvals {args:?}: {}",
        out.stderr
    );
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", out.stdout))
}

#[tokio::test]
async fn a_call_held_on_postgres_is_decided_by_another_process() {
    let Some(server) = PostgresServer::start().await else {
        return;
    };
    let url = server.database().await;
    let env = Env::new().await;
    if env.db.is_some() {
        // About the approvals-only settings; the shared database would win over them.
        return;
    }
    std::fs::write(
        env.home.path().join("config.toml"),
        format!("[approvals]\nstore = {:?}\n", url),
    )
    .unwrap();
    let other_home = tempfile::tempdir().unwrap();

    let show = env.keel().args(["config", "show"]).run().await.unwrap();
    assert!(
        show.stdout
            .contains(&format!("approvals_store = {url:?}  # postgres")),
        "{}",
        show.stdout
    );

    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "touch first.txt"}),
        )]),
        MockResponse::text("Made it."),
    ]);
    let (child, _) = env
        .exec_held(&["--approval-mode", "everything", "make a file"])
        .await;
    assert!(!env.ws().join("first.txt").exists(), "held, not run");

    // The other process finds the request on the server, and approves it
    // with a rule for `touch …`.
    let listed = decider(&env, other_home.path(), &url, &["list"]).await;
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(listed[0]["tool"], "bash");
    let decided = decider(
        &env,
        other_home.path(),
        &url,
        &["approve", &id, "--always", "--scope", "touch"],
    )
    .await;
    assert_eq!(decided["status"], "approved");

    let done = child.wait().await.unwrap();
    assert_eq!(done.code(), Some(0), "stderr: {}", done.stderr);
    assert!(done.stdout.contains("Made it."), "{}", done.stdout);
    assert!(env.ws().join("first.txt").exists());

    let rules = decider(&env, other_home.path(), &url, &["rules"]).await;
    assert_eq!(rules.as_array().unwrap().len(), 1, "{rules}");
    assert_eq!(rules[0]["created_from"], id.as_str());
    assert!(rules[0]["created_at"].as_i64().unwrap() > 0);
    assert_eq!(rules[0]["match_count"], 0);
    assert_eq!(rules[0]["last_matched_at"], Value::Null);

    // The rule lets the next `touch` run without asking, and counts it.
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c2",
            "bash",
            json!({"command": "touch second.txt"}),
        )]),
        MockResponse::text("Made another."),
    ]);
    let again = env
        .exec()
        .args([
            "--approval-mode",
            "everything",
            "--wait-approvals",
            "another",
        ])
        .run()
        .await
        .unwrap();
    assert_eq!(again.code(), Some(0), "stderr: {}", again.stderr);
    assert!(env.ws().join("second.txt").exists());
    let rules = decider(&env, other_home.path(), &url, &["rules"]).await;
    assert_eq!(rules[0]["match_count"], 1);
    assert!(rules[0]["last_matched_at"].as_i64().is_some(), "{rules}");
    let text = env.keel().args(["approvals", "rules"]).run().await.unwrap();
    assert!(
        text.stdout
            .contains(&format!("from request {id}; matched 1 times")),
        "{}",
        text.stdout
    );
    let audit = decider(&env, other_home.path(), &url, &["explain", "c2"]).await;
    assert_eq!(audit[0]["approved_by"], "rule", "{audit}");

    // Everything lives on the server: neither home has an SQLite file.
    assert!(!env.home.path().join("keel.db").exists());
    assert!(!other_home.path().join("keel.db").exists());
}

#[tokio::test]
async fn a_bad_store_setting_is_a_clear_error_without_the_password() {
    let env = Env::new().await;
    if env.db.is_some() {
        // About the approvals-only settings; the shared database would win over them.
        return;
    }
    std::fs::write(
        env.home.path().join("config.toml"),
        "[approvals]\nstore = \"mysql://keel:hunter2@127.0.0.1/keel\"\n",
    )
    .unwrap();
    let out = env.keel().args(["approvals", "list"]).run().await.unwrap();
    assert_ne!(out.code(), Some(0));
    assert!(out.stderr.contains("[approvals] store"), "{}", out.stderr);
    assert!(out.stderr.contains("postgres://"), "{}", out.stderr);
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
    let show = env.keel().args(["config", "show"]).run().await.unwrap();
    assert!(!show.stdout.contains("hunter2"), "{}", show.stdout);
    assert!(
        show.stdout.contains("# approvals store:"),
        "{}",
        show.stdout
    );
}
