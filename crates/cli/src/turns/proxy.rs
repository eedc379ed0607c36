//! Tools a worker's turn offers but the front-end that started it runs:
//! its host's tools and its MCP servers' (`TurnInput::tools`), and the
//! file tools' calls on its host's URIs (`TurnInput::host_schemes`).
//!
//! Owns [`FrontEndProxy`], the worker's stand-in for such a tool, and
//! [`forward_host_uris`], which sends a `read`/`write`/`edit` of a
//! `scheme://…` path the host serves the same way. The
//! worker's approval gate judges a call by the class the front-end gave;
//! a call that passes becomes a `tool_call` record in the session's event
//! log, after the call's `tool_execution_start`, and the proxy waits for
//! the front-end's `tool_result` record of the same call. An abort of the
//! run stops the wait (the front-end's run is aborted by the same
//! interrupt); a front-end that never answers ends the call with an error
//! after [`ANSWER_WAIT`]. It must not know how the front-end runs them.

use std::sync::Arc;
use std::time::Duration;

use keel_protocol::{ToolResult, ToolSpec};
use keel_session_store::EventLog;
use keel_temporal::{FrontEndTool, TurnInput};
use keel_tools::{Tool, ToolContext, ToolHints, ToolOutput};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{LogRecord, Logged};

/// How long a call waits for the front-end's answer: longer than a host
/// is given to answer a host tool (10 minutes), so the host's own timeout
/// speaks first.
pub const ANSWER_WAIT: Duration = Duration::from_secs(11 * 60);

/// A tool of the front-end, run there; see the module docs.
pub(super) struct FrontEndProxy {
    spec: ToolSpec,
    hints: ToolHints,
    log: EventLog,
    session_id: String,
    turn_id: String,
    log_from: u64,
    /// The try's records, appended after the events before them.
    records: mpsc::Sender<String>,
}

/// The proxies of `turn`'s front-end tools, leaving out names the worker
/// has tools of its own for.
pub(super) fn proxies(
    turn: &TurnInput,
    own: &[String],
    log: EventLog,
    records: &mpsc::Sender<String>,
) -> Vec<Arc<dyn Tool>> {
    turn.tools
        .iter()
        .filter(|t| !own.contains(&t.name))
        .map(|t| {
            Arc::new(FrontEndProxy {
                spec: ToolSpec {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    parameters: t.parameters.clone(),
                },
                hints: hints(t),
                log,
                session_id: turn.session_id.clone(),
                turn_id: turn.turn_id.clone(),
                log_from: turn.log_from,
                records: records.clone(),
            }) as Arc<dyn Tool>
        })
        .collect()
}

fn hints(tool: &FrontEndTool) -> ToolHints {
    ToolHints {
        read_only: tool.read_only,
        destructive: tool.destructive,
        open_world: tool.open_world,
        class: tool.class.clone(),
        server: tool.server.clone(),
    }
}

#[async_trait::async_trait]
impl Tool for FrontEndProxy {
    fn name(&self) -> &str {
        &self.spec.name
    }
    fn description(&self) -> &str {
        &self.spec.description
    }
    fn parameters(&self) -> Value {
        self.spec.parameters.clone()
    }
    fn hints(&self) -> Option<ToolHints> {
        Some(self.hints.clone())
    }

    async fn execute(&self, ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        // Follow before asking, so the answer cannot come in between.
        let mut answers = self.log.follow(&self.session_id, self.log_from);
        let ask = LogRecord::ToolCall {
            call_id: ctx.call_id.clone(),
            tool: self.spec.name.clone(),
            args,
        };
        let text =
            serde_json::to_string(&ask).map_err(|e| keel_tools::Error::Failed(e.to_string()))?;
        if self.records.send(text).await.is_err() {
            return Err(keel_tools::Error::Aborted);
        }
        let answered = async {
            while let Some(stored) = answers.recv().await {
                if stored.turn != self.turn_id {
                    continue;
                }
                if let Ok(Logged::Record(LogRecord::ToolResult {
                    call_id,
                    result,
                    is_error,
                })) = Logged::read(&stored.event)
                    && call_id == ctx.call_id
                {
                    return Some(ToolOutput { result, is_error });
                }
            }
            None
        };
        tokio::select! {
            () = ctx.cancel.cancelled() => Err(keel_tools::Error::Aborted),
            answer = tokio::time::timeout(ANSWER_WAIT, answered) => match answer {
                Ok(Some(out)) => Ok(out),
                Ok(None) => Err(keel_tools::Error::Failed("the session's event log stopped".to_owned())),
                Err(_) => Ok(ToolOutput::error(ToolResult::text(format!(
                    "The front-end that runs `{}` did not answer within {} minutes.",
                    self.spec.name,
                    ANSWER_WAIT.as_secs() / 60
                )))),
            },
        }
    }
}

/// `tools` with their `read`, `write` and `edit` sending a path of one of
/// the front-end host's URI schemes (`TurnInput::host_schemes`) to the
/// front-end, where the host serves it; every other path stays here.
pub(super) fn forward_host_uris(
    tools: Vec<Arc<dyn Tool>>,
    turn: &TurnInput,
    log: EventLog,
    records: &mpsc::Sender<String>,
) -> Vec<Arc<dyn Tool>> {
    if turn.host_schemes.is_empty() {
        return tools;
    }
    let schemes: Vec<String> = turn.host_schemes.iter().map(|s| s.scheme.clone()).collect();
    tools
        .into_iter()
        .map(|inner| {
            if !matches!(inner.name(), "read" | "write" | "edit") {
                return inner;
            }
            let proxy = FrontEndProxy {
                spec: inner.spec(),
                hints: ToolHints::default(),
                log,
                session_id: turn.session_id.clone(),
                turn_id: turn.turn_id.clone(),
                log_from: turn.log_from,
                records: records.clone(),
            };
            Arc::new(UriForward {
                inner,
                proxy,
                schemes: schemes.clone(),
            }) as Arc<dyn Tool>
        })
        .collect()
}

/// A file tool whose host-URI paths go to the front-end.
struct UriForward {
    inner: Arc<dyn Tool>,
    proxy: FrontEndProxy,
    schemes: Vec<String>,
}

impl UriForward {
    fn hosted(&self, args: &Value) -> bool {
        args.get("path")
            .and_then(Value::as_str)
            .and_then(keel_tools::host::uri_scheme)
            .is_some_and(|s| self.schemes.contains(&s))
    }
}

#[async_trait::async_trait]
impl Tool for UriForward {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> Value {
        self.inner.parameters()
    }
    fn hints(&self) -> Option<ToolHints> {
        self.inner.hints()
    }
    /// No file here for a host's URI (as in the front-end).
    fn write_target(&self, cwd: &std::path::Path, args: &Value) -> Option<std::path::PathBuf> {
        if self.hosted(args) {
            return None;
        }
        self.inner.write_target(cwd, args)
    }
    async fn execute(&self, ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        if self.hosted(&args) {
            self.proxy.execute(ctx, args).await
        } else {
            self.inner.execute(ctx, args).await
        }
    }
}
