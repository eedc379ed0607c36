//! Where the approvals database lives, chosen in one place.
//!
//! Owns [`StoreLocation`]: the SQLite file `$KEEL_HOME/keel.db` (the
//! default), another SQLite file, or a PostgreSQL server; read from
//! `KEEL_APPROVALS_DATABASE_URL`, else `store` under `[approvals]` in
//! `$KEEL_HOME/config.toml` ([`StoreLocation::for_home`]; the section is
//! read by [`crate::settings`]), and opened as an
//! [`ApprovalStore`] ([`StoreLocation::open`]). Every process that opens
//! the approvals (the engine of `keel exec` and `keel rpc`, `keel
//! approvals`, the app-server) goes through here so they all agree. A
//! PostgreSQL URL is only ever shown redacted. It must not know about rows'
//! meaning or the rest of the configuration file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::postgres::{PostgresStore, redact_dsn};
use super::{ApprovalStore, SqliteStore};
use crate::error::{Error, Result};
use crate::settings::approvals_table;

/// The environment variable that picks the store (over `config.toml`).
pub const STORE_ENV: &str = "KEEL_APPROVALS_DATABASE_URL";

/// The database file under `$KEEL_HOME` when nothing else is configured.
pub const DEFAULT_SQLITE_FILE: &str = "keel.db";

/// Where the approvals database is.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// An SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL server (`postgres://` or `postgresql://` URL; may hold
    /// a password, so it is never printed as is).
    Postgres { url: String },
}

impl fmt::Debug for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            StoreLocation::Postgres { url } => f
                .debug_struct("Postgres")
                .field("url", &redact_dsn(url))
                .finish(),
        }
    }
}

/// For people: the file's path, or the server's URL with the password hidden.
impl fmt::Display for StoreLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreLocation::Sqlite(path) => write!(f, "{}", path.display()),
            StoreLocation::Postgres { url } => f.write_str(&redact_dsn(url)),
        }
    }
}

impl StoreLocation {
    /// The default: `keel.db` in `home`.
    pub fn default_for(home: &Path) -> Self {
        StoreLocation::Sqlite(home.join(DEFAULT_SQLITE_FILE))
    }

    /// Reads one setting: empty or `sqlite` (the default file in `home`),
    /// `sqlite:PATH` (relative paths from `home`), or a `postgres://` /
    /// `postgresql://` URL.
    pub fn parse(setting: &str, home: &Path) -> Result<Self> {
        let setting = setting.trim();
        if setting.is_empty() || setting == "sqlite" {
            return Ok(Self::default_for(home));
        }
        if let Some(path) = setting.strip_prefix("sqlite:") {
            let path = path.trim();
            if path.is_empty() {
                return Ok(Self::default_for(home));
            }
            return Ok(StoreLocation::Sqlite(home.join(path)));
        }
        let lower = setting.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            return Ok(StoreLocation::Postgres {
                url: setting.to_owned(),
            });
        }
        Err(Error::Config(format!(
            "invalid approvals store {:?}: use \"sqlite\", \"sqlite:PATH\" or a postgres:// URL",
            redact_dsn(setting)
        )))
    }

    /// The store for the keel home `home`: `KEEL_APPROVALS_DATABASE_URL`
    /// when set and not empty, else `[approvals] store` in
    /// `home/config.toml`, else `home/keel.db`.
    pub fn for_home(home: &Path) -> Result<Self> {
        let env = std::env::var(STORE_ENV).ok();
        Self::resolve(home, env.as_deref())
    }

    /// [`for_home`](Self::for_home) with the environment's value given.
    pub fn resolve(home: &Path, env: Option<&str>) -> Result<Self> {
        if let Some(value) = env.filter(|v| !v.trim().is_empty()) {
            return Self::parse(value, home)
                .map_err(|e| Error::Config(format!("{STORE_ENV}: {e}")));
        }
        let config = home.join("config.toml");
        match configured_store(&config)? {
            Some(value) => Self::parse(&value, home).map_err(|e| {
                Error::Config(format!("[approvals] store in {}: {e}", config.display()))
            }),
            None => Ok(Self::default_for(home)),
        }
    }

    /// Opens (creating and migrating as needed) the store. An error names
    /// the store (a password hidden).
    pub async fn open(&self) -> Result<Arc<dyn ApprovalStore>> {
        let opened: Result<Arc<dyn ApprovalStore>> = match self {
            StoreLocation::Sqlite(path) => match SqliteStore::open(path.clone()).await {
                Ok(store) => Ok(Arc::new(store)),
                Err(e) => Err(e),
            },
            StoreLocation::Postgres { url } => match PostgresStore::open(url).await {
                Ok(store) => Ok(Arc::new(store)),
                Err(e) => Err(e),
            },
        };
        opened.map_err(|e| Error::Config(format!("cannot open the approvals database {self}: {e}")))
    }
}

