//! Request routing and the gates every request passes, in order: the
//! method exists (else serde's `unknown variant` error), `params` is there
//! when its type is an object, `initialize` comes first, experimental
//! methods need `experimentalApi`; then the handler of its resource, which
//! deserialises (validates) its params before doing anything. Methods of
//! the protocol that keel does not implement get `-32601` naming them.

use std::sync::Arc;

use keel_app_server_protocol::RequestId;
use keel_app_server_protocol::methods::{
    Params, Stability, client_request, unknown_method_message,
};
use serde_json::Value;

use crate::handlers;
use crate::notify::Notifier;
use crate::outbound::Connection;
use crate::rpc_error::RpcError;
use crate::runtime::Runtime;

pub use crate::handlers::{After, Reply, RequestCtx, ok, parse};

pub async fn handle_request(
    runtime: &Arc<Runtime>,
    conn: &Arc<Connection>,
    id: RequestId,
    method: String,
    params: Option<Value>,
) {
    let mut ctx = RequestCtx {
        runtime: runtime.clone(),
        conn: conn.clone(),
        id: id.clone(),
        after: Vec::new(),
    };
    match route(&mut ctx, &method, params).await {
        Ok(Reply::Now(result)) => {
            conn.respond(id, result).await;
        }
        Ok(Reply::Later) => {}
        Err(e) => {
            conn.respond_error(Some(id), &e).await;
        }
    }
    for after in ctx.after {
        match after {
            After::Signal(tx) => {
                let _ = tx.send(());
            }
            After::NotifyThread(thread, n) => runtime.notify_thread(&thread, &n).await,
            After::ReplayApprovals(thread) => {
                crate::approvals::replay(runtime, &thread, conn).await
            }
            After::ResumeInterrupted(thread) => {
                crate::sessions::resume_interrupted(runtime, &thread).await
            }
            After::NotifyConns(conns, n) => {
                for c in conns {
                    c.notify(&n).await;
                }
            }
        }
    }
}

