//! The mock model server: an axum app on `127.0.0.1:<random port>`.
//!
//! This module owns the HTTP side of the mock: accepting requests, capturing
//! them ([`CapturedRequest`]), popping the next scripted [`MockResponse`]
//! (FIFO, whatever the dialect path) and writing it out, misbehaviour
//! included (delays, cuts, stalls). It does not build any dialect's JSON:
//! the dialect modules do, and each contributes the path it is served on to
//! [`DIALECT_PATHS`].
//!
//! Answers: a `POST` to a dialect path gets the next scripted response, or
//! `500 {"error":{"message":"mock: no scripted response"}}` when the script
//! is empty; any other method or path gets `404` (and is captured too).

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use axum::body::{Body as HttpBody, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;

use crate::response::{Body, MockResponse};
use crate::{anthropic, chat_completions, responses};

/// The paths served with scripted responses, one per wire dialect.
pub const DIALECT_PATHS: &[&str] = &[chat_completions::PATH, responses::PATH, anthropic::PATH];

/// One request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct CapturedRequest {
    pub method: String,
    /// The path without the query string, for example `/v1/chat/completions`.
    pub path: String,
    /// Header names lowercased; repeated headers joined with `, `.
    pub headers: BTreeMap<String, String>,
    /// The body parsed as JSON; a non-JSON body is kept as a JSON string and
    /// an empty body is `null`.
    pub body: Value,
}

impl CapturedRequest {
    /// The value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<MockResponse>>,
    /// Answers given to every request whose body holds the text, outside
    /// the script (a client's side requests, such as title generation).
    standing: Mutex<Vec<(String, MockResponse)>>,
    /// Answers given to every request whose last message holds the text
    /// (many conversations at once, each answered by where it is).
    by_last: Mutex<Vec<(String, MockResponse)>>,
    requests: Mutex<Vec<CapturedRequest>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Clone)]
struct AppState {
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

/// A scripted model server. Dropping it shuts it down (stalled streams are
/// aborted).
pub struct MockModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for MockModelServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockModelServer")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl MockModelServer {
    /// Starts a server on `127.0.0.1` with a random port. Panics if the
    /// socket cannot be bound (a broken test environment).
    pub async fn start() -> MockModelServer {
        match MockModelServer::try_start().await {
            Ok(server) => server,
            Err(e) => panic!("mock model server failed to start: {e:#}"),
        }
    }

    /// Like [`MockModelServer::start`], reporting failure as an error.
    pub async fn try_start() -> anyhow::Result<MockModelServer> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .context("binding 127.0.0.1:0")?;
        let addr = listener.local_addr().context("reading the local address")?;
        let shared = Arc::new(Shared::default());
        let shutdown = CancellationToken::new();
        let state = AppState {
            shared: shared.clone(),
            shutdown: shutdown.clone(),
        };
        let app = Router::new().fallback(handle).with_state(state);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(stop.cancelled_owned())
                .await;
            if let Err(e) = served {
                tracing::warn!("mock model server stopped: {e}");
            }
        });
        Ok(MockModelServer {
            addr,
            shared,
            shutdown,
        })
    }

    /// Answers every request whose JSON body contains `text` with
    /// `response`, without taking from the script: for requests a client
    /// makes on its own at moments a test cannot order (a conversation
    /// title, say).
    pub fn answer_whenever(&self, text: impl Into<String>, response: MockResponse) {
        lock(&self.shared.standing).push((text.into(), response));
    }

    /// Answers every request whose last message (of `messages`, or of
    /// `input` in the Responses dialect) contains `text` with `response`,
    /// without taking from the script: for many conversations at once in
    /// no set order, each answered by what it said last (its prompt, or the
    /// output of the tool it ran).
    pub fn answer_when_last_says(&self, text: impl Into<String>, response: MockResponse) {
        lock(&self.shared.by_last).push((text.into(), response));
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL to configure a provider with.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Appends a response to the script.
    pub fn push(&self, response: MockResponse) {
        lock(&self.shared.script).push_back(response);
    }

    /// Appends several responses to the script, in order.
    pub fn push_all(&self, responses: impl IntoIterator<Item = MockResponse>) {
        lock(&self.shared.script).extend(responses);
    }

    /// How many scripted responses have not been served yet.
    pub fn pending_responses(&self) -> usize {
        lock(&self.shared.script).len()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<CapturedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The last request received, if any.
    pub fn last_request(&self) -> Option<CapturedRequest> {
        lock(&self.shared.requests).last().cloned()
    }

    /// How many requests have been received.
    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    /// Waits until at least `n` requests have arrived.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> anyhow::Result<()> {
        crate::wait_until(timeout, || self.request_count() >= n)
            .await
            .with_context(|| format!("waiting for {n} request(s), got {}", self.request_count()))
    }
}

