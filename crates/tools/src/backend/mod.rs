//! File-system and process backends.
//!
//! Owns the two seams every tool goes through: [`FileSystem`] (read, atomic
//! write, metadata, directory listing and an ignore-aware walk) and
//! [`ProcessRunner`] (run `bash -c` with a timeout and cancellation, streaming
//! merged output, confined by a [`Confiner`] to the request's
//! [`SandboxSpec`]), plus the local implementations and the glob semantics a
//! walk filters with. A remote or sandboxed backend implements these traits
//! and the tools need no change. It must not know about any tool, about
//! output formatting or about approvals.

mod confine;
mod glob;
mod kept_out;
mod local_fs;
mod local_process;
mod pinned;

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::error::Result;

pub use confine::{Confiner, SandboxSpec};
pub use glob::PathGlob;
pub use kept_out::{keep_out, kept_out};
pub use local_fs::LocalFileSystem;
pub use local_process::LocalProcessRunner;

/// What [`FileSystem::metadata`] reports (symlinks are followed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metadata {
    pub is_dir: bool,
    pub is_file: bool,
    /// Size in bytes.
    pub len: u64,
}

/// One entry of [`FileSystem::read_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// The file name (not the full path).
    pub name: String,
    /// Whether it is a directory (following symlinks).
    pub is_dir: bool,
    /// Whether the entry itself is a symlink.
    pub is_symlink: bool,
}

/// How [`FileSystem::walk`] lists a tree.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WalkOptions {
    /// Maximum depth below the root (`None`: unlimited; 1: direct children).
    pub max_depth: Option<usize>,
    /// Stop after this many matching entries (`None`: no limit).
    pub limit: Option<usize>,
    /// Include hidden (dot) files and directories. `.git` is always skipped.
    pub include_hidden: bool,
    /// Include directories as well as files.
    pub include_dirs: bool,
    /// Keep only entries matching this glob (see [`PathGlob`] for semantics).
    pub glob: Option<String>,
}

/// One entry found by a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalkEntry {
    /// Full path (the root joined with the relative path).
    pub path: PathBuf,
    pub is_dir: bool,
    /// Size in bytes (0 for directories or when unknown).
    pub len: u64,
}

/// What a walk found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WalkResult {
    /// Entries in walk order (depth-first, names sorted within a directory).
    pub entries: Vec<WalkEntry>,
    /// Whether the walk stopped at [`WalkOptions::limit`] with more to find.
    pub truncated: bool,
}

/// File access used by the tools.
#[async_trait::async_trait]
pub trait FileSystem: Send + Sync {
    /// Reads a whole file.
    async fn read(&self, path: &Path) -> Result<Vec<u8>>;
    /// Writes a whole file, creating parent directories. Local implementations
    /// replace the file atomically.
    async fn write(&self, path: &Path, contents: &[u8]) -> Result<()>;
    /// Writes a whole file at the *physical* `path` the approval gate
    /// judged (every symlink already resolved), following no symlink on
    /// the way: a folder or the final name that became a symlink since
    /// fails the write. Missing parent directories are created.
    async fn write_judged(&self, path: &Path, contents: &[u8]) -> Result<()>;
    /// Metadata of a path, following symlinks.
    async fn metadata(&self, path: &Path) -> Result<Metadata>;
    /// Entries of a directory, in no particular order, without `.`/`..`.
    async fn read_dir(&self, path: &Path) -> Result<Vec<DirEntry>>;
    /// Lists entries under `root`, honouring `.gitignore`, `.ignore` and
    /// hidden-file rules. A file `root` yields itself.
    async fn walk(&self, root: &Path, options: &WalkOptions) -> Result<WalkResult>;
}

/// A shell command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessRequest {
    /// Passed to `bash -c`.
    pub command: String,
    /// Working directory.
    pub cwd: PathBuf,
    /// Extra environment variables (on top of the inherited environment).
    pub env: Vec<(String, String)>,
    /// Kill the process (group) after this long.
    pub timeout: Option<Duration>,
    /// The sandbox it runs in; `None` runs it unconfined (a caller with no
    /// policy, such as a test).
    pub sandbox: Option<SandboxSpec>,
}

/// How a process run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ProcessExit {
    /// The exit code, when the shell exited normally.
    pub exit_code: Option<i32>,
    /// The signal that terminated the shell, if any.
    pub signal: Option<i32>,
    /// The timeout elapsed and the process group was killed.
    pub timed_out: bool,
    /// The cancellation token fired and the process group was killed.
    pub cancelled: bool,
}

/// Runs shell commands.
#[async_trait::async_trait]
pub trait ProcessRunner: Send + Sync {
    /// Runs `bash -c <command>` with stdin closed, passing each chunk of
    /// merged stdout+stderr to `on_output` as it arrives. On timeout or
    /// cancellation the whole process tree is killed and the run returns
    /// promptly with `timed_out`/`cancelled` set.
    async fn run(
        &self,
        request: ProcessRequest,
        cancel: CancellationToken,
        on_output: &mut (dyn for<'b> FnMut(&'b [u8]) + Send),
    ) -> Result<ProcessExit>;
}
