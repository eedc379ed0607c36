//! A session's todo list: phases of tasks a host can pre-seed and read back.
//!
//! Wire shape (`set_todos`, `get_state.todoPhases`):
//!
//! ```json
//! [{"id":"phase-1","name":"Evaluation","tasks":[
//!   {"id":"task-1","content":"Map the read tool surface","status":"in_progress"}]}]
//! ```

use serde::{Deserialize, Serialize};

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    #[default]
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

/// One task of a phase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoTask {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub content: String,
    #[serde(default)]
    pub status: TodoStatus,
}

/// A named group of tasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoPhase {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub tasks: Vec<TodoTask>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn phases_round_trip_in_wire_shape() {
        let wire = json!([{"id":"phase-1","name":"Todos","tasks":[
            {"id":"task-1","content":"Map","status":"in_progress"}]}]);
        let phases: Vec<TodoPhase> = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(phases[0].tasks[0].status, TodoStatus::InProgress);
        assert_eq!(serde_json::to_value(&phases).unwrap(), wire);
        assert!(
            serde_json::from_value::<TodoTask>(json!({"content":"x","status":"done"})).is_err()
        );
    }
}
