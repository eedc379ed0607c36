//! A harness for the network transports: starts `keel app-server --listen
//! ws://127.0.0.1:0` or `unix://PATH`, learns the address from the
//! documented stderr line (`keel app-server listening on <url> (auth:
//! <mode>)`), and talks to it with raw HTTP requests ([`Target::http_get`])
//! and WebSocket clients ([`WsClient`], tokio-tungstenite). Every frame the
//! server sends is validated against the Codex schema; every wait is
//! bounded by [`WAIT`]. Only 127.0.0.1 and unix sockets in temp dirs.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use futures::{SinkExt, StreamExt};
use keel_test_support::{KeelChild, KeelOutput};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::{HeaderName, HeaderValue};
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{self, Message};

use super::super::Env;
use super::WAIT;
use super::schema::{Profile, Schemas};

/// What the listener is bound to.
#[derive(Debug, Clone)]
pub enum Target {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

/// A running network listener.
pub struct NetServer {
    pub child: KeelChild,
    pub target: Target,
}

pub trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

impl Env {
    /// Starts `keel app-server --listen <listen> <extra…>` and waits for
    /// its listening line.
    pub async fn net_server(&self, listen: &str, extra: &[&str]) -> NetServer {
        let mut child = self
            .app_server_cmd()
            .args(["--listen", listen])
            .args(extra.iter().copied())
            .spawn()
            .await
            .unwrap();
        let line = child
            .wait_for_stderr(WAIT, |l| l.starts_with("keel app-server listening on "))
            .await
            .unwrap();
        let url = line
            .trim_start_matches("keel app-server listening on ")
            .split(' ')
            .next()
            .unwrap();
        let target = match url.strip_prefix("ws://") {
            Some(addr) => Target::Tcp(addr.parse().unwrap()),
            None => Target::Unix(PathBuf::from(url.strip_prefix("unix://").unwrap())),
        };
        NetServer { child, target }
    }
}

impl NetServer {
    /// SIGTERM, then the exit.
    pub async fn stop(self) -> KeelOutput {
        self.child.signal("TERM").await.unwrap();
        self.child.wait().await.unwrap()
    }
}

impl Target {
    async fn stream(&self) -> Box<dyn Io> {
        let connect = async {
            match self {
                Target::Tcp(a) => {
                    Box::new(tokio::net::TcpStream::connect(a).await.unwrap()) as Box<dyn Io>
                }
                Target::Unix(p) => Box::new(tokio::net::UnixStream::connect(p).await.unwrap()),
            }
        };
        tokio::time::timeout(WAIT, connect).await.unwrap()
    }

    /// `GET path` with extra headers over a fresh connection: (status, body).
    pub async fn http_get(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        let mut s = self.stream().await;
        let mut req = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(WAIT, s.read_to_end(&mut raw))
            .await
            .unwrap()
            .unwrap();
        let text = String::from_utf8_lossy(&raw).into_owned();
        let status = text.split(' ').nth(1).unwrap().parse().unwrap();
        let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
        (status, body.unwrap_or_default())
    }

    /// A WebSocket upgrade of `path` with extra headers: the client, or the
    /// HTTP status and body of the refusal.
    pub async fn ws(
        &self,
        path: &str,
        headers: &[(&str, &str)],
    ) -> Result<WsClient, (u16, String)> {
        let mut req = format!("ws://localhost{path}")
            .into_client_request()
            .unwrap();
        for (k, v) in headers {
            req.headers_mut().append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        let stream = self.stream().await;
        let r = tokio::time::timeout(WAIT, tokio_tungstenite::client_async(req, stream))
            .await
            .unwrap();
        match r {
            Ok((ws, _)) => Ok(WsClient::new(ws)),
            Err(tungstenite::Error::Http(resp)) => {
                let body = resp
                    .body()
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .unwrap_or_default();
                Err((resp.status().as_u16(), body))
            }
            Err(e) => panic!("websocket handshake failed: {e}"),
        }
    }

    /// A WebSocket with `Authorization: Bearer <token>`, which must succeed.
    pub async fn ws_bearer(&self, token: &str) -> WsClient {
        let auth = format!("Bearer {token}");
        match self.ws("/", &[("Authorization", &auth)]).await {
            Ok(c) => c,
            Err((status, body)) => panic!("upgrade refused: {status} {body}"),
        }
    }

    /// The status of an upgrade that must be refused.
    pub async fn ws_refused(&self, path: &str, headers: &[(&str, &str)]) -> (u16, String) {
        match self.ws(path, headers).await {
            Ok(_) => panic!("the upgrade of {path} with {headers:?} was accepted"),
            Err(e) => e,
        }
    }
}

/// One WebSocket client speaking the app-server protocol.
pub struct WsClient {
    ws: WebSocketStream<Box<dyn Io>>,
    /// Every frame read so far.
    pub frames: Vec<Value>,
    next_id: i64,
    sent: HashMap<String, String>,
    schemas: Schemas,
}

impl WsClient {
    fn new(ws: WebSocketStream<Box<dyn Io>>) -> Self {
        Self {
            ws,
            frames: Vec::new(),
            next_id: 0,
            sent: HashMap::new(),
            schemas: Schemas::new(Profile::Stable),
        }
    }

