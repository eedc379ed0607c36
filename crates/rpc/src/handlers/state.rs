//! `get_state`, `get_messages`, `get_last_assistant_text`,
//! `get_session_stats`, `set_todos`.
//!
//! Owns the shapes of those payloads; the numbers (context usage, counts,
//! tokens, cost) come from the core session.

use keel_protocol::{InterruptMode, Op, QueueMode, ThinkingLevel, TodoPhase, TodoStatus, ToolSpec};
use serde::Serialize;
use serde_json::{Value, json};

use crate::command::{GetStateArgs, Include, SetTodosArgs};
use crate::server::Server;
use crate::ui::Notice;
use crate::wire_errors::{self, WireError};

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct State {
    model: Option<Value>,
    thinking_level: ThinkingLevel,
    is_streaming: bool,
    is_compacting: bool,
    steering_mode: QueueMode,
    follow_up_mode: QueueMode,
    interrupt_mode: InterruptMode,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_file: Option<String>,
    session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_name: Option<String>,
    auto_compaction_enabled: bool,
    /// keel's addition: whether failed model calls are retried.
    auto_retry_enabled: bool,
    message_count: usize,
    queued_message_count: usize,
    /// pi's name for `queuedMessageCount` (same value), for pi's clients.
    pending_message_count: usize,
    todo_phases: Vec<TodoPhase>,
    /// keel's addition: the sandbox policy the session's commands run
    /// under (`null`: no sandbox).
    sandbox: Option<keel_protocol::SandboxPolicy>,
    /// keel's addition: the MCP servers and their tools (absent when none
    /// is configured).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    mcp_servers: Vec<Value>,
    context_usage: Option<keel_core::ContextUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_prompt: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dump_tools: Option<Vec<ToolSpec>>,
}

impl Server {
    pub(super) fn get_state(&self, args: &GetStateArgs) -> Result<Option<Value>, WireError> {
        let snap = self.handle().snapshot();
        let wants = |i: &[Include]| args.include.iter().any(|x| i.contains(x));
        let state = State {
            model: self.model.as_ref().map(super::settings::model_wire),
            thinking_level: snap.thinking_level,
            is_streaming: snap.is_streaming,
            is_compacting: snap.is_compacting,
            steering_mode: snap.steering_mode,
            follow_up_mode: snap.follow_up_mode,
            interrupt_mode: snap.interrupt_mode,
            session_file: snap.session_file.as_ref().map(|p| p.display().to_string()),
            session_id: snap.session_id.clone(),
            session_name: snap.session_name.clone(),
            auto_compaction_enabled: snap.auto_compaction_enabled,
            auto_retry_enabled: snap.auto_retry_enabled,
            message_count: snap.message_count,
            queued_message_count: snap.queued_message_count,
            pending_message_count: snap.queued_message_count,
            todo_phases: snap.todos.clone(),
            sandbox: snap.sandbox.clone(),
            mcp_servers: self.factory.mcp_servers(),
            context_usage: self.model.as_ref().map(|_| self.handle().context_usage()),
            system_prompt: wants(&[Include::SystemPrompt])
                .then(|| vec![self.handle().system_prompt()]),
            dump_tools: wants(&[Include::Tools, Include::DumpTools])
                .then(|| self.handle().tool_specs()),
        };
        Ok(Some(to_value(&state)))
    }

    pub(super) fn get_messages(&self) -> Result<Option<Value>, WireError> {
        Ok(Some(json!({"messages": self.handle().messages()})))
    }

    pub(super) fn get_last_assistant_text(&self) -> Result<Option<Value>, WireError> {
        Ok(Some(json!({"text": self.handle().last_assistant_text()})))
    }