impl Drop for MockModelServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn handle(
    State(state): State<AppState>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let captured = CapturedRequest {
        method: method.to_string(),
        path: path.clone(),
        headers: capture_headers(&headers),
        body: parse_body(&body),
    };
    lock(&state.shared.requests).push(captured);

    if method != Method::POST || !DIALECT_PATHS.contains(&path.as_str()) {
        let msg = format!("mock: no route for {method} {path}");
        return json_response(404, &json!({"error": {"message": msg}}), &[]);
    }
    let text = String::from_utf8_lossy(&body);
    let standing = lock(&state.shared.standing)
        .iter()
        .find(|(needle, _)| text.contains(needle.as_str()))
        .map(|(_, r)| r.clone());
    let by_last = || {
        let body: Value = serde_json::from_slice(&body).ok()?;
        let last = ["messages", "input"]
            .iter()
            .find_map(|k| body.get(*k).and_then(Value::as_array))?
            .last()?
            .to_string();
        lock(&state.shared.by_last)
            .iter()
            .find(|(needle, _)| last.contains(needle.as_str()))
            .map(|(_, r)| r.clone())
    };
    let next = standing
        .or_else(by_last)
        .or_else(|| lock(&state.shared.script).pop_front());
    let Some(scripted) = next else {
        let body = json!({"error": {"message": "mock: no scripted response"}});
        return json_response(500, &body, &[]);
    };
    if let Some(delay) = scripted.delay_headers {
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = state.shutdown.cancelled() => {}
        }
    }
    match scripted.body.clone() {
        Body::Error { status, body } => json_response(status, &body, &scripted.headers),
        Body::Sse(events) => sse_response(scripted, events, state.shutdown.clone()),
    }
}

fn capture_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        out.entry(name.as_str().to_ascii_lowercase())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    out
}

fn parse_body(body: &[u8]) -> Value {
    if body.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

fn apply_headers(response: &mut Response, extra: &[(String, String)]) {
    for (name, value) in extra {
        let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) else {
            tracing::warn!("mock: skipping invalid header {name}: {value}");
            continue;
        };
        response.headers_mut().append(name, value);
    }
}

fn json_response(status: u16, body: &Value, extra: &[(String, String)]) -> Response {
    let mut response = Response::new(HttpBody::from(body.to_string()));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    apply_headers(&mut response, extra);
    response
}

type Chunk = Result<Bytes, std::io::Error>;

/// Streams `events` through a channel so the writer can notice the client
/// going away (`tx.closed()`) while it sleeps or stalls.
fn sse_response(
    scripted: MockResponse,
    events: Vec<crate::SseEvent>,
    shutdown: CancellationToken,
) -> Response {
    let (tx, rx) = mpsc::channel::<Chunk>(16);
    let mut response = Response::new(HttpBody::from_stream(ReceiverStream::new(rx)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    apply_headers(&mut response, &scripted.headers);
    tokio::spawn(write_events(scripted, events, tx, shutdown));
    response
}

fn abort_error() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "mock: connection cut",
    )
}

