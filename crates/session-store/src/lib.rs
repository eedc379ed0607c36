//! Append-only, versioned JSONL session files for keel.
//!
//! This crate owns persistence of a session's history: the file format
//! (`format`), the sessions directory with listing and id resolution
//! (`store`), crash-tolerant loading (`load`), the entry tree in memory and
//! the context it gives the model, with compaction summaries (`tree`), and
//! the one writer task per open file (`writer`). Files live on disk, or,
//! after [`use_database`], in PostgreSQL (`db`), behind the few file
//! operations of `files`. It stores [`keel_protocol::Message`]s
//! as they serialise; it must not know any wire protocol (RPC frames, app
//! server) nor how the agent loop uses the history.
//!
//! Typical use:
//!
//! ```no_run
//! # async fn demo(store: keel_session_store::SessionStore, cwd: &std::path::Path)
//! # -> keel_session_store::Result<()> {
//! use keel_session_store::{load, EntryBody};
//! let path = store.resolve(cwd, "0198").await?;
//! let session = load(&path).await?;
//! let history = session.messages();
//! let writer = session.into_writer().await?;
//! writer.append(EntryBody::SessionInfo { name: Some("demo".into()) }).await?;
//! writer.flush().await?;
//! # let _ = history; Ok(()) }
//! ```

mod db;
mod error;
pub mod events;
mod files;
mod format;
pub mod home_files;
mod ids;
mod load;
mod migrations;
mod pool;
mod store;
mod summary;
mod tree;
mod writer;

#[cfg(test)]
mod backends_tests;
#[cfg(test)]
mod testutil;

pub use db::{DbError, database_in_use, use_database};
pub use error::{Error, Result};
pub use events::{EventLog, StoredEvent};
pub use format::{
    ApprovalDecision, ApprovalEntry, Entry, EntryBody, FORMAT_VERSION, SessionHeader,
    random_entry_id,
};
pub use load::{LoadedSession, header_of, load};
pub use store::{FIRST_MESSAGE_MAX_CHARS, SessionStore, SessionSummary};
pub use tree::{
    CompactionInfo, Context, ContextRefs, SUMMARY_PREFIX, SUMMARY_SUFFIX, SessionTree,
    context_messages_of, context_of, context_refs_of, summary_message, user_text,
};
pub use writer::{SessionWriter, WRITER_CHANNEL_CAPACITY};

use std::io;
use std::path::Path;

/// Runs blocking file work on tokio's blocking pool.
pub(crate) async fn blocking<T, F>(path: &Path, work: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(|e| {
        Error::io(
            path,
            io::Error::other(format!("blocking file task failed: {e}")),
        )
    })?
}
