//! The `[approvals]` section of `$KEEL_HOME/config.toml`, as far as the
//! engine reads it: how long a held call waits before it expires.
//!
//! ```toml
//! [approvals]
//! expire_after = "7d"          # every class (the default)
//!
//! [approvals.expire_after_by_class]
//! money = "1h"                 # write, send or money
//! ```
//!
//! Owns the duration syntax ([`parse_expiry`]: a whole number and `s`, `m`,
//! `h` or `d`; [`format_expiry`]), turning the settings into an
//! [`EngineConfig`] ([`EngineConfig::with_expiry`],
//! [`EngineConfig::for_home`]) with errors that name the key, and reading the
//! section from the file (also used by
//! [`StoreLocation::for_home`](crate::StoreLocation::for_home)). Every keel
//! process that opens the engine reads its expiry through here, so they
//! agree. It must not know about the store's contents or the rest of the
//! configuration file.

use std::path::Path;
use std::time::Duration;

use crate::class::Class;
use crate::engine::EngineConfig;
use crate::error::{Error, Result};

/// The key of the expiry of every class.
pub const EXPIRE_AFTER_KEY: &str = "expire_after";
/// The table of per-class expiries.
pub const EXPIRE_AFTER_BY_CLASS_KEY: &str = "expire_after_by_class";
/// The longest expiry accepted: ten years.
pub const MAX_EXPIRY: Duration = Duration::from_secs(3650 * 24 * 60 * 60);

const SYNTAX: &str = "write a whole number and a unit, like \"90s\", \"30m\", \"12h\" or \"7d\"";

/// Reads a duration such as `90s`, `30m`, `12h` or `7d`: more than zero, at
/// most [`MAX_EXPIRY`]. The error says what is wrong (without the key).
pub fn parse_expiry(text: &str) -> std::result::Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let unit_secs: u64 = match unit.trim() {
        "s" => 1,
        "m" => 60,
        "h" => 60 * 60,
        "d" => 24 * 60 * 60,
        _ => return Err(format!("{text:?} is not a duration: {SYNTAX}")),
    };
    if digits.is_empty() {
        return Err(format!("{text:?} is not a duration: {SYNTAX}"));
    }
    let too_long = || {
        format!(
            "{text:?} is too long: at most {}",
            format_expiry(MAX_EXPIRY)
        )
    };
    let n: u64 = digits.parse().map_err(|_| too_long())?;
    if n == 0 {
        return Err(format!(
            "{text:?} is too short: a held call must wait at least 1s"
        ));
    }
    let secs = n
        .checked_mul(unit_secs)
        .filter(|s| *s <= MAX_EXPIRY.as_secs())
        .ok_or_else(too_long)?;
    Ok(Duration::from_secs(secs))
}

/// A duration in the syntax [`parse_expiry`] reads, in its largest whole
/// unit (`7d`, `90m`, `45s`; `1500ms` below whole seconds).
pub fn format_expiry(d: Duration) -> String {
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    for (unit, len) in [("d", 24 * 60 * 60), ("h", 60 * 60), ("m", 60)] {
        if secs != 0 && secs.is_multiple_of(len) {
            return format!("{}{unit}", secs / len);
        }
    }
    format!("{secs}s")
}

impl EngineConfig {
    /// The defaults with the expiry settings applied: `expire_after` for
    /// every class, then `by_class` (class name, duration) for single
    /// classes. Only classes that can be held (write, send, money) may be
    /// named. An error names the key and says what is wrong.
    pub fn with_expiry<'a>(
        expire_after: Option<&str>,
        by_class: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self> {
        let mut config = Self::default();
        if let Some(text) = expire_after {
            config.default_ttl = parse_expiry(text)
                .map_err(|e| Error::Config(format!("[approvals] {EXPIRE_AFTER_KEY}: {e}")))?;
        }
        for (name, text) in by_class {
            let key = format!("[approvals.{EXPIRE_AFTER_BY_CLASS_KEY}] {name}");
            let class = match name.parse::<Class>() {
                Ok(Class::Read) => {
                    return Err(Error::Config(format!(
                        "{key}: read calls are never held, so they never expire; name write, send or money"
                    )));
                }
                Ok(class) => class,
                Err(_) => {
                    return Err(Error::Config(format!(
                        "{key}: not a class; name write, send or money"
                    )));
                }
            };
            let ttl = parse_expiry(text).map_err(|e| Error::Config(format!("{key}: {e}")))?;
            config.class_ttl.retain(|(c, _)| *c != class);
            config.class_ttl.push((class, ttl));
        }
        config.class_ttl.sort_by_key(|(c, _)| *c);
        Ok(config)
    }