async fn write_events(
    scripted: MockResponse,
    events: Vec<crate::SseEvent>,
    tx: mpsc::Sender<Chunk>,
    shutdown: CancellationToken,
) {
    let limit = match (scripted.cut_after, scripted.stall_after) {
        (Some(c), Some(s)) => c.min(s),
        (Some(c), None) => c,
        (None, Some(s)) => s,
        (None, None) => events.len(),
    };
    for event in events.iter().take(limit) {
        if let Some(delay) = scripted.delay_each {
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = tx.closed() => return,
                _ = shutdown.cancelled() => {
                    let _ = tx.send(Err(abort_error())).await;
                    return;
                }
            }
        }
        if tx.send(Ok(Bytes::from(event.encode()))).await.is_err() {
            return;
        }
    }
    if scripted.cut_after == Some(limit) {
        let next = events
            .get(limit)
            .map(|e| e.encode())
            .unwrap_or_else(|| "data: {\"id\":\"chatcmpl-mock\",\"choices\":[{\"delta\"".into());
        let half = next.as_bytes()[..next.len() / 2].to_vec();
        if !half.is_empty() && tx.send(Ok(Bytes::from(half))).await.is_err() {
            return;
        }
        // Give the server a moment to flush the half event before aborting.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _ = tx.send(Err(abort_error())).await;
        return;
    }
    if scripted.stall_after.is_some() {
        tokio::select! {
            _ = tx.closed() => {}
            _ = shutdown.cancelled() => {
                let _ = tx.send(Err(abort_error())).await;
            }
        }
    }
    // Otherwise dropping `tx` ends the body cleanly.
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ev_done, ev_text_delta};

    const T: Duration = Duration::from_secs(10);

    async fn post(server: &MockModelServer, body: Value) -> (u16, HeaderMap, String) {
        let fut = async {
            let resp = reqwest::Client::new()
                .post(format!("{}/chat/completions", server.base_url()))
                .header("Authorization", "Bearer k")
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let headers = resp.headers().clone();
            (status, headers, resp.text().await.unwrap())
        };
        tokio::time::timeout(T, fut).await.unwrap()
    }

    #[tokio::test]
    async fn serves_script_in_order_and_captures() {
        let server = MockModelServer::start().await;
        server.push_all([
            MockResponse::sse(vec![ev_text_delta("one"), ev_done()]),
            MockResponse::text("two"),
        ]);
        let (status, headers, body) = post(&server, json!({"n": 1})).await;
        assert_eq!(status, 200);
        assert_eq!(headers["content-type"], "text/event-stream");
        assert!(body.contains("\"content\":\"one\""), "{body}");
        assert!(body.ends_with("data: [DONE]\n\n"));
        let (_, _, body) = post(&server, json!({"n": 2})).await;
        assert!(body.contains("\"content\":\"w\""), "{body}");

        let reqs = server.requests();
        assert_eq!(server.request_count(), 2);
        assert_eq!(reqs[0].method, "POST");
        assert_eq!(reqs[0].path, "/v1/chat/completions");
        assert_eq!(reqs[0].body, json!({"n": 1}));
        assert_eq!(reqs[1].header("AUTHORIZATION"), Some("Bearer k"));
        assert_eq!(server.pending_responses(), 0);
    }

    #[tokio::test]
    async fn errors_and_empty_script() {
        let server = MockModelServer::start().await;
        server.push(
            MockResponse::error(429, json!({"error": {"message": "slow down"}}))
                .header("retry-after", "2"),
        );
        let (status, headers, body) = post(&server, json!({})).await;
        assert_eq!(status, 429);
        assert_eq!(headers["retry-after"], "2");
        assert!(body.contains("slow down"));
        let (status, _, body) = post(&server, json!({})).await;
        assert_eq!(status, 500);
        assert!(body.contains("mock: no scripted response"));
    }

    #[tokio::test]
    async fn every_dialect_path_is_served_from_the_one_script() {
        let server = MockModelServer::start().await;
        server.push_all([
            crate::responses::text("from responses"),
            crate::anthropic::text("from messages"),
        ]);
        let client = reqwest::Client::new();
        let mut bodies = Vec::new();
        for path in ["responses", "messages", "embeddings"] {
            let fut = async {
                let resp = client
                    .post(format!("{}/{path}", server.base_url()))
                    .json(&json!({"stream": true}))
                    .send()
                    .await
                    .unwrap();
                (resp.status().as_u16(), resp.text().await.unwrap())
            };
            bodies.push(tokio::time::timeout(T, fut).await.unwrap());
        }
        assert_eq!(bodies[0].0, 200);
        assert!(
            bodies[0].1.starts_with("event: response.created\n"),
            "{}",
            bodies[0].1
        );
        assert!(
            bodies[0].1.contains("\"delta\":\"from \""),
            "{}",
            bodies[0].1
        );
        assert!(bodies[0].1.contains("event: response.completed\n"));
        assert_eq!(bodies[1].0, 200);
        assert!(
            bodies[1].1.starts_with("event: message_start\n"),
            "{}",
            bodies[1].1
        );
        assert!(
            bodies[1]
                .1
                .ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
        );
        assert_eq!(bodies[2].0, 404, "not a dialect path");
        let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
        assert_eq!(paths, ["/v1/responses", "/v1/messages", "/v1/embeddings"]);
    }

    #[tokio::test]
    async fn cut_aborts_the_body() {
        let server = MockModelServer::start().await;
        server.push(MockResponse::text("hello there").cut_after(2));
        let fut = async {
            let resp = reqwest::Client::new()
                .post(format!("{}/chat/completions", server.base_url()))
                .json(&json!({}))
                .send()
                .await
                .unwrap();
            resp.text().await
        };
        let result = tokio::time::timeout(T, fut).await.unwrap();
        assert!(
            result.is_err(),
            "a cut body must not end cleanly: {result:?}"
        );
    }
}
