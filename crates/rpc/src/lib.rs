//! RPC mode: keel driven by a host over newline-delimited JSON on stdio.
//!
//! This crate owns the protocol of `specs/rpc-protocol.md` as keel speaks
//! it (documented in `docs/rpc.md`): the command and frame types, the one
//! method table ([`methods`]), dispatch (commands handled in order, one at a
//! time, except `bash`, which runs in the background), the translation of
//! core events into canonical event frames (or flat ones), and the brokers of
//! the sub-protocols (host tools, host URIs, extension UI, workflow gates,
//! unattended mode), and approvals: the front end of the core's
//! [`EngineGate`](keel_core::EngineGate) (`approval_request` /
//! `approval_resolved` frames and the approval commands, a keel extension).
//!
//! It reaches the agent only through `keel-core` (a
//! [`SessionHandle`](keel_core::SessionHandle) and its event stream) and
//! obtains sessions and models from a [`SessionFactory`] the binary
//! provides. It must not know about the app-server protocol, nor how
//! providers or session files are configured.

mod approvals;
mod bash_jobs;
mod command;
mod elicit;
mod error;
mod events;
mod factory;
mod frames;
mod gates;
mod handlers;
mod host_tools;
mod host_uris;
pub mod methods;
mod server;
mod ui;
mod unattended;
mod wire_errors;

pub use error::{Error, Result};
pub use events::{EventFramer, EventStyle, SeqCounters};
pub use factory::{ModelChoice, OpenTarget, OpenedSession, SessionCloser, SessionFactory};
pub use server::{RpcOptions, serve};

/// Version of the event framing written with canonical frames.
pub const PROTOCOL_VERSION: u32 = 2;
/// Capacity of the queue of commands waiting for the command worker.
pub const COMMAND_QUEUE_CAPACITY: usize = 256;
/// Capacity of the queue of flush requests to a session's event pump.
pub const PUMP_FLUSH_CAPACITY: usize = 8;
/// Capacity of the per-call channel carrying a host's replies to one request.
pub const HOST_REPLY_CAPACITY: usize = 64;