    pub(super) fn get_session_stats(&self) -> Result<Option<Value>, WireError> {
        let snap = self.handle().snapshot();
        let st = self.handle().stats();
        let mut stats = json!({
            "sessionId": snap.session_id,
            "userMessages": st.user_messages,
            "assistantMessages": st.assistant_messages,
            "toolCalls": st.tool_calls,
            "toolResults": st.tool_results,
            "totalMessages": st.total_messages,
            "tokens": st.tokens,
            "cost": st.cost,
            "compactions": st.compactions,
            "contextMessages": st.context_messages,
        });
        if let Some(file) = &snap.session_file {
            stats["sessionFile"] = json!(file.display().to_string());
        }
        if self.model.is_some() {
            stats["contextUsage"] = to_value(&st.context_usage);
        }
        Ok(Some(stats))
    }

    pub(super) async fn set_todos(&self, args: SetTodosArgs) -> Result<Option<Value>, WireError> {
        let phases = normalize_todos(args.phases)?;
        self.handle()
            .submit(Op::SetTodos {
                phases: phases.clone(),
            })
            .await
            .map_err(|e| wire_errors::from_core(&e))?;
        self.brokers
            .ui
            .notice(Notice::SetWidget, todo_widget(&phases))
            .await;
        Ok(Some(json!({"todoPhases": phases})))
    }
}

/// `setWidget` fields showing the todo list (`[x]` done, `[~]` in
/// progress, `[ ]` pending, `[-]` cancelled).
fn todo_widget(phases: &[TodoPhase]) -> serde_json::Map<String, Value> {
    let mut lines = Vec::new();
    for phase in phases {
        lines.push(phase.name.clone());
        for task in &phase.tasks {
            let mark = match task.status {
                TodoStatus::Completed => "[x]",
                TodoStatus::InProgress => "[~]",
                TodoStatus::Pending => "[ ]",
                TodoStatus::Cancelled => "[-]",
            };
            lines.push(format!("{mark} {}", task.content));
        }
    }
    let mut fields = serde_json::Map::new();
    fields.insert("widgetKey".to_owned(), json!("todos"));
    fields.insert("widgetLines".to_owned(), json!(lines));
    fields
}

fn to_value<T: Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Trims names and contents, names unnamed phases `Todos`, numbers missing
/// ids (`phase-N`, `task-N`); an empty task is refused.
fn normalize_todos(phases: Vec<TodoPhase>) -> Result<Vec<TodoPhase>, WireError> {
    let mut task_n = 0usize;
    phases
        .into_iter()
        .enumerate()
        .map(|(i, mut phase)| {
            phase.name = match phase.name.trim() {
                "" => "Todos".to_owned(),
                n => n.to_owned(),
            };
            if phase.id.as_deref().is_none_or(|s| s.trim().is_empty()) {
                phase.id = Some(format!("phase-{}", i + 1));
            }
            for task in &mut phase.tasks {
                task_n += 1;
                task.content = task.content.trim().to_owned();
                if task.content.is_empty() {
                    return Err(wire_errors::todos_invalid(&format!(
                        "task {task_n} of phase {:?} has no content",
                        phase.name
                    )));
                }
                if task.id.as_deref().is_none_or(|s| s.trim().is_empty()) {
                    task.id = Some(format!("task-{task_n}"));
                }
            }
            Ok(phase)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_protocol::TodoTask;

    #[test]
    fn todos_are_normalised() {
        let phases = vec![TodoPhase {
            id: None,
            name: " ".into(),
            tasks: vec![TodoTask {
                id: None,
                content: " Map ".into(),
                status: TodoStatus::InProgress,
            }],
        }];
        let got = normalize_todos(phases).unwrap();
        assert_eq!(
            serde_json::to_value(&got).unwrap(),
            json!([{"id":"phase-1","name":"Todos","tasks":[
                {"id":"task-1","content":"Map","status":"in_progress"}]}])
        );
        let bad = vec![TodoPhase {
            id: None,
            name: "P".into(),
            tasks: vec![TodoTask {
                id: None,
                content: "".into(),
                status: TodoStatus::Pending,
            }],
        }];
        assert!(normalize_todos(bad).is_err());
    }
}
