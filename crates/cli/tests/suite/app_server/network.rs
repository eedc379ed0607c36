//! The network transports end to end against the real binary: auth on
//! `ws://` and `unix://` (capability tokens, signed bearer tokens), the
//! `Origin` refusal, the health endpoints, oversize messages, the
//! slow-client policy, and one runtime shared by every connection.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use keel_app_server::transport::jwt::sign_hs256;
use keel_test_support::{MockResponse, tool_call};
use serde_json::json;

use super::super::Env;
use super::WAIT;
use super::net::{NetServer, Target};

const TOKEN: &str = "keel-test-capability-token-0123456789";
const SECRET: &str = "keel-test-jwt-secret-0123456789-abcdefghij";

/// Writes a 0600 secret file into `dir`.
fn secret_file(dir: &Path, name: &str, content: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, content).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p.display().to_string()
}

fn sha256_hex(s: &str) -> String {
    use std::process::Command;
    // sha256sum is in coreutils; avoids a hashing dev-dependency.
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("printf %s '{s}' | sha256sum"))
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// `ws://127.0.0.1:0` with [`TOKEN`] in a token file.
async fn loopback_server_with_token(env: &Env) -> NetServer {
    let token = secret_file(env.home.path(), "token", &format!("{TOKEN}\n"));
    env.net_server("ws://127.0.0.1:0", &["--ws-token-file", &token])
        .await
}

#[tokio::test]
async fn ws_auth_origin_and_health_endpoints() {
    let env = Env::new().await;
    let server = loopback_server_with_token(&env).await;
    let t = server.target.clone();
    assert!(matches!(t, Target::Tcp(a) if a.ip().is_loopback()));

    // Health endpoints need no auth; an Origin header is refused everywhere.
    assert_eq!(t.http_get("/healthz", &[]).await, (200, "ok\n".into()));
    assert_eq!(t.http_get("/readyz", &[]).await, (200, "ready\n".into()));
    let origin = ("Origin", "http://127.0.0.1:1234");
    assert_eq!(t.http_get("/healthz", &[origin]).await.0, 403);
    assert_eq!(t.http_get("/readyz", &[origin]).await.0, 403);

    // Upgrades: no token, a wrong one, another scheme, the token in the
    // query string (never read) → 401 without detail.
    let bearer = format!("Bearer {TOKEN}");
    let refusals = [
        ("/", vec![]),
        ("/", vec![("Authorization", "Bearer not-the-token")]),
        ("/", vec![("Authorization", "Basic a2VlbDprZWVs")]),
        ("/", vec![("Authorization", TOKEN)]),
        (&*format!("/?token={TOKEN}"), vec![]),
        (
            &*format!("/?access_token={TOKEN}&authorization=Bearer%20{TOKEN}"),
            vec![],
        ),
    ];
    for (path, headers) in &refusals {
        let (status, body) = t.ws_refused(path, headers).await;
        assert_eq!(
            (status, body.as_str()),
            (401, "unauthorized\n"),
            "{path} {headers:?}"
        );
    }
    // The right token with an Origin header is still refused (403).
    let (status, _) = t
        .ws_refused("/", &[("Authorization", &bearer), origin])
        .await;
    assert_eq!(status, 403);

    // The right token in the header works.
    let mut c = t.ws_bearer(TOKEN).await;
    let init = c.initialize().await;
    assert!(
        init["userAgent"]
            .as_str()
            .unwrap()
            .starts_with("keel_net_tests/")
    );
    assert_eq!(
        c.ok("thread/loaded/list", json!({})).await["data"],
        json!([])
    );

    // Shutdown closes the connection with 1001; the process exits 0.
    let out_fut = server.stop();
    let (closed, out) = tokio::join!(c.closed(), out_fut);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    if let Some(frame) = closed {
        assert_eq!(u16::from(frame.code), 1001);
    }
    // Neither the token nor the refused query strings reach the logs.
    assert!(!out.stderr.contains(TOKEN), "{}", out.stderr);
    assert!(
        out.stderr.contains("refused a websocket upgrade"),
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn ws_text_turn_and_two_connections_share_one_thread() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::text("Hello over a socket!"),
        MockResponse::text("Second answer."),
    ]);
    let token = secret_file(env.home.path(), "token", TOKEN);
    let server = env
        .net_server("ws://127.0.0.1:0", &["--ws-token-file", &token])
        .await;
    let t = server.target.clone();

    // Connection A starts a thread and runs a text turn against the mock.
    let mut a = t.ws_bearer(TOKEN).await;
    a.initialize().await;
    let r = a
        .ok(
            "thread/start",
            json!({"cwd": env.ws().display().to_string(), "approvalPolicy": "never"}),
        )
        .await;
    let thread = r["thread"]["id"].as_str().unwrap().to_owned();
    let r = a
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "Say hello"}]}),
        )
        .await;
    let turn = r["turn"]["id"].as_str().unwrap().to_owned();
    let done = a.finish_turn(&turn).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["items"][0]["text"], "Hello over a socket!");
    let deltas: String = a
        .seen("item/agentMessage/delta")
        .iter()
        .map(|f| f["params"]["delta"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deltas, "Hello over a socket!");

    // Connection B sees the same loaded thread, reads it and resumes it.
    let mut b = t.ws_bearer(TOKEN).await;
    b.initialize().await;
    let loaded = b.ok("thread/loaded/list", json!({})).await;
    assert_eq!(loaded["data"], json!([thread]));
    let read = b
        .ok(
            "thread/read",
            json!({"threadId": thread, "includeTurns": true}),
        )
        .await;
    assert_eq!(
        read["thread"]["turns"][0]["items"][1]["text"],
        "Hello over a socket!"
    );
    let resumed = b.ok("thread/resume", json!({"threadId": thread})).await;
    assert_eq!(resumed["thread"]["id"], thread.as_str());

    // B starts the next turn; A, still subscribed, sees it too.
    let r = b
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "Again"}]}),
        )
        .await;
    let turn2 = r["turn"]["id"].as_str().unwrap().to_owned();
    let done_b = b.finish_turn(&turn2).await;
    let done_a = a.finish_turn(&turn2).await;
    assert_eq!(done_b["items"][0]["text"], "Second answer.");
    assert_eq!(done_a, done_b);
    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert_eq!(env.session_files().await.len(), 1);
}

