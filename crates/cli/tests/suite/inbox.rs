//! The web inbox end to end: a running `keel --mode rpc` holds calls, a
//! real headless Chromium decides them in `keel approvals serve`, and the
//! model reads the outcome. Also the webhook nudge, against a local
//! receiver.

use std::io::Write as _;
use std::path::Path;
use std::process::Stdio;

use keel_test_support::{KeelChild, MockResponse};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use super::Env;
use super::approvals::result_text;
use super::rpc::WAIT;
use super::sandbox::bash;

/// `keel approvals serve` on a free port: the process, its address, the token.
async fn serve(env: &Env) -> (KeelChild, String, String) {
    let mut child = env
        .keel()
        .args(["approvals", "serve", "--listen", "127.0.0.1:0"])
        .spawn()
        .await
        .unwrap();
    let on = child
        .wait_for_stdout(WAIT, |l| l.starts_with("keel inbox on "))
        .await
        .unwrap();
    let base = on
        .trim_start_matches("keel inbox on ")
        .trim_end_matches('/')
        .to_owned();
    let token = child
        .wait_for_stdout(WAIT, |l| l.starts_with("token: "))
        .await
        .unwrap()
        .trim_start_matches("token: ")
        .to_owned();
    (child, base, token)
}

/// The browser driver (`scripts/inbox-browser-check.py`).
struct Browser {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    out: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

impl Browser {
    /// `None` (the test is skipped) without Chromium, except under `CI`.
    #[allow(clippy::print_stderr)]
    async fn start(base: &str) -> Option<Browser> {
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/inbox-browser-check.py");
        let mut child = tokio::process::Command::new("python3")
            .arg(script)
            .arg(base)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(WAIT * 2, out.next_line())
            .await
            .expect("the browser did not start")
            .unwrap()
            .unwrap_or_default();
        if first.starts_with("SKIP:") {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run the inbox in Chromium: {first}"
            );
            eprintln!("{first}");
            return None;
        }
        assert!(first.contains("\"ready\""), "{first}");
        Some(Browser { child, stdin, out })
    }

    async fn cmd(&mut self, line: &str) -> Value {
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        let reply = tokio::time::timeout(WAIT * 2, self.out.next_line())
            .await
            .unwrap_or_else(|_| panic!("the browser did not answer {line:?}"))
            .unwrap()
            .unwrap_or_default();
        let v: Value = serde_json::from_str(&reply).unwrap_or_else(|e| panic!("{e}: {reply}"));
        assert_eq!(v["ok"], true, "{line}: {v}");
        v
    }

    async fn quit(mut self) {
        let _ = self.stdin.write_all(b"quit\n").await;
        let _ = tokio::time::timeout(WAIT, self.child.wait()).await;
    }
}

