//! Where the approvals database lives, chosen in one place.
//!
//! Owns [`StoreLocation`]: the SQLite file `$KEEL_HOME/keel.db` (the
//! default), another SQLite file, or a PostgreSQL server; read from the
//! command line's `--database`, `KEEL_APPROVALS_DATABASE_URL`,
//! `KEEL_DATABASE_URL`, `store` under `[approvals]` or `url` under
//! `[store]` in `$KEEL_HOME/config.toml`, the first one set
//! ([`StoreLocation::for_home`], [`StoreSource`]), and opened as an
//! [`ApprovalStore`] ([`StoreLocation::open`]). Every process that opens
//! the approvals (the engine of `keel exec` and `keel rpc`, `keel
//! approvals`, the app-server, `keel worker`) goes through here so they
//! all agree. A PostgreSQL URL is only ever shown redacted. It must not
//! know about rows' meaning or the rest of the configuration file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use super::postgres::{PostgresStore, redact_dsn};
use super::{ApprovalStore, SqliteStore};
use crate::error::{Error, Result};
use crate::settings::config_table;

/// The environment variable that picks the store (over `config.toml`).
pub const STORE_ENV: &str = "KEEL_APPROVALS_DATABASE_URL";

/// The environment variable of the one database for everything durable
/// (`--database`); `KEEL_APPROVALS_DATABASE_URL` wins over it for approvals.
pub const DATABASE_ENV: &str = "KEEL_DATABASE_URL";

/// The command line's `--database`, set once at startup by the binary.
static COMMAND_LINE_DATABASE: OnceLock<String> = OnceLock::new();

/// Records the command line's `--database URL` for every later
/// [`StoreLocation::for_home`] of this process. Only the first call counts.
pub fn set_command_line_database(url: &str) {
    let _ = COMMAND_LINE_DATABASE.set(url.to_owned());
}

/// What the command line and environment say (for [`StoreLocation::resolve`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct Given<'a> {
    pub command_line: Option<&'a str>,
    pub approvals_env: Option<&'a str>,
    pub database_env: Option<&'a str>,
}

/// This process's environment variables of the store.
struct ProcessEnv {
    approvals: Option<String>,
    database: Option<String>,
}

impl ProcessEnv {
    fn read() -> Self {
        Self {
            approvals: std::env::var(STORE_ENV).ok(),
            database: std::env::var(DATABASE_ENV).ok(),
        }
    }

    /// With the command line's `--database`.
    fn given(&self) -> Given<'_> {
        Given {
            command_line: COMMAND_LINE_DATABASE.get().map(String::as_str),
            approvals_env: self.approvals.as_deref(),
            database_env: self.database.as_deref(),
        }
    }
}

/// Every setting, in the order they win.
const ALL: [StoreSource; 5] = [
    StoreSource::CommandLine,
    StoreSource::ApprovalsEnv,
    StoreSource::DatabaseEnv,
    StoreSource::ApprovalsFile,
    StoreSource::StoreFile,
];

/// The settings of the one shared database (not the approvals-only ones).
const SHARED: [StoreSource; 3] = [
    StoreSource::CommandLine,
    StoreSource::DatabaseEnv,
    StoreSource::StoreFile,
];

/// Which setting chose the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreSource {
    CommandLine,
    ApprovalsEnv,
    DatabaseEnv,
    ApprovalsFile,
    StoreFile,
    Default,
}

