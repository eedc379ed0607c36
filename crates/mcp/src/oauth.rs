//! OAuth 2.1 for remote MCP servers (`keel mcp login` / `logout`), on the
//! SDK's authorization client (`rmcp`'s `auth`: RFC 9728 protected-resource
//! metadata, RFC 8414 authorization-server metadata with the OpenID and
//! pre-2025 fallbacks, dynamic client registration, PKCE, refresh).
//!
//! Owns where a server's tokens live (one owner-only JSON file per server
//! under keel's home, [`credentials_path`], written whole by rename; a row
//! of the database once the home has one: `keel_session_store::home_files`), the
//! login (a loopback redirect on 127.0.0.1, or the redirected address
//! pasted by a person on a machine without a browser), and the HTTP client
//! a connection uses once signed in (its token refreshed when it expires or
//! the server refuses it). Tokens never reach a log: the stored type's
//! `Debug` redacts them and nothing here prints one. It must not know how
//! servers are listed or called.

use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_session_store::home_files;
use rmcp::transport::AuthClient;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationRequest, CredentialStore, OAuthState,
    StoredCredentials,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::{Error, Result};

/// Folder of keel's home holding each server's tokens.
pub const CREDENTIALS_DIR: &str = "mcp-credentials";
/// How long a login waits for the person to sign in.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(600);
/// How long one connection to the loopback redirect may take to send its
/// request.
const REDIRECT_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest request head the loopback redirect reads.
const MAX_REDIRECT_HEAD: usize = 16 * 1024;

/// Where server `name`'s tokens are kept under keel's `home`.
pub fn credentials_path(home: &Path, name: &str) -> PathBuf {
    let safe: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' | '.' => c,
            _ => '_',
        })
        .collect();
    home.join(CREDENTIALS_DIR).join(format!("{safe}.json"))
}

/// The field of a tokens file naming the server address they were issued
/// for: they are only ever sent there.
const SERVER_FIELD: &str = "keel_server_url";

/// One server's tokens in their file, bound to the server's address: a
/// file written for another address (the configuration now names a
/// different URL under the same name) is never used for this one.
#[derive(Debug, Clone)]
pub struct FileCredentials {
    path: PathBuf,
    url: String,
}

/// Stored credentials, and the address they were issued for (`None`: a
/// file from before keel bound them).
type Read = Option<(StoredCredentials, Option<String>)>;

fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

