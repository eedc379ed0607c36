//! What a host shows for a held call, and what the model reads afterwards.
//!
//! Owns [`PendingRequest`] (title, up to six argument lines cut at 300
//! characters with secret-named keys and `authorization`, `proxy-
//! authorization` and `cookie` removed, the address of a URL call, the class
//! pill, the reason, and the always-allow offer), and the sentences the model
//! reads when a call was declined, superseded by a message, expired,
//! cancelled, parked as a draft, or may or may not have run. It must not know
//! about storage, waiting or any wire format.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::class::{Class, url_of};
use crate::rules::AlwaysOffer;
use crate::store::{ApprovalRecord, Delivery, Status};

/// Most argument lines a prompt shows.
pub const MAX_ARG_LINES: usize = 6;
/// Longest argument line (in characters) a prompt shows.
pub const MAX_LINE_CHARS: usize = 300;

/// Everything a host needs to show a held call and collect a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingRequest {
    pub id: String,
    pub workspace: String,
    pub session_id: String,
    pub call_id: String,
    pub tool: String,
    pub operation: Option<String>,
    /// "keel wants to run `cargo publish`".
    pub title: String,
    /// `key: value` lines, secrets removed, at most six, each cut at 300 chars.
    pub arg_lines: Vec<String>,
    /// The URL of a call that fetches one.
    pub address: Option<String>,
    pub class: Class,
    /// "Makes changes", "Reaches out", "Money or deletes".
    pub class_label: String,
    pub reason: String,
    /// False when the analyser could not see through the call.
    pub understood: bool,
    /// The always-allow the prompt may offer (never for money, never for a
    /// call not fully understood); `None` when none may be offered.
    pub always: Option<AlwaysOffer>,
    pub delivery: Delivery,
    pub status: Status,
    pub created_at: i64,
    pub expires_at: i64,
}

impl PendingRequest {
    pub fn from_record(r: &ApprovalRecord) -> Self {
        Self {
            id: r.id.clone(),
            workspace: r.workspace.clone(),
            session_id: r.session_id.clone(),
            call_id: r.call_id.clone(),
            tool: r.tool.clone(),
            operation: r.operation.clone(),
            title: title(&r.tool, r.operation.as_deref(), &r.args),
            arg_lines: arg_lines(&r.args),
            address: url_of(&r.args).map(|(_, url)| cut(&url)),
            class: r.class,
            class_label: r.class.label().to_owned(),
            reason: r.reason.clone(),
            understood: r.understood,
            always: if r.class == Class::Money || !r.understood {
                None
            } else {
                r.offer.clone()
            },
            delivery: r.delivery,
            status: r.status,
            created_at: r.created_at,
            expires_at: r.expires_at,
        }
    }
}

/// The prompt's title.
pub fn title(tool: &str, operation: Option<&str>, args: &Value) -> String {
    if tool == "bash"
        && let Some(cmd) = args.get("command").and_then(Value::as_str)
    {
        let one_line = cmd.lines().next().unwrap_or("");
        let more = if cmd.lines().nth(1).is_some() {
            " …"
        } else {
            ""
        };
        return format!("keel wants to run `{}{more}`", cut(one_line));
    }
    // An MCP tool (`mcp__<server>__<tool>`) is named with its server.
    if let Some(rest) = tool.strip_prefix("mcp__")
        && let Some((server, name)) = rest.split_once("__")
    {
        return format!("keel wants to use {name} of the MCP server {server}");
    }
    match operation {
        Some(op) => format!("keel wants to use {tool}: {op}"),
        None => format!("keel wants to use {tool}"),
    }
}

fn cut(s: &str) -> String {
    if s.chars().count() <= MAX_LINE_CHARS {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(MAX_LINE_CHARS - 1).collect();
        out.push('…');
        out
    }
}

/// Whether an argument name looks like it holds a secret.
pub fn is_secret_key(key: &str) -> bool {
    let k: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    const SECRET: &[&str] = &[
        "secret",
        "token",
        "password",
        "passwd",
        "passphrase",
        "apikey",
        "authorization",
        "cookie",
        "credential",
        "privatekey",
        "accesskey",
        "sessionkey",
        "signature",
    ];
    SECRET.iter().any(|s| k.contains(s))
}

/// `args` with secret-named keys removed at every depth.
pub fn redact(args: &Value) -> Value {
    match args {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                if !is_secret_key(k) {
                    out.insert(k.clone(), redact(v));
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(redact).collect()),
        other => other.clone(),
    }
}

