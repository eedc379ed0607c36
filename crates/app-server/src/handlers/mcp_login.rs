//! `mcpServer/oauth/login`: a client signs the process in to a configured
//! HTTP MCP server with OAuth, as `keel mcp login` does (the protocol and
//! the token file are `keel_mcp::oauth`'s).
//!
//! Owns answering with the address the person opens, waiting for the
//! browser's return in the background, telling the client how it ended
//! (`mcpServer/oauthLogin/completed`) and starting the server again on
//! its new tokens, so loaded threads get its tools. It must not know how
//! tokens are exchanged or kept.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_app_server_protocol::v2::{
    McpServerOauthLoginCompletedNotification, McpServerOauthLoginParams,
    McpServerOauthLoginResponse, ServerNotification,
};

use crate::handlers::{Reply, RequestCtx, ok};
use crate::rpc_error::RpcError;

/// How long the sign-in address may take to be known (discovery and
/// registration).
const ADDRESS_TIMEOUT: Duration = Duration::from_secs(30);

pub async fn oauth_login(
    ctx: &mut RequestCtx,
    params: McpServerOauthLoginParams,
) -> Result<Reply, RpcError> {
    if params.client_registration.as_deref() == Some("cimd") {
        return Err(RpcError::invalid(
            "keel has no client metadata document: use `dcr` or `auto`",
        ));
    }
    let cwd = ctx.runtime.config.default_cwd.clone();
    let configs = keel_mcp::workspace::configured(&ctx.runtime.config.home, &cwd)
        .map_err(|e| RpcError::invalid(e.to_string()))?;
    let name = params.name.clone();
    let Some(config) = configs.get(&name).cloned() else {
        return Err(RpcError::invalid(format!("no MCP server named {name}")));
    };
    let (Some(url), Some(path)) = (config.url.clone(), config.credentials.clone()) else {
        return Err(RpcError::invalid(format!(
            "{name} is a stdio server: only HTTP servers sign in"
        )));
    };
    let login_id = format!("login-{:x}", std::process::id() as u128 ^ now_nanos());
    let request = keel_mcp::oauth::LoginRequest {
        scopes: params.scopes.clone().unwrap_or_default(),
        ..keel_mcp::oauth::LoginRequest::default()
    };
    let wait = params
        .timeout_secs
        .and_then(|s| u64::try_from(s).ok())
        .filter(|s| *s > 0)
        .map_or(keel_mcp::oauth::LOGIN_TIMEOUT, Duration::from_secs);
    // The address, or why there is none, reaches this request once.
    let (tx, rx) = tokio::sync::oneshot::channel::<Result<String, String>>();
    let tx = Arc::new(Mutex::new(Some(tx)));
    let answer = move |r: Result<String, String>| {
        if let Some(tx) = tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = tx.send(r);
        }
    };
    let (runtime, conn) = (ctx.runtime.clone(), ctx.conn.clone());
    let (id, thread_id) = (login_id.clone(), params.thread_id.clone());
    tokio::spawn(async move {
        // Nobody pastes on this surface: the browser comes back to keel.
        let (_paste, pasted) = tokio::sync::mpsc::channel(1);
        let store = keel_mcp::oauth::FileCredentials::new(path, &url);
        let shown = answer.clone();
        let login = keel_mcp::oauth::login(
            &url,
            store,
            &request,
            move |address, _| shown(Ok(address.to_owned())),
            pasted,
        );
        let outcome = match tokio::time::timeout(wait, login).await {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err(format!("nobody signed in within {}s", wait.as_secs())),
        };
        if let Err(e) = &outcome {
            answer(Err(e.clone()));
        } else {
            restart(&runtime, &name, config).await;
        }
        let done = McpServerOauthLoginCompletedNotification {
            name,
            success: outcome.is_ok(),
            error: outcome.err(),
            login_id: Some(id),
            thread_id,
        };
        conn.notify(&ServerNotification::McpServerOauthLoginCompleted(done))
            .await;
    });
    let address = tokio::time::timeout(ADDRESS_TIMEOUT, rx)
        .await
        .map_err(|_| RpcError::invalid("the sign-in address did not come in time"))?
        .map_err(|_| RpcError::internal("the sign-in stopped"))?
        .map_err(RpcError::invalid)?;
    ok(&McpServerOauthLoginResponse {
        authorization_url: address,
        login_id: Some(login_id),
    })
}

/// Starts server `name` again on its new tokens; loaded threads hear of
/// its tools.
async fn restart(
    runtime: &Arc<crate::runtime::Runtime>,
    name: &str,
    config: keel_mcp::McpServerConfig,
) {
    if let Some(servers) = runtime.mcp() {
        if let Err(e) = servers.put(name, config).await {
            tracing::warn!(server = name, error = %e, "the MCP server did not start after signing in");
        }
        return;
    }
    let cwd = runtime.config.default_cwd.clone();
    let one = std::collections::BTreeMap::from([(name.to_owned(), config)]);
    let servers = keel_mcp::McpServers::start_in(&one, &cwd).await;
    // Another start may have installed servers meanwhile: they go.
    if let Some(old) = crate::handlers::mcp::install(runtime, Some(servers)) {
        old.stop().await;
    }
}

fn now_nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}
