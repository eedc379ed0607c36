//! What RPC mode needs from the binary: sessions and models.
//!
//! Owns the [`SessionFactory`] seam. The binary knows the configuration,
//! the providers and the session files; RPC mode asks it to open sessions
//! (new, continuing another, or resumed from a file) and, through its
//! [`ModelSource`], for the models and a provider for the one a host
//! selects. It does not know how any of that is done.

use std::path::PathBuf;
use std::sync::Arc;

use keel_core::{ModelInfo, ModelSource, Session};
use keel_protocol::ThinkingLevel;

/// A model a host can select: what the session knows about it (from the
/// model catalogue) and where its provider is.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    pub info: ModelInfo,
    /// Where its provider is reached (reported to hosts).
    pub base_url: String,
}

/// Which session to open.
#[derive(Debug, Clone, PartialEq)]
pub enum OpenTarget {
    /// A new session; `parent_session` is recorded in its header.
    New { parent_session: Option<String> },
    /// An existing session, by id, id prefix or file path. `log_seen`: the
    /// last place in its shared event log the host has seen (a host that
    /// reconnects; see `keel_core::SessionConfig::log_seen`).
    Resume {
        session: String,
        log_seen: Option<u64>,
    },
    /// A new session continuing from a branch of another: it starts with
    /// copies of `entries` (ids kept; empty: an empty session) and records
    /// `parent_session` in its header.
    Fork {
        parent_session: Option<String>,
        entries: Vec<keel_session_store::Entry>,
    },
}

/// Closes what a session holds once its task has stopped (for example the
/// session file's writer).
#[async_trait::async_trait]
pub trait SessionCloser: Send + Sync {
    async fn close(&self) -> Result<(), String>;
}

/// A session ready to run.
pub struct OpenedSession {
    pub session: Session,
    /// Called after the session has been shut down.
    pub closer: Option<Arc<dyn SessionCloser>>,
    /// The session's name, when resumed from a file that had one.
    pub name: Option<String>,
    /// The session file, if persisted.
    pub file: Option<PathBuf>,
}

/// Opens sessions for RPC mode; its models come from core's
/// [`ModelSource`], as the app-server's do.
#[async_trait::async_trait]
pub trait SessionFactory: Send + Sync {
    /// Where the models come from: the configured one first
    /// ([`ModelSource::models`]), the ones hosts can select
    /// ([`ModelSource::available`]: `get_available_models`, `set_model`),
    /// the ones `cycle_model` goes through ([`ModelSource::cycle_models`]).
    fn models(&self) -> &dyn ModelSource;

    /// The MCP servers sessions get tools from, as `get_state.mcpServers`
    /// lists them (`{name, state, tools, error?}`); none by default.
    fn mcp_servers(&self) -> Vec<serde_json::Value> {
        Vec::new()
    }

    /// Replaces the MCP servers with `servers` (`{"NAME": {…}}`, the keys
    /// of `[mcp_servers.NAME]`): the old ones stop, the new ones start.
    /// Returns the new servers' tools (for the current session and every
    /// session opened later) and their statuses.
    async fn set_mcp_servers(
        &self,
        servers: serde_json::Value,
    ) -> Result<
        (
            Vec<std::sync::Arc<dyn keel_tools::Tool>>,
            Vec<serde_json::Value>,
        ),
        String,
    > {
        let _ = servers;
        Err("this keel cannot start MCP servers".to_owned())
    }

    /// Opens a session that will use `model` (`None`: no model configured;
    /// the session must still open, and its runs fail) at `thinking`, its
    /// tools' questions put to `asker` (the host).
    async fn open(
        &self,
        target: OpenTarget,
        model: Option<&ModelInfo>,
        thinking: ThinkingLevel,
        asker: Option<std::sync::Arc<dyn keel_tools::Asker>>,
    ) -> Result<OpenedSession, String>;
}

impl ModelChoice {
    /// `info` with its provider's base URL from `source`.
    pub fn of(source: &dyn ModelSource, info: ModelInfo) -> Self {
        let base_url = source.base_url(&info).unwrap_or_default();
        Self { info, base_url }
    }
}

/// The choices of `source`'s models.
pub(crate) fn choices(source: &dyn ModelSource, models: Vec<ModelInfo>) -> Vec<ModelChoice> {
    models
        .into_iter()
        .map(|m| ModelChoice::of(source, m))
        .collect()
}