async fn route(
    ctx: &mut RequestCtx,
    method: &str,
    params: Option<Value>,
) -> Result<Reply, RpcError> {
    let Some(spec) = client_request(method) else {
        return Err(RpcError::invalid_params(unknown_method_message(method)));
    };
    let params = match (params, spec.params) {
        (None, Params::Object) => {
            return Err(RpcError::invalid_params("missing field `params`"));
        }
        (p, _) => p.unwrap_or(Value::Null),
    };
    let caps = ctx.conn.caps();
    if method == "initialize" {
        return handlers::initialize::initialize(ctx, parse(params)?);
    }
    if !caps.initialized {
        return Err(RpcError::not_initialized());
    }
    if spec.stability == Stability::Experimental && !caps.experimental {
        return Err(RpcError::requires_experimental(method));
    }
    use handlers::{command, fs, misc, thread, thread_admin, turn};
    match method {
        "thread/start" => thread::start(ctx, parse(params)?).await,
        "thread/resume" => thread::resume(ctx, parse(params)?).await,
        "thread/fork" => thread::fork(ctx, parse(params)?).await,
        "thread/compact/start" => thread::compact_start(ctx, parse(params)?).await,
        "thread/list" => thread::list(ctx, parse(params)?).await,
        "thread/read" => thread::read(ctx, parse(params)?).await,
        "thread/turns/list" => thread::turns_list(ctx, parse(params)?).await,
        "thread/loaded/list" => thread::loaded_list(ctx, parse(params)?),
        "thread/name/set" => thread::name_set(ctx, parse(params)?).await,
        "thread/unsubscribe" => thread::unsubscribe(ctx, parse(params)?),
        "thread/archive" => thread_admin::archive(ctx, parse(params)?).await,
        "thread/unarchive" => thread_admin::unarchive(ctx, parse(params)?).await,
        "thread/delete" => thread_admin::delete(ctx, parse(params)?).await,
        "thread/metadata/update" => thread_admin::metadata_update(ctx, parse(params)?).await,
        "thread/items/list" => thread_admin::items_list(ctx, parse(params)?).await,
        "turn/start" => turn::start(ctx, parse(params)?).await,
        "turn/steer" => turn::steer(ctx, parse(params)?).await,
        "turn/interrupt" => turn::interrupt(ctx, parse(params)?).await,
        "fs/readFile" => fs::read_file(parse(params)?).await,
        "fs/writeFile" => fs::write_file(parse(params)?).await,
        "fs/getMetadata" => fs::get_metadata(parse(params)?).await,
        "fs/readDirectory" => fs::read_directory(parse(params)?).await,
        "fs/createDirectory" => fs::create_directory(parse(params)?).await,
        "fs/remove" => fs::remove(parse(params)?).await,
        "fs/copy" => fs::copy(parse(params)?).await,
        "fs/watch" => fs::watch(ctx, parse(params)?).await,
        "fs/unwatch" => fs::unwatch(ctx, parse(params)?),
        "command/exec" => command::exec(ctx, parse(params)?),
        "command/exec/write" => command::write(ctx, parse(params)?).await,
        "command/exec/terminate" => command::terminate(ctx, parse(params)?),
        "command/exec/resize" => command::resize(ctx, parse(params)?),
        "model/list" => misc::model_list(ctx, parse(params)?),
        "modelProvider/list" => misc::model_provider_list(ctx),
        "config/read" => misc::config_read(ctx, parse(params)?).await,
        "account/read" => misc::account_read(ctx),
        "skills/list" => misc::skills_list(ctx, parse(params)?),
        "permissionProfile/list" => misc::permission_profiles(parse(params)?),
        "hooks/list" => misc::hooks_list(ctx, parse(params)?),
        "mcpServerStatus/list" => crate::handlers::mcp::status_list(ctx, parse(params)?).await,
        "mcpServer/tool/call" => crate::handlers::mcp::tool_call(ctx, parse(params)?).await,
        "config/mcpServer/reload" => crate::handlers::mcp::reload(ctx).await,
        "mcpServer/resource/read" => crate::handlers::mcp::resource_read(ctx, parse(params)?).await,
        "mcpServer/oauth/login" => {
            crate::handlers::mcp_login::oauth_login(ctx, parse(params)?).await
        }
        other => Err(RpcError::not_implemented(other)),
    }
}

/// Methods [`route`] implements (for the docs and the tests).
pub const IMPLEMENTED: &[&str] = &[
    "initialize",
    "thread/start",
    "thread/resume",
    "thread/fork",
    "thread/compact/start",
    "thread/list",
    "thread/read",
    "thread/turns/list",
    "thread/loaded/list",
    "thread/name/set",
    "thread/unsubscribe",
    "thread/archive",
    "thread/unarchive",
    "thread/delete",
    "thread/metadata/update",
    "thread/items/list",
    "turn/start",
    "turn/steer",
    "turn/interrupt",
    "fs/readFile",
    "fs/writeFile",
    "fs/getMetadata",
    "fs/readDirectory",
    "fs/createDirectory",
    "fs/remove",
    "fs/copy",
    "fs/watch",
    "fs/unwatch",
    "command/exec",
    "command/exec/write",
    "command/exec/terminate",
    "command/exec/resize",
    "model/list",
    "modelProvider/list",
    "config/read",
    "account/read",
    "skills/list",
    "permissionProfile/list",
    "hooks/list",
    "mcpServerStatus/list",
    "mcpServer/tool/call",
    "config/mcpServer/reload",
    "mcpServer/resource/read",
    "mcpServer/oauth/login",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn implemented_methods_exist_in_the_catalogue() {
        for m in IMPLEMENTED {
            assert!(client_request(m).is_some(), "{m}");
        }
    }

    /// keel's schema export (`generate-json-schema`) covers exactly the
    /// methods answered here.
    #[test]
    fn the_schema_surface_is_what_is_implemented() {
        let mut implemented: Vec<&str> = IMPLEMENTED.to_vec();
        implemented.sort_unstable();
        let mut surface = keel_app_server_protocol::surface::methods();
        surface.sort_unstable();
        assert_eq!(
            implemented, surface,
            "add the method to keel_app_server_protocol::surface::REQUESTS (and bless the schema)"
        );
    }
}
