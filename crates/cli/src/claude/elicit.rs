//! An MCP server's questions (elicitation), put to the SDK's host: the
//! `elicitation` control request, which the SDK hands to the `onElicitation`
//! callback (`on_elicitation` in Python) and answers `{action, content?}`;
//! an SDK given no callback answers `decline` itself. The question is
//! withdrawn (`control_cancel_request`) when the call ends first. It must
//! not know MCP: the question arrives as keel-tools' [`Question`].

use std::sync::Arc;

use keel_tools::{Answer, Asker, Question};
use serde_json::{Value, json};

use super::peer::Peer;

/// Asks the SDK's host.
pub struct SdkAsker {
    pub peer: Arc<Peer>,
}

#[async_trait::async_trait]
impl Asker for SdkAsker {
    async fn ask(&self, call_id: &str, question: Question) -> Answer {
        let reply = self
            .peer
            .request(json!({
                "subtype": "elicitation",
                "mcp_server_name": question.from,
                "message": question.message,
                "mode": "form",
                "requested_schema": question.schema,
            }))
            .await;
        match reply {
            Ok(r) => answer_of(&r),
            Err(e) => {
                tracing::info!(
                    call = call_id,
                    "the host could not be asked the MCP server's question ({e}): declined"
                );
                Answer::Decline
            }
        }
    }
}

/// The SDK's `{action, content?}`; anything else is a decline.
fn answer_of(r: &Value) -> Answer {
    Answer::from_result(r).unwrap_or_else(|| {
        tracing::warn!(answer = %r, "an answer to an MCP server's question that cannot be read: declined");
        Answer::Decline
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_sdk_cannot_say_is_a_decline() {
        assert_eq!(
            answer_of(&json!({"action": "accept", "content": {"proceed": true}})),
            Answer::Accept(json!({"proceed": true}))
        );
        assert_eq!(answer_of(&json!({"action": "maybe"})), Answer::Decline);
        assert_eq!(answer_of(&json!(null)), Answer::Decline);
    }
}
