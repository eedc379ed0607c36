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
//! [`postgres`] starts a throwaway PostgreSQL server ([`PostgresServer`]),
//! [`temporal`] a Temporal dev server ([`TemporalServer`]).
//!
//! Dialects, one module each, all served by the same server from the same
//! FIFO script (whatever the path): [`chat_completions`] (OpenAI Chat
//! Completions, `POST /v1/chat/completions`; its builders are re-exported
//! at the crate root because it is the default dialect, and its
//! [`MockResponse`] shortcuts such as [`MockResponse::text`] are Chat
//! Completions answers), [`responses`] (OpenAI Responses,
//! `POST /v1/responses`) and [`anthropic`] (Anthropic Messages,
//! `POST /v1/messages`), used through their module path
//! (`responses::text("Hi")`, `anthropic::ev_text_delta(0, "Hi")`). Whole
//! SSE bodies kept as fixture files are served with [`sse_from_text`].
// Test helpers report a skipped test on stderr, where the test runner shows
// it; stdout stays untouched.
#![allow(clippy::print_stderr)]

pub mod anthropic;
pub mod chat_completions;
mod local_model;
pub mod postgres;
pub mod process;
mod response;
pub mod responses;
mod server;
pub mod temporal;
mod wait;

pub use chat_completions::*;
pub use local_model::{SMALL_MODEL_FILE, in_ci, small_local_model};
pub use postgres::PostgresServer;
pub use process::{KeelChild, KeelCommand, KeelOutput};
pub use response::{MockResponse, SseEvent, sse_from_text};
pub use server::{CapturedRequest, MockModelServer};
pub use temporal::TemporalServer;
pub use wait::wait_until;
