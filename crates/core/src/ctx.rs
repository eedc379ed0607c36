//! What a run works with ([`RunCtx`]): the shared state, the
//! dependencies and the event channel, with the few steps every part of
//! the loop takes through it (emit an event, commit a message to the
//! history and the log, flush the log). The modules of the loop (run,
//! tool execution, compaction, resume, todos) all take a `RunCtx`; it
//! knows none of them.

use std::sync::Arc;

use keel_protocol::{AgentEvent, ContentBlock, Message, UserInput, UserMessage};
use keel_session_store::EntryBody;
use tokio::sync::mpsc;

use crate::event::SessionEvent;
use crate::state::{SessionDeps, SharedState, lock};

/// What a run needs; cheap to clone.
#[derive(Clone)]
pub(crate) struct RunCtx {
    pub shared: SharedState,
    pub deps: Arc<SessionDeps>,
    pub events: mpsc::Sender<SessionEvent>,
}

impl RunCtx {
    /// Sends an event; a consumer that went away is not an error for the loop.
    pub async fn emit(&self, event: AgentEvent) {
        let _ = self.events.send(SessionEvent::here(event)).await;
    }

    /// Sends an event as it is.
    pub async fn send(&self, event: SessionEvent) {
        let _ = self.events.send(event).await;
    }

    /// Appends a message to the history and the session log, then announces
    /// its end.
    pub async fn commit_message(&self, message: Message) {
        self.commit_entry(message).await;
    }

    /// [`commit_message`](Self::commit_message), returning the id of the
    /// message's session entry.
    pub async fn commit_entry(&self, message: Message) -> Option<String> {
        let id = self.store_message(message.clone()).await;
        self.emit(AgentEvent::MessageEnd { message }).await;
        id
    }

    /// Appends a message to the history and the session log without
    /// announcing it; returns its entry's id.
    pub(crate) async fn store_message(&self, message: Message) -> Option<String> {
        {
            let mut guard = lock(&self.shared);
            let s = &mut *guard;
            s.context.messages_mut(&s.tree).push(message.clone());
        }
        let recorded = crate::history::record(
            &self.shared,
            self.deps.log.as_ref(),
            self.deps.clock.as_ref(),
            EntryBody::Message {
                message: message.clone(),
            },
        )
        .await;
        match recorded {
            Ok(entry) => Some(entry.id),
            Err(e) => {
                tracing::error!(error = %e, "appending to the session log failed");
                lock(&self.shared).tree.leaf().map(str::to_owned)
            }
        }
    }

    pub async fn flush_log(&self) {
        if let Err(e) = self.deps.log.flush().await {
            tracing::error!(error = %e, "flushing the session log failed");
        }
    }

    pub(crate) fn user_message(&self, input: UserInput) -> Message {
        let mut content = Vec::with_capacity(1 + input.images.len());
        if !input.message.is_empty() || input.images.is_empty() {
            content.push(ContentBlock::text(input.message));
        }
        content.extend(input.images.into_iter().map(ContentBlock::from));
        Message::User(UserMessage {
            content,
            timestamp: self.deps.clock.now_ms(),
        })
    }
}
