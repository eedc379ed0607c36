//! Assembling a session: the one place that decides what a session is made
//! of when a front-end opens one.
//!
//! Owns [`SessionBuilder`]: from a workspace, keel's home, a model and its
//! provider, and an approval gate, it builds a [`Session`] with keel's
//! built-in tools over the local file system and a process runner confined
//! by the sandbox (`workspace-write` without network unless
//! [`SessionBuilder::sandbox`] says otherwise; keel's home read-only), the
//! workspace's project instructions ([`PROJECT_INSTRUCTION_FILES`]), the
//! scratch folder under keel's home, and the session file's writer as its
//! log. `keel exec`, RPC mode and the app-server all open sessions through
//! it; what differs between them (extra tools, developer instructions, a
//! resumed tree) is a builder call, not a copy. It must not know the wire,
//! configuration files or where models come from.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_llm::Provider;
use keel_protocol::SandboxPolicy;
use keel_protocol::{Message, ThinkingLevel};
use keel_sandbox::Sandbox;
use keel_session_store::{SessionTree, SessionWriter};
use keel_tools::{FileSystem, LocalFileSystem, LocalProcessRunner, ProcessRunner, Tool};

use crate::compaction::CompactionSettings;
use crate::config::{ModelInfo, SessionConfig};
use crate::deps::{ApprovalGate, NullLog, SessionLog, SystemClock};
use crate::retry::RetryPolicy;
use crate::session::Session;
use crate::state::SessionDeps;

/// The files read as project instructions, first found wins.
pub const PROJECT_INSTRUCTION_FILES: &[&str] = &["AGENTS.md", "CLAUDE.md"];

/// The workspace's project instructions ([`PROJECT_INSTRUCTION_FILES`]).
pub fn project_instructions(cwd: &Path) -> Option<String> {
    PROJECT_INSTRUCTION_FILES
        .iter()
        .find_map(|name| std::fs::read_to_string(cwd.join(name)).ok())
}

/// Where tools save the full output of what they truncated.
pub fn scratch_dir(home: &Path) -> PathBuf {
    home.join("tool-output")
}

/// Builds a [`Session`] (see the module docs).
pub struct SessionBuilder {
    config: SessionConfig,
    provider: Arc<dyn Provider>,
    tools: Vec<Arc<dyn Tool>>,
    fs: Arc<dyn FileSystem>,
    process: Arc<dyn ProcessRunner>,
    gate: Arc<dyn ApprovalGate>,
    log: Arc<dyn SessionLog>,
    developer_instructions: Option<String>,
    sandbox: Arc<Sandbox>,
    home: PathBuf,
    elsewhere: Option<Arc<dyn crate::elsewhere::RunsElsewhere>>,
    fence: Option<Arc<dyn crate::deps::RunFence>>,
    asker: Option<Arc<dyn keel_tools::Asker>>,
}

impl SessionBuilder {
    /// A session `id` in workspace `cwd` on `model` through `provider`,
    /// every tool call passing `gate`; in memory until [`Self::writer`].
    pub fn new(
        id: impl Into<String>,
        cwd: &Path,
        home: &Path,
        model: ModelInfo,
        provider: Arc<dyn Provider>,
        gate: Arc<dyn ApprovalGate>,
    ) -> Self {
        let mut config = SessionConfig::new(id, cwd, model);
        config.scratch_dir = scratch_dir(home);
        config.sandbox = Some(SandboxPolicy::default());
        let sandbox = Arc::new(Sandbox::new(vec![home.to_path_buf()]));
        Self {
            config,
            provider,
            tools: keel_tools::builtin_tools(),
            fs: Arc::new(LocalFileSystem),
            process: Arc::new(LocalProcessRunner::confined(sandbox.clone())),
            gate,
            log: Arc::new(NullLog),
            developer_instructions: None,
            sandbox,
            home: home.to_path_buf(),
            elsewhere: None,
            fence: None,
            asker: None,
        }
    }

    /// The sandbox policy the session's commands run under;
    /// `allow_unconfined` lets them run without walls on a kernel that
    /// cannot confine them (instead of refusing to run them).
    pub fn sandbox(mut self, policy: SandboxPolicy, allow_unconfined: bool) -> Self {
        let sandbox =
            Arc::new(Sandbox::new(vec![self.home.clone()]).allow_unconfined(allow_unconfined));
        self.process = Arc::new(LocalProcessRunner::confined(sandbox.clone()));
        self.sandbox = sandbox;
        self.config.sandbox = Some(policy);
        self
    }

