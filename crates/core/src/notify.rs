//! Nudges a person when a call is held: one POST to the configured webhook
//! (`[approvals.notify]`), with retries and a timeout, never in the way of
//! the turn.
//!
//! Owns [`Notifier`]: the body in the configured format (keel's JSON, ntfy,
//! or a Slack-style `{"text": …}`) built from the card only — title, class,
//! workspace, expiry, the card's redacted argument lines and the link to
//! the card in the inbox; never argument values beyond those lines, never
//! keel's secrets. Sending runs in its own task; a failing webhook is
//! logged and forgotten. It must not know which front end held the call.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel_approvals::{NotifyFormat, NotifySettings, PendingRequest};
use serde_json::json;

/// First wait before a retry (doubled each time).
const FIRST_BACKOFF: Duration = Duration::from_millis(500);

/// Sends nudges to one webhook.
#[derive(Debug, Clone)]
pub struct Notifier {
    settings: NotifySettings,
    client: reqwest::Client,
}

impl Notifier {
    pub fn new(settings: NotifySettings) -> Option<Self> {
        let client = reqwest::Client::builder()
            .timeout(settings.timeout)
            .build()
            .map_err(|e| tracing::error!(error = %e, "cannot build the webhook client"))
            .ok()?;
        Some(Self { settings, client })
    }

    /// The notifier `[approvals.notify]` of `home/config.toml` configures;
    /// `None` without one (a section that cannot be read is logged).
    pub fn for_home(home: &Path) -> Option<Arc<Self>> {
        match NotifySettings::for_home(home) {
            Ok(Some(s)) => Self::new(s).map(Arc::new),
            Ok(None) => None,
            Err(e) => {
                tracing::error!(error = %e, "no approval nudges");
                None
            }
        }
    }

    /// The link to `request`'s card in the inbox, if its address is known.
    fn link(&self, request: &PendingRequest) -> Option<String> {
        self.settings
            .inbox_url
            .as_ref()
            .map(|base| format!("{base}/#card-{}", request.id))
    }

    /// The JSON body (format `json`).
    pub fn body(&self, request: &PendingRequest) -> serde_json::Value {
        json!({
            "event": "approval.held",
            "id": request.id,
            "title": request.title,
            "class": request.class.as_str(),
            "classLabel": request.class_label,
            "tool": request.tool,
            "workspace": request.workspace,
            "delivery": request.delivery,
            "createdAt": request.created_at,
            "expiresAt": request.expires_at,
            "argLines": request.arg_lines,
            "url": self.link(request),
        })
    }

    fn text(&self, request: &PendingRequest) -> String {
        let mut text = format!(
            "{} ({}) in {}",
            request.title, request.class_label, request.workspace
        );
        if let Some(link) = self.link(request) {
            text.push_str(&format!("\n{link}"));
        }
        text
    }

    /// Sends the nudge for `request` in the background.
    pub fn held(self: &Arc<Self>, request: &PendingRequest) {
        let this = self.clone();
        let request = request.clone();
        tokio::spawn(async move { this.send(&request).await });
    }

    /// Sends the nudge, retrying with backoff; true when it was accepted.
    pub async fn send(&self, request: &PendingRequest) -> bool {
        let mut wait = FIRST_BACKOFF;
        for attempt in 0..=self.settings.retries {
            if attempt > 0 {
                tokio::time::sleep(wait).await;
                wait *= 2;
            }
            let post = self.client.post(&self.settings.webhook);
            let post = match self.settings.format {
                NotifyFormat::Json => post.json(&self.body(request)),
                NotifyFormat::Slack => post.json(&json!({ "text": self.text(request) })),
                NotifyFormat::Ntfy => {
                    let mut p = post
                        .header("Title", "keel: a call waits for your OK")
                        .header("Tags", request.class.as_str())
                        .body(self.text(request));
                    if let Some(link) = self.link(request) {
                        p = p.header("Click", link);
                    }
                    p
                }
            };
            match post.send().await {
                Ok(r) if r.status().is_success() => return true,
                Ok(r) => {
                    tracing::warn!(status = %r.status(), attempt, request = %request.id, "approval webhook refused the nudge")
                }
                Err(e) => {
                    // The URL may hold a secret (a Slack hook's path is one).
                    let e = e.without_url();
                    tracing::warn!(error = %e, attempt, request = %request.id, "approval webhook unreachable")
                }
            }
        }
        false
    }
}