#[tokio::test]
async fn approvals_reach_every_connection_and_the_first_answer_wins() {
    let env = Env::new().await;
    env.mock.push_all([
        MockResponse::tool_calls(vec![tool_call(
            "c1",
            "bash",
            json!({"command": "echo first | tee first.txt"}),
        )]),
        MockResponse::text("ran first"),
        MockResponse::tool_calls(vec![tool_call(
            "c2",
            "bash",
            json!({"command": "echo second | tee second.txt"}),
        )]),
        MockResponse::text("ran second"),
    ]);
    let token = secret_file(env.home.path(), "token", TOKEN);
    let server = env
        .net_server("ws://127.0.0.1:0", &["--ws-token-file", &token])
        .await;
    let t = server.target.clone();
    let mut a = t.ws_bearer(TOKEN).await;
    a.initialize().await;
    let r = a
        .ok(
            "thread/start",
            json!({"cwd": env.ws().display().to_string(), "approvalPolicy": "untrusted"}),
        )
        .await;
    let thread = r["thread"]["id"].as_str().unwrap().to_owned();
    let mut b = t.ws_bearer(TOKEN).await;
    b.initialize().await;
    b.ok("thread/resume", json!({"threadId": thread})).await;

    // Both connections get the request; B answers first, A's late decline
    // is ignored.
    let r = a
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "one"}]}),
        )
        .await;
    let turn = r["turn"]["id"].as_str().unwrap().to_owned();
    let req_a = a.server_request().await;
    let req_b = b.server_request().await;
    assert_eq!(req_a["method"], "item/commandExecution/requestApproval");
    assert_eq!(req_a["params"], req_b["params"]);
    b.send(json!({"id": req_b["id"], "result": {"decision": "accept"}}))
        .await;
    a.wait_for("serverRequest/resolved", |f| {
        f["method"] == "serverRequest/resolved"
    })
    .await;
    a.send(json!({"id": req_a["id"], "result": {"decision": "decline"}}))
        .await;
    let done = a.finish_turn(&turn).await;
    assert_eq!(done["status"], "completed");
    b.finish_turn(&turn).await;
    let item = a
        .seen("item/completed")
        .into_iter()
        .map(|f| f["params"]["item"].clone())
        .find(|i| i["type"] == "commandExecution")
        .unwrap();
    assert_eq!(item["status"], "completed");
    assert!(item["aggregatedOutput"].as_str().unwrap().contains("first"));

    // A connection that goes away leaves the request pending for the other.
    let r = b
        .ok(
            "turn/start",
            json!({"threadId": thread, "input": [{"type": "text", "text": "two"}]}),
        )
        .await;
    let turn = r["turn"]["id"].as_str().unwrap().to_owned();
    a.server_request().await;
    a.close().await;
    let req = b.server_request().await;
    assert_eq!(req["params"]["itemId"], "c2");
    b.send(json!({"id": req["id"], "result": {"decision": "accept"}}))
        .await;
    let done = b.finish_turn(&turn).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["items"][0]["text"], "ran second");
    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}

