//! The workflow gate sub-protocol.
//!
//! Owns opening gates (`workflow_gate` frames with ids
//! `wg_<run>_<stage>_NNNNNN`, a stage of `deep-interview`, `ralplan` or
//! `ultragoal`, a kind of `question`, `approval` or `execution`, a schema
//! from the supported subset and its hash) and judging
//! `workflow_gate_response`: a valid answer is stored as the accepted
//! resolution before the waiting workflow advances; an invalid one is a
//! successful response with `status: "rejected"` and an
//! `invalid_workflow_gate_answer` error, and the gate stays pending;
//! idempotency keys replay the cached resolution for the same body and are
//! an `idempotency_conflict` for another; `unknown_gate`,
//! `already_resolved` and `invalid_workflow_stage` are command failures.
//! Everything is durable through [`store`]. What opens gates in keel is the
//! `ask_host` tool ([`tool`]).

pub(crate) mod schema;
pub(crate) mod store;
pub(crate) mod tool;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::frames::Out;
use crate::wire_errors::{self, WireError};
use store::{GateStore, Record};

/// The stages a gate may belong to (`team` is reserved).
pub(crate) const STAGES: &[&str] = &["deep-interview", "ralplan", "ultragoal"];
/// The kinds of gates.
pub(crate) const KINDS: &[&str] = &["question", "approval", "execution"];

/// One choice of a select-style gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GateOption {
    pub value: String,
    pub label: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// What to open.
#[derive(Debug, Clone)]
pub(crate) struct GateSpec {
    pub stage: String,
    pub kind: String,
    pub schema: Value,
    pub options: Vec<GateOption>,
    /// `title`, `prompt`, `summary`, `stage_state`, `artifact_refs`, `language`.
    pub context: Value,
}

/// The `workflow_gate` frame.
#[derive(Debug, Serialize)]
struct GateFrame<'a> {
    #[serde(rename = "type")]
    kind_tag: &'static str,
    gate_id: &'a str,
    stage: &'a str,
    kind: &'a str,
    schema: &'a Value,
    schema_hash: &'a str,
    #[serde(skip_serializing_if = "<[GateOption]>::is_empty")]
    options: &'a [GateOption],
    context: &'a Value,
    created_at: String,
    required: bool,
}

struct Entry {
    schema: Value,
    schema_hash: String,
    accepted: Option<Value>,
    waiter: Option<oneshot::Sender<Value>>,
}

#[derive(Default)]
struct Inner {
    run: u64,
    run_recorded: bool,
    next: u64,
    gates: HashMap<String, Entry>,
    /// Idempotency key → (body hash, response data).
    idem: HashMap<String, (String, Value)>,
}