/// Where screenshots are kept (a CI artifact).
fn shots() -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/inbox-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn a_person_decides_held_calls_from_the_inbox_in_a_browser() {
    let env = Env::new().await;
    let (_inbox, base, token) = serve(&env).await;
    let Some(mut b) = Browser::start(&base).await else {
        return;
    };
    let login = b.cmd(&format!("login {token}")).await;
    assert_eq!(login["url"], "/", "{login}");
    b.cmd("wait-cards 0").await;
    b.cmd("mark").await;

    env.mock.push_all([
        bash(
            "c1",
            "curl -s 'https://example.com/<script>window.pwned=1</script>'",
        ),
        MockResponse::text("fetched"),
        MockResponse::text_and_tool_calls(
            "Let me fetch the mirror's index.",
            vec![keel_test_support::tool_call(
                "c2",
                "bash",
                json!({"command": "curl -s https://example.com/mirror"}),
            )],
        ),
        MockResponse::text("ok"),
        bash("c3", "rm -rf build"),
        MockResponse::text("ok"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "one"})).await;
    let req = rpc.approval_request().await;
    // The card shows up without a reload, with the count in the title.
    let seen = b.cmd("wait-cards 1").await;
    assert_eq!(seen["ids"][0], req["id"], "{seen}");
    assert!(
        seen["title"].as_str().unwrap().starts_with("(1) "),
        "{seen}"
    );
    assert_eq!(seen["marked"], true, "the page was reloaded: {seen}");
    let facts = b.cmd("probe").await;
    assert_eq!(facts["pwned"], false, "an argument ran as markup");
    assert!(
        facts["text"]
            .as_str()
            .unwrap()
            .contains("<script>window.pwned=1</script>")
    );
    // On a phone nothing overflows.
    b.cmd("phone").await;
    let phone = b.cmd("probe").await;
    assert_eq!(
        (phone["overflow"].clone(), phone["wide"].clone()),
        (json!(false), json!(0)),
        "{phone}"
    );
    b.cmd(&format!(
        "screenshot {}",
        shots().join("inbox-phone.png").display()
    ))
    .await;
    b.cmd("desktop").await;
    b.cmd(&format!(
        "screenshot {}",
        shots().join("inbox-desktop.png").display()
    ))
    .await;
    // A page on another origin cannot approve it: the cookie stays home.
    let id = req["id"].as_str().unwrap().to_owned();
    b.cmd(&format!("forge {id}")).await;
    b.cmd("goto /").await;
    b.cmd("wait-cards 1").await;
    // Allow: the turn runs the tool.
    b.cmd(&format!("act {id} approve")).await;
    rpc.tool_end("c1").await;
    rpc.event("agent_end").await;
    let audit = env.approvals_json(&["explain", "c1"]).await;
    assert!(
        audit
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["decider"] == "web"),
        "{audit}"
    );

    // Decline with a note: the model reads the note.
    rpc.send(json!({"type": "prompt", "message": "two"})).await;
    let req = rpc.approval_request().await;
    let id = req["id"].as_str().unwrap().to_owned();
    b.cmd("wait-cards 1").await;
    b.cmd(&format!("act {id} decline use the internal mirror"))
        .await;
    let end = rpc.tool_end("c2").await;
    assert!(
        result_text(&end).contains("use the internal mirror"),
        "{end}"
    );
    rpc.event("agent_end").await;

    // Money: no Always allow on the card.
    rpc.send(json!({"type": "prompt", "message": "three"}))
        .await;
    let req = rpc.approval_request().await;
    let id = req["id"].as_str().unwrap().to_owned();
    b.cmd("wait-cards 1").await;
    let facts = b.cmd("probe").await;
    let actions = facts["cards"][0]["actions"].to_string();
    assert!(
        !actions.contains("always"),
        "money offered always-allow: {actions}"
    );
    b.cmd(&format!("act {id} decline")).await;
    rpc.tool_end("c3").await;
    rpc.event("agent_end").await;
    b.cmd("wait-cards 0").await;
    b.quit().await;
}

#[tokio::test]
async fn always_allow_from_the_inbox_and_removing_the_rule_asks_again() {
    let env = Env::new().await;
    let (_inbox, base, token) = serve(&env).await;
    let Some(mut b) = Browser::start(&base).await else {
        return;
    };
    b.cmd(&format!("login {token}")).await;
    env.mock.push_all([
        bash("c1", "curl -s https://example.com/a"),
        MockResponse::text("one"),
        bash("c2", "curl -s https://example.com/a"),
        MockResponse::text("two"),
        bash("c3", "curl -s https://example.com/a"),
        MockResponse::text("three"),
    ]);
    let mut rpc = env.rpc(&[]).await;
    rpc.send(json!({"type": "prompt", "message": "one"})).await;
    let req = rpc.approval_request().await;
    let id = req["id"].as_str().unwrap().to_owned();
    b.cmd("wait-cards 1").await;
    let facts = b.cmd("probe").await;
    let scope = facts["cards"][0]["scope"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        scope.starts_with("Saves the rule: Always allow"),
        "the scope is said before saving: {facts}"
    );
    b.cmd(&format!("act {id} always")).await;
    rpc.tool_end("c1").await;
    rpc.event("agent_end").await;
    // The next matching call runs unasked.
    rpc.send(json!({"type": "prompt", "message": "two"})).await;
    rpc.tool_end("c2").await;
    rpc.event("agent_end").await;
    assert_eq!(
        rpc.frames
            .iter()
            .filter(|f| f["type"] == "approval_request")
            .count(),
        1
    );
    // Removing the rule in the workspace page makes the next call ask.
    let ws = keel_core::workspace_key(env.ws());
    b.cmd(&format!("goto /workspace?w={}", ws)).await;
    let removed = b.cmd("remove-first-rule").await;
    assert_eq!(removed["rules"], 0, "{removed}");
    rpc.send(json!({"type": "prompt", "message": "three"}))
        .await;
    let again = rpc.approval_request().await;
    assert_eq!(again["toolCallId"], "c3");
    b.cmd("goto /").await;
    b.cmd("wait-cards 1").await;
    b.cmd(&format!("act {} approve", again["id"].as_str().unwrap()))
        .await;
    rpc.tool_end("c3").await;
    b.quit().await;
}

