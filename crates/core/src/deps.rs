//! The traits through which the turn loop reaches the outside world, and
//! their default implementations.
//!
//! The loop never touches the network, the file system, the clock or the
//! session file directly; it goes through [`SessionDeps`](crate::session::SessionDeps).
//! That keeps it deterministic given its inputs and lets a durable driver
//! run the same loop later.

use std::path::PathBuf;
use std::sync::Mutex;

use keel_session_store::{EntryBody, SessionWriter};
use serde_json::Value;

use crate::{Error, Result};

/// A tool call about to run, as the approval gate sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallInfo {
    pub session_id: String,
    pub call_id: String,
    pub tool_name: String,
    pub args: Value,
    pub cwd: PathBuf,
}

/// What the gate decided.
#[derive(Debug, Clone, PartialEq)]
pub enum GateDecision {
    /// Run the call.
    Allow,
    /// Do not run it; the model sees `message` as the tool's error result.
    Deny { message: String },
}

/// Asked before every tool run. Implementations may wait (for a person's
/// decision); the wait is cancelled if the run is aborted.
#[async_trait::async_trait]
pub trait ApprovalGate: Send + Sync {
    async fn check(&self, call: &ToolCallInfo) -> GateDecision;
}

/// The default gate: everything runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

#[async_trait::async_trait]
impl ApprovalGate for AllowAll {
    async fn check(&self, _call: &ToolCallInfo) -> GateDecision {
        GateDecision::Allow
    }
}

/// Time as the loop sees it.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// Today's date for the system prompt, `YYYY-MM-DD`.
    fn today(&self) -> String;
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
    fn today(&self) -> String {
        chrono::Local::now().format("%Y-%m-%d").to_string()
    }
}

/// The session's durable log. `append` queues an entry; `flush` returns once
/// everything appended so far is on disk.
#[async_trait::async_trait]
pub trait SessionLog: Send + Sync {
    async fn append(&self, body: EntryBody) -> Result<()>;
    async fn flush(&self) -> Result<()>;
}

#[async_trait::async_trait]
impl SessionLog for SessionWriter {
    async fn append(&self, body: EntryBody) -> Result<()> {
        SessionWriter::append(self, body)
            .await
            .map(|_| ())
            .map_err(|e| Error::Log(e.to_string()))
    }
    async fn flush(&self) -> Result<()> {
        SessionWriter::flush(self)
            .await
            .map_err(|e| Error::Log(e.to_string()))
    }
}

/// A log that keeps nothing (ephemeral sessions).
#[derive(Debug, Clone, Copy, Default)]
pub struct NullLog;

#[async_trait::async_trait]
impl SessionLog for NullLog {
    async fn append(&self, _body: EntryBody) -> Result<()> {
        Ok(())
    }
    async fn flush(&self) -> Result<()> {
        Ok(())
    }
}

/// A log in memory, for tests: records every entry and every flush.
#[derive(Debug, Default)]
pub struct MemoryLog {
    inner: Mutex<MemoryLogInner>,
}

#[derive(Debug, Default)]
struct MemoryLogInner {
    entries: Vec<EntryBody>,
    flushed: usize,
}

impl MemoryLog {
    /// Every entry appended so far.
    pub fn entries(&self) -> Vec<EntryBody> {
        self.inner
            .lock()
            .map(|i| i.entries.clone())
            .unwrap_or_default()
    }
    /// How many entries had been appended at the last flush.
    pub fn flushed_len(&self) -> usize {
        self.inner.lock().map(|i| i.flushed).unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl SessionLog for MemoryLog {
    async fn append(&self, body: EntryBody) -> Result<()> {
        if let Ok(mut inner) = self.inner.lock() {
            inner.entries.push(body);
        }
        Ok(())
    }
    async fn flush(&self) -> Result<()> {
        if let Ok(mut inner) = self.inner.lock() {
            inner.flushed = inner.entries.len();
        }
        Ok(())
    }
}
