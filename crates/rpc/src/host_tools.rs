//! The host tool sub-protocol.
//!
//! Owns the host's tool set (`set_host_tools` replaces it; the tools reach
//! the model on its next call) and the broker behind them: a run of a host
//! tool writes `host_tool_call`, forwards `host_tool_update` frames as
//! partial results, and ends with the matching `host_tool_result` (with
//! `isError` making it an error result). An abort or the timeout writes
//! `host_tool_cancel`; the end of input fails every pending call. Replies
//! with unknown ids are ignored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use keel_protocol::{ToolResult, ToolSpec};
use keel_tools::host::{HostTool, HostToolRunner};
use keel_tools::{Tool, ToolContext, ToolOutput};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::HOST_REPLY_CAPACITY;
use crate::command::{HostResult, HostToolDef, HostToolResult, HostToolUpdate};
use crate::frames::{Cancel, HostToolCall, Out};
use crate::wire_errors::{self, WireError, tool_text};

/// Names the built-in tools use; a host tool may not shadow them.
const RESERVED: &[&str] = &["read", "bash", "edit", "write", "grep", "find", "ls"];

enum HostMsg {
    Update(HostResult),
    Done(HostToolResult),
    Gone,
}

#[derive(Default)]
struct Inner {
    specs: Vec<ToolSpec>,
    pending: HashMap<String, mpsc::Sender<HostMsg>>,
    next_id: u64,
    closed: bool,
}

/// The host's tools and their pending calls.
pub(crate) struct HostTools {
    out: Out,
    timeout: Duration,
    inner: Mutex<Inner>,
}

fn to_result(r: HostResult) -> ToolResult {
    ToolResult {
        content: r.content,
        details: r.details,
    }
}

impl HostTools {
    pub fn new(out: Out, timeout: Duration) -> Self {
        Self {
            out,
            timeout,
            inner: Mutex::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `base` followed by the host's tools.
    pub fn tools_with(self: &Arc<Self>, base: &[Arc<dyn Tool>]) -> Vec<Arc<dyn Tool>> {
        let runner: Arc<dyn HostToolRunner> = self.clone();
        let mut tools = base.to_vec();
        tools.extend(
            self.lock()
                .specs
                .iter()
                .map(|spec| Arc::new(HostTool::new(spec.clone(), runner.clone())) as Arc<dyn Tool>),
        );
        tools
    }

    pub(crate) fn set(&self, specs: Vec<ToolSpec>) {
        self.lock().specs = specs;
    }

    /// A host's progress report.
    pub async fn update(&self, update: HostToolUpdate) {
        let tx = self.lock().pending.get(&update.id).cloned();
        match tx {
            Some(tx) => {
                let _ = tx.try_send(HostMsg::Update(update.partial_result));
            }
            None => tracing::debug!(id = %update.id, "host_tool_update for no pending call"),
        }
    }

    /// A host's final answer.
    pub async fn result(&self, result: HostToolResult) {
        let tx = self.lock().pending.remove(&result.id);
        match tx {
            Some(tx) => {
                let _ = tx.send(HostMsg::Done(result)).await;
            }
            None => tracing::debug!(id = %result.id, "host_tool_result for no pending call"),
        }
    }

    /// The host is gone: fail every pending call and refuse new ones.
    pub async fn close(&self) {
        let pending: Vec<_> = {
            let mut inner = self.lock();
            inner.closed = true;
            inner.pending.drain().map(|(_, tx)| tx).collect()
        };
        for tx in pending {
            let _ = tx.send(HostMsg::Gone).await;
        }
    }

    fn register(&self) -> Option<(String, u64, mpsc::Receiver<HostMsg>)> {
        let mut inner = self.lock();
        if inner.closed {
            return None;
        }
        inner.next_id += 1;
        let n = inner.next_id;
        let id = format!("host_{n}");
        let (tx, rx) = mpsc::channel(HOST_REPLY_CAPACITY);
        inner.pending.insert(id.clone(), tx);
        Some((id, n, rx))
    }

    async fn cancel(&self, id: &str, n: u64) {
        self.lock().pending.remove(id);
        self.out
            .send(&Cancel {
                kind: "host_tool_cancel",
                id: &format!("host_cancel_{n}"),
                target_id: id,
            })
            .await;
    }
}

#[async_trait::async_trait]
impl HostToolRunner for HostTools {
    async fn run(
        &self,
        tool: &str,
        ctx: &ToolContext,
        args: Value,
    ) -> keel_tools::Result<ToolOutput> {
        let Some((id, n, mut rx)) = self.register() else {
            return Err(keel_tools::Error::Failed(tool_text::host_gone()));
        };
        self.out
            .send(&HostToolCall {
                kind: "host_tool_call",
                id: &id,
                tool_call_id: &ctx.call_id,
                tool_name: tool,
                arguments: &args,
            })
            .await;
        let deadline = tokio::time::sleep(self.timeout);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                _ = ctx.cancel.cancelled() => {
                    self.cancel(&id, n).await;
                    return Err(keel_tools::Error::Aborted);
                }
                _ = &mut deadline => {
                    self.cancel(&id, n).await;
                    return Err(keel_tools::Error::Failed(tool_text::host_timeout(
                        &format!("the {tool} call"),
                        self.timeout.as_secs_f64(),
                    )));
                }
                msg = rx.recv() => match msg {
                    Some(HostMsg::Update(partial)) => (ctx.updates)(to_result(partial)),
                    Some(HostMsg::Done(done)) => {
                        let result = to_result(done.result);
                        return Ok(if done.is_error {
                            ToolOutput::error(result)
                        } else {
                            ToolOutput::success(result)
                        });
                    }
                    Some(HostMsg::Gone) | None => {
                        return Err(keel_tools::Error::Failed(tool_text::host_gone()));
                    }
                },
            }
        }
    }
}