    /// The engine settings the keel home `home` configures: the defaults
    /// with `expire_after` and `[approvals.expire_after_by_class]` of
    /// `home/config.toml` (absent file or keys: the defaults). An error
    /// names the file and the key.
    pub fn for_home(home: &Path) -> Result<Self> {
        let path = home.join("config.toml");
        let in_file = |e: Error| Error::Config(format!("{}: {e}", path.display()));
        let Some(section) = approvals_table(&path)? else {
            return Ok(Self::default());
        };
        let expire_after = match section.get(EXPIRE_AFTER_KEY) {
            None => None,
            Some(toml::Value::String(s)) => Some(s.as_str()),
            Some(_) => {
                return Err(in_file(Error::Config(format!(
                    "[approvals] {EXPIRE_AFTER_KEY} must be a string such as \"7d\""
                ))));
            }
        };
        let mut by_class = Vec::new();
        match section.get(EXPIRE_AFTER_BY_CLASS_KEY) {
            None => {}
            Some(toml::Value::Table(table)) => {
                for (name, value) in table {
                    match value {
                        toml::Value::String(s) => by_class.push((name.as_str(), s.as_str())),
                        _ => {
                            return Err(in_file(Error::Config(format!(
                                "[approvals.{EXPIRE_AFTER_BY_CLASS_KEY}] {name} must be a string such as \"1h\""
                            ))));
                        }
                    }
                }
            }
            Some(_) => {
                return Err(in_file(Error::Config(format!(
                    "[approvals] {EXPIRE_AFTER_BY_CLASS_KEY} must be a table such as {{ money = \"1h\" }}"
                ))));
            }
        }
        Self::with_expiry(expire_after, by_class).map_err(in_file)
    }
}

/// The `[approvals]` table of the configuration file at `path` (absent
/// file or table: `None`).
pub(crate) fn approvals_table(path: &Path) -> Result<Option<toml::Table>> {
    config_table(path, "approvals")
}

