//! Pure data shared by every keel crate.
//!
//! This crate owns the vocabulary of the agent: messages and their content
//! blocks, usage and cost, tool specs and results, the [`Op`]s a host submits
//! to a session and the [`AgentEvent`]s the session emits. It holds data and
//! serde derives only: no tokio, no I/O, and no knowledge of either wire
//! format (RPC mode and the app-server translate these types at their edges).
//!
//! The JSON shapes follow the message model that pi-family hosts already
//! understand (camelCase fields, `role`-tagged messages, `type`-tagged content
//! blocks), so session files and RPC frames can carry them unchanged.

mod compaction;
mod event;
mod message;
mod op;
mod sandbox;
mod tag_first;
mod todo;

pub use compaction::*;
pub use event::*;
pub use message::*;
pub use op::*;
pub use sandbox::*;
pub use todo::*;
