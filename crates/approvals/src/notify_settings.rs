//! `[approvals.notify]` of `config.toml`: where to send a nudge when a call
//! is held.
//!
//! ```toml
//! [approvals.notify]
//! webhook = "https://ntfy.sh/my-keel-topic"   # receives one POST per held call
//! format = "ntfy"                              # json (default) | ntfy | slack
//! inbox_url = "https://keel.example.org"       # where `keel approvals serve` is reached
//! timeout = "5s"                               # per attempt (default 5s)
//! retries = 3                                  # attempts after the first (default 3)
//! ```
//!
//! Owns the section's shape and reading it; sending is the business of the
//! process that holds the call. It must not know HTTP.

use std::path::Path;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::settings::{approvals_table, parse_expiry};

/// How a nudge's body looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NotifyFormat {
    /// keel's JSON object (documented in docs/inbox.md).
    #[default]
    Json,
    /// ntfy: the text as the body, `Title` and `Click` headers.
    Ntfy,
    /// A Slack-style incoming webhook: `{"text": …}`.
    Slack,
}

/// `[approvals.notify]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotifySettings {
    pub webhook: String,
    pub format: NotifyFormat,
    /// The inbox's address; a nudge links to the card there.
    pub inbox_url: Option<String>,
    pub timeout: Duration,
    pub retries: u32,
}

/// Default time one attempt may take.
pub const DEFAULT_NOTIFY_TIMEOUT: Duration = Duration::from_secs(5);
/// Default attempts after the first.
pub const DEFAULT_NOTIFY_RETRIES: u32 = 3;

impl NotifySettings {
    /// `[approvals.notify]` of `home/config.toml`; `None` when there is
    /// none. An error names the key.
    pub fn for_home(home: &Path) -> Result<Option<Self>> {
        let path = home.join("config.toml");
        let Some(section) = approvals_table(&path)? else {
            return Ok(None);
        };
        let Some(notify) = section.get("notify") else {
            return Ok(None);
        };
        let bad =
            |what: &str| Error::Config(format!("{}: [approvals.notify] {what}", path.display()));
        let toml::Value::Table(t) = notify else {
            return Err(bad("must be a table"));
        };
        let webhook = match t.get("webhook") {
            Some(toml::Value::String(s))
                if s.starts_with("http://") || s.starts_with("https://") =>
            {
                s.clone()
            }
            Some(_) => return Err(bad("webhook must be an http:// or https:// URL")),
            None => return Err(bad("needs a webhook URL")),
        };
        let format = match t.get("format").map(|v| v.as_str()) {
            None | Some(Some("json")) => NotifyFormat::Json,
            Some(Some("ntfy")) => NotifyFormat::Ntfy,
            Some(Some("slack")) => NotifyFormat::Slack,
            Some(_) => return Err(bad("format must be \"json\", \"ntfy\" or \"slack\"")),
        };
        let inbox_url = match t.get("inbox_url") {
            None => None,
            Some(toml::Value::String(s)) => Some(s.trim_end_matches('/').to_owned()),
            Some(_) => return Err(bad("inbox_url must be a string")),
        };
        let timeout = match t.get("timeout") {
            None => DEFAULT_NOTIFY_TIMEOUT,
            Some(toml::Value::String(s)) => {
                parse_expiry(s).map_err(|e| bad(&format!("timeout: {e}")))?
            }
            Some(_) => return Err(bad("timeout must be a string such as \"5s\"")),
        };
        let retries = match t.get("retries") {
            None => DEFAULT_NOTIFY_RETRIES,
            Some(toml::Value::Integer(n)) if (0..=10).contains(n) => u32::try_from(*n).unwrap_or(0),
            Some(_) => return Err(bad("retries must be a number from 0 to 10")),
        };
        for key in t.keys() {
            if !["webhook", "format", "inbox_url", "timeout", "retries"].contains(&key.as_str()) {
                return Err(bad(&format!("has an unknown key `{key}`")));
            }
        }
        Ok(Some(Self {
            webhook,
            format,
            inbox_url,
            timeout,
            retries,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Option<NotifySettings>> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), text).unwrap();
        NotifySettings::for_home(dir.path())
    }

    #[test]
    fn the_section_reads_with_defaults_and_names_mistakes() {
        assert_eq!(read("").unwrap(), None);
        let n = read("[approvals.notify]\nwebhook = \"http://127.0.0.1:9/h\"\n")
            .unwrap()
            .unwrap();
        assert_eq!(n.format, NotifyFormat::Json);
        assert_eq!((n.timeout, n.retries), (DEFAULT_NOTIFY_TIMEOUT, 3));
        let n = read(
            "[approvals.notify]\nwebhook = \"https://ntfy.sh/t\"\nformat = \"ntfy\"\n\
             inbox_url = \"https://k.example/\"\ntimeout = \"2s\"\nretries = 0\n",
        )
        .unwrap()
        .unwrap();
        assert_eq!(n.inbox_url.as_deref(), Some("https://k.example"));
        assert_eq!((n.format, n.retries), (NotifyFormat::Ntfy, 0));
        for bad in [
            "[approvals.notify]\nformat = \"json\"\n",
            "[approvals.notify]\nwebhook = \"ftp://x\"\n",
            "[approvals.notify]\nwebhook = \"http://x\"\nformat = \"mail\"\n",
            "[approvals.notify]\nwebhook = \"http://x\"\nretries = 99\n",
            "[approvals.notify]\nwebhook = \"http://x\"\nsecret = \"y\"\n",
        ] {
            let e = read(bad).unwrap_err().to_string();
            assert!(e.contains("[approvals.notify]"), "{e}");
        }
    }
}
