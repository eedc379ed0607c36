//! The plan of a turn: `turn/plan/updated` from keel's todos.
//!
//! App-server threads get one more tool, [`PLAN_TOOL`] (`update_plan`,
//! named and shaped as the tool Codex's models know: `{explanation?, plan:
//! [{step, status}]}`). A call replaces the session's todo list (one phase,
//! `Plan`, visible to RPC mode's `get_state` as well) and the pump
//! announces it as `turn/plan/updated` instead of an item. The tool only
//! reports, so it never asks for approval.

use std::sync::Arc;

use keel_app_server_protocol::v2::{
    ServerNotification, TurnPlanStep, TurnPlanStepStatus, TurnPlanUpdatedNotification,
};
use keel_protocol::{Op, TodoPhase, TodoStatus, TodoTask, ToolResult};
use keel_tools::{Tool, ToolContext, ToolOutput};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::notify::Notifier;
use crate::thread_state::LoadedThread;

/// The tool's name.
pub const PLAN_TOOL: &str = "update_plan";
/// The name of the todo phase a plan is kept in.
pub const PLAN_PHASE: &str = "Plan";

#[derive(Debug, Deserialize)]
struct PlanArgs {
    #[serde(default)]
    explanation: Option<String>,
    plan: Vec<PlanItem>,
}

#[derive(Debug, Deserialize)]
struct PlanItem {
    step: String,
    #[serde(default)]
    status: Option<String>,
}

fn status_of(s: Option<&str>) -> TodoStatus {
    match s.unwrap_or("pending") {
        "in_progress" | "inProgress" | "in-progress" => TodoStatus::InProgress,
        "completed" | "done" => TodoStatus::Completed,
        "cancelled" | "canceled" => TodoStatus::Cancelled,
        _ => TodoStatus::Pending,
    }
}

/// Todos as plan steps: every task of every phase, in order; cancelled
/// tasks are left out.
pub fn plan_of(todos: &[TodoPhase]) -> Vec<TurnPlanStep> {
    todos
        .iter()
        .flat_map(|p| p.tasks.iter())
        .filter_map(|t| {
            let status = match t.status {
                TodoStatus::Pending => TurnPlanStepStatus::Pending,
                TodoStatus::InProgress => TurnPlanStepStatus::InProgress,
                TodoStatus::Completed => TurnPlanStepStatus::Completed,
                TodoStatus::Cancelled => return None,
            };
            Some(TurnPlanStep {
                step: t.content.clone(),
                status,
            })
        })
        .collect()
}

fn todos_of(args: &PlanArgs) -> Vec<TodoPhase> {
    vec![TodoPhase {
        id: None,
        name: PLAN_PHASE.to_owned(),
        tasks: args
            .plan
            .iter()
            .map(|i| TodoTask {
                id: None,
                content: i.step.clone(),
                status: status_of(i.status.as_deref()),
            })
            .collect(),
    }]
}

/// A call of the tool, seen by the pump: the todos are replaced and the
/// plan announced. Arguments that do not parse are left to the tool's
/// own error result.
pub async fn announce(
    notifier: &dyn Notifier,
    thread: &Arc<LoadedThread>,
    turn_id: String,
    args: &Value,
) {
    let Ok(parsed) = serde_json::from_value::<PlanArgs>(args.clone()) else {
        return;
    };
    let todos = todos_of(&parsed);
    if let Err(e) = thread
        .handle
        .submit(Op::SetTodos {
            phases: todos.clone(),
        })
        .await
    {
        tracing::warn!(error = %e, "cannot record the plan as the session's todos");
    }
    notifier
        .notify_thread(
            &thread.id,
            &ServerNotification::TurnPlanUpdated(TurnPlanUpdatedNotification {
                thread_id: thread.id.clone(),
                turn_id,
                explanation: parsed.explanation,
                plan: plan_of(&todos),
            }),
        )
        .await;
}

/// `update_plan`: records the plan; the client shows it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanTool;

#[async_trait::async_trait]
impl Tool for PlanTool {
    fn name(&self) -> &str {
        PLAN_TOOL
    }

    fn description(&self) -> &str {
        "Updates the task plan shown to the user. Give every step with its status \
         (pending, in_progress or completed); at most one step is in_progress."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "explanation": {"type": "string"},
                "plan": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "step": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                        },
                        "required": ["step", "status"]
                    }
                }
            },
            "required": ["plan"]
        })
    }

    async fn execute(&self, _ctx: &ToolContext, args: Value) -> keel_tools::Result<ToolOutput> {
        Ok(match serde_json::from_value::<PlanArgs>(args) {
            Ok(_) => ToolOutput {
                result: ToolResult::text("Plan updated"),
                is_error: false,
            },
            Err(e) => ToolOutput {
                result: ToolResult::text(format!("Invalid plan: {e}")),
                is_error: true,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_become_todos_and_back() {
        let args: PlanArgs = serde_json::from_value(json!({"plan": [
            {"step": "read", "status": "completed"},
            {"step": "write", "status": "in_progress"},
            {"step": "test", "status": "pending"}]}))
        .unwrap();
        let todos = todos_of(&args);
        assert_eq!(todos[0].name, PLAN_PHASE);
        let plan = plan_of(&todos);
        assert_eq!(plan.len(), 3);
        assert_eq!(plan[1].status, TurnPlanStepStatus::InProgress);
        let v = serde_json::to_value(&plan[1]).unwrap();
        assert_eq!(v, json!({"step": "write", "status": "inProgress"}));
    }
}
