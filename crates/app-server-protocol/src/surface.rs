//! keel's surface of the protocol: every client request `keel app-server`
//! answers, with the Rust types of its params and result, and the schema
//! of each, for `keel app-server generate-json-schema` / `generate-ts`
//! ([`crate::export`]).
//!
//! The app-server's dispatcher has a test that its list of implemented
//! methods and this table are the same: a method added there must be added
//! here (with types deriving `schemars::JsonSchema`).

use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::v2::*;

/// One request keel answers.
pub struct RequestSurface {
    pub method: &'static str,
    /// A `$ref` to the params type (registering its definitions).
    pub params: fn(&mut SchemaGenerator) -> Schema,
    /// A `$ref` to the result type (registering its definitions).
    pub result: fn(&mut SchemaGenerator) -> Schema,
    /// The names of the params and result types.
    pub names: fn() -> (String, String),
    /// A self-contained schema of the params type and of the result type.
    pub roots: fn() -> (Schema, Schema),
}

fn sub<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

fn root<T: JsonSchema>() -> Schema {
    crate::export::settings()
        .into_generator()
        .into_root_schema_for::<T>()
}

macro_rules! requests {
    ($($method:literal => $params:ty, $result:ty;)*) => {
        /// Every request keel answers, in the order of the docs.
        pub static REQUESTS: &[RequestSurface] = &[
            $(RequestSurface {
                method: $method,
                params: sub::<$params>,
                result: sub::<$result>,
                names: || (
                    <$params as JsonSchema>::schema_name().into_owned(),
                    <$result as JsonSchema>::schema_name().into_owned(),
                ),
                roots: || (root::<$params>(), root::<$result>()),
            },)*
        ];
    };
}

requests! {
    "initialize" => InitializeParams, InitializeResponse;
    "thread/start" => ThreadStartParams, ThreadStartResponse;
    "thread/resume" => ThreadResumeParams, ThreadResumeResponse;
    "thread/fork" => ThreadForkParams, ThreadForkResponse;
    "thread/list" => ThreadListParams, ThreadListResponse;
    "thread/read" => ThreadReadParams, ThreadReadResponse;
    "thread/turns/list" => ThreadTurnsListParams, ThreadTurnsListResponse;
    "thread/items/list" => ThreadItemsListParams, ThreadItemsListResponse;
    "thread/loaded/list" => ThreadLoadedListParams, ThreadLoadedListResponse;
    "thread/name/set" => ThreadSetNameParams, EmptyResponse;
    "thread/unsubscribe" => ThreadIdParams, ThreadUnsubscribeResponse;
    "thread/archive" => ThreadIdParams, EmptyResponse;
    "thread/unarchive" => ThreadIdParams, ThreadResponse;
    "thread/delete" => ThreadIdParams, EmptyResponse;
    "thread/metadata/update" => ThreadMetadataUpdateParams, ThreadResponse;
    "thread/compact/start" => ThreadIdParams, EmptyResponse;
    "turn/start" => TurnStartParams, TurnStartResponse;
    "turn/steer" => TurnSteerParams, TurnSteerResponse;
    "turn/interrupt" => TurnInterruptParams, EmptyResponse;
    "fs/readFile" => FsPathParams, FsReadFileResponse;
    "fs/writeFile" => FsWriteFileParams, EmptyResponse;
    "fs/getMetadata" => FsPathParams, FsGetMetadataResponse;
    "fs/readDirectory" => FsPathParams, FsReadDirectoryResponse;
    "fs/createDirectory" => FsCreateDirectoryParams, EmptyResponse;
    "fs/remove" => FsRemoveParams, EmptyResponse;
    "fs/copy" => FsCopyParams, EmptyResponse;
    "fs/watch" => FsWatchParams, FsWatchResponse;
    "fs/unwatch" => FsUnwatchParams, EmptyResponse;
    "command/exec" => CommandExecParams, CommandExecResponse;
    "command/exec/write" => CommandExecWriteParams, EmptyResponse;
    "command/exec/terminate" => CommandExecTerminateParams, EmptyResponse;
    "command/exec/resize" => CommandExecResizeParams, EmptyResponse;
    "model/list" => ModelListParams, ModelListResponse;
    "modelProvider/list" => EmptyResponse, ModelProviderListResponse;
    "config/read" => ConfigReadParams, ConfigReadResponse;
    "account/read" => EmptyResponse, GetAccountResponse;
    "skills/list" => CwdsParams, SkillsListResponse;
    "permissionProfile/list" => PermissionProfileListParams, PermissionProfileListResponse;
    "hooks/list" => CwdsParams, HooksListResponse;
    "mcpServerStatus/list" => ListMcpServerStatusParams, ListMcpServerStatusResponse;
    "mcpServer/tool/call" => McpServerToolCallParams, McpServerToolCallResponse;
    "config/mcpServer/reload" => EmptyResponse, EmptyResponse;
    "mcpServer/resource/read" => McpResourceReadParams, McpResourceReadResponse;
    "mcpServer/oauth/login" => McpServerOauthLoginParams, McpServerOauthLoginResponse;
}

/// The methods of [`REQUESTS`].
pub fn methods() -> Vec<&'static str> {
    REQUESTS.iter().map(|r| r.method).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_is_in_the_catalogue() {
        for m in methods() {
            assert!(crate::methods::client_request(m).is_some(), "{m}");
        }
    }
}
