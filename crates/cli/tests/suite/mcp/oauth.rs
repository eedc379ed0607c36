//! `keel mcp login` against a local OAuth 2.1 authorization server and MCP
//! server (`tests/clients/oauth_mcp_server.py`, on 127.0.0.1): discovery,
//! dynamic registration, PKCE and the loopback redirect; a session's tool
//! call on the token; the token refreshed once it expires; a revoked
//! sign-in named as such, and a new login by pasting the redirected
//! address; logout. The browser's part is done here: the server approves
//! at once, so following its redirect is all a person would do.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{WAIT, call, result_for, write_config};
use crate::suite::Env;

/// The OAuth and MCP server, killed when dropped.
struct OAuthServer {
    _child: tokio::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl OAuthServer {
    /// Started with access tokens that live `expires_in` seconds.
    async fn start(expires_in: u32) -> OAuthServer {
        let dir = tempfile::tempdir().unwrap();
        let port_file = dir.path().join("port");
        let script: PathBuf = super::clients_dir().join("oauth_mcp_server.py");
        let child = tokio::process::Command::new("python3")
            .arg(&script)
            .arg(&port_file)
            .arg(expires_in.to_string())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let port = tokio::time::timeout(WAIT, async {
            loop {
                if let Some(p) = std::fs::read_to_string(&port_file)
                    .ok()
                    .and_then(|t| t.trim().parse().ok())
                {
                    return p;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the OAuth server did not start");
        OAuthServer {
            _child: child,
            port,
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    async fn log(&self) -> Value {
        let (_, _, body) = http("GET", &self.url("/admin/log")).await;
        serde_json::from_str(&body).unwrap()
    }
}

/// One HTTP request over a fresh connection, redirects not followed:
/// (status, `Location`, body).
async fn http(method: &str, url: &str) -> (u16, Option<String>, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(host).await.unwrap();
        let req = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await.unwrap();
        String::from_utf8_lossy(&raw).into_owned()
    };
    let text = tokio::time::timeout(WAIT, exchange).await.unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let location = head
        .lines()
        .find_map(|l| l.strip_prefix("Location: ").map(str::to_owned));
    (status, location, body.to_owned())
}

async fn mcp_list(env: &Env) -> String {
    let out = env
        .keel()
        .args(["mcp", "list"])
        .timeout(WAIT)
        .run()
        .await
        .unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    out.stdout
}

/// Starts `keel mcp login remote` and returns it with the address it
/// printed and the authorization server's redirect for it.
async fn start_login(env: &Env) -> (keel_test_support::KeelChild, String) {
    let mut login = env
        .keel()
        .args(["mcp", "login", "remote", "--no-browser"])
        .env("RUST_LOG", "debug")
        .timeout(WAIT)
        .spawn()
        .await
        .unwrap();
    let address = login
        .wait_for_stdout(WAIT, |l| l.contains("/authorize?"))
        .await
        .unwrap();
    assert!(address.contains("code_challenge_method=S256"), "{address}");
    let (status, location, body) = http("GET", address.trim()).await;
    assert_eq!(status, 302, "{body}");
    (login, location.unwrap())
}

#[tokio::test]
async fn a_login_is_used_refreshed_and_told_when_revoked() {
    let env = Env::new().await;
    let server = OAuthServer::start(2).await;
    write_config(
        &env,
        &format!("[mcp_servers.remote]\nurl = \"{}\"\n", server.url("/mcp")),
    );
    let before = mcp_list(&env).await;
    assert!(
        before.contains("asks to sign in (401 Unauthorized): run `keel mcp login remote`"),
        "{before}"
    );

    // The browser comes back to keel's loopback listener.
    let (login, back) = start_login(&env).await;
    assert!(back.starts_with("http://127.0.0.1:"), "{back}");
    let (status, _, page) = http("GET", &back).await;
    assert_eq!(status, 200);
    assert!(page.contains("sign-in came back"), "{page}");
    let out = login.wait().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("Signed in to remote"), "{}", out.stdout);
    let log = server.log().await;
    assert_eq!(
        (log["registered"].clone(), log["code_grants"].clone()),
        (json!(1), json!(1))
    );

    // A session calls the server's tool with the token.
    let tokens_file = env.home.path().join("mcp-credentials/remote.json");
    env.mock.push_all([
        call("c1", "mcp__remote__whoami", json!({})),
        // The model's own file tools never read the tokens.
        call(
            "c2",
            "read",
            json!({"path": tokens_file.display().to_string()}),
        ),
        // Nor can a command, even one that hides the path from the
        // approvals analyser (which holds any touch of keel's home): the
        // sandbox covers the folder.
        call(
            "c3",
            "bash",
            json!({"command": format!(
                "p=$(printf '{}'); cat \"$p\"; echo listed:; ls -A \"$(dirname \"$p\")\"",
                tokens_file.display().to_string().bytes().map(|b| format!("\\x{b:02x}")).collect::<String>()
            )}),
        ),
        keel_test_support::MockResponse::text("done"),
    ]);
    let run = env
        .exec()
        .args(["--approval-mode", "money_only", "who am i"])
        .run()
        .await
        .unwrap();
    assert_eq!(run.code(), Some(0), "{}", run.stderr);
    assert!(
        result_for(&env, "c1").contains("signed in with a live token"),
        "{}",
        result_for(&env, "c1")
    );
    assert!(
        result_for(&env, "c2").contains("keel keeps its own secrets there"),
        "{}",
        result_for(&env, "c2")
    );
    let catted = result_for(&env, "c3");
    assert!(catted.contains("No such file"), "{catted}");
    assert!(!catted.contains("access_token"), "{catted}");
    if env.db.is_none() {
        // It is there, outside the sandbox, and the command saw an empty
        // folder. (With a database the tokens are a row, and no folder.)
        assert!(tokens_file.exists());
        assert!(catted.trim_end().ends_with("listed:"), "{catted}");
    }

    // Expired: refreshed on the next start, with a new token.
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let refreshed = mcp_list(&env).await;
    assert!(
        refreshed.contains("remote  ready (signed in (mcp))"),
        "{refreshed}"
    );
    let log = server.log().await;
    assert_eq!(log["refresh_grants"], 1, "{log}");
    let tokens: Vec<String> = log["bearer_seen"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str().map(str::to_owned))
        .collect();
    assert!(
        tokens
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            >= 2
    );

    // No token in what keel printed, logged or stored in sessions.
    let mut seen = format!("{}{}{}{}", out.stdout, out.stderr, run.stdout, run.stderr);
    for entry in walk(env.home.path()) {
        if entry.extension().is_some_and(|e| e == "jsonl") {
            seen.push_str(&std::fs::read_to_string(&entry).unwrap_or_default());
        }
    }
    for token in &tokens {
        assert!(!seen.contains(token.as_str()), "a token leaked: {token}");
    }

    // Revoked at the server: the refresh is refused and keel says so.
    http("POST", &server.url("/admin/revoke")).await;
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let revoked = mcp_list(&env).await;
    assert!(
        revoked.contains(
            "no longer takes keel's sign-in (401 Unauthorized): run `keel mcp login remote` again"
        ),
        "{revoked}"
    );
    assert!(
        revoked.contains("signed out: the server refused its tokens"),
        "{revoked}"
    );

    // A new login on a machine without a browser: the redirected address
    // is pasted.
    let (mut login, back) = start_login(&env).await;
    login.send_line(&back).await.unwrap();
    let out = login.wait().await.unwrap();
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(mcp_list(&env).await.contains("remote  ready"));

    // The same name at another address never gets these tokens.
    let seen_before = server.log().await["bearer_seen"].as_array().unwrap().len();
    write_config(
        &env,
        &format!("[mcp_servers.remote]\nurl = \"{}\"\n", server.url("/mcp/"))
            .replace("/mcp/", "/elsewhere/mcp"),
    );
    let moved = mcp_list(&env).await;
    assert!(moved.contains("is for http://127.0.0.1:"), "{moved}");
    assert!(moved.contains("sign in again"), "{moved}");
    assert_eq!(
        server.log().await["bearer_seen"].as_array().unwrap().len(),
        seen_before
    );
    write_config(
        &env,
        &format!("[mcp_servers.remote]\nurl = \"{}\"\n", server.url("/mcp")),
    );

    let logout = env
        .keel()
        .args(["mcp", "logout", "remote"])
        .timeout(WAIT)
        .run()
        .await
        .unwrap();
    assert!(
        logout.stdout.contains("Signed out of remote"),
        "{}",
        logout.stdout
    );
    assert!(mcp_list(&env).await.contains("not signed in"));
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// An app-server client signs the process in (`mcpServer/oauth/login`):
/// the answer is the address, the outcome a notification, and the server
/// is started again on its tokens.
#[tokio::test]
async fn an_app_server_client_signs_a_server_in() {
    let env = Env::new().await;
    let server = OAuthServer::start(3600).await;
    write_config(
        &env,
        &format!(
            "[mcp_servers.remote]\nurl = \"{}\"\n\n[mcp_servers.dead]\nurl = \"http://127.0.0.1:1/mcp\"\n",
            server.url("/mcp")
        ),
    );
    let mut s = env.initialized(false).await;
    let before = s.ok("mcpServerStatus/list", json!({})).await;
    let named = |list: &Value, name: &str| -> Value {
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} in {list}"))
    };
    let remote = named(&before, "remote");
    assert_ne!(remote["runtimeStatus"], "connected", "{before}");
    assert_eq!(remote["authStatus"], "notLoggedIn", "{before}");

    let answer = s
        .ok("mcpServer/oauth/login", json!({"name": "remote"}))
        .await;
    let address = answer["authorizationUrl"].as_str().unwrap().to_owned();
    assert!(answer["loginId"].is_string(), "{answer}");
    let (status, location, _) = http("GET", &address).await;
    assert_eq!(status, 302);
    let (status, _, _) = http("GET", &location.unwrap()).await;
    assert_eq!(status, 200);
    let done = s.notification("mcpServer/oauthLogin/completed").await;
    assert_eq!(done["params"]["success"], true, "{done}");
    assert_eq!(done["params"]["loginId"], answer["loginId"]);
    let after = s.ok("mcpServerStatus/list", json!({})).await;
    let remote = &named(&after, "remote");
    assert_eq!(remote["runtimeStatus"], "connected", "{after}");
    assert_eq!(remote["authStatus"], "oAuth", "{after}");
    assert!(remote["tools"].to_string().contains("whoami"), "{after}");

    // A server nobody answers at: the sign-in cannot start, and says so.
    let dead = s
        .err("mcpServer/oauth/login", json!({"name": "dead"}))
        .await;
    assert!(
        dead["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{dead}"
    );
    // A stdio server, or one not configured, is refused with why.
    let unknown = s
        .err("mcpServer/oauth/login", json!({"name": "nowhere"}))
        .await;
    assert!(
        unknown["message"]
            .as_str()
            .is_some_and(|m| m.contains("no MCP server named nowhere")),
        "{unknown}"
    );
    s.close().await;
}
