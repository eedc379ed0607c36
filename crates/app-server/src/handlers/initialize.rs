//! `initialize`: the handshake. Records the connection's capabilities and
//! answers with keel's user agent, home and platform.

use keel_app_server_protocol::v2::{InitializeParams, InitializeResponse};

use crate::handlers::{Reply, RequestCtx, ok};
use crate::outbound::ClientCaps;
use crate::rpc_error::RpcError;

pub fn initialize(ctx: &mut RequestCtx, params: InitializeParams) -> Result<Reply, RpcError> {
    if ctx.conn.caps().initialized {
        return Err(RpcError::already_initialized());
    }
    let caps = params.capabilities.unwrap_or_default();
    let client = params.client_info;
    ctx.conn.set_caps(ClientCaps {
        initialized: true,
        experimental: caps.experimental_api,
        opt_out: caps
            .opt_out_notification_methods
            .unwrap_or_default()
            .into_iter()
            .collect(),
        client_name: client.name.clone(),
    });
    let version = &ctx.runtime.config.version;
    let home = std::path::absolute(&ctx.runtime.config.home)
        .unwrap_or_else(|_| ctx.runtime.config.home.clone());
    ok(&InitializeResponse {
        user_agent: format!(
            "{}/{} ({}; {}) keel/{version} ({}; {})",
            client.name,
            keel_app_server_protocol::CODEX_VERSION,
            std::env::consts::OS,
            std::env::consts::ARCH,
            client.name,
            client.version
        ),
        codex_home: home.display().to_string(),
        platform_family: std::env::consts::FAMILY.to_owned(),
        platform_os: std::env::consts::OS.to_owned(),
    })
}
