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

#[cfg(test)]
mod tests {
    use super::*;
    use keel_approvals::{Class, Delivery, Status};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn request() -> PendingRequest {
        PendingRequest {
            id: "apr_1".into(),
            workspace: "/ws".into(),
            session_id: "s".into(),
            call_id: "c".into(),
            tool: "bash".into(),
            operation: None,
            title: "keel wants to run `curl x`".into(),
            arg_lines: vec!["command: curl x".into()],
            address: None,
            class: Class::Send,
            class_label: "Reaches out".into(),
            reason: String::new(),
            understood: true,
            always: None,
            delivery: Delivery::Wait,
            status: Status::Pending,
            created_at: 0,
            expires_at: 1,
        }
    }

    fn notifier(url: String, retries: u32) -> Notifier {
        Notifier::new(NotifySettings {
            webhook: url,
            format: NotifyFormat::Json,
            inbox_url: None,
            timeout: Duration::from_secs(5),
            retries,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn a_failing_webhook_is_retried_and_a_dead_one_gives_up() {
        // Answers 500 twice, then 200: the third attempt is accepted.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            for status in [
                "500 Internal Server Error",
                "500 Internal Server Error",
                "200 OK",
            ] {
                let (mut sock, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 8192];
                let _ = sock.read(&mut buf).await;
                let reply =
                    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
                sock.write_all(reply.as_bytes()).await.unwrap();
            }
        });
        assert!(notifier(url, 3).send(&request()).await);
        server.await.unwrap();
        // Nobody listens: it gives up after its attempts and says so.
        let dead = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}/hook", l.local_addr().unwrap())
        };
        assert!(!notifier(dead, 1).send(&request()).await);
    }
}
