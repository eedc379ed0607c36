//! `new_session`, `switch_session`, `set_session_name`.
//!
//! A session opened with `switch_session` (or at start-up with
//! `--session`) whose last turn a crash or kill cut off resumes that turn
//! right after the response (after `ready`). A running run is aborted
//! before the session changes; the old session is
//! flushed and closed; host tools and host URI schemes carry over (they
//! belong to the process, not the session). Naming a session also sends a
//! `setTitle` UI request (suppressed unless enabled).

use crate::command::WireId;
use keel_protocol::Op;
use serde_json::{Value, json};

use crate::command::NewSessionArgs;
use crate::factory::OpenTarget;
use crate::server::{Answer, Server};
use crate::ui::Notice;
use crate::wire_errors::{self, WireError};

impl Server {
    pub(super) async fn new_session(
        &mut self,
        args: NewSessionArgs,
    ) -> Result<Option<Value>, WireError> {
        self.abort_and_wait().await;
        let thinking = self.handle().snapshot().thinking_level;
        let opened = self
            .factory
            .open(
                OpenTarget::New {
                    parent_session: args.parent_session.filter(|p| !p.trim().is_empty()),
                },
                self.model.as_ref().map(|m| &m.info),
                thinking,
                self.brokers.asker(),
            )
            .await
            .map_err(|reason| wire_errors::session_failure(&reason))?;
        self.replace_session(opened).await;
        Ok(Some(json!({"cancelled": false})))
    }

    /// Switches, answers, then resumes a turn of the opened session that
    /// a crash or kill cut off (so the response comes before its
    /// `agent_start`).
    pub(super) async fn switch_session(
        &mut self,
        id: Option<&WireId>,
        path: &str,
        log_seen: Option<u64>,
    ) -> Answer {
        match self.open_other(path, log_seen).await {
            Ok(switched) => {
                self.out
                    .respond_ok(id, "switch_session", Some(json!({"cancelled": false})))
                    .await;
                if switched {
                    self.resume_interrupted().await;
                }
                Answer::Sent
            }
            Err(e) => Answer::Failed(e),
        }
    }

    /// A turn of the active session cut off by a crash or kill goes on:
    /// its unanswered tool calls are answered (a request still pending is
    /// announced again) and the model continues, as one run. Called right
    /// after `ready` and after `switch_session`; when a cut-off call names
    /// a tool the session does not have (a host tool, registered by the
    /// host after `ready`), it waits for the `set_host_tools` that brings
    /// it instead of answering `Tool … not found`.
    pub(crate) async fn resume_interrupted(&self) {
        if self.model.is_none() {
            return;
        }
        let missing = self.handle().cut_off_calls_missing_tools();
        if !missing.is_empty() {
            tracing::info!(tools = ?missing, "the cut-off turn waits for set_host_tools");
            return;
        }
        match self.handle().resume_interrupted().await {
            Ok(true) => tracing::info!("resuming a turn that was cut off"),
            Ok(false) => {}
            Err(e) => tracing::warn!(error = %e, "cannot resume the cut-off turn"),
        }
    }

    /// Opens `path` in place of the active session; false when it is the
    /// active session already.
    async fn open_other(&mut self, path: &str, log_seen: Option<u64>) -> Result<bool, WireError> {
        let current = self.handle().snapshot();
        let same = current
            .session_file
            .as_ref()
            .is_some_and(|f| f.as_os_str() == path || current.session_id == path);
        if same {
            return Ok(false);
        }
        self.abort_and_wait().await;
        let opened = self
            .factory
            .open(
                OpenTarget::Resume {
                    session: path.to_owned(),
                    log_seen,
                },
                self.model.as_ref().map(|m| &m.info),
                current.thinking_level,
                self.brokers.asker(),
            )
            .await
            .map_err(|reason| wire_errors::cannot_open_session(path, &reason))?;
        self.replace_session(opened).await;
        Ok(true)
    }

    /// `fork {entryId}` (pi): a new session file holding the branch up to
    /// before that user message; answers with the message's text.
    pub(super) async fn fork(&mut self, entry_id: &str) -> Result<Option<Value>, WireError> {
        self.abort_and_wait().await;
        let (text, parent) = self
            .handle()
            .fork_point(entry_id)
            .map_err(|e| wire_errors::from_core(&e))?;
        self.fork_through(parent).await?;
        Ok(Some(json!({"text": text, "cancelled": false})))
    }

    /// `clone` (pi): a new session file holding the whole active branch.
    pub(super) async fn clone_session(&mut self) -> Result<Option<Value>, WireError> {
        self.abort_and_wait().await;
        let Some(leaf) = self.handle().tree().leaf().map(str::to_owned) else {
            return Err(wire_errors::nothing_to_clone());
        };
        self.fork_through(Some(leaf)).await?;
        Ok(Some(json!({"cancelled": false})))
    }

    /// Opens a new session holding the active branch up to `through`
    /// (none: empty) in place of the active one.
    async fn fork_through(&mut self, through: Option<String>) -> Result<(), WireError> {
        let current = self.handle().snapshot();
        let entries = match &through {
            Some(id) => self
                .handle()
                .tree()
                .branch_to(Some(id))
                .into_iter()
                .cloned()
                .collect(),
            None => Vec::new(),
        };
        let parent_session = current
            .session_file
            .as_ref()
            .map(|f| f.display().to_string());
        let opened = self
            .factory
            .open(
                OpenTarget::Fork {
                    parent_session,
                    entries,
                },
                self.model.as_ref().map(|m| &m.info),
                current.thinking_level,
                self.brokers.asker(),
            )
            .await
            .map_err(|reason| wire_errors::session_failure(&reason))?;
        self.replace_session(opened).await;
        Ok(())
    }

    pub(super) async fn set_session_name(&self, name: &str) -> Result<Option<Value>, WireError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(wire_errors::session_name_empty());
        }
        self.handle()
            .submit(Op::SetSessionName {
                name: Some(name.to_owned()),
            })
            .await
            .map_err(|e| wire_errors::from_core(&e))?;
        let mut fields = serde_json::Map::new();
        fields.insert("title".to_owned(), json!(name));
        self.brokers.ui.notice(Notice::SetTitle, fields).await;
        Ok(None)
    }
}