#[tokio::test]
async fn ws_oversize_message_closes_with_1009() {
    let env = Env::new().await;
    let token = secret_file(env.home.path(), "token", TOKEN);
    let server = env
        .net_server(
            "ws://127.0.0.1:0",
            &["--ws-token-file", &token, "--max-frame-bytes", "2048"],
        )
        .await;
    let t = server.target.clone();
    let mut c = t.ws_bearer(TOKEN).await;
    c.initialize().await;
    let big = json!({"id": 7, "method": "thread/start",
                     "params": {"baseInstructions": "x".repeat(4096)}});
    c.send(big).await;
    let frame = c.closed().await.expect("a close frame");
    assert_eq!(u16::from(frame.code), 1009);
    // The server keeps serving other connections.
    let mut d = t.ws_bearer(TOKEN).await;
    d.initialize().await;
    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}

#[tokio::test]
async fn unix_socket_has_the_same_auth_and_is_private() {
    let env = Env::new().await;
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("keel.sock");
    // A stale socket left by a dead server is replaced.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    assert!(sock.exists());
    let digest = sha256_hex(TOKEN);
    let server = env
        .net_server(
            &format!("unix://{}", sock.display()),
            &["--ws-token-sha256", &digest],
        )
        .await;
    let t = server.target.clone();
    assert!(matches!(&t, Target::Unix(p) if *p == sock));
    let mode = std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    assert_eq!(t.http_get("/healthz", &[]).await.0, 200);
    assert_eq!(t.http_get("/readyz", &[("Origin", "null")]).await.0, 403);
    assert_eq!(t.ws_refused("/", &[]).await.0, 401);
    assert_eq!(
        t.ws_refused("/", &[("Authorization", "Bearer wrong")])
            .await
            .0,
        401
    );
    assert_eq!(t.ws_refused(&format!("/?token={TOKEN}"), &[]).await.0, 401);
    let mut c = t.ws_bearer(TOKEN).await;
    c.initialize().await;
    let r = c
        .ok(
            "thread/start",
            json!({"cwd": env.ws().display().to_string()}),
        )
        .await;
    assert!(r["thread"]["id"].is_string());

    // A second server on the same path is refused while the first lives.
    let second = env
        .app_server_cmd()
        .args([
            "--listen",
            &format!("unix://{}", sock.display()),
            "--ws-token-sha256",
            &digest,
        ])
        .run()
        .await
        .unwrap();
    assert_ne!(second.code(), Some(0));
    assert!(
        second.stderr.contains("another server is listening"),
        "{}",
        second.stderr
    );

    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(!sock.exists(), "the socket is removed on shutdown");
}

