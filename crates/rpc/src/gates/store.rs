//! Durable workflow gates: an append-only JSONL file.
//!
//! Owns the file `gates.jsonl` in RPC mode's state directory: one line per
//! opened gate and one per resolution (accepted or rejected), each written
//! and fsynced (or committed, with the shared database: see
//! `keel_session_store::home_files`) before the gate frame or the response
//! that reports it.
//! Loading replays the lines (a torn last line is skipped), so gates,
//! resolutions, idempotency keys and the run counter survive a restart. It
//! does not validate answers or talk to the host.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One line of the file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub(crate) enum Record {
    /// A run of keel started opening gates.
    Run { run: u64 },
    /// A gate was opened; `gate` is its `workflow_gate` frame.
    Opened { gate: Value },
    /// An answer was judged.
    Resolution {
        gate_id: String,
        status: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idempotency_key: Option<String>,
        body_hash: String,
        answer: Value,
        /// The `data` of the response.
        data: Value,
    },
}

/// The file, or nothing (gates then live in memory only).
#[derive(Clone)]
pub(crate) struct GateStore {
    path: Option<Arc<PathBuf>>,
    lock: Arc<tokio::sync::Mutex<()>>,
}

impl GateStore {
    /// A store in `dir` (created when needed), or an in-memory one.
    pub fn new(dir: Option<&Path>) -> Self {
        Self {
            path: dir.map(|d| Arc::new(d.join("gates.jsonl"))),
            lock: Arc::default(),
        }
    }

    /// Every record written so far (lines that do not parse are skipped).
    pub async fn load(&self) -> Vec<Record> {
        let Some(path) = self.path.clone() else {
            return Vec::new();
        };
        let text = match keel_session_store::home_files::read(path.as_ref()).await {
            Ok(Some(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
            Ok(None) => return Vec::new(),
            Err(e) => {
                tracing::warn!(error = %e, path = %path.display(), "cannot read the gate store");
                return Vec::new();
            }
        };
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| match serde_json::from_str::<Record>(l) {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(error = %e, "skipping a bad line of the gate store");
                    None
                }
            })
            .collect()
    }

    /// Appends `record` and syncs it to disk.
    pub async fn append(&self, record: &Record) -> Result<(), String> {
        let Some(path) = self.path.clone() else {
            return Ok(());
        };
        let mut line = serde_json::to_vec(record).map_err(|e| e.to_string())?;
        line.push(b'\n');
        let _guard = self.lock.lock().await;
        keel_session_store::home_files::append(&path, line)
            .await
            .map_err(|e| format!("cannot write the gate store: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn records_survive_and_torn_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let store = GateStore::new(Some(dir.path()));
        store.append(&Record::Run { run: 1 }).await.unwrap();
        store
            .append(&Record::Opened {
                gate: json!({"gate_id": "wg_1_ralplan_000001"}),
            })
            .await
            .unwrap();
        let path = dir.path().join("gates.jsonl");
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"record\":\"resolu");
        std::fs::write(&path, text).unwrap();
        let reopened = GateStore::new(Some(dir.path()));
        reopened.append(&Record::Run { run: 2 }).await.unwrap();
        let records = reopened.load().await;
        assert_eq!(records.len(), 3);
        assert_eq!(records[2], Record::Run { run: 2 });
        assert_eq!(records[0], Record::Run { run: 1 });
        assert!(GateStore::new(None).load().await.is_empty());
    }
}
