//! The host URI sub-protocol.
//!
//! Owns the host's schemes (`set_host_uri_schemes` replaces the set; names
//! are lowercased) and the broker that serves `read`/`write` of
//! `<scheme>://…` through the host: `host_uri_request` out,
//! `host_uri_result` in (content, contentType, notes, immutable; or
//! `isError` with `error`), `host_uri_cancel` on abort or timeout. The end
//! of input fails every pending request. Unknown result ids are ignored.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use keel_tools::host::{HostScheme, HostUriContent, HostUriResolver};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use crate::command::HostUriResult;
use crate::frames::{Cancel, HostUriRequest, Out};
use crate::wire_errors::tool_text;

#[derive(Default)]
pub(crate) struct Inner {
    pub(crate) schemes: BTreeMap<String, HostScheme>,
    pending: HashMap<String, oneshot::Sender<Option<HostUriResult>>>,
    next_id: u64,
    closed: bool,
}

/// The host's schemes and pending requests.
pub(crate) struct HostUris {
    out: Out,
    timeout: Duration,
    inner: Mutex<Inner>,
}

impl HostUris {
    pub fn new(out: Out, timeout: Duration) -> Self {
        Self {
            out,
            timeout,
            inner: Mutex::default(),
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A host's answer.
    pub async fn result(&self, result: HostUriResult) {
        let tx = self.lock().pending.remove(&result.id);
        match tx {
            Some(tx) => {
                let _ = tx.send(Some(result));
            }
            None => tracing::debug!(id = %result.id, "host_uri_result for no pending request"),
        }
    }

    /// The host is gone: fail every pending request and refuse new ones.
    pub async fn close(&self) {
        let mut inner = self.lock();
        inner.closed = true;
        for (_, tx) in inner.pending.drain() {
            let _ = tx.send(None);
        }
    }

    async fn request(
        &self,
        operation: &str,
        url: &str,
        content: Option<&str>,
        cancel: CancellationToken,
    ) -> keel_tools::Result<HostUriResult> {
        let (id, n, rx) = {
            let mut inner = self.lock();
            if inner.closed {
                return Err(keel_tools::Error::Failed(tool_text::host_gone()));
            }
            inner.next_id += 1;
            let n = inner.next_id;
            let id = format!("uri_{n}");
            let (tx, rx) = oneshot::channel();
            inner.pending.insert(id.clone(), tx);
            (id, n, rx)
        };
        self.out
            .send(&HostUriRequest {
                kind: "host_uri_request",
                id: &id,
                operation,
                url,
                content,
            })
            .await;
        let outcome = tokio::select! {
            _ = cancel.cancelled() => Err(keel_tools::Error::Aborted),
            _ = tokio::time::sleep(self.timeout) => Err(keel_tools::Error::Failed(
                tool_text::host_timeout(&format!("the {operation} of {url}"), self.timeout.as_secs_f64()),
            )),
            got = rx => match got {
                Ok(Some(result)) => return Ok(result),
                Ok(None) | Err(_) => return Err(keel_tools::Error::Failed(tool_text::host_gone())),
            },
        };
        self.lock().pending.remove(&id);
        self.out
            .send(&Cancel {
                kind: "host_uri_cancel",
                id: &format!("uri_cancel_{n}"),
                target_id: &id,
            })
            .await;
        outcome
    }
}

fn failure(what: &str, result: &HostUriResult) -> keel_tools::Error {
    let detail = result
        .error
        .clone()
        .or_else(|| result.content.clone())
        .unwrap_or_else(|| "no reason given".to_owned());
    keel_tools::Error::Failed(tool_text::host_error(what, &detail))
}

#[async_trait::async_trait]
impl HostUriResolver for HostUris {
    fn scheme(&self, scheme: &str) -> Option<HostScheme> {
        self.lock().schemes.get(scheme).copied()
    }

    async fn read(
        &self,
        url: &str,
        cancel: CancellationToken,
    ) -> keel_tools::Result<HostUriContent> {
        let result = self.request("read", url, None, cancel).await?;
        if result.is_error {
            return Err(failure(url, &result));
        }
        Ok(HostUriContent {
            content: result.content.unwrap_or_default(),
            content_type: result.content_type,
            notes: result.notes,
            immutable: result.immutable,
        })
    }

    async fn write(
        &self,
        url: &str,
        content: &str,
        cancel: CancellationToken,
    ) -> keel_tools::Result<()> {
        let result = self.request("write", url, Some(content), cancel).await?;
        if result.is_error {
            return Err(failure(url, &result));
        }
        Ok(())
    }
}
