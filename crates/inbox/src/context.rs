//! What a card shows from the session that made the call: the session's
//! name and the last thing the agent said before the call.
//!
//! Owns [`call_context`]: finds the session file by id under keel's home
//! (the workspace's folder first), loads it, and takes the text of the
//! assistant message that made the call (or the last one before it). A
//! session that cannot be found or read gives an empty context: the card
//! is shown without it. It must not know pages.

use std::path::Path;

use keel_protocol::{ContentBlock, Message};
use keel_session_store::SessionStore;

use crate::cards::CallContext;

/// The context of call `call_id` (a re-run's `#sandbox` suffix ignored) of
/// session `session_id` in `workspace`.
pub async fn call_context(
    store: &SessionStore,
    workspace: &str,
    session_id: &str,
    call_id: &str,
) -> CallContext {
    let call_id = call_id.split('#').next().unwrap_or(call_id);
    let Ok(path) = store.resolve(Path::new(workspace), session_id).await else {
        return CallContext::default();
    };
    let Ok(loaded) = keel_session_store::load(&path).await else {
        return CallContext::default();
    };
    let mut said = None;
    for m in loaded.messages() {
        let Message::Assistant(a) = m else {
            continue;
        };
        let text: Vec<&str> = a
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } if !text.trim().is_empty() => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if !text.is_empty() {
            said = Some(text.join("\n"));
        }
        let made_it = a
            .content
            .iter()
            .any(|b| matches!(b, ContentBlock::ToolCall { id, .. } if id == call_id));
        if made_it {
            break;
        }
    }
    CallContext {
        session_name: loaded.name(),
        said,
    }
}
