//! `get_state`, `get_messages`, `get_last_assistant_text`,
//! `get_session_stats`, `set_todos`.
//!
//! Owns the shapes of those payloads and the context-usage estimate (the
//! last answered call's reported tokens, plus about one token per four
//! characters of what came after it).

use keel_protocol::{
    ContentBlock, InterruptMode, Message, Op, QueueMode, StopReason, ThinkingLevel, TodoPhase,
    TodoStatus, ToolSpec,
};
use serde::Serialize;
use serde_json::{Value, json};

use crate::command::{GetStateArgs, Include, SetTodosArgs};
use crate::server::Server;
use crate::ui::Notice;
use crate::wire_errors::{self, WireError};

/// `contextUsage`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ContextUsage {
    pub tokens: u64,
    pub context_window: u64,
    pub percent: f64,
}

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
    todo_phases: Vec<TodoPhase>,
    context_usage: Option<ContextUsage>,
    #[serde(skip_serializing_if = "Option::is_none")]
    system_prompt: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dump_tools: Option<Vec<ToolSpec>>,
}

/// Rough tokens of a message's text (four characters a token).
fn estimate_tokens(message: &Message) -> u64 {
    let blocks: &[ContentBlock] = match message {
        Message::User(m) => &m.content,
        Message::Assistant(m) => &m.content,
        Message::ToolResult(m) => &m.content,
    };
    let chars: usize = blocks
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            ContentBlock::Thinking { thinking, .. } => thinking.len(),
            ContentBlock::Image { .. } => 4 * 1200,
            ContentBlock::ToolCall {
                name, arguments, ..
            } => name.len() + arguments.to_string().len(),
        })
        .sum();
    chars.div_ceil(4) as u64
}

/// The context-usage estimate of `messages` in a window of `window` tokens.
pub(crate) fn context_usage(messages: &[Message], window: u64) -> ContextUsage {
    let last_answered = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| match m {
            Message::Assistant(a)
                if a.usage.total_tokens > 0
                    && !matches!(a.stop_reason, StopReason::Error | StopReason::Aborted) =>
            {
                Some((i, a.usage))
            }
            _ => None,
        });
    let (base, rest) = match last_answered {
        Some((i, u)) => (
            u.input + u.output + u.cache_read + u.cache_write,
            &messages[i + 1..],
        ),
        None => (0, messages),
    };
    let tokens = base + rest.iter().map(estimate_tokens).sum::<u64>();
    let percent = if window == 0 {
        0.0
    } else {
        tokens as f64 * 100.0 / window as f64
    };
    ContextUsage {
        tokens,
        context_window: window,
        percent,
    }
}

impl Server {
    pub(super) fn get_state(&self, args: &GetStateArgs) -> Result<Option<Value>, WireError> {
        let snap = self.handle().snapshot();
        let messages = self.handle().messages();
        let wants = |i: &[Include]| args.include.iter().any(|x| i.contains(x));
        let state = State {
            model: self.model.as_ref().map(super::settings::model_wire),
            thinking_level: snap.thinking_level,
            is_streaming: snap.is_streaming,
            is_compacting: false,
            steering_mode: snap.steering_mode,
            follow_up_mode: snap.follow_up_mode,
            interrupt_mode: snap.interrupt_mode,
            session_file: snap.session_file.as_ref().map(|p| p.display().to_string()),
            session_id: snap.session_id.clone(),
            session_name: snap.session_name.clone(),
            auto_compaction_enabled: false,
            auto_retry_enabled: snap.auto_retry_enabled,
            message_count: snap.message_count,
            queued_message_count: snap.queued_message_count,
            todo_phases: snap.todos.clone(),
            context_usage: self
                .model
                .as_ref()
                .map(|m| context_usage(&messages, m.info.context_window)),
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
        let messages = self.handle().messages();
        let (mut user, mut assistant, mut calls, mut results) = (0, 0, 0, 0);
        let mut usage = keel_protocol::Usage::default();
        for m in &messages {
            match m {
                Message::User(_) => user += 1,
                Message::Assistant(a) => {
                    assistant += 1;
                    calls += a.tool_calls().len();
                    usage.accumulate(&a.usage);
                }
                Message::ToolResult(_) => results += 1,
            }
        }
        let mut stats = json!({
            "sessionId": snap.session_id,
            "userMessages": user,
            "assistantMessages": assistant,
            "toolCalls": calls,
            "toolResults": results,
            "totalMessages": messages.len(),
            "tokens": {
                "input": usage.input,
                "output": usage.output,
                "cacheRead": usage.cache_read,
                "cacheWrite": usage.cache_write,
                "total": usage.input + usage.output + usage.cache_read + usage.cache_write,
            },
            "cost": usage.cost.total,
        });
        if let Some(file) = &snap.session_file {
            stats["sessionFile"] = json!(file.display().to_string());
        }
        if let Some(m) = &self.model {
            stats["contextUsage"] = to_value(&context_usage(&messages, m.info.context_window));
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
    use keel_protocol::{AssistantMessage, TodoTask, Usage, UserMessage};

    #[test]
    fn usage_counts_reported_tokens_then_estimates() {
        let user = |t: &str| {
            Message::User(UserMessage {
                content: vec![ContentBlock::text(t)],
                timestamp: 0,
            })
        };
        let answered = Message::Assistant(AssistantMessage {
            content: vec![ContentBlock::text("ok")],
            api: "a".into(),
            provider: "p".into(),
            model: "m".into(),
            usage: Usage {
                input: 600,
                output: 10,
                total_tokens: 610,
                ..Usage::default()
            },
            stop_reason: StopReason::Stop,
            error_message: None,
            error_kind: None,
            timestamp: 0,
            response_id: None,
        });
        let u = context_usage(&[user("hello"), answered, user("12345678")], 1000);
        assert_eq!(u.tokens, 612);
        assert!((u.percent - 61.2).abs() < 1e-9);
        assert_eq!(context_usage(&[], 0).percent, 0.0);
    }

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
