//! The inbox over HTTP: a real server on 127.0.0.1, a real SQLite store,
//! requests as a browser would send them (and as an attacker would).

mod http;

use std::sync::Arc;
use std::time::Duration;

use keel_approvals::{ApprovalEngine, CallContext, GateOutcome, ToolOrigin};
use keel_inbox::{Auth, Inbox, Served};
use serde_json::{Value, json};

/// Every wait in these tests ends.
pub const WAIT: Duration = Duration::from_secs(20);
pub const TOKEN: &str = "a-long-test-token-0123456789";

/// A running inbox over a fresh store.
pub struct Lab {
    _dir: tempfile::TempDir,
    pub engine: ApprovalEngine,
    pub base: String,
    pub client: reqwest::Client,
    pub ws: String,
    calls: std::sync::atomic::AtomicU32,
}

impl Lab {
    pub async fn new() -> Lab {
        let dir = tempfile::tempdir().unwrap();
        let engine = ApprovalEngine::open_sqlite(dir.path().join("keel.db"))
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let host = addr.to_string();
        let inbox = Arc::new(Inbox {
            engine: engine.clone(),
            auth: Auth::new(
                TOKEN.into(),
                Served {
                    hosts: vec![host.clone()],
                    tls: false,
                },
            ),
            sessions: keel_session_store::SessionStore::new(dir.path().join("sessions")),
            drafts: None,
        });
        tokio::spawn(async move {
            let _ = axum_serve(listener, keel_inbox::router(inbox)).await;
        });
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        Lab {
            engine,
            base: format!("http://{host}"),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(WAIT)
                .build()
                .unwrap(),
            ws: ws.display().to_string(),
            _dir: dir,
            calls: std::sync::atomic::AtomicU32::new(0),
        }
    }

    /// Holds a call of `tool` with `args`; its request id.
    pub async fn hold(&self, tool: &str, args: Value) -> String {
        let n = self
            .calls
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let call = CallContext {
            workspace: self.ws.clone(),
            cwd: self.ws.clone().into(),
            session_id: "s1".into(),
            call_id: format!("call_{n}"),
            tool_name: tool.into(),
            args,
            origin: ToolOrigin::Builtin,
            unattended: false,
            write_target: None,
        };
        match self.engine.gate_check(&call).await {
            GateOutcome::Held { request } => request.id,
            other => panic!("not held: {other:?}"),
        }
    }

    pub async fn hold_bash(&self, command: &str) -> String {
        self.hold("bash", json!({ "command": command })).await
    }

    /// Logs in; the cookie header value and the session's CSRF token.
    pub async fn login(&self) -> (String, String) {
        let r = self
            .client
            .post(format!("{}/login", self.base))
            .header("origin", &self.base)
            .form(&[("token", TOKEN)])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 303, "login failed");
        let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
        let cookie = set.split(';').next().unwrap().to_owned();
        let page = self.get("/", &cookie).await.1;
        let csrf = page
            .split("name=\"csrf\" value=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap()
            .to_owned();
        (cookie, csrf)
    }

    pub async fn get(&self, path: &str, cookie: &str) -> (u16, String) {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    /// POSTs a form as the inbox's own page would (cookie, origin).
    pub async fn post(&self, path: &str, cookie: &str, form: &[(&str, &str)]) -> u16 {
        self.client
            .post(format!("{}{path}", self.base))
            .header("cookie", cookie)
            .header("origin", &self.base)
            .form(form)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

async fn axum_serve(listener: tokio::net::TcpListener, app: axum::Router) -> std::io::Result<()> {
    axum::serve(listener, app).await
}
