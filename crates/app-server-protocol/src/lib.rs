//! The Codex app-server protocol (v2), as keel speaks it: data only.
//!
//! This crate owns the wire vocabulary of `keel app-server`: the JSON-RPC
//! envelopes without the `"jsonrpc"` member ([`jsonrpc`]), the one method
//! catalogue with each method's profile (stable or experimental) and
//! whether it takes `params` ([`methods`]), and the typed params, results,
//! thread items, notifications and server requests ([`v2`]). Every type is
//! plain serde data in camelCase, shaped after the official JSON Schema of
//! Codex 0.169.0; unknown fields are ignored on input. Every type also
//! derives `schemars::JsonSchema`: keel's own schema of the requests it
//! answers ([`surface`]) is generated from them ([`export`]). It also
//! holds the JSON lines of Codex's `exec --experimental-json` ([`exec`]).
//!
//! It must not know keel's agent (`keel-core`), tokio, or any transport:
//! the `keel-app-server` crate translates between these types and sessions.

pub mod exec;
pub mod export;
pub mod jsonrpc;
mod method_table;
pub mod methods;
pub mod surface;
pub mod v2;

pub use jsonrpc::{ErrorObject, Incoming, IncomingError, RequestId, parse_incoming};

/// The Codex release whose app-server protocol keel implements: the
/// version of the schema checked in under `schema/` and of the peer it is
/// tested against. `initialize` reports it where Codex clients read the
/// server's version (the `userAgent`'s `name/VERSION`), so their
/// version-gated features work; keel's own name and version follow in the
/// same string.
pub const CODEX_VERSION: &str = "0.169.0";
pub use methods::{MethodSpec, Params, Stability};