    pub async fn send_text(&mut self, text: String) {
        tokio::time::timeout(WAIT, self.ws.send(Message::text(text)))
            .await
            .unwrap()
            .unwrap();
    }

    pub async fn send(&mut self, v: Value) {
        self.send_text(v.to_string()).await;
    }

    /// The next message (`None` when the connection ended without a close frame).
    pub async fn message(&mut self) -> Option<Message> {
        match tokio::time::timeout(WAIT, self.ws.next()).await {
            Ok(Some(Ok(m))) => Some(m),
            Ok(Some(Err(_)) | None) => None,
            Err(_) => panic!(
                "no websocket message within {WAIT:?}; frames so far: {:#?}",
                self.frames
            ),
        }
    }

    /// The next JSON-RPC frame, validated against the schema.
    pub async fn next(&mut self) -> Value {
        loop {
            match self.message().await {
                Some(Message::Text(t)) => {
                    let v: Value = serde_json::from_str(t.as_str()).unwrap();
                    let method = self.sent.get(&v["id"].to_string()).cloned();
                    let is_response = v.get("method").is_none();
                    if let Err(e) = self
                        .schemas
                        .validate(&v, if is_response { method.as_deref() } else { None })
                    {
                        panic!("frame violates the Codex schema: {e}\nframe: {v}");
                    }
                    self.frames.push(v.clone());
                    return v;
                }
                Some(Message::Ping(_) | Message::Pong(_)) => continue,
                other => panic!("expected a text frame, got {other:?}"),
            }
        }
    }

    /// Reads frames until one satisfies `pred`.
    pub async fn wait_for(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {what} within {WAIT:?}"
            );
            let v = self.next().await;
            if pred(&v) {
                return v;
            }
        }
    }

    /// Sends a request; returns its id.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.sent.insert(id.to_string(), method.to_owned());
        self.send(json!({"id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a request and waits for its response frame.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.wait_for(&format!("response {id}"), |f| {
            f["id"] == id && f.get("method").is_none()
        })
        .await
    }

    /// Sends a request, asserts success and returns `result`.
    pub async fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        assert!(r.get("error").is_none(), "{method} failed: {r}");
        r["result"].clone()
    }

    /// `initialize` + `initialized`.
    pub async fn initialize(&mut self) -> Value {
        let r = self
            .ok(
                "initialize",
                json!({"clientInfo": {"name": "keel_net_tests", "title": null, "version": "1.0.0"}}),
            )
            .await;
        self.send(json!({"method": "initialized"})).await;
        r
    }

    /// Waits for `turn/completed` of `turn`; returns the turn.
    pub async fn finish_turn(&mut self, turn: &str) -> Value {
        let f = self
            .wait_for("turn/completed", |f| {
                f["method"] == "turn/completed" && f["params"]["turn"]["id"] == turn
            })
            .await;
        f["params"]["turn"].clone()
    }

    /// Reads until the server closes: its close frame, or `None` when the
    /// connection ended without one. Other messages are skipped.
    pub async fn closed(&mut self) -> Option<CloseFrame> {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server did not close within {WAIT:?}"
            );
            match self.message().await {
                Some(Message::Close(frame)) => return frame,
                None => return None,
                Some(_) => continue,
            }
        }
    }

    /// Waits for the next server request (approval).
    pub async fn server_request(&mut self) -> Value {
        self.wait_for("a server request", |f| {
            f.get("id").is_some() && f.get("method").is_some()
        })
        .await
    }

    /// Closes the connection from the client side.
    pub async fn close(mut self) {
        let _ = tokio::time::timeout(WAIT, self.ws.close(None)).await;
    }

    /// The notifications `method` seen so far.
    pub fn seen(&self, method: &str) -> Vec<Value> {
        self.frames
            .iter()
            .filter(|f| f["method"] == method)
            .cloned()
            .collect()
    }
}