    /// Persists the session through `writer` (its file and its log).
    pub fn writer(mut self, writer: Option<&SessionWriter>) -> Self {
        if let Some(w) = writer {
            self.config.session_file = Some(w.path().to_path_buf());
            self.log = Arc::new(w.clone());
        }
        self
    }

    /// Resumes from a session file's messages and entry tree.
    pub fn history(mut self, messages: Vec<Message>, tree: Option<SessionTree>) -> Self {
        self.config.initial_messages = messages;
        self.config.history = tree;
        self
    }

    /// Adds a tool beside the built-ins.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds tools beside the built-ins.
    pub fn tools(mut self, tools: Vec<Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Instructions from the host, after the project's own.
    pub fn developer_instructions(mut self, text: Option<&str>) -> Self {
        self.developer_instructions = text.map(str::to_owned);
        self
    }

    /// Replaces keel's system prompt.
    pub fn system_prompt(mut self, prompt: Option<String>) -> Self {
        self.config.system_prompt = prompt;
        self
    }

    pub fn thinking(mut self, level: ThinkingLevel) -> Self {
        self.config.thinking_level = level;
        self
    }

    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.config.retry = retry;
        self
    }

    /// Runs this session's runs elsewhere (a worker of a cluster) instead
    /// of here; see `crate::elsewhere`.
    pub fn runs_elsewhere(
        mut self,
        elsewhere: Option<Arc<dyn crate::elsewhere::RunsElsewhere>>,
    ) -> Self {
        self.elsewhere = elsewhere;
        self
    }

    /// Asks `fence` before each call that passed the gate runs (see
    /// [`crate::RunFence`]).
    pub fn fence(mut self, fence: Option<Arc<dyn crate::deps::RunFence>>) -> Self {
        self.fence = fence;
        self
    }

    /// Puts the questions of the session's running tools (an MCP server's
    /// elicitation) to `asker`: the person behind the front end.
    pub fn asker(mut self, asker: Option<Arc<dyn keel_tools::Asker>>) -> Self {
        self.asker = asker;
        self
    }

    /// Syncs a turn's new user messages before the model call (see
    /// [`SessionConfig::sync_prompts`]).
    pub fn sync_prompts(mut self, sync: bool) -> Self {
        self.config.sync_prompts = sync;
        self
    }

    /// The last place in the session's shared event log its host has seen
    /// ([`SessionConfig::log_seen`]).
    pub fn log_seen(mut self, seen: Option<u64>) -> Self {
        self.config.log_seen = seen;
        self
    }

    /// The schema of the runs' final answers ([`SessionConfig::output_schema`]).
    pub fn output_schema(mut self, schema: Option<serde_json::Value>) -> Self {
        self.config.output_schema = schema;
        self
    }

    pub fn compaction(mut self, compaction: CompactionSettings) -> Self {
        self.config.compaction = compaction;
        self
    }

    /// Spawns the session task.
    pub fn spawn(self) -> Session {
        let mut config = self.config;
        let project = project_instructions(&config.cwd);
        config.project_context = match (project, self.developer_instructions) {
            (Some(p), Some(d)) => Some(format!("{p}\n\n{d}")),
            (p, d) => p.or(d),
        };
        let deps = SessionDeps {
            provider: self.provider,
            tools: self.tools,
            fs: self.fs,
            process: self.process,
            gate: self.gate,
            clock: Arc::new(SystemClock),
            log: self.log,
            sandbox: Some(self.sandbox),
            elsewhere: self.elsewhere,
            fence: self.fence,
            asker: self.asker,
        };
        Session::spawn(config, deps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn project_instructions_prefer_agents_md() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(project_instructions(dir.path()), None);
        std::fs::write(dir.path().join("CLAUDE.md"), "claude").unwrap();
        assert_eq!(project_instructions(dir.path()).as_deref(), Some("claude"));
        std::fs::write(dir.path().join("AGENTS.md"), "agents").unwrap();
        assert_eq!(project_instructions(dir.path()).as_deref(), Some("agents"));
    }
}