/// Open gates and their resolutions.
pub(crate) struct Gates {
    out: Out,
    store: GateStore,
    inner: Mutex<Inner>,
    /// Judging is one at a time, so a gate is never accepted twice.
    judging: tokio::sync::Mutex<()>,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl Gates {
    /// Gates stored in `dir` (in memory when `None`), replayed from disk.
    pub async fn load(out: Out, dir: Option<&Path>) -> Self {
        let store = GateStore::new(dir);
        let mut inner = Inner::default();
        for record in store.load().await {
            match record {
                Record::Run { run } => inner.run = inner.run.max(run),
                Record::Opened { gate } => {
                    let (Some(id), Some(hash)) =
                        (gate["gate_id"].as_str(), gate["schema_hash"].as_str())
                    else {
                        continue;
                    };
                    inner.gates.insert(
                        id.to_owned(),
                        Entry {
                            schema: gate["schema"].clone(),
                            schema_hash: hash.to_owned(),
                            accepted: None,
                            waiter: None,
                        },
                    );
                }
                Record::Resolution {
                    gate_id,
                    status,
                    idempotency_key,
                    body_hash,
                    data,
                    ..
                } => {
                    if status == "accepted"
                        && let Some(e) = inner.gates.get_mut(&gate_id)
                    {
                        e.accepted = Some(data.clone());
                    }
                    if let Some(key) = idempotency_key {
                        inner.idem.insert(key, (body_hash, data));
                    }
                }
            }
        }
        inner.run += 1;
        Self {
            out,
            store,
            inner: Mutex::new(inner),
            judging: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a gate: stored first, then announced. Returns its id and a
    /// receiver of the accepted answer.
    pub async fn open(
        &self,
        spec: GateSpec,
    ) -> Result<(String, oneshot::Receiver<Value>), WireError> {
        if !STAGES.contains(&spec.stage.as_str()) {
            return Err(wire_errors::gate::invalid_stage(&spec.stage, STAGES, None));
        }
        if !KINDS.contains(&spec.kind.as_str()) {
            return Err(wire_errors::gate::invalid_kind(&spec.kind, KINDS));
        }
        if let Err(detail) = schema::check(&spec.schema) {
            return Err(wire_errors::gate::invalid_schema(
                &detail,
                schema::SUPPORTED,
            ));
        }
        let schema_hash = schema::hash(&spec.schema);
        let (gate_id, run, record_run) = {
            let mut inner = self.lock();
            inner.next += 1;
            let record_run = !inner.run_recorded;
            inner.run_recorded = true;
            (
                format!("wg_{}_{}_{:06}", inner.run, spec.stage, inner.next),
                inner.run,
                record_run,
            )
        };
        let frame = GateFrame {
            kind_tag: "workflow_gate",
            gate_id: &gate_id,
            stage: &spec.stage,
            kind: &spec.kind,
            schema: &spec.schema,
            schema_hash: &schema_hash,
            options: &spec.options,
            context: &spec.context,
            created_at: now(),
            required: true,
        };
        let gate = serde_json::to_value(&frame).unwrap_or(Value::Null);
        if record_run {
            self.persist(&Record::Run { run }).await?;
        }
        self.persist(&Record::Opened { gate: gate.clone() }).await?;
        let (tx, rx) = oneshot::channel();
        self.lock().gates.insert(
            gate_id.clone(),
            Entry {
                schema: spec.schema.clone(),
                schema_hash: schema_hash.clone(),
                accepted: None,
                waiter: Some(tx),
            },
        );
        self.out.send(&frame).await;
        Ok((gate_id, rx))
    }

    /// Nobody waits for this gate any more (the gate stays open).
    pub fn forget_waiter(&self, gate_id: &str) {
        if let Some(e) = self.lock().gates.get_mut(gate_id) {
            e.waiter = None;
        }
    }

    async fn persist(&self, record: &Record) -> Result<(), WireError> {
        self.store
            .append(record)
            .await
            .map_err(|e| wire_errors::session_failure(&e))
    }

    /// Judges an answer; `Ok` is the response's `data`.
    pub async fn respond(
        &self,
        gate_id: &str,
        answer: &Value,
        idempotency_key: Option<&str>,
    ) -> Result<Value, WireError> {
        let _one_at_a_time = self.judging.lock().await;
        let body_hash = schema::hash(&json!({"gate_id": gate_id, "answer": answer}));
        let (schema, schema_hash) = {
            let inner = self.lock();
            if let Some(key) = idempotency_key
                && let Some((seen, data)) = inner.idem.get(key)
            {
                if *seen == body_hash {
                    return Ok(data.clone());
                }
                return Err(wire_errors::gate::idempotency_conflict(gate_id, key));
            }
            let Some(entry) = inner.gates.get(gate_id) else {
                return Err(unknown(gate_id));
            };
            if let Some(resolution) = &entry.accepted {
                return Err(wire_errors::gate::already_resolved(gate_id, resolution));
            }
            (entry.schema.clone(), entry.schema_hash.clone())
        };
        let violations = schema::validate(&schema, answer);
        let accepted = violations.is_empty();
        let mut data = json!({
            "gate_id": gate_id,
            "status": if accepted { "accepted" } else { "rejected" },
            "answer_hash": schema::hash(answer),
            "resolved_at": now(),
        });
        if !accepted {
            data["error"] = json!({
                "code": "invalid_workflow_gate_answer",
                "gate_id": gate_id,
                "schema_hash": schema_hash,
                "errors": violations,
            });
        }
        self.persist(&Record::Resolution {
            gate_id: gate_id.to_owned(),
            status: data["status"].as_str().unwrap_or_default().to_owned(),
            idempotency_key: idempotency_key.map(str::to_owned),
            body_hash: body_hash.clone(),
            answer: answer.clone(),
            data: data.clone(),
        })
        .await?;
        let waiter = {
            let mut inner = self.lock();
            if let Some(key) = idempotency_key {
                inner.idem.insert(key.to_owned(), (body_hash, data.clone()));
            }
            match inner.gates.get_mut(gate_id) {
                Some(entry) if accepted => {
                    entry.accepted = Some(data.clone());
                    entry.waiter.take()
                }
                _ => None,
            }
        };
        if let Some(w) = waiter {
            let _ = w.send(answer.clone());
        }
        Ok(data)
    }
}

/// `unknown_gate`, or `invalid_workflow_stage` when the id names a stage
/// that does not exist.
fn unknown(gate_id: &str) -> WireError {
    let stage = gate_id
        .strip_prefix("wg_")
        .and_then(|rest| rest.split_once('_'))
        .and_then(|(_, rest)| rest.rsplit_once('_'))
        .map(|(stage, _)| stage);
    match stage {
        Some(stage) if !STAGES.contains(&stage) => {
            wire_errors::gate::invalid_stage(stage, STAGES, Some(gate_id))
        }
        _ => wire_errors::gate::unknown(gate_id),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out() -> Out {
        let (w, _r) = tokio::io::duplex(1 << 20);
        let (sender, _task) = keel_jsonl::spawn_writer(w);
        std::mem::forget(_r);
        Out::new(sender)
    }

    fn spec(stage: &str) -> GateSpec {
        GateSpec {
            stage: stage.into(),
            kind: "approval".into(),
            schema: json!({"type": "string", "enum": ["approve", "reject"]}),
            options: vec![],
            context: json!({"title": "Approve plan?"}),
        }
    }

    fn code(e: WireError) -> String {
        e.to_value()["code"].as_str().unwrap_or_default().to_owned()
    }

    #[tokio::test]
    async fn judging_idempotency_and_durability() {
        let dir = tempfile::tempdir().unwrap();
        let gates = Gates::load(out(), Some(dir.path())).await;
        let (id, rx) = gates.open(spec("ralplan")).await.unwrap();
        assert_eq!(id, "wg_1_ralplan_000001");
        assert_eq!(
            code(gates.open(spec("team")).await.unwrap_err()),
            "invalid_workflow_stage"
        );
        let mut bad = spec("ralplan");
        bad.schema = json!({"type": "string", "format": "email"});
        assert_eq!(
            code(gates.open(bad).await.unwrap_err()),
            "invalid_workflow_gate_schema"
        );

        let r = gates.respond(&id, &json!(true), Some("k0")).await.unwrap();
        assert_eq!(r["status"], "rejected");
        assert_eq!(r["error"]["code"], "invalid_workflow_gate_answer");
        assert_eq!(r["error"]["errors"][0]["keyword"], "type");
        let again = gates.respond(&id, &json!(true), Some("k0")).await.unwrap();
        assert_eq!(again, r, "same key and body replay the cached resolution");
        let conflict = gates.respond(&id, &json!("approve"), Some("k0")).await;
        assert_eq!(code(conflict.unwrap_err()), "idempotency_conflict");

        let ok = gates
            .respond(&id, &json!("approve"), Some("k1"))
            .await
            .unwrap();
        assert_eq!(ok["status"], "accepted");
        assert_eq!(rx.await.unwrap(), json!("approve"));
        assert_eq!(
            code(
                gates
                    .respond(&id, &json!("reject"), None)
                    .await
                    .unwrap_err()
            ),
            "already_resolved"
        );
        assert_eq!(
            code(
                gates
                    .respond("wg_9_ralplan_000001", &json!(1), None)
                    .await
                    .unwrap_err()
            ),
            "unknown_gate"
        );
        assert_eq!(
            code(
                gates
                    .respond("wg_9_team_000001", &json!(1), None)
                    .await
                    .unwrap_err()
            ),
            "invalid_workflow_stage"
        );

        // A restart keeps gates, resolutions and keys, and starts a new run.
        let (pending, _rx) = gates.open(spec("ultragoal")).await.unwrap();
        let restarted = Gates::load(out(), Some(dir.path())).await;
        assert_eq!(
            code(
                restarted
                    .respond(&id, &json!("approve"), None)
                    .await
                    .unwrap_err()
            ),
            "already_resolved"
        );
        let replay = restarted
            .respond(&id, &json!("approve"), Some("k1"))
            .await
            .unwrap();
        assert_eq!(replay, ok);
        let late = restarted
            .respond(&pending, &json!("approve"), None)
            .await
            .unwrap();
        assert_eq!(late["status"], "accepted");
        let (next, _rx) = restarted.open(spec("ralplan")).await.unwrap();
        assert_eq!(next, "wg_2_ralplan_000001");
    }
}
