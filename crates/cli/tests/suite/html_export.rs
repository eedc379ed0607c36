//! `keel sessions show|export|rm`, `keel exec --fork-from`, and the HTML
//! export of a fixture session with every entry type checked in a real
//! headless Chromium by `scripts/html-export-check.py` (skipped, with a
//! message, when Chromium or python3 is missing — except under CI, where
//! `CI` is set and a missing browser fails the test).

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_test_support::MockResponse;

use super::Env;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sessions/every-entry-type.jsonl")
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A check that could not run: skipped locally, a failure under CI.
#[allow(clippy::print_stderr)]
fn skip_or_fail(why: &str) {
    assert!(!keel_test_support::in_ci(), "CI is set but {why}");
    eprintln!("SKIP: {why}");
}

#[test]
fn the_fixture_holds_every_entry_type() {
    let text = std::fs::read_to_string(fixture()).unwrap();
    let mut kinds: Vec<String> = text
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            v["type"].as_str().unwrap().to_owned()
        })
        .collect();
    kinds.sort();
    kinds.dedup();
    assert_eq!(
        kinds,
        [
            "approval",
            "branch",
            "compaction",
            "message",
            "model_change",
            "session",
            "session_info",
            "thinking_level_change"
        ]
    );
    for role in [
        "\"role\": \"user\"",
        "\"role\": \"assistant\"",
        "\"role\": \"toolResult\"",
    ] {
        assert!(text.contains(role), "no {role} message");
    }
}

#[tokio::test]
async fn the_export_of_every_entry_type_renders_safely_in_chromium() {
    let env = Env::new().await;
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("html-export-check");
    std::fs::create_dir_all(&out_dir).unwrap();
    let html = out_dir.join("every-entry-type.html");
    let fixture = fixture().display().to_string();
    let out = env
        .keel()
        .args(["sessions", "export", "--html", "--session", &fixture, "-o"])
        .arg(html.display().to_string())
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let page = std::fs::read_to_string(&html).unwrap();
    // Static checks that need no browser.
    assert_eq!(page.matches("<script>").count(), 1);
    assert!(page.contains("&lt;script&gt;window.pwned=1&lt;/script&gt;"));
    assert!(page.contains("Content-Security-Policy"));
    for needle in [
        "Context compacted",
        "Thinking",
        "Approval: declined: “open a PR instead”",
        "Approval: approved by you",
        "Approval: allowed by rule rule_0001",
        "Went back to an earlier point",
        // Header: model and token totals.
        "<dt>Model</dt><dd>openai/gpt-4.1</dd>",
        "<span class=\"pill\">input <b>10,800</b>",
        "<span class=\"pill\">cost <b>$0.0441</b>",
        // Markdown, highlighted code, thinking folded (closed).
        "<table>",
        "class=\"k\"",
        "<details class=\"thinking\">",
        // Entries the latest compaction summarised are marked.
        "class=\"entry msg user compacted\"",
        "d-add",
        "more lines</summary>",
        "Another branch from here",
        "Model: openai/gpt-4.1",
        "Thinking level: medium",
        "Session named",
        "Aborted",
    ] {
        assert!(page.contains(needle), "the page lacks {needle:?}");
    }

    let shot = out_dir.join("every-entry-type.png");
    let dark = out_dir.join("every-entry-type-dark.png");
    let _ = std::fs::remove_file(&shot);
    let script = repo_root().join("scripts/html-export-check.py");
    let run = tokio::process::Command::new("python3")
        .arg(&script)
        .arg(&html)
        .arg(&shot)
        .arg(&dark)
        .kill_on_drop(true)
        .output();
    let output = match tokio::time::timeout(Duration::from_secs(180), run).await {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => {
            skip_or_fail(&format!(
                "cannot run python3 ({e}); the HTML export was not checked in Chromium"
            ));
            return;
        }
        Err(_) => panic!("the Chromium check did not finish within 180 s"),
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(77) {
        skip_or_fail(stdout.trim().trim_start_matches("SKIP: "));
        return;
    }
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{stderr}");
    let size = std::fs::metadata(&shot).map(|m| m.len()).unwrap_or(0);
    assert!(size > 10_000, "no screenshot at {}", shot.display());
    assert!(dark.is_file());
}

#[tokio::test]
async fn show_fork_from_and_rm() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("first answer"),
        MockResponse::text("second answer"),
        MockResponse::text("forked answer"),
    ]);
    env.exec().arg("question one").run().await.unwrap();
    let id = env.only_session().await.header.id;
    env.exec()
        .args(["--session", &id, "question two"])
        .run()
        .await
        .unwrap();
    let session = env.only_session().await;
    let first_answer = session
        .entries
        .iter()
        .find(|e| matches!(&e.body, keel_session_store::EntryBody::Message { message: keel_protocol::Message::Assistant(a) } if a.text() == "first answer"))
        .unwrap()
        .id
        .clone();

    let show = env
        .keel()
        .args(["sessions", "show", &id])
        .run()
        .await
        .unwrap();
    assert_eq!(show.code(), Some(0), "{}", show.stderr);
    assert!(show.stdout.contains(&first_answer), "{}", show.stdout);
    assert!(
        show.stdout.contains("user       question two"),
        "{}",
        show.stdout
    );

    let out = env
        .exec()
        .args([
            "--session",
            &id,
            "--fork-from",
            &first_answer,
            "question three",
        ])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    let sent = env.mock.last_request().unwrap().body["messages"].to_string();
    assert!(
        sent.contains("first answer") && !sent.contains("second answer"),
        "{sent}"
    );
    assert_eq!(env.session_files().await.len(), 2);

    let out = env
        .exec()
        .args(["--fork-from", &first_answer, "x"])
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(2));
    assert!(out.stderr.contains("--fork-from needs"), "{}", out.stderr);

    let rm = env
        .keel()
        .args(["sessions", "rm", &id])
        .run()
        .await
        .unwrap();
    assert_eq!(rm.code(), Some(0), "{}", rm.stderr);
    assert_eq!(env.session_files().await.len(), 1);
    let export = env
        .keel()
        .args(["sessions", "export", "--html", "-o", "latest.html"])
        .run()
        .await
        .unwrap();
    assert_eq!(export.code(), Some(0), "{}", export.stderr);
    let page = std::fs::read_to_string(env.ws().join("latest.html")).unwrap();
    assert!(page.contains("forked answer"));
}