#[tokio::test]
async fn a_held_call_nudges_the_webhook_once_without_secrets() {
    let env = Env::new().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mut config = std::fs::File::create(env.home.path().join("config.toml")).unwrap();
    writeln!(
        config,
        "[approvals.notify]\nwebhook = \"http://127.0.0.1:{port}/hook\"\ninbox_url = \"http://inbox.test:4600\"\nretries = 0\n"
    )
    .unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(String, String)>(8);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncReadExt;
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let text = String::from_utf8_lossy(&buf).into_owned();
                    if let Some((head, body)) = text.split_once("\r\n\r\n") {
                        let len: usize = head
                            .lines()
                            .find_map(|l| {
                                l.to_ascii_lowercase()
                                    .strip_prefix("content-length:")
                                    .map(|v| v.trim().parse().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if body.len() >= len {
                            let _ = sock
                                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                                .await;
                            let _ = tx.send((head.to_owned(), body.to_owned())).await;
                            break;
                        }
                    }
                }
            });
        }
    });
    env.mock.push_all([
        bash(
            "c1",
            "curl -s -H 'Authorization: Bearer abc' https://example.com/x",
        ),
        MockResponse::text("done"),
    ]);
    let mut rpc =
        super::rpc::Rpc::start(env.rpc_cmd().env("OPENAI_API_KEY", "sk-very-secret-value")).await;
    rpc.send(json!({"type": "prompt", "message": "go"})).await;
    let req = rpc.approval_request().await;
    let (head, body) = tokio::time::timeout(WAIT, rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(head.starts_with("POST /hook "), "{head}");
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["event"], "approval.held");
    assert_eq!(v["id"], req["id"]);
    assert_eq!(v["class"], "send");
    assert_eq!(
        v["url"],
        format!(
            "http://inbox.test:4600/#card-{}",
            req["id"].as_str().unwrap()
        )
    );
    assert!(v["title"].as_str().unwrap().contains("curl"), "{v}");
    assert!(!body.contains("sk-very-secret-value"), "{body}");
    let id = req["id"].as_str().unwrap().to_owned();
    rpc.decide(&id, "decline", json!({})).await;
    rpc.event("agent_end").await;
    // One nudge per held call.
    assert!(
        tokio::time::timeout(std::time::Duration::from_millis(500), rx.recv())
            .await
            .is_err(),
        "a second nudge for the same call"
    );
}

#[tokio::test]
async fn drafts_are_sent_or_discarded_from_the_inbox() {
    let env = Env::new().await;
    let (_inbox, base, token) = serve(&env).await;
    let Some(mut b) = Browser::start(&base).await else {
        return;
    };
    b.cmd(&format!("login {token}")).await;
    // An unattended run parks its held calls as drafts and goes on.
    env.mock.push_all([
        bash("c1", "echo sent > sent.txt"),
        bash("c2", "echo gone > discarded.txt"),
        MockResponse::text("parked both"),
    ]);
    let run = env
        .exec()
        .args(["--approval-mode", "everything", "write two files"])
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    let seen = b.cmd("wait-cards 2").await;
    let facts = b.cmd("probe").await;
    for card in facts["cards"].as_array().unwrap() {
        assert_eq!(card["actions"], json!(["send", "discard"]), "{facts}");
    }
    let ids: Vec<String> = seen["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    // Newest first: c2's draft, then c1's.
    b.cmd(&format!("act {} send", ids[1])).await;
    b.cmd(&format!("act {} discard", ids[0])).await;
    b.cmd("wait-cards 0").await;
    assert_eq!(
        std::fs::read_to_string(env.ws().join("sent.txt")).unwrap(),
        "sent\n"
    );
    assert!(!env.ws().join("discarded.txt").exists());
    b.quit().await;
}
