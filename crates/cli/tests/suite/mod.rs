//! Shared setup for the binary's integration tests.

mod app_server;
mod approvals;
mod clients;
mod cluster;
mod compaction_config;
mod compaction_cycle;
mod config;
mod exec;
mod exec_abort;
mod html_export;
mod inbox;
mod mcp;
mod providers;
mod rpc;
mod sandbox;
mod session_approvals;
mod sessions;
mod snapshots;

use std::path::{Path, PathBuf};

use keel_test_support::{KeelCommand, MockModelServer};
use tempfile::TempDir;

/// A scratch workspace and home, and a mock model server.
pub struct Env {
    pub mock: MockModelServer,
    pub home: TempDir,
    pub ws: TempDir,
}

impl Env {
    pub async fn new() -> Self {
        Self {
            mock: MockModelServer::start().await,
            home: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
        }
    }

    pub fn ws(&self) -> &Path {
        self.ws.path()
    }

    /// `keel exec` pointed at the mock, in the workspace, with its own home.
    pub fn exec(&self) -> KeelCommand {
        KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
            .home(self.home.path())
            .cwd(self.ws())
            .args([
                "exec",
                "--base-url",
                &self.mock.base_url(),
                "--model",
                "mock-model",
            ])
    }

    /// `keel` with no arguments, in the workspace, with its own home.
    pub fn keel(&self) -> KeelCommand {
        KeelCommand::new(env!("CARGO_BIN_EXE_keel"))
            .home(self.home.path())
            .cwd(self.ws())
    }

    /// The session files saved for this workspace.
    pub fn session_files(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        let root = self.home.path().join("sessions");
        for dir in std::fs::read_dir(root).into_iter().flatten().flatten() {
            for f in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                files.push(f.path());
            }
        }
        files.sort();
        files
    }

    /// The messages of the only session file.
    pub async fn only_session(&self) -> keel_session_store::LoadedSession {
        let files = self.session_files();
        assert_eq!(files.len(), 1, "expected one session file, found {files:?}");
        keel_session_store::load(&files[0]).await.unwrap()
    }
}