/// The table `[name]` of the configuration file at `path` (absent file or
/// table: `None`).
pub(crate) fn config_table(path: &Path, name: &str) -> Result<Option<toml::Table>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| {
        Error::Config(format!(
            "invalid {}: {}",
            path.display(),
            e.message().trim()
        ))
    })?;
    match table.remove(name) {
        None => Ok(None),
        Some(toml::Value::Table(section)) => Ok(Some(section)),
        Some(_) => Err(Error::Config(format!(
            "[{name}] in {} must be a table",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_seconds_minutes_hours_and_days() {
        assert_eq!(parse_expiry("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_expiry("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_expiry(" 12h ").unwrap(), Duration::from_secs(43_200));
        assert_eq!(parse_expiry("7d").unwrap(), Duration::from_secs(604_800));
        for bad in ["", "7", "d", "7 days", "1.5h", "-1d", "7w", "h7"] {
            let err = parse_expiry(bad).unwrap_err();
            assert!(err.contains("is not a duration"), "{bad:?}: {err}");
        }
        assert!(parse_expiry("0s").unwrap_err().contains("too short"));
        assert!(parse_expiry("3651d").unwrap_err().contains("at most 3650d"));
        assert!(
            parse_expiry("99999999999999999999999s")
                .unwrap_err()
                .contains("too long")
        );
        assert_eq!(parse_expiry("3650d").unwrap(), MAX_EXPIRY);
    }

    #[test]
    fn durations_print_in_their_largest_whole_unit() {
        assert_eq!(format_expiry(Duration::from_secs(604_800)), "7d");
        assert_eq!(format_expiry(Duration::from_secs(5400)), "90m");
        assert_eq!(format_expiry(Duration::from_secs(7200)), "2h");
        assert_eq!(format_expiry(Duration::from_secs(45)), "45s");
        assert_eq!(format_expiry(Duration::from_millis(1500)), "1500ms");
        for text in ["1s", "59s", "61m", "25h", "3650d"] {
            assert_eq!(
                parse_expiry(&format_expiry(parse_expiry(text).unwrap())).unwrap(),
                parse_expiry(text).unwrap()
            );
        }
    }

    #[test]
    fn settings_set_the_default_and_single_classes() {
        let config = EngineConfig::with_expiry(None, []).unwrap();
        assert_eq!(config, EngineConfig::default());
        let config =
            EngineConfig::with_expiry(Some("2d"), [("money", "1h"), ("Send", "3d")]).unwrap();
        assert_eq!(config.ttl(Class::Write), Duration::from_secs(2 * 86_400));
        assert_eq!(config.ttl(Class::Send), Duration::from_secs(3 * 86_400));
        assert_eq!(config.ttl(Class::Money), Duration::from_secs(3600));

        let err = EngineConfig::with_expiry(Some("soon"), []).unwrap_err();
        assert_eq!(
            err.to_string(),
            "[approvals] expire_after: \"soon\" is not a duration: write a whole number and a unit, like \"90s\", \"30m\", \"12h\" or \"7d\""
        );
        let err = EngineConfig::with_expiry(None, [("monye", "1h")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("[approvals.expire_after_by_class] monye: not a class"),
            "{err}"
        );
        let err = EngineConfig::with_expiry(None, [("read", "1h")]).unwrap_err();
        assert!(err.to_string().contains("never held"), "{err}");
        let err = EngineConfig::with_expiry(None, [("money", "0m")]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("[approvals.expire_after_by_class] money: \"0m\" is too short"),
            "{err}"
        );
    }

    #[test]
    fn the_home_config_file_sets_the_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        assert_eq!(
            EngineConfig::for_home(home).unwrap(),
            EngineConfig::default()
        );
        std::fs::write(home.join("config.toml"), "[model]\nid = \"m\"\n").unwrap();
        assert_eq!(
            EngineConfig::for_home(home).unwrap(),
            EngineConfig::default()
        );
        std::fs::write(
            home.join("config.toml"),
            "[approvals]\nstore = \"sqlite\"\nexpire_after = \"12h\"\n\n\
             [approvals.expire_after_by_class]\nmoney = \"30m\"\n",
        )
        .unwrap();
        let config = EngineConfig::for_home(home).unwrap();
        assert_eq!(config.default_ttl, Duration::from_secs(12 * 3600));
        assert_eq!(
            config.class_ttl,
            vec![(Class::Money, Duration::from_secs(1800))]
        );

        for (text, says) in [
            (
                "[approvals]\nexpire_after = 60\n",
                "expire_after must be a string",
            ),
            (
                "[approvals]\nexpire_after = \"60\"\n",
                "[approvals] expire_after: \"60\" is not a duration",
            ),
            (
                "[approvals]\nexpire_after_by_class = \"1h\"\n",
                "expire_after_by_class must be a table",
            ),
            (
                "[approvals.expire_after_by_class]\nmoney = 5\n",
                "] money must be a string",
            ),
            ("approvals = 1\n", "must be a table"),
        ] {
            std::fs::write(home.join("config.toml"), text).unwrap();
            let err = EngineConfig::for_home(home).unwrap_err().to_string();
            assert!(err.contains(says), "{text:?}: {err}");
            assert!(err.contains("config.toml"), "{err}");
        }
    }

    /// Money configured short and send long: a money call expires while a
    /// send call held at the same moment still waits.
    #[tokio::test]
    async fn a_per_class_expiry_from_the_file_is_honoured() {
        use std::sync::Arc;

        use crate::clock::ManualClock;
        use crate::engine::{ApprovalEngine, CallContext, GateOutcome, Resolution};

        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        std::fs::write(
            home.join("config.toml"),
            "[approvals]\nexpire_after = \"1h\"\n\n\
             [approvals.expire_after_by_class]\nmoney = \"1m\"\nsend = \"2d\"\n",
        )
        .unwrap();
        let clock = ManualClock::new(1_700_000_000_000);
        let engine = ApprovalEngine::open_sqlite_with(
            home.join("keel.db"),
            Arc::new(clock.clone()),
            EngineConfig::for_home(home).unwrap(),
        )
        .await
        .unwrap();
        let call = |id: &str, command: &str| CallContext {
            workspace: "/ws".to_owned(),
            cwd: "/ws".into(),
            session_id: "s1".to_owned(),
            call_id: id.to_owned(),
            tool_name: "bash".to_owned(),
            args: serde_json::json!({ "command": command }),
            origin: Default::default(),
            unattended: false,
            write_target: None,
        };
        let held = |outcome: GateOutcome| match outcome {
            GateOutcome::Held { request } => request,
            other => panic!("expected held, got {other:?}"),
        };
        let money = held(engine.gate_check(&call("m", "rm -rf build")).await);
        let send = held(engine.gate_check(&call("s", "cargo publish")).await);
        assert_eq!((money.class, send.class), (Class::Money, Class::Send));
        assert_eq!(money.expires_at - money.created_at, 60_000);
        assert_eq!(send.expires_at - send.created_at, 2 * 86_400_000);

        clock.advance(61_000);
        let pending: Vec<String> = engine
            .pending(None)
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.call_id)
            .collect();
        assert_eq!(pending, vec!["s".to_owned()]);
        let cancel = tokio_util::sync::CancellationToken::new();
        let waited = tokio::time::timeout(Duration::from_secs(20), engine.wait(&money.id, &cancel))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            waited,
            Resolution::Expired {
                request_id: money.id.clone()
            }
        );
        assert_eq!(
            waited.message_for_model().as_deref(),
            Some("The user did not answer in time; nothing happened.")
        );
        assert!(engine.request(&send.id).await.unwrap().is_pending());
    }
}
