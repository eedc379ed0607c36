//! Test helpers shared by keel's test suites.
//!
//! This crate owns the scripted mock model server ([`MockModelServer`]) and
//! the builders that script it: [`MockResponse`] (what one request gets back)
//! and, per wire dialect, event builders that read like the domain
//! (`ev_text_delta("Hel")`, `ev_finish("stop")`, …). It is a dev-only crate:
//! it may use `anyhow` and may panic on broken test setups, and it must not
//! depend on keel's own runtime crates (it speaks the wire formats directly,
//! so it can catch a provider that speaks them wrong).
//!
//! [`process`] runs the real `keel` binary with timeouts ([`KeelCommand`]).
//!
//! Dialects: [`chat_completions`] (OpenAI Chat Completions, served on
//! `POST /v1/chat/completions`). Its builders are re-exported at the crate
//! root because it is the default dialect; later dialects (`responses`,
//! `messages`) live in sibling modules and are used through their module
//! path.

pub mod chat_completions;
pub mod process;
mod response;
mod server;
mod wait;

pub use chat_completions::*;
pub use process::{KeelChild, KeelCommand, KeelOutput};
pub use response::{MockResponse, SseEvent};
pub use server::{CapturedRequest, MockModelServer};
pub use wait::wait_until;
