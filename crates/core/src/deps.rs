//! The traits through which the turn loop reaches the outside world, and
//! their default implementations.
//!
//! The loop never touches the network, the file system, the clock or the
//! session file directly; it goes through [`SessionDeps`](crate::session::SessionDeps).
//! That keeps it deterministic given its inputs and lets a durable driver
//! run the same loop later.

use std::path::PathBuf;
use std::sync::Mutex;

use keel_session_store::{ApprovalEntry, Entry, EntryBody, SessionWriter};
use serde_json::Value;

use crate::{Error, Result};

/// A tool call about to run, as the approval gate sees it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolCallInfo {
    pub session_id: String,
    pub call_id: String,
    pub tool_name: String,
    pub args: Value,
    pub cwd: PathBuf,
    /// The physical file the call writes (`Tool::write_target`), resolved
    /// once: the gate judges it and the tool writes exactly there.
    pub write_target: Option<PathBuf>,
    /// What the tool says about itself (an MCP tool's annotations).
    pub hints: Option<keel_tools::ToolHints>,
}

/// What the gate decided about a call.
#[derive(Debug, Clone, PartialEq)]
pub enum GateDecision {
    /// Run the call.
    Allow,
    /// Run the call: an always-allow rule a person saved covers it.
    Covered,
    /// Run the call: a person approved its stored request. After it ran,
    /// the loop reports the result with [`ApprovalGate::finish`].
    Approved { approval_id: String },
    /// Held for a person. The request is stored; the loop makes what it
    /// has logged durable, then calls [`ApprovalGate::wait`], which
    /// announces the request and waits for the decision. No
    /// `tool_execution_start` is emitted before the decision.
    Held { approval_id: String },
    /// Do not run it; the model sees `message` as the tool's error result.
    /// `stop_turn`: the run ends after this call (declined with "stop").
    Deny { message: String, stop_turn: bool },
}

impl GateDecision {
    /// A denial the turn goes on after.
    pub fn deny(message: impl Into<String>) -> Self {
        GateDecision::Deny {
            message: message.into(),
            stop_turn: false,
        }
    }
}

/// What the gate knows of a call found without a result when a turn cut
/// off by a crash or kill is resumed (see `SessionHandle::resume_interrupted`).
#[derive(Debug, Clone, PartialEq)]
pub enum Recovery {
    /// A stored request covers the call: [`ApprovalGate::check`] picks it
    /// up (still pending: held again; decided meanwhile: honoured once;
    /// approved and started: "may or may not have happened").
    Recorded,
    /// Nothing is stored about the call. `read_only`: running it again
    /// cannot change anything.
    Unrecorded { read_only: bool },
    /// The call's outcome is known (it finished, or its decline was handed
    /// over, before keel stopped): the model reads this result; nothing runs.
    Answer { text: String, is_error: bool },
}

/// Asked before every tool run; the loop's only way to the approval engine.
///
/// The loop calls [`check`](Self::check) before each call. A
/// [`GateDecision::Held`] call is waited on with [`wait`](Self::wait) (the
/// wait ends on a decision, on expiry, or when the run is cancelled: the
/// loop then drops the future; a user's abort has already reached
/// [`abort`](Self::abort), a shutdown leaves the request pending for the
/// next process). Only `check` is required; the defaults suit gates that
/// never hold calls.
#[async_trait::async_trait]
pub trait ApprovalGate: Send + Sync {
    async fn check(&self, call: &ToolCallInfo) -> GateDecision;

    /// What a person's yes to `call` (a [`GateDecision::Approved`] or
    /// [`GateDecision::Covered`] call) lets it do beyond the sandbox
    /// policy, for that call only: network for what reaches out, the
    /// paths of a write outside the workspace, what a `sandbox_permissions`
    /// argument asked for. The default grants nothing.
    async fn grant(&self, call: &ToolCallInfo) -> keel_protocol::SandboxGrant {
        let _ = call;
        keel_protocol::SandboxGrant::default()
    }

    /// Announces the held request `approval_id` and waits for its decision.
    /// Never returns `Held`.
    async fn wait(&self, call: &ToolCallInfo, approval_id: &str) -> GateDecision {
        let _ = (call, approval_id);
        GateDecision::deny("This call was held for approval, but nothing can decide it here.")
    }

    /// What the session file records about how `call` was decided
    /// (`decision`: what `check`, or `wait` for a held call, returned);
    /// `None`, the default, records nothing.
    async fn outcome(&self, call: &ToolCallInfo, decision: &GateDecision) -> Option<ApprovalEntry> {
        let _ = (call, decision);
        None
    }

    /// An approved call ran; `outcome` is the text the model saw.
    async fn finish(&self, call: &ToolCallInfo, approval_id: &str, outcome: &str, is_error: bool) {
        let _ = (call, approval_id, outcome, is_error);
    }

    /// A new user message arrived while the session's turn may wait on
    /// calls: decline them with `message` as the note. Returns how many were
    /// declined (the message is then the note, not a new user message).
    async fn decline_waiting(&self, session_id: &str, message: &str) -> usize {
        let _ = (session_id, message);
        0
    }