#[tokio::test]
async fn unix_without_a_path_uses_the_default_socket_under_keel_home() {
    let env = Env::new().await;
    let token = secret_file(env.ws(), "token", TOKEN);
    let server = env
        .net_server("unix://", &["--ws-token-file", &token])
        .await;
    let expected = env
        .home
        .path()
        .join("app-server-control/app-server-control.sock");
    let Target::Unix(path) = server.target.clone() else {
        panic!("not a unix target")
    };
    assert_eq!(
        std::fs::canonicalize(&path).unwrap(),
        std::fs::canonicalize(&expected).unwrap()
    );
    let dir_mode = std::fs::metadata(expected.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    let mut c = server.target.ws_bearer(TOKEN).await;
    c.initialize().await;
    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(!expected.exists());
}

#[tokio::test]
async fn signed_bearer_tokens_valid_expired_wrong_audience() {
    let env = Env::new().await;
    let secret = secret_file(env.home.path(), "jwt-secret", SECRET);
    let server = env
        .net_server(
            "ws://127.0.0.1:0",
            &[
                "--ws-auth",
                "signed-bearer-token",
                "--ws-shared-secret-file",
                &secret,
                "--ws-issuer",
                "keel-tests",
                "--ws-audience",
                "keel",
            ],
        )
        .await;
    let t = server.target.clone();
    let sign = |claims: serde_json::Value| sign_hs256(SECRET.as_bytes(), &claims);
    let valid = sign(json!({"iss": "keel-tests", "aud": "keel", "exp": now() + 300}));
    let refused = [
        (
            "expired",
            sign(json!({"iss": "keel-tests", "aud": "keel", "exp": now() - 3600})),
        ),
        (
            "wrong audience",
            sign(json!({"iss": "keel-tests", "aud": "other", "exp": now() + 300})),
        ),
        (
            "wrong issuer",
            sign(json!({"iss": "mallory", "aud": "keel", "exp": now() + 300})),
        ),
        (
            "not yet valid",
            sign(
                json!({"iss": "keel-tests", "aud": "keel", "exp": now() + 7200, "nbf": now() + 3600}),
            ),
        ),
        ("no exp", sign(json!({"iss": "keel-tests", "aud": "keel"}))),
        (
            "other secret",
            sign_hs256(
                b"a-completely-different-secret-of-enough-bytes",
                &json!({"iss": "keel-tests", "aud": "keel", "exp": now() + 300}),
            ),
        ),
    ];
    for (what, token) in &refused {
        let (status, body) = t
            .ws_refused("/", &[("Authorization", &format!("Bearer {token}"))])
            .await;
        assert_eq!((status, body.as_str()), (401, "unauthorized\n"), "{what}");
    }
    // A valid token, but in the query string: refused.
    assert_eq!(t.ws_refused(&format!("/?token={valid}"), &[]).await.0, 401);
    let mut c = t.ws_bearer(&valid).await;
    c.initialize().await;
    assert_eq!(
        c.ok("thread/loaded/list", json!({})).await["data"],
        json!([])
    );
    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(!out.stderr.contains(SECRET));
    assert!(!out.stderr.contains(&valid));
}

#[tokio::test]
async fn network_listeners_refuse_to_start_without_auth() {
    let env = Env::new().await;
    let token = secret_file(env.home.path(), "token", TOKEN);
    let fails = |args: Vec<String>| {
        let cmd = env.app_server_cmd().args(args).timeout(WAIT);
        async move {
            let out = cmd.run().await.unwrap();
            assert_ne!(out.code(), Some(0), "{}", out.stderr);
            out.stderr
        }
    };
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let err = fails(s(&["--listen", "ws://127.0.0.1:0"])).await;
    assert!(err.contains("needs auth"), "{err}");
    let err = fails(s(&["--listen", "unix://"])).await;
    assert!(err.contains("needs auth"), "{err}");
    let err = fails(s(&["--listen", "ws://0.0.0.0:0", "--ws-insecure-no-auth"])).await;
    assert!(err.contains("only allowed on a loopback"), "{err}");
    let err = fails(s(&[
        "--listen",
        "ws://127.0.0.1:0",
        "--ws-token-file",
        &token,
        "--ws-token-sha256",
        &sha256_hex(TOKEN),
    ]))
    .await;
    assert!(err.contains("cannot be used with"), "{err}");
    let short = secret_file(env.home.path(), "short", "short");
    let err = fails(s(&[
        "--listen",
        "ws://127.0.0.1:0",
        "--ws-shared-secret-file",
        &short,
    ]))
    .await;
    assert!(err.contains("at least 32 bytes"), "{err}");
    assert!(!err.contains("short\n"), "secrets are not echoed: {err}");

    // Loopback with the explicit opt-out serves without a token.
    let server = env
        .net_server("ws://127.0.0.1:0", &["--ws-insecure-no-auth"])
        .await;
    let mut c = match server.target.ws("/", &[]).await {
        Ok(c) => c,
        Err(e) => panic!("refused: {e:?}"),
    };
    c.initialize().await;
    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}

#[tokio::test]
async fn a_client_that_does_not_read_is_disconnected() {
    let env = Env::new().await;
    let token = secret_file(env.home.path(), "token", TOKEN);
    let mut server = env
        .net_server("ws://127.0.0.1:0", &["--ws-token-file", &token])
        .await;
    let t = server.target.clone();
    let mut c = t.ws_bearer(TOKEN).await;
    c.initialize().await;
    // Far more streamed output than the socket buffers and the outbound
    // queue hold; the client reads nothing meanwhile.
    c.request(
        "command/exec",
        json!({"command": ["head", "-c", "400000000", "/dev/zero"],
               "processId": "flood", "streamStdoutStderr": true, "disableOutputCap": true}),
    )
    .await;
    server
        .child
        .wait_for_stderr(WAIT, |l| l.contains("closing a slow websocket client"))
        .await
        .unwrap();
    // The connection ends: with a 1008 close frame when it still got out,
    // or cut after the close timeout.
    if let Some(frame) = c.closed().await {
        assert_eq!(u16::from(frame.code), 1008);
        assert_eq!(frame.reason.as_str(), "slow client: outbound queue full");
    }
    // The server goes on serving.
    let mut d = t.ws_bearer(TOKEN).await;
    d.initialize().await;
    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}

#[tokio::test]
async fn idle_unauthenticated_sockets_do_not_starve_health_or_clients() {
    let env = Env::new().await;
    let server = loopback_server_with_token(&env).await;
    let t = server.target.clone();
    let Target::Tcp(addr) = t.clone() else {
        panic!("not tcp")
    };
    // More idle sockets than the listener holds at once.
    let mut idle = Vec::new();
    for _ in 0..600 {
        idle.push(tokio::net::TcpStream::connect(addr).await.unwrap());
    }
    let wait = std::time::Duration::from_secs(10);
    let health = tokio::time::timeout(wait, t.http_get("/healthz", &[]))
        .await
        .expect("/healthz waited behind idle sockets");
    assert_eq!(health, (200, "ok\n".into()));
    let mut c = tokio::time::timeout(wait, t.ws_bearer(TOKEN))
        .await
        .expect("an authenticated upgrade waited behind idle sockets");
    c.initialize().await;
    assert_eq!(
        c.ok("thread/loaded/list", json!({})).await["data"],
        json!([])
    );
    drop(idle);
    let out = server.stop().await;
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
}