impl fmt::Display for StoreSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreSource::CommandLine => "--database",
            StoreSource::ApprovalsEnv => STORE_ENV,
            StoreSource::DatabaseEnv => DATABASE_ENV,
            StoreSource::ApprovalsFile => "[approvals] store in config.toml",
            StoreSource::StoreFile => "[store] url in config.toml",
            StoreSource::Default => "default",
        })
    }
}

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

    /// The store for the keel home `home`, from the first of these that is
    /// set and not empty (see [`StoreSource`]): the command line's
    /// `--database` ([`set_command_line_database`]),
    /// `KEEL_APPROVALS_DATABASE_URL`, `KEEL_DATABASE_URL`, `[approvals]
    /// store` in `home/config.toml`, `[store] url` there; else
    /// `home/keel.db`.
    pub fn for_home(home: &Path) -> Result<Self> {
        Self::locate(home).map(|(location, _)| location)
    }

    /// [`for_home`](Self::for_home), and which setting chose it.
    pub fn locate(home: &Path) -> Result<(Self, StoreSource)> {
        Self::resolve(home, &ProcessEnv::read().given())
    }

    /// The PostgreSQL database every durable thing of `home` shares, when
    /// one is set by `--database`, `KEEL_DATABASE_URL` or `[store] url`
    /// (the first set; the approvals-only settings do not count). Its URL,
    /// and which setting chose it.
    pub fn shared_database(home: &Path) -> Result<Option<(String, StoreSource)>> {
        let env = ProcessEnv::read();
        let (location, source) = Self::resolve_from(home, &env.given(), &SHARED)?;
        Ok(location.postgres_url().map(|url| (url, source)))
    }

    fn postgres_url(self) -> Option<String> {
        match self {
            StoreLocation::Postgres { url } => Some(url),
            StoreLocation::Sqlite(_) => None,
        }
    }

    /// [`locate`](Self::locate) with the command line and environment given.
    pub fn resolve(home: &Path, given: &Given<'_>) -> Result<(Self, StoreSource)> {
        Self::resolve_from(home, given, &ALL)
    }

    /// The first of `sources` that is set and not empty, else the default.
    fn resolve_from(
        home: &Path,
        given: &Given<'_>,
        sources: &[StoreSource],
    ) -> Result<(Self, StoreSource)> {
        let config = home.join("config.toml");
        for &source in sources {
            let value = match source {
                StoreSource::CommandLine => given.command_line.map(str::to_owned),
                StoreSource::ApprovalsEnv => given.approvals_env.map(str::to_owned),
                StoreSource::DatabaseEnv => given.database_env.map(str::to_owned),
                StoreSource::ApprovalsFile => configured(&config, "approvals", "store")?,
                StoreSource::StoreFile => configured(&config, "store", "url")?,
                StoreSource::Default => None,
            };
            let Some(value) = value.filter(|v| !v.trim().is_empty()) else {
                continue;
            };
            return Self::parse(&value, home).map(|l| (l, source)).map_err(|e| {
                let from = match source {
                    StoreSource::ApprovalsFile | StoreSource::StoreFile => {
                        format!("{source} ({})", config.display())
                    }
                    _ => source.to_string(),
                };
                Error::Config(format!("{from}: {e}"))
            });
        }
        Ok((Self::default_for(home), StoreSource::Default))
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

/// `key` under `[table]` in the file at `path` (absent file, table or
/// key: `None`).
fn configured(path: &Path, table: &str, key: &str) -> Result<Option<String>> {
    let Some(section) = config_table(path, table)? else {
        return Ok(None);
    };
    match section.get(key) {
        None => Ok(None),
        Some(toml::Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Error::Config(format!(
            "[{table}] {key} in {} must be a string",
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

    fn pick(home: &Path, given: Given<'_>) -> (StoreLocation, StoreSource) {
        StoreLocation::resolve(home, &given).unwrap()
    }

    #[test]
    fn the_command_line_wins_then_the_environment_then_the_file_then_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let pg = |url: &str| StoreLocation::Postgres {
            url: url.to_owned(),
        };
        assert_eq!(
            pick(home, Given::default()),
            (StoreLocation::default_for(home), StoreSource::Default)
        );
        std::fs::write(
            home.join("config.toml"),
            "[store]\nurl = \"postgres://k@127.0.0.1/all\"\n",
        )
        .unwrap();
        assert_eq!(
            pick(home, Given::default()),
            (pg("postgres://k@127.0.0.1/all"), StoreSource::StoreFile)
        );
        std::fs::write(
            home.join("config.toml"),
            "[model]\nid = \"m\"\n\n[approvals]\nstore = \"postgresql://k@127.0.0.1/a\"\n\n[store]\nurl = \"postgres://k@127.0.0.1/all\"\n",
        )
        .unwrap();
        assert_eq!(
            pick(home, Given::default()),
            (pg("postgresql://k@127.0.0.1/a"), StoreSource::ApprovalsFile)
        );
        let env = Given {
            database_env: Some("postgres://k@127.0.0.1/env"),
            ..Given::default()
        };
        assert_eq!(
            pick(home, env),
            (pg("postgres://k@127.0.0.1/env"), StoreSource::DatabaseEnv)
        );
        let approvals_env = Given {
            approvals_env: Some("sqlite"),
            ..env
        };
        assert_eq!(
            pick(home, approvals_env),
            (StoreLocation::default_for(home), StoreSource::ApprovalsEnv)
        );
        let flag = Given {
            command_line: Some("postgres://k@127.0.0.1/flag"),
            ..approvals_env
        };
        assert_eq!(
            pick(home, flag),
            (pg("postgres://k@127.0.0.1/flag"), StoreSource::CommandLine)
        );
        // Blank values do not count.
        let blank = Given {
            command_line: Some(" "),
            approvals_env: Some(""),
            database_env: Some("  "),
        };
        assert_eq!(pick(home, blank).1, StoreSource::ApprovalsFile);

        std::fs::write(home.join("config.toml"), "[approvals]\nstore = 5\n").unwrap();
        let err = StoreLocation::resolve(home, &Given::default()).unwrap_err();
        assert!(err.to_string().contains("must be a string"), "{err}");
        let bad = Given {
            database_env: Some("nope"),
            ..Given::default()
        };
        let err = StoreLocation::resolve(home, &bad).unwrap_err();
        assert!(err.to_string().contains(DATABASE_ENV), "{err}");
    }

    #[test]
    fn the_shared_database_ignores_the_approvals_only_settings() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path();
        let general = |given: Given<'_>| {
            StoreLocation::resolve_from(home, &given, &SHARED)
                .unwrap()
                .0
                .postgres_url()
        };
        assert_eq!(general(Given::default()), None);
        std::fs::write(
            home.join("config.toml"),
            "[approvals]\nstore = \"postgres://k@h/approvals\"\n",
        )
        .unwrap();
        assert_eq!(general(Given::default()), None);
        std::fs::write(
            home.join("config.toml"),
            "[approvals]\nstore = \"postgres://k@h/approvals\"\n[store]\nurl = \"postgres://k@h/all\"\n",
        )
        .unwrap();
        assert_eq!(
            general(Given::default()).as_deref(),
            Some("postgres://k@h/all")
        );
        let env = Given {
            approvals_env: Some("postgres://k@h/env-approvals"),
            database_env: Some("postgres://k@h/env"),
            ..Given::default()
        };
        assert_eq!(general(env).as_deref(), Some("postgres://k@h/env"));
        let sqlite = Given {
            command_line: Some("sqlite"),
            ..env
        };
        assert_eq!(general(sqlite), None);
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