    /// The input `call` runs with instead of the model's, when whoever
    /// decided it changed it (a host's permission callback or hook that
    /// answered with an updated input); asked once, after a decision that
    /// lets the call run. The sandbox confines the call as it runs with
    /// the new input. The default changes nothing.
    async fn rewrite(&self, call: &ToolCallInfo) -> Option<Value> {
        let _ = call;
        None
    }

    /// The user aborted the session's run: cancel what its turn waits on.
    async fn abort(&self, session_id: &str) {
        let _ = session_id;
    }

    /// What is known of a call found without a result when an interrupted
    /// turn is resumed. The default knows nothing, and runs nothing again
    /// that could have changed something.
    async fn recover(&self, call: &ToolCallInfo) -> Recovery {
        let _ = call;
        Recovery::Unrecorded { read_only: false }
    }

    /// Notes for the model at the start of the session's next run (what
    /// became of calls parked as drafts). Each note is returned once.
    async fn take_notes(&self, session_id: &str) -> Vec<String> {
        let _ = session_id;
        Vec::new()
    }

    /// The approval mode the gate's front end judges `call`'s session by
    /// (the app-server's per-thread policy), for a run elsewhere to use;
    /// `None`: the workspace's.
    fn session_mode(&self, call: &ToolCallInfo) -> Option<keel_approvals::Mode> {
        let _ = call;
        None
    }

    /// The URI schemes the gate's front end's host serves, for a run
    /// elsewhere to send `read`/`write` of such paths back here.
    fn host_schemes(&self) -> Vec<(String, keel_tools::host::HostScheme)> {
        Vec::new()
    }

    /// What the gate's front end says of `tool` when the host serves it
    /// (its declared class), for a run elsewhere that asks this side to
    /// run it; `None` for tools the host does not serve.
    fn host_hints(&self, tool: &str) -> Option<keel_tools::ToolHints> {
        let _ = tool;
        None
    }

    /// The session's run, running elsewhere, holds `request` there:
    /// announce it as a call held here would be (the decision is taken on
    /// the shared store, where the run elsewhere waits on it).
    async fn held_elsewhere(&self, request: &keel_approvals::PendingRequest, call: &ToolCallInfo) {
        let _ = (request, call);
    }

    /// The wait on `request` elsewhere ended.
    async fn resolved_elsewhere(
        &self,
        request: &keel_approvals::PendingRequest,
        resolution: &keel_approvals::Resolution,
    ) {
        let _ = (request, resolution);
    }
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
    /// Waits `duration` (the backoff before a retry). The default sleeps on
    /// tokio's timer, so paused test time applies; a durable driver or a
    /// test may replace it.
    fn sleep(
        &self,
        duration: std::time::Duration,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'static>> {
        Box::pin(tokio::time::sleep(duration))
    }
}

/// The wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl SystemClock {
    /// Looks up the local time zone now, so the first turn does not (call
    /// once at startup; later calls are cheap).
    pub fn warm_up() {
        let _ = local_offset(chrono::Utc::now().timestamp());
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        chrono::Utc::now().timestamp_millis()
    }
    fn today(&self) -> String {
        let now = chrono::Utc::now();
        now.with_timezone(&local_offset(now.timestamp()))
            .format("%Y-%m-%d")
            .to_string()
    }
}

/// Every change of a UTC offset in the time zone database falls on a
/// quarter hour of UTC, so an offset looked up at some instant holds at
/// least until the next one.
const OFFSET_VALID_SECS: i64 = 15 * 60;

/// The local offset of this process and the UTC second until which it
/// holds (exclusive).
static LOCAL_OFFSET: Mutex<Option<(chrono::FixedOffset, i64)>> = Mutex::new(None);

/// The local time zone's offset from UTC at `utc_secs`.
///
/// chrono keeps its parsed zone per thread and reads the zone file again
/// on each new thread (and checks it every second), which put a file read
/// on the way of a turn's first request. The offset is kept for the whole
/// process instead and looked up again at the next quarter hour, so the
/// date stays right across midnight and daylight saving changes; a change
/// of the machine's zone is seen within 15 minutes.
fn local_offset(utc_secs: i64) -> chrono::FixedOffset {
    if let Ok(cached) = LOCAL_OFFSET.lock()
        && let Some((offset, until)) = *cached
        && utc_secs < until
        && utc_secs >= until - OFFSET_VALID_SECS
    {
        return offset;
    }
    let offset = chrono::DateTime::from_timestamp(utc_secs, 0)
        .map(|utc| *utc.with_timezone(&chrono::Local).offset())
        .unwrap_or_else(|| *chrono::Local::now().offset());
    let until = utc_secs.div_euclid(OFFSET_VALID_SECS) * OFFSET_VALID_SECS + OFFSET_VALID_SECS;
    if let Ok(mut cached) = LOCAL_OFFSET.lock() {
        *cached = Some((offset, until));
    }
    offset
}