/// The argument lines a prompt shows.
pub fn arg_lines(args: &Value) -> Vec<String> {
    let redacted = redact(args);
    match &redacted {
        Value::Object(map) => map
            .iter()
            .take(MAX_ARG_LINES)
            .map(|(k, v)| {
                let shown = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                cut(&format!("{k}: {shown}"))
            })
            .collect(),
        Value::Null => Vec::new(),
        other => vec![cut(&other.to_string())],
    }
}

/// What the model reads instead of a result.
pub mod messages {
    /// A person declined the call.
    pub fn declined(note: Option<&str>) -> String {
        match note.map(str::trim).filter(|n| !n.is_empty()) {
            Some(n) => format!("The user declined this; nothing happened. Their note: {n}"),
            None => "The user declined this; nothing happened. Don't try to get the same \
                     outcome another way."
                .to_owned(),
        }
    }

    /// A new user message arrived while the call waited.
    pub fn superseded(message: &str) -> String {
        format!(
            "The user sent a message instead of answering; nothing happened. Their message: {message}"
        )
    }

    pub fn expired() -> String {
        "The user did not answer in time; nothing happened.".to_owned()
    }

    pub fn cancelled() -> String {
        "The run was stopped while this call waited for approval; nothing happened.".to_owned()
    }

    /// An approved call whose run was cut off (a crash between claiming and
    /// finishing): it is not run a second time.
    pub fn maybe_ran() -> String {
        "This call was approved and started, but keel stopped before it finished; it may or \
         may not have happened. Check its effects before trying again."
            .to_owned()
    }

    /// An unattended run parked the call.
    pub fn drafted(id: &str) -> String {
        format!(
            "Held for approval as draft {id}; nothing has happened yet. A person can send it \
             later (`keel approvals send {id}`), and you will hear the outcome on a later turn. \
             Continue with other work."
        )
    }

    /// The approval check itself failed (the gate fails closed).
    pub fn check_failed(error: &str) -> String {
        format!("The approval check failed, so this call did not run: {error}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_mcp_tool_is_named_with_its_server() {
        assert_eq!(
            title("mcp__github__create_issue", None, &serde_json::json!({})),
            "keel wants to use create_issue of the MCP server github"
        );
    }
    use serde_json::json;

    #[test]
    fn secrets_are_removed_at_every_depth() {
        let args = json!({
            "url": "https://api.example.com",
            "headers": {"Authorization": "Bearer x", "Proxy-Authorization": "y", "Cookie": "z", "Accept": "json"},
            "api_key": "k",
            "clientSecret": "s",
            "list": [{"password": "p", "name": "n"}],
            "author": "kept"
        });
        let r = redact(&args);
        assert_eq!(
            r,
            json!({
                "url": "https://api.example.com",
                "headers": {"Accept": "json"},
                "list": [{"name": "n"}],
                "author": "kept"
            })
        );
    }

    #[test]
    fn lines_are_capped_and_cut() {
        let long = "x".repeat(1000);
        let args = json!({"a": long, "b": 1, "c": true, "d": null, "e": [1], "f": {"g": 2}, "h": "dropped"});
        let lines = arg_lines(&args);
        assert_eq!(lines.len(), MAX_ARG_LINES);
        assert_eq!(lines[0].chars().count(), MAX_LINE_CHARS);
        assert!(lines[0].ends_with('…'));
        assert_eq!(lines[1], "b: 1");
        assert_eq!(lines[5], "f: {\"g\":2}");
        assert!(arg_lines(&Value::Null).is_empty());
    }

    #[test]
    fn titles() {
        assert_eq!(
            title(
                "bash",
                None,
                &json!({"command": "cargo publish\necho done"})
            ),
            "keel wants to run `cargo publish …`"
        );
        assert_eq!(
            title("fetch", Some("GET"), &json!({})),
            "keel wants to use fetch: GET"
        );
        assert_eq!(
            title("write", None, &json!({"path": "a"})),
            "keel wants to use write"
        );
    }

    #[test]
    fn model_messages() {
        assert_eq!(
            messages::declined(Some("use the staging bucket")),
            "The user declined this; nothing happened. Their note: use the staging bucket"
        );
        assert!(
            messages::declined(None).contains("Don't try to get the same outcome another way.")
        );
        assert!(messages::declined(Some("  ")).contains("Don't try"));
        assert!(messages::superseded("stop").ends_with("Their message: stop"));
        assert_eq!(
            messages::expired(),
            "The user did not answer in time; nothing happened."
        );
        assert!(messages::drafted("apr_1").contains("apr_1"));
        assert!(messages::maybe_ran().contains("may or may not have happened"));
    }
}
