//! Engine tests: the decision order, waits and decisions, restarts across
//! engine instances on one database file, drafts, and two engines on one
//! PostgreSQL database (`postgres.rs`). Everything runs on temp dirs or a
//! throwaway server; anything that waits is under a timeout.

mod drafts;
mod gate;
mod postgres;
mod restart;
mod waits;
mod wakeups;

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::*;
use crate::clock::ManualClock;

/// Generous: only reached when something hangs.
const HANG: Duration = Duration::from_secs(20);

async fn within<T>(f: impl Future<Output = T>) -> T {
    match tokio::time::timeout(HANG, f).await {
        Ok(v) => v,
        Err(_) => panic!("timed out: something hangs"),
    }
}

fn test_config() -> EngineConfig {
    EngineConfig {
        poll_interval: Duration::from_millis(20),
        ..EngineConfig::default()
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    db: PathBuf,
    clock: ManualClock,
    engine: ApprovalEngine,
}

impl Fixture {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("keel.db");
        let clock = ManualClock::new(1_700_000_000_000);
        let engine = engine_on(&db, &clock).await;
        Self {
            _dir: dir,
            db,
            clock,
            engine,
        }
    }

    /// Another engine (another process, or keel after a restart) on the
    /// same database file.
    async fn another(&self) -> ApprovalEngine {
        engine_on(&self.db, &self.clock).await
    }
}

async fn engine_on(db: &Path, clock: &ManualClock) -> ApprovalEngine {
    ApprovalEngine::open_sqlite_with(db, Arc::new(clock.clone()), test_config())
        .await
        .unwrap()
}

fn call(call_id: &str, tool: &str, args: Value) -> CallContext {
    CallContext {
        workspace: "/ws".to_owned(),
        cwd: PathBuf::from("/ws"),
        session_id: "s1".to_owned(),
        call_id: call_id.to_owned(),
        tool_name: tool.to_owned(),
        args,
        origin: ToolOrigin::Builtin,
        unattended: false,
        write_target: None,
    }
}

fn bash(call_id: &str, command: &str) -> CallContext {
    call(call_id, "bash", json!({ "command": command }))
}

fn held_id(outcome: &GateOutcome) -> String {
    match outcome {
        GateOutcome::Held { request } => request.id.clone(),
        other => panic!("expected held, got {other:?}"),
    }
}

fn is_auto(outcome: &GateOutcome) -> bool {
    matches!(
        outcome,
        GateOutcome::Allow {
            approved_by: ApprovedBy::Auto,
            ..
        }
    )
}

fn deny_message(outcome: &GateOutcome) -> &str {
    match outcome {
        GateOutcome::Deny { message, .. } => message,
        other => panic!("expected deny, got {other:?}"),
    }
}

/// Polls `pending` until a request for `call_id` shows up.
async fn pending_for(engine: &ApprovalEngine, call_id: &str) -> PendingRequest {
    within(async {
        loop {
            let pending = engine.pending(None).await.unwrap();
            if let Some(p) = pending.into_iter().find(|p| p.call_id == call_id) {
                return p;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
}