/// The session's durable log. `append` queues an entry; `flush` returns once
/// everything appended so far is on disk.
#[async_trait::async_trait]
pub trait SessionLog: Send + Sync {
    async fn append(&self, body: EntryBody) -> Result<()>;
    async fn flush(&self) -> Result<()>;

    /// Appends an entry and returns it as written (`id`, `parentId`) when
    /// the log assigns ids; `None` when it keeps none (the loop then mints
    /// one for its own tree).
    async fn append_entry(&self, body: EntryBody) -> Result<Option<Entry>> {
        self.append(body).await.map(|()| None)
    }

    /// Moves the leaf: the next entry follows `entry_id` (`None`: a new
    /// root). Used to branch and to leave a failed message off the branch.
    async fn set_leaf(&self, entry_id: Option<String>) -> Result<()> {
        let _ = entry_id;
        Ok(())
    }

    /// Reads the log again after another process appended to it (a run
    /// elsewhere, see `crate::elsewhere`) and goes on after its end;
    /// returns the entries as they are now. `None`, the default: the log
    /// keeps no entries to read.
    async fn reload(&self) -> Result<Option<keel_session_store::SessionTree>> {
        Ok(None)
    }
}

#[async_trait::async_trait]
impl SessionLog for SessionWriter {
    async fn append(&self, body: EntryBody) -> Result<()> {
        SessionWriter::append(self, body)
            .await
            .map(|_| ())
            .map_err(|e| Error::Log(e.to_string()))
    }
    async fn append_entry(&self, body: EntryBody) -> Result<Option<Entry>> {
        SessionWriter::append(self, body)
            .await
            .map(Some)
            .map_err(|e| Error::Log(e.to_string()))
    }
    async fn set_leaf(&self, entry_id: Option<String>) -> Result<()> {
        SessionWriter::set_leaf(self, entry_id)
            .await
            .map_err(|e| Error::Log(e.to_string()))
    }
    async fn flush(&self) -> Result<()> {
        SessionWriter::flush(self)
            .await
            .map_err(|e| Error::Log(e.to_string()))
    }
    async fn reload(&self) -> Result<Option<keel_session_store::SessionTree>> {
        SessionWriter::reload(self)
            .await
            .map(Some)
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
    /// Reloads still to fail (a store that is away), and reloads asked.
    failing_reloads: usize,
    reloads: usize,
    /// What a reload reads (a session another process wrote).
    reloaded: Option<keel_session_store::SessionTree>,
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
    /// Makes the next `n` reloads fail, as with a store that is away.
    pub fn fail_reloads(&self, n: usize) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.failing_reloads = n;
        }
    }
    /// Makes each later reload read `tree`, as another process wrote it.
    pub fn reload_as(&self, tree: keel_session_store::SessionTree) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.reloaded = Some(tree);
        }
    }
    /// How many reloads were asked for.
    pub fn reloads(&self) -> usize {
        self.inner.lock().map(|i| i.reloads).unwrap_or_default()
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
    async fn reload(&self) -> Result<Option<keel_session_store::SessionTree>> {
        let (failing, reloaded) = match self.inner.lock() {
            Ok(mut inner) => {
                inner.reloads += 1;
                let failing = inner.failing_reloads > 0;
                inner.failing_reloads = inner.failing_reloads.saturating_sub(1);
                (failing, inner.reloaded.clone())
            }
            Err(_) => (false, None),
        };
        if failing {
            return Err(crate::Error::Log("the store is away".to_owned()));
        }
        Ok(reloaded)
    }
}

/// Whether a session's run may still act: asked once a call has passed
/// the gate and before it runs (a durable driver's try that was replaced
/// by a later one must not run anything). `Err` says why not, to the
/// model; the run then stops. A check that cannot be made must answer
/// `Err`: the fence fails closed.
#[async_trait::async_trait]
pub trait RunFence: Send + Sync {
    async fn check(&self) -> std::result::Result<(), String>;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrono_offset(utc_secs: i64) -> chrono::FixedOffset {
        let utc = chrono::DateTime::from_timestamp(utc_secs, 0).unwrap();
        *utc.with_timezone(&chrono::Local).offset()
    }

    #[test]
    fn the_cached_offset_is_the_zone_offset_at_every_instant_asked() {
        let now = chrono::Utc::now().timestamp();
        // Now, half a year on (another window: looked up again), back to
        // now (the window moved on: looked up again) and within the window.
        for t in [now, now + 183 * 86_400, now, now + 1] {
            assert_eq!(local_offset(t), chrono_offset(t), "at {t}");
        }
    }

    #[test]
    fn today_is_the_local_date() {
        let before = chrono::Local::now().format("%Y-%m-%d").to_string();
        let today = SystemClock.today();
        let after = chrono::Local::now().format("%Y-%m-%d").to_string();
        assert!(
            today == before || today == after,
            "{today} vs {before}/{after}"
        );
        assert_eq!(today.len(), 10);
    }
}
