//! What the session's todo list does when the agent is about to stop.
//!
//! Owns the [`TodoPolicy`] and the decision taken, under the session lock,
//! when a run would end normally (no error, no abort, no queued message):
//!
//! * unfinished tasks (pending or in progress) and reminders left: a
//!   `todo_reminder` event, then a user message listing the tasks, and the
//!   run goes on with another turn;
//! * a non-empty list whose tasks are all completed or cancelled: the list
//!   is emptied and `todo_auto_clear` announced;
//! * otherwise the run stops.
//!
//! Reminders are counted per run. The policy starts off: a front end that
//! wants reminders (RPC mode) turns them on with
//! [`SessionHandle::set_todo_policy`](crate::SessionHandle::set_todo_policy).
//! It does not know how todos are set, nor how events reach a host.

use keel_protocol::{AgentEvent, TodoPhase, TodoStatus, TodoTask, UserInput};

pub use crate::config::{DEFAULT_TODO_REMINDERS, TodoPolicy};
use crate::ctx::RunCtx;
use crate::state::Shared;

/// What happens instead of stopping.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AtStop {
    /// Stop as usual.
    Stop,
    /// Send reminder `attempt` about `todos` and run another turn.
    Remind {
        todos: Vec<TodoTask>,
        attempt: u32,
        max_attempts: u32,
    },
    /// The finished list was emptied; stop.
    Cleared,
}

impl AtStop {
    /// Whether the run goes on.
    pub fn continues(&self) -> bool {
        matches!(self, AtStop::Remind { .. })
    }
}

/// Decides, under the session lock, what a run about to stop does; counts
/// the reminder in `reminded` and clears a finished list.
pub(crate) fn at_stop(s: &mut Shared, reminded: &mut u32) -> AtStop {
    let policy = s.todo_policy;
    let unfinished = unfinished(&s.todos);
    if !unfinished.is_empty() {
        if *reminded >= policy.max_reminders {
            return AtStop::Stop;
        }
        *reminded += 1;
        return AtStop::Remind {
            todos: unfinished,
            attempt: *reminded,
            max_attempts: policy.max_reminders,
        };
    }
    let has_tasks = s.todos.iter().any(|p| !p.tasks.is_empty());
    if policy.auto_clear && has_tasks {
        s.todos.clear();
        return AtStop::Cleared;
    }
    AtStop::Stop
}

/// Announces the decision; for a reminder, returns the message that starts
/// the next turn.
pub(crate) async fn announce(ctx: &RunCtx, step: AtStop) -> Option<UserInput> {
    match step {
        AtStop::Stop => None,
        AtStop::Cleared => {
            ctx.emit(AgentEvent::TodoAutoClear).await;
            None
        }
        AtStop::Remind {
            todos,
            attempt,
            max_attempts,
        } => {
            let text = reminder_text(&todos, attempt, max_attempts);
            ctx.emit(AgentEvent::TodoReminder {
                todos,
                attempt,
                max_attempts,
            })
            .await;
            Some(UserInput::text(text))
        }
    }
}

/// The pending and in-progress tasks of every phase, in order.
fn unfinished(phases: &[TodoPhase]) -> Vec<TodoTask> {
    phases
        .iter()
        .flat_map(|p| p.tasks.iter())
        .filter(|t| matches!(t.status, TodoStatus::Pending | TodoStatus::InProgress))
        .cloned()
        .collect()
}

/// The reminder the model reads.
fn reminder_text(todos: &[TodoTask], attempt: u32, max_attempts: u32) -> String {
    let mut text = format!(
        "<system-reminder>\nYou are about to stop, but the todo list still has {} unfinished \
         task(s) (reminder {attempt} of {max_attempts}):\n",
        todos.len()
    );
    for task in todos {
        let status = match task.status {
            TodoStatus::InProgress => "in progress",
            TodoStatus::Pending | TodoStatus::Completed | TodoStatus::Cancelled => "pending",
        };
        text.push_str(&format!("- [{status}] {}\n", task.content));
    }
    text.push_str(
        "Continue with them. If a task cannot be done, say why in your answer.\n</system-reminder>",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(content: &str, status: TodoStatus) -> TodoTask {
        TodoTask {
            id: None,
            content: content.into(),
            status,
        }
    }

    fn phase(tasks: Vec<TodoTask>) -> Vec<TodoPhase> {
        vec![TodoPhase {
            id: None,
            name: "Todos".into(),
            tasks,
        }]
    }

    #[test]
    fn only_unfinished_tasks_are_listed() {
        let todos = phase(vec![
            task("a", TodoStatus::Completed),
            task("b", TodoStatus::InProgress),
            task("c", TodoStatus::Cancelled),
            task("d", TodoStatus::Pending),
        ]);
        let names: Vec<_> = unfinished(&todos).into_iter().map(|t| t.content).collect();
        assert_eq!(names, ["b", "d"]);
        let text = reminder_text(&unfinished(&todos), 2, 3);
        assert!(
            text.contains("- [in progress] b\n- [pending] d\n"),
            "{text}"
        );
        assert!(text.contains("reminder 2 of 3"), "{text}");
    }
}
