//! The extension UI sub-protocol.
//!
//! Owns `extension_ui_request` frames and their answers. Dialogs (`select`,
//! `confirm`, `input`, `editor`) wait for the matching
//! `extension_ui_response` (`value`, `confirmed`, or `cancelled` with
//! `timedOut`); when their timeout passes or the caller is cancelled, keel
//! writes a `cancel` request naming the dialog and the dialog resolves to
//! its default (cancelled). Fire-and-forget methods (`notify`, `setStatus`,
//! `setWidget`, `setTitle`) expect no answer; `setTitle` is suppressed
//! unless enabled. Responses with unknown ids are ignored.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::command::UiResponse;
use crate::frames::{Out, UiRequest};

/// A dialog that waits for an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialog {
    Select,
    Confirm,
    Input,
    Editor,
}

impl Dialog {
    fn method(self) -> &'static str {
        match self {
            Dialog::Select => "select",
            Dialog::Confirm => "confirm",
            Dialog::Input => "input",
            Dialog::Editor => "editor",
        }
    }
}

/// A request that expects no answer. (keel has no editor of its own, so
/// it never sends `set_editor_text`.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    Notify,
    SetStatus,
    SetWidget,
    SetTitle,
}

impl Notice {
    fn method(self) -> &'static str {
        match self {
            Notice::Notify => "notify",
            Notice::SetStatus => "setStatus",
            Notice::SetWidget => "setWidget",
            Notice::SetTitle => "setTitle",
        }
    }
}

/// How a dialog ended.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum UiAnswer {
    /// `select`, `input`, `editor`.
    Value(Value),
    /// `confirm`.
    Confirmed(bool),
    /// Cancelled by the host, by keel, or by the timeout (the default).
    Cancelled { timed_out: bool },
}

#[derive(Default)]
struct Inner {
    pending: HashMap<String, oneshot::Sender<UiAnswer>>,
    next_id: u64,
    closed: bool,
}

/// Pending dialogs.
pub(crate) struct Ui {
    out: Out,
    default_timeout: Duration,
    emit_title: bool,
    inner: Mutex<Inner>,
}

