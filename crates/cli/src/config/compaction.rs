//! `[compaction]` of `config.toml`: when the conversation is summarised.
//!
//! ```toml
//! [compaction]
//! enabled = true               # automatic compaction (threshold and overflow)
//! reserve_tokens = 16384       # compact once the context passes window - reserve
//! keep_recent_tokens = 20000   # about this much of the newest conversation stays whole
//! ```
//!
//! This module owns the section's shape and turning it into core's
//! [`CompactionSettings`]; unset keys keep core's defaults. Both token
//! counts are capped at a quarter of the model's window by core, so a
//! small window still leaves room to work. It must not know how modes use
//! the settings.

use keel_core::CompactionSettings;
use serde::Deserialize;

/// `[compaction]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactionSection {
    /// Compact automatically when the context passes the threshold or the
    /// provider says it overflowed (`set_auto_compaction` overrides it for
    /// one session).
    pub enabled: Option<bool>,
    /// Room kept free in the model's window: compaction starts once the
    /// context is larger than `context_window - reserve_tokens`.
    pub reserve_tokens: Option<u64>,
    /// About how many tokens of the newest messages stay as they are.
    pub keep_recent_tokens: Option<u64>,
}

impl CompactionSection {
    /// The settings sessions get: the file's values over core's defaults.
    pub fn settings(&self) -> CompactionSettings {
        let d = CompactionSettings::default();
        CompactionSettings {
            enabled: self.enabled.unwrap_or(d.enabled),
            reserve_tokens: self.reserve_tokens.unwrap_or(d.reserve_tokens),
            keep_recent_tokens: self.keep_recent_tokens.unwrap_or(d.keep_recent_tokens),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_keys_keep_the_defaults() {
        let empty: CompactionSection = toml::from_str("").unwrap();
        assert_eq!(empty.settings(), CompactionSettings::default());
        let set: CompactionSection =
            toml::from_str("enabled = false\nreserve_tokens = 100\nkeep_recent_tokens = 50")
                .unwrap();
        assert_eq!(
            set.settings(),
            CompactionSettings {
                enabled: false,
                reserve_tokens: 100,
                keep_recent_tokens: 50,
            }
        );
        let bad = toml::from_str::<CompactionSection>("reserve = 1").unwrap_err();
        assert!(bad.to_string().contains("unknown field"), "{bad}");
        let negative = toml::from_str::<CompactionSection>("reserve_tokens = -5");
        assert!(negative.is_err());
    }
}
