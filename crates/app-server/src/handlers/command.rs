//! `command/exec` and its companions. `command/exec` runs in its own task
//! and answers when the process ends, so other requests on the same
//! connection (`command/exec/write`, `terminate`, anything else) are served
//! meanwhile.

use base64::Engine;
use keel_app_server_protocol::v2::{
    CommandExecParams, CommandExecResizeParams, CommandExecTerminateParams, CommandExecWriteParams,
    EmptyResponse, SandboxPolicy,
};

use crate::commands;
use crate::handlers::{Reply, RequestCtx, ok};
use crate::rpc_error::RpcError;

pub fn exec(ctx: &mut RequestCtx, p: CommandExecParams) -> Result<Reply, RpcError> {
    // The request's `sandboxPolicy` (any variant of the schema), else the
    // server's configured policy: enforced on the process.
    let policy = match &p.sandbox_policy {
        Some(v) => {
            let wire: SandboxPolicy = serde_json::from_value(v.clone())
                .map_err(|e| RpcError::invalid_params(format!("sandboxPolicy: {e}")))?;
            crate::sandbox::from_wire(&wire)
        }
        None => ctx.runtime.config.sandbox.clone(),
    };
    let running = commands::start(
        ctx.runtime.processes.clone(),
        ctx.conn.clone(),
        ctx.runtime.config.default_cwd.clone(),
        p,
        (&ctx.runtime.sandbox, policy),
    )?;
    let conn = ctx.conn.clone();
    let id = ctx.id.clone();
    tokio::spawn(async move {
        match running
            .wait()
            .await
            .and_then(|r| serde_json::to_value(r).map_err(RpcError::internal))
        {
            Ok(v) => conn.respond(id, v).await,
            Err(e) => conn.respond_error(Some(id), &e).await,
        };
    });
    Ok(Reply::Later)
}

pub async fn write(ctx: &mut RequestCtx, p: CommandExecWriteParams) -> Result<Reply, RpcError> {
    let data = match &p.delta_base64 {
        Some(d) => base64::engine::general_purpose::STANDARD
            .decode(d.as_bytes())
            .map_err(|e| RpcError::invalid_params(format!("deltaBase64: {e}")))?,
        None => Vec::new(),
    };
    ctx.runtime
        .processes
        .write(ctx.conn.id, &p.process_id, data, p.close_stdin)
        .await?;
    ok(&EmptyResponse {})
}

pub fn terminate(ctx: &mut RequestCtx, p: CommandExecTerminateParams) -> Result<Reply, RpcError> {
    ctx.runtime
        .processes
        .terminate(ctx.conn.id, &p.process_id)?;
    ok(&EmptyResponse {})
}

/// `command/exec/resize`: a `tty` process's terminal size.
pub fn resize(ctx: &mut RequestCtx, p: CommandExecResizeParams) -> Result<Reply, RpcError> {
    ctx.runtime
        .processes
        .resize(ctx.conn.id, &p.process_id, p.size)?;
    ok(&EmptyResponse {})
}
