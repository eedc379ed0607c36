//! What RPC mode needs from the binary: sessions and models.
//!
//! Owns the [`SessionFactory`] seam. The binary knows the configuration,
//! the providers and the session files; RPC mode asks it to open sessions
//! (new, continuing another, or resumed from a file) and to build a provider
//! for a model a host selects. It does not know how any of that is done.

use std::path::PathBuf;
use std::sync::Arc;

use keel_core::{ModelInfo, Session};
use keel_llm::Provider;
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenTarget {
    /// A new session; `parent_session` is recorded in its header.
    New { parent_session: Option<String> },
    /// An existing session, by id, id prefix or file path.
    Resume(String),
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

/// Opens sessions and builds providers for RPC mode.
#[async_trait::async_trait]
pub trait SessionFactory: Send + Sync {
    /// The models hosts can select (`get_available_models`, `set_model`),
    /// the configured one first. Empty when no model is configured.
    fn models(&self) -> Vec<ModelChoice>;

    /// The models `cycle_model` goes through, and whether they are a scope
    /// the user chose (`isScoped`) rather than every available model.
    fn cycle_models(&self) -> (Vec<ModelChoice>, bool) {
        (self.models(), false)
    }

    /// One line telling a person how to configure a model.
    fn no_model_hint(&self) -> String;

    /// A provider for `model`.
    fn provider(&self, model: &ModelChoice) -> Result<Arc<dyn Provider>, String>;

    /// Opens a session that will use `model` (`None`: no model configured;
    /// the session must still open, and its runs fail) at `thinking`.
    async fn open(
        &self,
        target: OpenTarget,
        model: Option<&ModelChoice>,
        thinking: ThinkingLevel,
    ) -> Result<OpenedSession, String>;
}
