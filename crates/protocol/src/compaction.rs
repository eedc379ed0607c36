//! Compaction: why it ran and what it produced, as events carry it.
//!
//! Wire shape (pi's fields): `{"reason":"threshold"}` on start;
//! `{"reason":"threshold","result":{"summary":"## Goal\n…","firstKeptEntryId":"6ff6ee90",
//! "tokensBefore":125003,"tokensAfter":9120,"details":{"readFiles":[],"modifiedFiles":[]}},
//! "aborted":false,"willRetry":false}` on end.

use serde::{Deserialize, Serialize};

/// Why the conversation was compacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CompactionReason {
    /// The context passed the threshold (the window minus a reserve).
    Threshold,
    /// The provider said the request did not fit the context window.
    Overflow,
    /// Asked for (`compact`).
    Manual,
}

impl CompactionReason {
    /// The name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionReason::Threshold => "threshold",
            CompactionReason::Overflow => "overflow",
            CompactionReason::Manual => "manual",
        }
    }
}

/// Files the summarised part of the conversation read or changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionDetails {
    #[serde(default)]
    pub read_files: Vec<String>,
    #[serde(default)]
    pub modified_files: Vec<String>,
}

/// A finished compaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactionResult {
    /// What the model now reads in place of the summarised messages.
    pub summary: String,
    /// The first session entry still sent to the model as it is.
    pub first_kept_entry_id: String,
    /// Estimated context tokens before and after.
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub details: CompactionDetails,
}
