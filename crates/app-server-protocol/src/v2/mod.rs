//! Typed params, results, items, notifications and server requests of the
//! v2 protocol (plus the v1 `initialize` pair it still uses). One module per
//! resource; field names and enum values follow the Codex JSON Schema.

mod command;
mod common;
mod fs;
mod initialize;
mod item;
mod misc;
mod notification;
mod server_request;
mod thread;
mod turn;

pub use command::*;
pub use common::*;
pub use fs::*;
pub use initialize::*;
pub use item::*;
pub use misc::*;
pub use notification::*;
pub use server_request::*;
pub use thread::*;
pub use turn::*;
