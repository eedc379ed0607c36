//! keel's Codex-compatible app-server: `keel app-server`.
//!
//! This crate owns the server side of the Codex app-server protocol over
//! keel's agent: transports ([`transport`]: stdio, WebSocket, unix), one
//! connection's state and loop ([`connection`], [`outbound`]), request
//! routing and gates ([`dispatch`]), handlers per resource ([`handlers`]),
//! the shared runtime of threads and subscriptions ([`runtime`]), threads
//! as keel sessions ([`sessions`], [`thread_state`], [`history`],
//! [`metadata`]), the
//! per-thread event pump that turns core events into thread/turn/item
//! notifications ([`pump`], [`items`], [`errors`]), the server-request
//! broker ([`broker`]), approvals as server requests through the approvals
//! engine ([`approvals`]), MCP servers' questions put to a thread's
//! clients ([`elicitation`]), the turn plan ([`plan`]) and `fs/watch`
//! ([`watch`]); `command/exec` processes ([`commands`], on a pseudo-terminal
//! with [`pty`]).
//! JSON-RPC error codes are chosen in one place ([`rpc_error`]).
//!
//! Wire types come from `keel-app-server-protocol`. It must not know RPC
//! mode (`keel-rpc`), clap, or stdout outside the stdio transport.

pub mod approvals;
pub mod broker;
pub mod commands;
pub mod connection;
pub mod dispatch;
pub mod elicitation;
mod error;
pub mod errors;
pub mod handlers;
pub mod history;
pub mod items;
pub mod metadata;
pub mod notify;
pub mod outbound;
pub mod plan;
pub mod pty;
pub mod pump;
pub mod rpc_error;
pub mod runtime;
pub mod sandbox;
pub mod sessions;
pub mod thread_mcp;
pub mod thread_state;
pub mod transport;
pub mod watch;

pub use error::{Error, Result};
pub use keel_app_server_protocol as protocol;
pub use runtime::{AppServerConfig, ModelSource, Runtime};
pub use transport::auth::{AuthMode, AuthPolicy, AuthSettings};
pub use transport::network::NetworkServer;
pub use transport::stdio::serve_stdio;
pub use transport::{Listen, parse_listen};
