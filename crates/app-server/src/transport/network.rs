//! The network listeners: `ws://HOST:PORT` and `unix://[PATH]`. Both speak
//! HTTP/1.1 and upgrade to WebSocket; the unix socket is the same protocol
//! over a unix stream. Every connection joins the one shared [`Runtime`]
//! (threads, subscriptions and approvals are shared with stdio and every
//! other connection).
//!
//! Each request passes, in order:
//!
//! 1. any request carrying an `Origin` header → **403** (a browser page can
//!    never reach the server, whatever it knows);
//! 2. `GET /healthz` → 200 `ok` (the process is up) and `GET /readyz` → 200
//!    `ready`, or 503 once the server is shutting down; neither needs auth
//!    and neither says anything else;
//! 3. any other path is a WebSocket upgrade: the [`AuthPolicy`] checks the
//!    `Authorization: Bearer` header (nothing else) → **401** with
//!    `WWW-Authenticate: Bearer` and no detail; the reason is logged, the
//!    token never is, and neither is the query string;
//! 4. at most [`MAX_CONNECTIONS`] connections at once → 503 beyond;
//! 5. the upgrade itself, with messages capped at `--max-frame-bytes`, then
//!    [`super::ws::run`].
//!
//! Below HTTP, a listener holds at most [`super::listener::MAX_SOCKETS`]
//! sockets at once, authenticated or not ([`Capped`]).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::{Semaphore, mpsc};

use super::Listen;
use super::auth::AuthPolicy;
use super::listener::{Capped, MAX_SOCKETS, Peer};
use super::unix::{SocketGuard, default_socket_path};
use crate::error::{Error, Result};
use crate::runtime::Runtime;

/// Most WebSocket connections served at once, per listener.
pub const MAX_CONNECTIONS: usize = 256;
/// How long shutdown waits for open connections to finish closing.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

enum Bound {
    Tcp(TcpListener),
    Unix(UnixListener, SocketGuard),
}

/// A bound network listener, ready to serve.
pub struct NetworkServer {
    runtime: Arc<Runtime>,
    auth: Arc<AuthPolicy>,
    bound: Bound,
    url: String,
}

#[derive(Clone)]
struct AppState {
    runtime: Arc<Runtime>,
    auth: Arc<AuthPolicy>,
    slots: Arc<Semaphore>,
    /// Held by every open connection; shutdown waits until all are dropped.
    live: mpsc::Sender<()>,
}

impl NetworkServer {
    /// Binds `listen` (`ws://` or `unix://`). `AuthPolicy::None` is refused
    /// unless the address is loopback or a unix socket.
    pub async fn bind(runtime: Arc<Runtime>, listen: &Listen, auth: AuthPolicy) -> Result<Self> {
        let (bound, url) = match listen {
            Listen::Ws(addr) => {
                let candidates: Vec<SocketAddr> = tokio::net::lookup_host(addr.as_str())
                    .await
                    .map_err(|e| Error::io(format!("cannot resolve {addr}"), e))?
                    .collect();
                let Some(first) = candidates.first().copied() else {
                    return Err(Error::InvalidListen(format!("ws://{addr}")));
                };
                if matches!(auth, AuthPolicy::None) && !first.ip().is_loopback() {
                    return Err(Error::Config(format!(
                        "--ws-insecure-no-auth is only allowed on a loopback address, not {first}"
                    )));
                }
                let listener = TcpListener::bind(first)
                    .await
                    .map_err(|e| Error::io(format!("cannot listen on {first}"), e))?;
                let local = listener
                    .local_addr()
                    .map_err(|e| Error::io("cannot read the bound address", e))?;
                if !local.ip().is_loopback() {
                    tracing::warn!(
                        %local,
                        "listening beyond loopback without TLS: tokens travel in clear text; \
                         put a TLS proxy or an SSH tunnel in front"
                    );
                }
                (Bound::Tcp(listener), format!("ws://{local}"))
            }
            Listen::Unix(path) => {
                let (path, default_dir) = match path {
                    Some(p) => (
                        std::path::absolute(p).map_err(|e| {
                            Error::io(format!("bad socket path {}", p.display()), e)
                        })?,
                        false,
                    ),
                    None => (default_socket_path(&runtime.config.home), true),
                };
                let (listener, guard) = super::unix::bind(&path, default_dir).await?;
                let url = format!("unix://{}", guard.path().display());
                (Bound::Unix(listener, guard), url)
            }
            Listen::Stdio | Listen::Off => {
                return Err(Error::Config(
                    "not a network listener (use ws:// or unix://)".into(),
                ));
            }
        };
        Ok(Self {
            runtime,
            auth: Arc::new(auth),
            bound,
            url,
        })
    }