impl Ui {
    pub fn new(out: Out, default_timeout: Duration, emit_title: bool) -> Self {
        Self {
            out,
            default_timeout,
            emit_title,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn next_id(inner: &mut Inner) -> String {
        inner.next_id += 1;
        format!("ui_{}", inner.next_id)
    }

    /// Writes a request that expects no answer.
    pub async fn notice(&self, notice: Notice, fields: Map<String, Value>) {
        if notice == Notice::SetTitle && !self.emit_title {
            return;
        }
        let id = Self::next_id(&mut self.lock());
        self.out
            .send(&UiRequest {
                kind: "extension_ui_request",
                id: &id,
                method: notice.method(),
                fields: &fields,
            })
            .await;
    }

    /// Opens a dialog and waits for its answer, the timeout (`None`: the
    /// default timeout) or `cancel`.
    pub async fn dialog(
        &self,
        dialog: Dialog,
        mut fields: Map<String, Value>,
        timeout: Option<Duration>,
        cancel: CancellationToken,
    ) -> UiAnswer {
        let timeout = timeout.unwrap_or(self.default_timeout);
        let (id, rx) = {
            let mut inner = self.lock();
            if inner.closed {
                return UiAnswer::Cancelled { timed_out: false };
            }
            let id = Self::next_id(&mut inner);
            let (tx, rx) = oneshot::channel();
            inner.pending.insert(id.clone(), tx);
            (id, rx)
        };
        fields.insert("timeout".to_owned(), json!(timeout.as_millis() as u64));
        self.out
            .send(&UiRequest {
                kind: "extension_ui_request",
                id: &id,
                method: dialog.method(),
                fields: &fields,
            })
            .await;
        let timed_out = tokio::select! {
            answer = rx => return answer.unwrap_or(UiAnswer::Cancelled { timed_out: false }),
            _ = tokio::time::sleep(timeout) => true,
            _ = cancel.cancelled() => false,
        };
        self.dismiss(&id).await;
        UiAnswer::Cancelled { timed_out }
    }

    /// Withdraws a pending dialog (`method: "cancel"`).
    pub async fn dismiss(&self, id: &str) {
        let was_pending = self.lock().pending.remove(id).is_some();
        if !was_pending {
            return;
        }
        let cancel_id = Self::next_id(&mut self.lock());
        let mut fields = Map::new();
        fields.insert("targetId".to_owned(), json!(id));
        self.out
            .send(&UiRequest {
                kind: "extension_ui_request",
                id: &cancel_id,
                method: "cancel",
                fields: &fields,
            })
            .await;
    }

    /// A host's answer; unknown ids are ignored.
    pub async fn response(&self, r: UiResponse) {
        let Some(tx) = self.lock().pending.remove(&r.id) else {
            tracing::debug!(id = %r.id, "extension UI response for no pending dialog; ignored");
            return;
        };
        let answer = if r.cancelled {
            UiAnswer::Cancelled {
                timed_out: r.timed_out,
            }
        } else if let Some(c) = r.confirmed {
            UiAnswer::Confirmed(c)
        } else if let Some(v) = r.value {
            UiAnswer::Value(v)
        } else {
            UiAnswer::Cancelled { timed_out: false }
        };
        let _ = tx.send(answer);
    }

    /// The host is gone: every pending dialog resolves to its default.
    pub async fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        for (_, tx) in inner.pending.drain() {
            let _ = tx.send(UiAnswer::Cancelled { timed_out: false });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ui(emit_title: bool) -> (Ui, tokio::sync::mpsc::Receiver<Vec<u8>>) {
        let (w, r) = tokio::io::duplex(1 << 16);
        let (sender, _task) = keel_jsonl::spawn_writer(w);
        let (tx, rx) = tokio::sync::mpsc::channel(64);
        tokio::spawn(async move {
            let mut frames = keel_jsonl::FrameReader::new(r, 1 << 20);
            while let Some(Ok(f)) = frames.next_frame().await {
                if tx.send(f).await.is_err() {
                    break;
                }
            }
        });
        (
            Ui::new(Out::new(sender), Duration::from_secs(30), emit_title),
            rx,
        )
    }

    async fn frame(rx: &mut tokio::sync::mpsc::Receiver<Vec<u8>>) -> Value {
        let bytes = tokio::time::timeout(Duration::from_secs(5), rx.recv())
            .await
            .unwrap()
            .unwrap();
        serde_json::from_slice(&bytes).unwrap()
    }

    #[tokio::test]
    async fn dialogs_resolve_by_answer_or_timeout() {
        let (ui, mut rx) = ui(false);
        let ui = std::sync::Arc::new(ui);
        let u = ui.clone();
        let waiting = tokio::spawn(async move {
            let mut f = Map::new();
            f.insert("title".into(), json!("Continue?"));
            u.dialog(Dialog::Confirm, f, None, CancellationToken::new())
                .await
        });
        let req = frame(&mut rx).await;
        assert_eq!(req["method"], "confirm");
        assert_eq!(req["title"], "Continue?");
        assert_eq!(req["timeout"], 30000);
        // An unknown id is ignored; the right one answers.
        let parse = |s: &str| serde_json::from_str::<UiResponse>(s).unwrap();
        ui.response(parse(r#"{"id":"nope","confirmed":true}"#))
            .await;
        let id = req["id"].as_str().unwrap();
        ui.response(parse(&format!(r#"{{"id":"{id}","confirmed":true}}"#)))
            .await;
        assert_eq!(waiting.await.unwrap(), UiAnswer::Confirmed(true));

        let answer = ui
            .dialog(
                Dialog::Input,
                Map::new(),
                Some(Duration::from_millis(20)),
                CancellationToken::new(),
            )
            .await;
        assert_eq!(answer, UiAnswer::Cancelled { timed_out: true });
        let req = frame(&mut rx).await;
        let cancel = frame(&mut rx).await;
        assert_eq!(cancel["method"], "cancel");
        assert_eq!(cancel["targetId"], req["id"]);
    }

    #[tokio::test]
    async fn titles_are_suppressed_unless_enabled() {
        let (ui, mut rx) = ui(false);
        ui.notice(Notice::SetTitle, Map::new()).await;
        ui.notice(Notice::Notify, Map::new()).await;
        assert_eq!(frame(&mut rx).await["method"], "notify");
        let (ui, mut rx) = ui_with_title();
        ui.notice(Notice::SetTitle, Map::new()).await;
        assert_eq!(frame(&mut rx).await["method"], "setTitle");
    }

    fn ui_with_title() -> (Ui, tokio::sync::mpsc::Receiver<Vec<u8>>) {
        ui(true)
    }
}
