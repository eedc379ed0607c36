//! Shared setup for the binary's integration tests.

mod app_server;
mod approvals;
mod claude_headless;
mod clients;
mod cluster;
mod cluster_front_ends;
mod cluster_reconnect;
mod cluster_turns;
mod compaction_config;
mod compaction_cycle;
mod config;
mod exec;
mod exec_abort;
mod html_export;
mod inbox;
pub(crate) mod mcp;
mod providers;
mod rpc;
mod sandbox;
mod session_approvals;
mod sessions;
mod snapshots;
mod soak;

use std::path::{Path, PathBuf};

use keel_test_support::{KeelCommand, MockModelServer};
use tempfile::TempDir;

/// With `KEEL_TEST_STORE=postgres`, every keel an [`Env`] spawns keeps its
/// sessions and approvals in a fresh PostgreSQL database instead of its
/// home (`.ci/run` runs the sessions and approvals tests both ways).
const STORE_MODE_ENV: &str = "KEEL_TEST_STORE";

/// A scratch workspace and home, and a mock model server.
pub struct Env {
    pub mock: MockModelServer,
    pub home: TempDir,
    pub ws: TempDir,
    /// The shared database of this test, in PostgreSQL mode.
    pub db: Option<SharedDb>,
}

/// A throwaway PostgreSQL server and the database one test uses.
pub struct SharedDb {
    pub server: keel_test_support::PostgresServer,
    pub url: String,
}

impl Env {
    pub async fn new() -> Self {
        let db = match std::env::var(STORE_MODE_ENV).as_deref() {
            Ok("postgres") => {
                let server = keel_test_support::PostgresServer::start()
                    .await
                    .expect("KEEL_TEST_STORE=postgres needs PostgreSQL");
                let url = server.database().await;
                Some(SharedDb { server, url })
            }
            Ok("" | "home") | Err(_) => None,
            Ok(other) => panic!("{STORE_MODE_ENV}={other}: use postgres or home"),
        };
        Self {
            mock: MockModelServer::start().await,
            home: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
            db,
        }
    }

    /// `keel` in this test's home, on its database in PostgreSQL mode.
    pub fn keel_bin(&self) -> KeelCommand {
        let command = KeelCommand::new(env!("CARGO_BIN_EXE_keel")).home(self.home.path());
        match &self.db {
            Some(db) => command.env("KEEL_DATABASE_URL", db.url.clone()),
            None => command,
        }
    }

    pub fn ws(&self) -> &Path {
        self.ws.path()
    }

    /// `keel exec` pointed at the mock, in the workspace, with its own home.
    pub fn exec(&self) -> KeelCommand {
        self.keel_bin().cwd(self.ws()).args([
            "exec",
            "--base-url",
            &self.mock.base_url(),
            "--model",
            "mock-model",
        ])
    }

    /// `keel` with no arguments, in the workspace, with its own home.
    pub fn keel(&self) -> KeelCommand {
        self.keel_bin().cwd(self.ws())
    }

    /// The session files saved for this workspace (in PostgreSQL mode, the
    /// paths keel gives the sessions in the database).
    pub async fn session_files(&self) -> Vec<PathBuf> {
        let root = self.home.path().join("sessions");
        let mut files = Vec::new();
        match &self.db {
            Some(db) => {
                for row in db.query("SELECT path FROM keel_session_files").await {
                    files.push(root.join(row.get::<_, String>(0)));
                }
            }
            None => {
                for dir in std::fs::read_dir(root).into_iter().flatten().flatten() {
                    for f in std::fs::read_dir(dir.path())
                        .into_iter()
                        .flatten()
                        .flatten()
                    {
                        files.push(f.path());
                    }
                }
            }
        }
        files.sort();
        files
    }

    /// The text of a small file below the home (`rpc/audit.jsonl`, …),
    /// wherever it is kept; empty when there is none.
    pub async fn home_file_text(&self, below_home: &str) -> String {
        let Some(db) = &self.db else {
            return std::fs::read_to_string(self.home.path().join(below_home)).unwrap_or_default();
        };
        let rows = db
            .query_with(
                "SELECT body FROM keel_home_files WHERE path = $1",
                below_home,
            )
            .await;
        rows.first()
            .map(|r| String::from_utf8(r.get::<_, Vec<u8>>(0)).unwrap())
            .unwrap_or_default()
    }

    /// The text of a session file, wherever it is kept.
    pub async fn session_text(&self, path: &Path) -> String {
        let Some(db) = &self.db else {
            return std::fs::read_to_string(path).unwrap();
        };
        let key = path
            .strip_prefix(self.home.path().join("sessions"))
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let header = db
            .query_with(
                "SELECT header FROM keel_session_files WHERE path = $1",
                &key,
            )
            .await;
        let lines = db
            .query_with(
                "SELECT line FROM keel_session_lines WHERE path = $1 ORDER BY seq",
                &key,
            )
            .await;
        let mut text = String::new();
        for row in header.iter().chain(&lines) {
            text.push_str(row.get::<_, &str>(0));
            text.push('\n');
        }
        text
    }

    /// The only session file, loaded.
    pub async fn only_session(&self) -> keel_session_store::LoadedSession {
        let files = self.session_files().await;
        assert_eq!(files.len(), 1, "expected one session file, found {files:?}");
        self.load_session(&files[0]).await
    }

    /// A session file, loaded (in PostgreSQL mode, from a copy of what the
    /// database holds; `path` stays the session's own).
    pub async fn load_session(&self, path: &Path) -> keel_session_store::LoadedSession {
        if self.db.is_none() {
            return keel_session_store::load(path).await.unwrap();
        }
        let copy = tempfile::tempdir().unwrap();
        let file = copy.path().join("copy.jsonl");
        std::fs::write(&file, self.session_text(path).await).unwrap();
        let mut loaded = keel_session_store::load(&file).await.unwrap();
        loaded.path = path.to_path_buf();
        loaded
    }
}

impl SharedDb {
    async fn client(&self) -> tokio_postgres::Client {
        let (client, connection) = tokio_postgres::connect(&self.url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
    }

    async fn query(&self, sql: &str) -> Vec<tokio_postgres::Row> {
        match self.client().await.query(sql, &[]).await {
            Ok(rows) => rows,
            // No session written yet: keel creates the tables on first use.
            Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::UNDEFINED_TABLE) => {
                Vec::new()
            }
            Err(e) => panic!("{sql}: {e}"),
        }
    }

    async fn query_with(&self, sql: &str, key: &str) -> Vec<tokio_postgres::Row> {
        self.client().await.query(sql, &[&key]).await.unwrap()
    }
}