    /// `ws://IP:PORT` (the real port when 0 was asked) or `unix:///path`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The socket file, for `unix://`.
    pub fn socket_path(&self) -> Option<PathBuf> {
        match &self.bound {
            Bound::Unix(_, g) => Some(g.path().to_owned()),
            Bound::Tcp(_) => None,
        }
    }

    pub fn auth_mode(&self) -> &'static str {
        self.auth.mode_name()
    }

    /// Serves until the runtime shuts down, then closes the connections
    /// (1001) and, for `unix://`, removes the socket file.
    pub async fn serve(self) -> Result<()> {
        let (live, mut drained) = mpsc::channel::<()>(1);
        let state = AppState {
            runtime: self.runtime.clone(),
            auth: self.auth,
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            live,
        };
        let app = router(state);
        let stop = self.runtime.shutdown.clone().cancelled_owned();
        let served = match self.bound {
            Bound::Tcp(listener) => {
                axum::serve(
                    Capped::new(listener, MAX_SOCKETS),
                    app.into_make_service_with_connect_info::<Peer>(),
                )
                .with_graceful_shutdown(stop)
                .await
            }
            Bound::Unix(listener, guard) => {
                let r = axum::serve(
                    Capped::new(listener, MAX_SOCKETS),
                    app.into_make_service_with_connect_info::<Peer>(),
                )
                .with_graceful_shutdown(stop)
                .await;
                drop(guard);
                r
            }
        };
        // Upgraded connections outlive the HTTP server: wait for them.
        let _ = tokio::time::timeout(DRAIN_TIMEOUT, drained.recv()).await;
        served.map_err(|e| Error::io("serving", e))
    }
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .fallback(upgrade)
        .layer(middleware::from_fn(reject_origin))
        .with_state(state)
}

fn plain(status: StatusCode, body: &'static str) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

async fn reject_origin(request: Request, next: Next) -> Response {
    if request.headers().contains_key(header::ORIGIN) {
        tracing::warn!(
            method = %request.method(),
            path = request.uri().path(),
            "refused a request with an Origin header"
        );
        return plain(StatusCode::FORBIDDEN, "forbidden\n");
    }
    next.run(request).await
}

async fn healthz() -> Response {
    plain(StatusCode::OK, "ok\n")
}

async fn readyz(State(state): State<AppState>) -> Response {
    if state.runtime.shutdown.is_cancelled() {
        plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n")
    } else {
        plain(StatusCode::OK, "ready\n")
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

async fn upgrade(State(state): State<AppState>, request: Request) -> Response {
    let (mut parts, _body) = request.into_parts();
    let slot = parts
        .extensions
        .get::<ConnectInfo<Peer>>()
        .map(|c| c.0.clone());
    let peer = slot.as_ref().map(|p| p.0.clone()).unwrap_or_default();
    if let Err(why) = state.auth.authorize(&parts.headers, now_secs()) {
        tracing::warn!(%peer, path = parts.uri.path(), reason = %why, "refused a websocket upgrade");
        let mut r = plain(StatusCode::UNAUTHORIZED, "unauthorized\n");
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        return r;
    }
    if let Some(slot) = &slot {
        slot.authenticated();
    }
    if state.runtime.shutdown.is_cancelled() {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down\n");
    }
    let Ok(permit) = state.slots.clone().try_acquire_owned() else {
        tracing::warn!(%peer, max = MAX_CONNECTIONS, "too many connections; refused one");
        return plain(StatusCode::SERVICE_UNAVAILABLE, "too many connections\n");
    };
    let ws = match WebSocketUpgrade::from_request_parts(&mut parts, &state).await {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    let max = state.runtime.config.max_frame_bytes;
    let runtime = state.runtime.clone();
    let live = state.live.clone();
    ws.max_message_size(max)
        .max_frame_size(max)
        .on_failed_upgrade(|e| tracing::warn!(error = %e, "websocket upgrade failed"))
        .on_upgrade(move |socket| async move {
            let _permit = permit;
            let _live = live;
            super::ws::run(runtime, socket, peer).await;
        })
}
