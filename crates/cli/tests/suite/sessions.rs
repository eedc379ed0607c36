//! Resuming sessions: `--continue`, `--session`, and files cut by a crash.

use std::io::Write;

use keel_test_support::MockResponse;

use super::Env;

fn user_texts(body: &serde_json::Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test]
async fn continue_resumes_the_latest_session_of_the_workspace() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::text("second answer"),
    ]);
    let out = env.exec().arg("first question").run().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let out = env
        .exec()
        .args(["--continue", "second question"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);

    let body = env.mock.last_request().unwrap().body;
    assert_eq!(user_texts(&body), ["first question", "second question"]);
    assert_eq!(body["messages"][2]["content"], "first answer");
    // Still one session file, now with four messages.
    assert_eq!(env.only_session().await.messages().len(), 4);
}

#[tokio::test]
async fn continue_without_a_previous_session_starts_one() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("fresh"));
    let out = env
        .exec()
        .args(["--continue", "hello"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(env.only_session().await.messages().len(), 2);
}

#[tokio::test]
async fn session_by_id_prefix_and_by_path() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("one"),
        MockResponse::text("two"),
        MockResponse::text("three"),
    ]);
    env.exec().arg("q1").run().await.unwrap();
    let session = env.only_session().await;
    let prefix = &session.header.id[..13];
    let out = env
        .exec()
        .args(["--session", prefix, "q2"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        user_texts(&env.mock.last_request().unwrap().body),
        ["q1", "q2"]
    );

    let path = session.path.display().to_string();
    let out = env
        .exec()
        .args(["--session", &path, "q3"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        user_texts(&env.mock.last_request().unwrap().body),
        ["q1", "q2", "q3"]
    );

    let out = env
        .exec()
        .args(["--session", "ffffffff", "q4"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr.starts_with("keel: "), "{}", out.stderr);
}

#[tokio::test]
async fn a_session_cut_mid_line_still_resumes() {
    let env = Env::new().await;
    if env.db.is_some() {
        // A database commits whole lines: there is no cut line to resume.
        return;
    }
    env.mock.push_all([
        MockResponse::text("kept"),
        MockResponse::text("after crash"),
    ]);
    env.exec().arg("before crash").run().await.unwrap();
    let path = env.only_session().await.path;
    // A crash in the middle of writing the next line.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"{\"type\":\"message\",\"id\":\"abcd1234\",\"parentId\":nu")
        .unwrap();
    drop(f);

    let out = env
        .exec()
        .args(["--continue", "go on"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(
        user_texts(&env.mock.last_request().unwrap().body),
        ["before crash", "go on"]
    );
    let session = env.only_session().await;
    assert!(!session.recovered_tail, "the cut line was repaired");
    assert_eq!(session.messages().len(), 4);
}

#[tokio::test]
async fn sessions_list_shows_this_workspace() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("hi"));
    env.exec().arg("list me").run().await.unwrap();
    let out = env
        .keel()
        .args(["sessions", "list", "--json"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let rows = out.json_lines().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["messages"], 2);
    assert_eq!(rows[0]["firstMessage"], "list me");
}

#[tokio::test]
async fn no_session_saves_nothing() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("ephemeral"));
    let out = env.exec().args(["--no-session", "hi"]).run().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(env.session_files().await.is_empty());
}

#[tokio::test]
async fn a_name_is_the_title_and_the_first_user_message_the_default() {
    let env = Env::new().await;
    env.mock
        .push_all([MockResponse::text("one"), MockResponse::text("two")]);
    env.exec()
        .arg("first   question\nwith two lines")
        .run()
        .await
        .unwrap();
    let mut rpc = env.rpc(&[]).await;
    rpc.prompt_and_wait("second session").await;
    rpc.ok(serde_json::json!({"type": "set_session_name", "name": "my <named> run"}))
        .await;
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));

    let out = env.keel().args(["sessions", "list"]).run().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    // Newest first: the named session, then the first message as title.
    assert!(lines[0].ends_with("my <named> run"), "{}", out.stdout);
    assert!(
        lines[1].ends_with("first question with two lines"),
        "{}",
        out.stdout
    );
    let rows = env
        .keel()
        .args(["sessions", "list", "--json"])
        .run()
        .await
        .unwrap()
        .json_lines()
        .unwrap();
    assert_eq!(rows[0]["name"], "my <named> run");
    assert_eq!(rows[0]["firstMessage"], "second session");
    assert_eq!(rows[1]["name"], serde_json::Value::Null);

    // The export's title is the name, escaped.
    let id = rows[0]["id"].as_str().unwrap();
    let export = env
        .keel()
        .args([
            "sessions",
            "export",
            "--html",
            "--session",
            id,
            "-o",
            "n.html",
        ])
        .run()
        .await
        .unwrap();
    assert_eq!(export.code(), Some(0), "{}", export.stderr);
    let page = std::fs::read_to_string(env.ws().join("n.html")).unwrap();
    assert!(page.contains("<title>my &lt;named&gt; run — keel session</title>"));
}

#[tokio::test]
async fn stats_price_tokens_with_the_catalogue() {
    let env = Env::new().await;
    env.mock.push(MockResponse::text("priced"));
    // gpt-4.1 costs $2 per million input tokens and $8 per million output.
    let cmd = keel_test_support::KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
        .home(env.home.path())
        .cwd(env.ws())
        .args(["--mode", "rpc", "--base-url", &env.mock.base_url()])
        .args(["--model", "gpt-4.1"]);
    let mut rpc = super::rpc::Rpc::start(cmd).await;
    rpc.prompt_and_wait("how much?").await;
    let stats = rpc
        .ok(serde_json::json!({"type": "get_session_stats"}))
        .await;
    assert_eq!(stats["tokens"]["input"], 10);
    assert_eq!(stats["tokens"]["output"], 5);
    let cost = stats["cost"].as_f64().unwrap();
    assert!(
        (cost - (10.0 * 2.0 + 5.0 * 8.0) / 1e6).abs() < 1e-12,
        "{stats}"
    );
    let state = rpc.ok(serde_json::json!({"type": "get_state"})).await;
    let usage = &state["contextUsage"];
    assert_eq!(usage["tokens"], 15, "the provider's usage: {state}");
    assert!(usage["contextWindow"].as_u64().unwrap() >= 1_000_000);
    let (out, _) = rpc.finish().await;
    assert_eq!(out.code(), Some(0));
}
