//! The SDK on the other end of stdio: frames keel writes to it, and the
//! control requests keel asks of it (`can_use_tool`, `hook_callback`),
//! each a oneshot keyed by its `request_id`. A request whose asker gives
//! up (the call was decided elsewhere, the run was interrupted) is
//! withdrawn with `control_cancel_request`. It knows nothing of what a
//! request means.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use keel_jsonl::FrameSender;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::wire;

/// The SDK's answer to one control request: its `response`, or its error.
pub type Reply = Result<Value, String>;

pub struct Peer {
    /// `None` once closed: the writer task then ends after what is queued.
    out: Mutex<Option<FrameSender>>,
    pending: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
    next: AtomicU64,
    /// Fired when stdout can no longer be written (the SDK is gone).
    gone: CancellationToken,
}

impl Peer {
    pub fn new(out: FrameSender) -> Self {
        Self {
            out: Mutex::new(Some(out)),
            pending: Mutex::default(),
            next: AtomicU64::new(1),
            gone: CancellationToken::new(),
        }
    }

    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Reply>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Fires once the SDK cannot be written to.
    pub fn gone(&self) -> CancellationToken {
        self.gone.clone()
    }

    fn sender(&self) -> Option<FrameSender> {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Writes one frame; a failed write marks the SDK gone.
    pub async fn send(&self, frame: &Value) {
        let Some(out) = self.sender() else { return };
        if out.send_json(frame).await.is_err() {
            self.gone.cancel();
        }
    }

    /// Writes nothing more: the writer ends once what is queued is out.
    pub fn close(&self) {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).take();
    }

    /// Asks the SDK `request` and waits for its answer. Dropping the
    /// future withdraws the request.
    pub async fn request(&self, request: Value) -> Reply {
        let id = format!("keel-{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.pending().insert(id.clone(), tx);
        let mut guard = Withdraw {
            peer: self,
            id: Some(id.clone()),
        };
        self.send(&wire::control_request(&id, request)).await;
        let reply = tokio::select! {
            r = rx => r.unwrap_or_else(|_| Err("the SDK closed the request".to_owned())),
            () = self.gone.cancelled() => Err("the SDK is gone".to_owned()),
        };
        // Answered, or nobody can answer it any more: nothing to withdraw.
        guard.id = None;
        self.pending().remove(&id);
        reply
    }

    /// The SDK answered `request_id`; `false` when nothing waits on it.
    pub fn answered(&self, request_id: &str, reply: Reply) -> bool {
        match self.pending().remove(request_id) {
            Some(tx) => tx.send(reply).is_ok(),
            None => false,
        }
    }

    /// Fails every request still waiting (the SDK closed its input).
    pub fn close_all(&self) {
        for (_, tx) in self.pending().drain() {
            let _ = tx.send(Err("the SDK closed its input".to_owned()));
        }
    }
}

/// Withdraws a request whose asker stopped waiting.
struct Withdraw<'a> {
    peer: &'a Peer,
    id: Option<String>,
}

impl Drop for Withdraw<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        if self.peer.pending().remove(&id).is_none() {
            return;
        }
        let Some(out) = self.peer.sender() else {
            return;
        };
        tokio::spawn(async move {
            let _ = out
                .send_json(&json!({"type": "control_cancel_request", "request_id": id}))
                .await;
        });
    }
}
