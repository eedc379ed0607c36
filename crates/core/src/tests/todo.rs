//! The todo policy at the end of a run: off unless a front end turns it on
//! (so `keel exec` and app-server sessions never see reminders), reminders
//! up to the policy's limit inside one run, and the clearing of a finished
//! list.

use super::*;
use crate::TodoPolicy;
use keel_protocol::{TodoPhase, TodoStatus, TodoTask};

fn todos(status: TodoStatus) -> Vec<TodoPhase> {
    vec![TodoPhase {
        id: None,
        name: "Todos".into(),
        tasks: vec![TodoTask {
            id: Some("task-1".into()),
            content: "Map the tool surface".into(),
            status,
        }],
    }]
}

fn reminders(events: &[AgentEvent]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TodoReminder { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn the_policy_is_off_until_a_front_end_sets_it() {
    let mut h = harness(vec![text("done")], vec![]);
    let handle = h.session.handle();
    handle
        .submit(Op::SetTodos {
            phases: todos(TodoStatus::InProgress),
        })
        .await
        .unwrap();
    h.prompt("go").await;
    let events = h.run_to_end().await;
    assert!(reminders(&events).is_empty(), "{events:?}");
    assert!(!events.contains(&AgentEvent::TodoAutoClear));
    assert_eq!(h.provider.requests().len(), 1);
    assert_eq!(handle.snapshot().todos, todos(TodoStatus::InProgress));
}

#[tokio::test]
async fn reminders_stop_at_the_limit_and_a_finished_list_is_cleared() {
    let mut h = harness(vec![text("a"), text("b"), text("c"), text("d")], vec![]);
    let handle = h.session.handle();
    handle.set_todo_policy(TodoPolicy {
        max_reminders: 2,
        auto_clear: true,
    });
    handle
        .submit(Op::SetTodos {
            phases: todos(TodoStatus::Pending),
        })
        .await
        .unwrap();
    h.prompt("go").await;
    let events = h.run_to_end().await;
    assert_eq!(reminders(&events), [1, 2]);
    let ends = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::AgentEnd { .. }))
        .count();
    assert_eq!(ends, 1);
    assert_eq!(h.provider.requests().len(), 3);
    let last = h.provider.requests().pop().unwrap();
    let Some(Message::User(u)) = last.messages.last() else {
        panic!("the reminder is the last message: {:?}", last.messages)
    };
    assert!(format!("{:?}", u.content).contains("reminder 2 of 2"));

    // Done: the next run clears the list instead of reminding.
    handle
        .submit(Op::SetTodos {
            phases: todos(TodoStatus::Completed),
        })
        .await
        .unwrap();
    h.prompt("again").await;
    let events = h.run_to_end().await;
    assert!(reminders(&events).is_empty());
    let n = events.len();
    assert_eq!(events[n - 2], AgentEvent::TodoAutoClear);
    assert!(handle.snapshot().todos.is_empty());
}
