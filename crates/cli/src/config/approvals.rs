//! `[approvals]` in `config.toml`: where the approvals database lives.
//!
//! ```toml
//! [approvals]
//! store = "postgres://keel@127.0.0.1:5432/keel"  # or "sqlite" (default), "sqlite:PATH"
//! ```
//!
//! Owns the section's shape (so the file loads with it) and the line
//! `keel config show` prints. Which store a process opens is decided in one
//! place, `keel_approvals::StoreLocation::for_home` (the environment
//! variable `KEEL_APPROVALS_DATABASE_URL` over this section over
//! `$KEEL_HOME/keel.db`), so every keel process agrees. A URL is only ever
//! printed with its password hidden. It must not open the store.

use std::path::Path;

use keel_core::keel_approvals::{STORE_ENV, StoreLocation};
use serde::Deserialize;

/// `[approvals]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsSection {
    /// `sqlite` (the default: `$KEEL_HOME/keel.db`), `sqlite:PATH`, or a
    /// `postgres://` URL.
    pub store: Option<String>,
}

/// The store line of `keel config show`: where the approvals are, where
/// that was set, the password hidden; or why the setting is wrong.
pub fn store_line(home: &Path, section: &ApprovalsSection) -> String {
    let from_env = std::env::var(STORE_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .is_some();
    let source = if from_env {
        STORE_ENV
    } else if section.store.is_some() {
        "[approvals] store in config.toml"
    } else {
        "default"
    };
    match StoreLocation::for_home(home) {
        Ok(location) => {
            let kind = match location {
                StoreLocation::Sqlite(_) => "sqlite",
                StoreLocation::Postgres { .. } => "postgres",
            };
            format!(
                "approvals_store = {:?}  # {kind}, from {source}",
                location.to_string()
            )
        }
        Err(e) => format!("# approvals store: {e}"),
    }
}
