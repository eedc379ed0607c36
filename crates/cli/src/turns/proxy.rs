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
//! the front-end's `tool_result` record of the same call. While the
//! front-end runs the call it says so every [`RUNNING_BEAT`]
//! (`tool_running`); a front-end not heard from for [`SILENCE`] while the
//! log can be read has gone away (killed, its machine lost), and the call
//! ends with an error that says it may or may not have happened. While
//! the log cannot be read (the database is away) the wait goes on, and
//! the front-end gets a whole [`SILENCE`] once it is back. An abort of
//! the run stops the wait (the front-end's run is aborted by the same
//! interrupt). It must not know how the front-end runs them.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use keel_protocol::{ToolResult, ToolSpec};
use keel_session_store::EventLog;
use keel_temporal::{FrontEndTool, TurnInput};
use keel_tools::{Tool, ToolContext, ToolHints, ToolOutput};
use serde_json::Value;
use tokio::sync::mpsc;

use super::{LogRecord, Logged};

/// How often a front-end running a call for a worker says so.
pub const RUNNING_BEAT: Duration = Duration::from_secs(2);

/// How long a worker's call waits without a word from the front-end
/// before it takes the front-end for gone: five beats.
pub const SILENCE: Duration = Duration::from_secs(10);

/// How a wait for the front-end's answer ended.
enum Answer {
    Given(ToolOutput),
    /// The front-end said nothing for [`SILENCE`] though the log could
    /// be read.
    Gone,
    /// The log's follower ended.
    Stopped,
}

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

/// How long a look at the event log may take before it counts as out of
/// reach.
const LOOK: Duration = Duration::from_secs(2);

impl FrontEndProxy {
    /// Whether the session's event log cannot be read from here now.
    async fn log_unreachable(&self) -> bool {
        let look = tokio::time::timeout(LOOK, self.log.last_seq(&self.session_id)).await;
        let unreachable = !matches!(look, Ok(Ok(_)));
        if unreachable {
            tracing::warn!(session = %self.session_id, "the event log cannot be reached; waiting for the front-end's answer until it can");
        }
        unreachable
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
            let mut heard = Instant::now();
            loop {
                let next = tokio::time::timeout_at(heard + SILENCE, answers.recv()).await;
                let Ok(next) = next else {
                    // Silence means something only when the log could
                    // have carried a word: while this side cannot reach
                    // it, nor perhaps can the front-end.
                    if self.log_unreachable().await {
                        heard = Instant::now();
                        continue;
                    }
                    return Answer::Gone;
                };
                let Some(stored) = next else {
                    return Answer::Stopped;
                };
                if stored.turn != self.turn_id {
                    continue;
                }
                match Logged::read(&stored.event) {
                    Ok(Logged::Record(LogRecord::ToolResult {
                        call_id,
                        result,
                        is_error,
                    })) if call_id == ctx.call_id => {
                        return Answer::Given(ToolOutput { result, is_error });
                    }
                    Ok(Logged::Record(LogRecord::ToolRunning { call_id }))
                        if call_id == ctx.call_id =>
                    {
                        heard = Instant::now();
                    }
                    _ => {}
                }
            }
        };
        tokio::select! {
            () = ctx.cancel.cancelled() => Err(keel_tools::Error::Aborted),
            answer = answered => match answer {
                Answer::Given(out) => Ok(out),
                Answer::Stopped => Err(keel_tools::Error::Failed("the session's event log stopped".to_owned())),
                Answer::Gone => {
                    tracing::warn!(tool = %self.spec.name, call = %ctx.call_id, "the front-end running the call went away");
                    Ok(ToolOutput::error(ToolResult::text(format!(
                        "The front-end that runs `{}` went away before it answered (nothing heard from it for {} s): the call may or may not have happened.",
                        self.spec.name,
                        SILENCE.as_secs()
                    ))))
                }
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
        keel_tools::host::path_scheme(args).is_some_and(|s| self.schemes.contains(&s))
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
