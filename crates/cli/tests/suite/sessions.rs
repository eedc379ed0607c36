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
    assert!(env.session_files().is_empty());
}
