//! Built-in tools and the `Tool` trait.
//!
//! This crate owns what a tool is (name, description, JSON Schema for its
//! arguments, an async `execute`), the built-ins (`read`, `write`, `edit`,
//! `bash`, `grep`, `find`, `ls`), path resolution against the workspace, and
//! output truncation. Every file and process access goes through the
//! [`FileSystem`] and [`ProcessRunner`] backends carried in the
//! [`ToolContext`], so remote or sandboxed execution needs no change to tool
//! logic. It must not know about approvals or any wire format.

pub mod ask;
pub mod backend;
pub mod bounded;
mod builtins;
pub mod child_env;
pub mod compact;
mod error;
pub mod git_drivers;
pub mod host;
mod path;
pub mod truncate;

use std::path::PathBuf;
use std::sync::Arc;

use keel_protocol::{ToolResult, ToolSpec};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use ask::{Answer, Asker, Question};
pub use backend::{
    Confiner, DirEntry, FileSystem, LocalFileSystem, LocalProcessRunner, Metadata, PathGlob,
    ProcessExit, ProcessRequest, ProcessRunner, SandboxSpec, WalkEntry, WalkOptions, WalkResult,
    keep_out, kept_out,
};
pub use builtins::{
    BashTool, EditTool, FindTool, GrepTool, LsTool, ReadTool, WriteTool, builtin_tools,
};
pub use child_env::{EnvPolicy, Scrubber};
pub use error::{Error, Result};
pub use path::{display_relative, normalize_path, physical_path, resolve_path};

/// What a tool from elsewhere (an MCP server) says about itself. Data only:
/// what it means for approvals is the gate's business.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolHints {
    /// `readOnlyHint`.
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    pub destructive: Option<bool>,
    /// `openWorldHint`.
    pub open_world: Option<bool>,
    /// A class the configuration sets (`read`, `write`, `send`, `money`),
    /// over the annotations.
    pub class: Option<String>,
    /// The server it comes from (shown on the approval card).
    pub server: Option<String>,
}

/// Receives partial results while a tool runs (for example streamed shell output).
pub type UpdateSink = Arc<dyn Fn(ToolResult) + Send + Sync>;

/// What a tool run may touch.
#[derive(Clone)]
pub struct ToolContext {
    /// The id of the model's tool call being run (empty outside a session).
    pub call_id: String,
    /// The workspace root; relative paths resolve against it.
    pub cwd: PathBuf,
    pub fs: Arc<dyn FileSystem>,
    pub process: Arc<dyn ProcessRunner>,
    /// Cancelled on abort: the tool must stop promptly (killing any child).
    pub cancel: CancellationToken,
    /// Partial results go here.
    pub updates: UpdateSink,
    /// Where full outputs that were truncated are saved.
    pub scratch_dir: PathBuf,
    /// The physical file this call writes, as [`Tool::write_target`] named
    /// it when the call was judged: the tool writes exactly there with
    /// [`FileSystem::write_judged`] (no symlink followed). `None`: the
    /// tool resolves its path itself (calls run outside a session).
    pub write_target: Option<PathBuf>,
    /// The sandbox the processes of this call run in (`None`: unconfined,
    /// for calls outside a session).
    pub sandbox: Option<SandboxSpec>,
    /// Who a question the tool has is put to (`None`: nobody attends the
    /// session; the tool answers its own questions).
    pub asker: Option<Arc<dyn Asker>>,
}

impl ToolContext {
    /// A context over the local file system and processes, rooted at `cwd`,
    /// with a no-op update sink and a scratch directory under the system
    /// temp dir (created on first use).
    pub fn local(cwd: impl Into<PathBuf>, cancel: CancellationToken) -> Self {
        Self {
            call_id: String::new(),
            cwd: cwd.into(),
            fs: Arc::new(LocalFileSystem),
            process: Arc::new(LocalProcessRunner::default()),
            cancel,
            updates: noop_updates(),
            scratch_dir: std::env::temp_dir().join(format!("keel-tools-{}", std::process::id())),
            write_target: None,
            sandbox: None,
            asker: None,
        }
    }

    /// Replaces the update sink.
    pub fn with_updates(mut self, updates: UpdateSink) -> Self {
        self.updates = updates;
        self
    }

    /// Replaces the scratch directory.
    pub fn with_scratch_dir(mut self, scratch_dir: impl Into<PathBuf>) -> Self {
        self.scratch_dir = scratch_dir.into();
        self
    }
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .field("cwd", &self.cwd)
            .field("scratch_dir", &self.scratch_dir)
            .field("cancelled", &self.cancel.is_cancelled())
            .field("asker", &self.asker.is_some())
            .finish_non_exhaustive()
    }
}

/// An update sink that drops every update.
pub fn noop_updates() -> UpdateSink {
    Arc::new(|_| {})
}

/// What a tool returns. `is_error` results are shown to the model as failures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    pub result: ToolResult,
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result.
    pub fn success(result: ToolResult) -> Self {
        Self {
            result,
            is_error: false,
        }
    }

    /// A failed result the model should see.
    pub fn error(result: ToolResult) -> Self {
        Self {
            result,
            is_error: true,
        }
    }

    /// The concatenated text blocks of the result.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.result.content {
            if let keel_protocol::ContentBlock::Text { text } = block {
                out.push_str(text);
            }
        }
        out
    }
}

/// A tool the model can call.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn description(&self) -> &str;
    /// JSON Schema of the arguments object.
    fn parameters(&self) -> Value;
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name().to_owned(),
            description: self.description().to_owned(),
            parameters: self.parameters(),
        }
    }
    /// The one file this call would write, resolved to where it lands
    /// (`..`, `~` and every existing symlink followed, see
    /// [`physical_path`]). The loop asks before the approval gate judges
    /// the call, hands it to the gate, and puts it in
    /// [`ToolContext::write_target`], so what is judged is what is written.
    /// `None` (the default) for tools that write no single file.
    fn write_target(&self, cwd: &std::path::Path, args: &Value) -> Option<PathBuf> {
        let _ = (cwd, args);
        None
    }
    /// What the tool says about itself (an MCP tool's annotations, or a
    /// configured class), for the approval gate; `None` for keel's own
    /// tools, which the gate classes by name.
    fn hints(&self) -> Option<ToolHints> {
        None
    }

    /// Runs the tool. Bad arguments and failures the model should see are
    /// returned as `Ok` with `is_error: true` or as `Err`, which the caller
    /// turns into an error result with the error's message.
    async fn execute(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput>;
}
