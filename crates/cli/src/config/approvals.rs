//! `[approvals]` in `config.toml`: where the approvals database lives and
//! how long a held call waits before it expires.
//!
//! ```toml
//! [approvals]
//! store = "postgres://keel@127.0.0.1:5432/keel"  # or "sqlite" (default), "sqlite:PATH"
//! expire_after = "7d"                              # the default; s, m, h or d
//!
//! [approvals.expire_after_by_class]               # write, send or money
//! money = "1h"
//! ```
//!
//! Owns the section's shape (so the file loads with it), checking the
//! expiry when the file is loaded ([`ApprovalsSection::check`]), and the
//! lines `keel config show` prints. Which store a process opens is decided
//! in one place, `keel_approvals::StoreLocation::for_home` (the environment
//! variable `KEEL_APPROVALS_DATABASE_URL` over this section over
//! `$KEEL_HOME/keel.db`), and the expiry in another,
//! `keel_approvals::EngineConfig::for_home`, so every keel process agrees.
//! A URL is only ever printed with its password hidden. It must not open
//! the store.

use std::collections::BTreeMap;
use std::path::Path;

use keel_core::keel_approvals::{Class, EngineConfig, StoreLocation, format_expiry};
use serde::Deserialize;

/// `[approvals]`.
#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalsSection {
    /// `sqlite` (the default: `$KEEL_HOME/keel.db`), `sqlite:PATH`, or a
    /// `postgres://` URL. Read by `keel_approvals::StoreLocation`.
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "read by keel_approvals::StoreLocation")
    )]
    pub store: Option<String>,
    /// How long a held call waits before it expires (`90s`, `30m`, `12h`,
    /// `7d`; default 7 days).
    pub expire_after: Option<String>,
    /// `[approvals.expire_after_by_class]`: class name → expiry, over
    /// `expire_after` for that class.
    #[serde(default)]
    pub expire_after_by_class: BTreeMap<String, String>,
    /// `[approvals.notify]`: a webhook nudged when a call is held (read
    /// and checked by `keel_approvals::NotifySettings`).
    #[serde(default)]
    pub notify: Option<toml::Table>,
}

impl ApprovalsSection {
    /// The engine settings this section configures, or what is wrong with
    /// them (naming the key).
    pub fn engine_config(&self) -> Result<EngineConfig, keel_core::keel_approvals::Error> {
        EngineConfig::with_expiry(
            self.expire_after.as_deref(),
            self.expire_after_by_class
                .iter()
                .map(|(class, text)| (class.as_str(), text.as_str())),
        )
    }

    /// Fails on an expiry that cannot be read, so a bad value stops keel
    /// before anything runs instead of denying every tool call later.
    pub fn check(&self) -> Result<(), keel_core::keel_approvals::Error> {
        self.engine_config().map(|_| ())
    }
}

/// The expiry lines of `keel config show`: every class's expiry and where
/// it comes from; or why the setting is wrong.
pub fn expiry_lines(section: &ApprovalsSection) -> Vec<String> {
    let config = match section.engine_config() {
        Ok(config) => config,
        Err(e) => return vec![format!("# approvals expiry: {e}")],
    };
    let source = if section.expire_after.is_some() {
        "from [approvals] expire_after in config.toml"
    } else {
        "default"
    };
    let mut lines = vec![format!(
        "approvals_expire_after = {:?}  # {source}",
        format_expiry(config.default_ttl)
    )];
    if !config.class_ttl.is_empty() {
        let by_class: Vec<String> = [Class::Write, Class::Send, Class::Money]
            .into_iter()
            .map(|class| format!("{class} = {:?}", format_expiry(config.ttl(class))))
            .collect();
        lines.push(format!(
            "approvals_expire_after_by_class = {{ {} }}  # from [approvals.expire_after_by_class] in config.toml",
            by_class.join(", ")
        ));
    }
    lines
}

/// The store line of `keel config show`: where the approvals are, where
/// that was set, the password hidden; or why the setting is wrong.
pub fn store_line(home: &Path) -> String {
    match StoreLocation::locate(home) {
        Ok((location, source)) => {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GlobalArgs;
    use crate::config::Settings;

    fn load(text: &str) -> anyhow::Result<Settings> {
        let dir = tempfile::tempdir()?;
        std::fs::write(dir.path().join("config.toml"), text)?;
        Settings::load(&GlobalArgs {
            home: Some(dir.path().to_path_buf()),
            log_file: None,
            database: None,
            temporal: None,
        })
    }

    #[test]
    fn expiry_defaults_to_seven_days_for_every_class() {
        let settings = load("").unwrap();
        assert_eq!(
            expiry_lines(&settings.file.approvals),
            vec!["approvals_expire_after = \"7d\"  # default".to_owned()]
        );
    }

    #[test]
    fn expiry_is_read_per_class_and_shown() {
        let settings = load(
            "[approvals]\nexpire_after = \"12h\"\n\n[approvals.expire_after_by_class]\nmoney = \"90m\"\n",
        )
        .unwrap();
        let config = settings.file.approvals.engine_config().unwrap();
        assert_eq!(config.ttl(Class::Send).as_secs(), 12 * 3600);
        assert_eq!(config.ttl(Class::Money).as_secs(), 90 * 60);
        assert_eq!(
            expiry_lines(&settings.file.approvals),
            vec![
                "approvals_expire_after = \"12h\"  # from [approvals] expire_after in config.toml"
                    .to_owned(),
                "approvals_expire_after_by_class = { write = \"12h\", send = \"12h\", money = \"90m\" }  # from [approvals.expire_after_by_class] in config.toml".to_owned(),
            ]
        );
    }

    #[test]
    fn a_bad_expiry_stops_loading_and_names_the_key() {
        let err = load("[approvals]\nexpire_after = \"7 days\"\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("config.toml"), "{err}");
        assert!(
            err.contains("[approvals] expire_after: \"7 days\" is not a duration"),
            "{err}"
        );
        let err = load("[approvals.expire_after_by_class]\nmony = \"1h\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("[approvals.expire_after_by_class] mony: not a class"),
            "{err}"
        );
        let err = load("[approvals]\nexpire_after = 60\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("expected a string"), "{err}");
    }
}