impl FileCredentials {
    /// The tokens at `path` of the server at `url`.
    pub fn new(path: PathBuf, url: &str) -> Self {
        Self {
            path,
            url: url.to_owned(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    async fn read_any(&self) -> std::result::Result<Read, String> {
        let bytes = home_files::read(&self.path)
            .await
            .map_err(|e| format!("cannot read {}: {e}", self.path.display()))?;
        let Some(bytes) = bytes else {
            return Ok(None);
        };
        let not_keels = |e: serde_json::Error| {
            format!(
                "{} is not keel's credentials file: {e}",
                self.path.display()
            )
        };
        let mut value: serde_json::Value = serde_json::from_slice(&bytes).map_err(not_keels)?;
        let server = value
            .as_object_mut()
            .and_then(|o| o.remove(SERVER_FIELD))
            .and_then(|v| v.as_str().map(str::to_owned));
        let credentials = serde_json::from_value(value).map_err(not_keels)?;
        Ok(Some((credentials, server)))
    }

    /// The stored credentials (`None`: never signed in, or signed out); an
    /// error when they were issued for another address.
    pub async fn read(&self) -> std::result::Result<Option<StoredCredentials>, String> {
        match self.read_any().await? {
            Some((_, Some(server))) if !same_server(&server, &self.url) => Err(format!(
                "the sign-in kept for this name is for {server}, not {}: sign in again",
                self.url
            )),
            Some((c, _)) => Ok(Some(c)),
            None => Ok(None),
        }
    }

    async fn write(&self, credentials: &StoredCredentials) -> std::result::Result<(), String> {
        let mut value = serde_json::to_value(credentials).map_err(|e| e.to_string())?;
        if let Some(o) = value.as_object_mut() {
            o.insert(SERVER_FIELD.to_owned(), self.url.clone().into());
        }
        let bytes = serde_json::to_vec_pretty(&value).map_err(|e| e.to_string())?;
        home_files::write_private(&self.path, bytes)
            .await
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }

    /// Forgets the tokens; whether there were any.
    pub async fn remove(&self) -> std::result::Result<bool, String> {
        home_files::remove(&self.path)
            .await
            .map_err(|e| format!("cannot remove {}: {e}", self.path.display()))
    }

    /// Whether a login left tokens the server has not refused.
    pub async fn signed_in(&self) -> bool {
        matches!(self.read().await, Ok(Some(c)) if c.token_response.is_some())
    }
}

fn store_error(e: String) -> AuthError {
    AuthError::CredentialStoreError(e)
}

#[async_trait::async_trait]
impl CredentialStore for FileCredentials {
    /// A sign-in kept for another address is not this server's: a login
    /// starts afresh (and replaces it).
    async fn load(&self) -> std::result::Result<Option<StoredCredentials>, AuthError> {
        match self.read_any().await.map_err(store_error)? {
            Some((_, Some(server))) if !same_server(&server, &self.url) => Ok(None),
            Some((c, _)) => Ok(Some(c)),
            None => Ok(None),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> std::result::Result<(), AuthError> {
        self.write(&credentials).await.map_err(store_error)
    }

    /// The server refused the refresh token: the stored tokens are
    /// dropped (the client registration is kept), unless a newer login
    /// replaced them meanwhile.
    async fn on_refresh_token_rejected(
        &self,
        rejected: &StoredCredentials,
    ) -> std::result::Result<(), AuthError> {
        // Compared in their wire form: the refresh token each holds.
        let refresh = |c: &StoredCredentials| {
            c.token_response
                .as_ref()
                .and_then(|t| serde_json::to_value(t).ok())
                .and_then(|v| v.get("refresh_token").cloned())
        };
        let Some(mut now) = self.read().await.map_err(store_error)? else {
            return Ok(());
        };
        if refresh(&now) != refresh(rejected) {
            return Ok(());
        }
        now.token_response = None;
        self.write(&now).await.map_err(store_error)
    }

    async fn clear(&self) -> std::result::Result<(), AuthError> {
        self.remove().await.map(|_| ()).map_err(store_error)
    }
}

/// What a login asks the authorization server for.
#[derive(Debug, Clone, Default)]
pub struct LoginRequest {
    /// Scopes to ask for (none: what the server's metadata suggests).
    pub scopes: Vec<String>,
    /// A client registered with the server beforehand (none: dynamic
    /// registration).
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    /// The loopback port of the redirect (0: any free one).
    pub port: u16,
}

fn auth_error(what: &str, e: AuthError) -> Error {
    Error::Start(format!("{what}: {e}"))
}

/// A manager for `url` that keeps its tokens in `store` (metadata may name
/// loopback or private addresses, as the server's own may).
async fn manager(url: &str, store: FileCredentials) -> Result<AuthorizationManager> {
    crate::tls::ensure_provider();
    let mut manager = AuthorizationManager::new_allowing_private_addresses(url)
        .await
        .map_err(|e| auth_error("the server's address", e))?;
    manager.set_credential_store(store);
    Ok(manager)
}

/// Signs in to the server at `url`: discovers its authorization server,
/// registers keel (unless `request` names a client), tells `show` the
/// address to open, and waits for the redirect back, on the loopback port
/// or as a line of `pasted` (the address the browser was sent to), for at
/// most [`LOGIN_TIMEOUT`]. The tokens are in `store` when this returns.
pub async fn login(
    url: &str,
    store: FileCredentials,
    request: &LoginRequest,
    show: impl FnOnce(&str, &str),
    mut pasted: tokio::sync::mpsc::Receiver<String>,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", request.port))
        .await
        .map_err(|e| Error::Start(format!("cannot listen for the redirect: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::Start(e.to_string()))?
        .port();
    let redirect = format!("http://127.0.0.1:{port}/callback");
    let mut state = OAuthState::Unauthorized(manager(url, store).await?);
    let mut asked = AuthorizationRequest::new(&redirect).with_client_name("keel");
    // The server's own challenge names its metadata and scopes best.
    if let Some(challenge) = challenge(url).await {
        asked = asked.with_challenge(challenge);
    }
    if !request.scopes.is_empty() {
        asked = asked.with_scopes(request.scopes.iter().cloned());
    }
    if let Some(id) = &request.client_id {
        asked = asked.with_preregistered_client(id);
        if let Some(secret) = &request.client_secret {
            asked = asked.with_client_secret(secret);
        }
    }
    state
        .start_authorization(asked)
        .await
        .map_err(|e| auth_error("starting the sign-in", e))?;
    let address = state
        .get_authorization_url()
        .await
        .map_err(|e| auth_error("the sign-in address", e))?;
    show(&address, &redirect);
    let came_back = tokio::time::timeout(LOGIN_TIMEOUT, async {
        tokio::select! {
            url = redirected(&listener, port) => url,
            line = async {
                loop {
                    match pasted.recv().await {
                        Some(line) if line.trim().contains("code=") => return Ok(line.trim().to_owned()),
                        Some(_) => {}
                        None => std::future::pending::<()>().await,
                    }
                }
            } => line,
        }
    })
    .await
    .map_err(|_| {
        Error::Start(format!(
            "nobody signed in within {}s",
            LOGIN_TIMEOUT.as_secs()
        ))
    })??;
    state
        .handle_callback_url(&came_back)
        .await
        .map_err(|e| auth_error("the authorization server's answer", e))
}

/// The `WWW-Authenticate` of the server's answer to an unsigned
/// `initialize`, when it asks to sign in (401).
async fn challenge(url: &str) -> Option<String> {
    crate::tls::ensure_provider();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .ok()?;
    let probe = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "keel", "version": env!("CARGO_PKG_VERSION")}},
    });
    let answer = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(probe.to_string())
        .send()
        .await
        .ok()?;
    if answer.status() != reqwest::StatusCode::UNAUTHORIZED {
        // A server that needs no sign-in opened a session for the probe:
        // it is closed again.
        if let Some(session) = answer.headers().get("mcp-session-id").cloned() {
            let _ = client
                .delete(url)
                .header("mcp-session-id", session)
                .send()
                .await;
        }
        return None;
    }
    answer
        .headers()
        .get("www-authenticate")
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
}

/// The first request to `/callback` on the loopback listener, as the full
/// address it was sent to; it is answered with a page saying what happened.
async fn redirected(listener: &tokio::net::TcpListener, port: u16) -> Result<String> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| Error::Start(format!("the redirect listener failed: {e}")))?;
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        // A connection that sends no request in time is dropped, so it
        // cannot hold the browser's own back.
        let read_head = async {
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REDIRECT_HEAD {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
        };
        if tokio::time::timeout(REDIRECT_READ_TIMEOUT, read_head)
            .await
            .is_err()
        {
            continue;
        }
        let text = String::from_utf8_lossy(&head);
        let target = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("GET "))
            .and_then(|l| l.split(' ').next())
            .unwrap_or("");
        if !target.starts_with("/callback?") {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let body = "keel: the sign-in came back. You can close this tab.\n";
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(reply.as_bytes()).await;
        return Ok(format!("http://127.0.0.1:{port}{target}"));
    }
}

/// The HTTP client of a connection to `url` signed in with `store`'s
/// tokens (refreshed when they expire or the server refuses them);
/// `None` when nobody signed in.
pub async fn signed_in_client(
    url: &str,
    store: FileCredentials,
) -> Result<Option<AuthClient<reqwest::Client>>> {
    if store.read().await.map_err(Error::Start)?.is_none() {
        return Ok(None);
    }
    let mut manager = manager(url, store).await?;
    let ready = manager
        .initialize_from_store()
        .await
        .map_err(|e| auth_error("the stored sign-in", e))?;
    if !ready {
        return Ok(None);
    }
    Ok(Some(AuthClient::new(reqwest::Client::default(), manager)))
}

/// What `keel mcp list` says of a server's sign-in.
pub async fn describe(store: &FileCredentials) -> String {
    match store.read().await {
        Ok(Some(c)) if c.token_response.is_some() => match c.granted_scopes.is_empty() {
            true => "signed in".to_owned(),
            false => format!("signed in ({})", c.granted_scopes.join(" ")),
        },
        Ok(Some(_)) => "signed out: the server refused its tokens".to_owned(),
        Ok(None) => "not signed in".to_owned(),
        Err(e) => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The loopback redirect answers other paths 404 and goes on; the
    /// callback's full address comes back, and the browser is told.
    #[tokio::test]
    async fn the_redirect_listener_takes_only_the_callback() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let waiting = tokio::spawn(async move { redirected(&listener, port).await });
        let get = |path: &'static str| async move {
            let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
                .await
                .unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            out
        };
        let timeout = Duration::from_secs(10);
        let other = tokio::time::timeout(timeout, get("/favicon.ico"))
            .await
            .unwrap();
        assert!(other.starts_with("HTTP/1.1 404"), "{other}");
        let page = tokio::time::timeout(timeout, get("/callback?code=c&state=s"))
            .await
            .unwrap();
        assert!(page.contains("sign-in came back"), "{page}");
        let url = tokio::time::timeout(timeout, waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(
            url,
            format!("http://127.0.0.1:{port}/callback?code=c&state=s")
        );
    }

    #[tokio::test]
    async fn tokens_are_kept_owner_only_and_never_shown() {
        use std::os::unix::fs::PermissionsExt;
        let home = tempfile::tempdir().unwrap();
        let path = credentials_path(home.path(), "my server/../x");
        assert_eq!(path.parent().unwrap(), home.path().join(CREDENTIALS_DIR));
        assert_eq!(path.file_name().unwrap(), "my_server_.._x.json");
        let store = FileCredentials::new(path.clone(), "http://127.0.0.1:1/mcp");
        assert_eq!(describe(&store).await, "not signed in");
        let token: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(
            serde_json::json!({"access_token": "secret-token", "token_type": "bearer", "expires_in": 60}),
        )
        .unwrap();
        let stored =
            StoredCredentials::new("client-1".into(), Some(token), vec!["read".into()], Some(1));
        store.write(&stored).await.unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        let back = store.read().await.unwrap().unwrap();
        assert_eq!(back.client_id, "client-1");
        assert!(!format!("{back:?}").contains("secret-token"));
        assert_eq!(describe(&store).await, "signed in (read)");
        assert!(store.signed_in().await);
        // Bound to the address: the same name at another URL never gets
        // the tokens, and a login there starts afresh.
        let elsewhere = FileCredentials::new(path.clone(), "http://127.0.0.1:2/mcp");
        let why = describe(&elsewhere).await;
        assert!(
            why.contains("is for http://127.0.0.1:1/mcp, not http://127.0.0.1:2/mcp"),
            "{why}"
        );
        assert!(!elsewhere.signed_in().await);
        assert!(elsewhere.load().await.unwrap().is_none());
        assert!(
            signed_in_client("http://127.0.0.1:2/mcp", elsewhere)
                .await
                .is_err()
        );
        assert!(
            FileCredentials::new(path.clone(), "http://127.0.0.1:1/mcp/")
                .signed_in()
                .await
        );
        assert!(store.remove().await.unwrap());
        assert!(!store.remove().await.unwrap());
        // A file that is not keel's is named, never taken as signed in.
        std::fs::write(&path, "{not json").unwrap();
        let why = describe(&store).await;
        assert!(why.contains("is not keel's credentials file"), "{why}");
        assert!(!store.signed_in().await);
        assert!(
            signed_in_client("http://127.0.0.1:1/mcp", store)
                .await
                .is_err()
        );
    }
}