/// `store` under `[approvals]` in the file at `path` (absent file, table or
/// key: `None`).
fn configured_store(path: &Path) -> Result<Option<String>> {
    let Some(approvals) = approvals_table(path)? else {
        return Ok(None);
    };
    match approvals.get("store") {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::Config(format!(
            "[approvals] store in {} must be a string",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_pick_the_store() {
        let home = Path::new("/home/k/.keel");
        assert_eq!(
            StoreLocation::parse("", home).unwrap(),
            StoreLocation::Sqlite(home.join("keel.db"))
        );
        assert_eq!(
            StoreLocation::parse("sqlite", home).unwrap(),
            StoreLocation::Sqlite(home.join("keel.db"))
        );
        assert_eq!(
            StoreLocation::parse("sqlite:other.db", home).unwrap(),
            StoreLocation::Sqlite(home.join("other.db"))
        );
        assert_eq!(
            StoreLocation::parse("sqlite:/abs/a.db", home).unwrap(),
            StoreLocation::Sqlite(PathBuf::from("/abs/a.db"))
        );
        let pg = StoreLocation::parse("postgres://k:pw@127.0.0.1:5432/keel", home).unwrap();
        assert_eq!(pg.to_string(), "postgres://k:***@127.0.0.1:5432/keel");
        assert!(!format!("{pg:?}").contains("pw"));
        let err = StoreLocation::parse("mysql://k:pw@h/db", home).unwrap_err();
        assert!(err.to_string().contains("postgres://"), "{err}");
        assert!(!err.to_string().contains("pw@"), "{err}");
    }

    #[test]
    fn the_environment_wins_over_the_file_and_the_file_over_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        assert_eq!(
            StoreLocation::resolve(home, None).unwrap(),
            StoreLocation::default_for(home)
        );
        std::fs::write(
            home.join("config.toml"),
            "[model]\nid = \"m\"\n\n[approvals]\nstore = \"postgresql://k@127.0.0.1/a\"\n",
        )
        .unwrap();
        assert_eq!(
            StoreLocation::resolve(home, None).unwrap(),
            StoreLocation::Postgres {
                url: "postgresql://k@127.0.0.1/a".to_owned()
            }
        );
        assert_eq!(
            StoreLocation::resolve(home, Some("sqlite")).unwrap(),
            StoreLocation::default_for(home)
        );
        assert_eq!(
            StoreLocation::resolve(home, Some("  ")).unwrap(),
            StoreLocation::Postgres {
                url: "postgresql://k@127.0.0.1/a".to_owned()
            }
        );
        std::fs::write(home.join("config.toml"), "[approvals]\nstore = 5\n").unwrap();
        let err = StoreLocation::resolve(home, None).unwrap_err();
        assert!(err.to_string().contains("must be a string"), "{err}");
        let err = StoreLocation::resolve(home, Some("nope")).unwrap_err();
        assert!(err.to_string().contains(STORE_ENV), "{err}");
    }

    #[tokio::test]
    async fn an_unreachable_server_is_a_clear_error_without_the_password() {
        // A port nothing listens on: bind one, then free it.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let location = StoreLocation::Postgres {
            url: format!("postgres://keel:hunter2@127.0.0.1:{port}/keel?connect_timeout=5"),
        };
        let err = location.open().await.unwrap_err().to_string();
        assert!(err.contains("cannot connect"), "{err}");
        assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}
