//! Request handlers, one module per resource. Each deserialises its params
//! (done by the dispatcher's `parse`) before any side effect.

pub mod command;
pub mod fs;
pub mod initialize;
pub mod misc;
pub mod thread;
pub mod thread_admin;
pub mod turn;