pub(crate) fn validate(defs: Vec<HostToolDef>) -> Result<Vec<ToolSpec>, WireError> {
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(defs.len());
    for def in defs {
        let name = def.name.trim();
        let valid_name = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(wire_errors::host_tool_invalid(&format!(
                "name {name:?} must be 1-64 characters of letters, digits, '_' or '-'"
            )));
        }
        if RESERVED.contains(&name) {
            return Err(wire_errors::host_tool_invalid(&format!(
                "{name} is a built-in tool"
            )));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(wire_errors::host_tool_invalid(&format!(
                "{name} is declared twice"
            )));
        }
        let parameters = match def.parameters {
            None | Some(Value::Null) => json!({"type": "object", "properties": {}}),
            Some(p @ Value::Object(_)) => p,
            Some(_) => {
                return Err(wire_errors::host_tool_invalid(&format!(
                    "{name}: parameters must be a JSON Schema object"
                )));
            }
        };
        let description = match (def.description.trim(), def.label.as_deref()) {
            ("", Some(label)) => label.to_owned(),
            ("", None) => format!("Host tool {name}"),
            (d, _) => d.to_owned(),
        };
        specs.push(ToolSpec {
            name: name.to_owned(),
            description,
            parameters,
        });
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(name: &str) -> HostToolDef {
        HostToolDef {
            name: name.into(),
            label: None,
            description: String::new(),
            parameters: None,
            approval_class: None,
            annotations: None,
        }
    }

    #[test]
    fn validation() {
        let specs = validate(vec![def("echo_host")]).unwrap();
        assert_eq!(specs[0].description, "Host tool echo_host");
        assert_eq!(specs[0].parameters["type"], "object");
        assert!(validate(vec![def("bash")]).is_err());
        assert!(validate(vec![def("a b")]).is_err());
        assert!(validate(vec![def("x"), def("x")]).is_err());
        let mut bad = def("y");
        bad.parameters = Some(json!([1]));
        assert!(validate(vec![bad]).is_err());
    }
}
