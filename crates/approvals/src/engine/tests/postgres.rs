//! The engine on a real PostgreSQL server (a throwaway one, see
//! `keel_test_support::PostgresServer`): a call held by one engine is
//! decided by another engine with its own connection (another process), and
//! the waiting one sees it by re-reading its row; the rule that decision
//! saved then lets a call run and counts it.

use tokio_util::sync::CancellationToken;

use super::*;
use crate::clock::Clock;

/// Two engines on one fresh database, or `None` (skipped) without PostgreSQL.
async fn two_engines(
    clock: &ManualClock,
) -> Option<(
    keel_test_support::PostgresServer,
    ApprovalEngine,
    ApprovalEngine,
)> {
    let server = keel_test_support::PostgresServer::start().await?;
    let location = StoreLocation::Postgres {
        url: server.database().await,
    };
    let a = ApprovalEngine::open_at(&location, Arc::new(clock.clone()), test_config())
        .await
        .unwrap();
    let b = ApprovalEngine::open_at(&location, Arc::new(clock.clone()), test_config())
        .await
        .unwrap();
    Some((server, a, b))
}

#[tokio::test]
async fn a_wait_sees_a_decision_made_through_another_connection() {
    let clock = ManualClock::new(1_700_000_000_000);
    let Some((_server, waiting, deciding)) = two_engines(&clock).await else {
        return;
    };
    let id = held_id(&waiting.gate_check(&bash("c1", "cargo publish")).await);
    let wait_id = id.clone();
    let engine = waiting.clone();
    let wait = tokio::spawn(async move { engine.wait(&wait_id, &CancellationToken::new()).await });

    let pending = deciding.pending(None).await.unwrap();
    assert_eq!(pending.len(), 1);
    deciding
        .decide(
            &id,
            Decision::ApproveAlways {
                scope: None,
                lifetime: Lifetime::Permanent,
            },
            "other",
            None,
        )
        .await
        .unwrap();
    let resolution = within(wait).await.unwrap().unwrap();
    let Resolution::Approved { rule_id, .. } = resolution else {
        panic!("not approved: {resolution:?}");
    };
    let rule_id = rule_id.unwrap();

    // The saved rule lets the same command run on the first engine, and
    // records that it did.
    clock.advance(5_000);
    let outcome = waiting.gate_check(&bash("c2", "cargo publish")).await;
    assert!(
        matches!(&outcome, GateOutcome::Allow { approved_by: ApprovedBy::Rule, rule_ids, .. } if rule_ids.as_slice() == std::slice::from_ref(&rule_id)),
        "{outcome:?}"
    );
    let rules = deciding.rules(Some("/ws")).await.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].created_from.as_deref(), Some(id.as_str()));
    assert_eq!(rules[0].match_count, 1);
    assert_eq!(rules[0].last_matched_at, Some(clock.now_ms()));
}

/// A call checked while the server is down waits for it and is held, not
/// denied; the request is stored once however many tries it took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_checked_while_the_server_restarts_is_held_once() {
    let clock = ManualClock::new(1_700_000_000_000);
    let Some((mut server, checking, other)) = two_engines(&clock).await else {
        return;
    };
    server.crash().await;
    let engine = checking.clone();
    let check = tokio::spawn(async move { engine.gate_check(&bash("c1", "cargo publish")).await });
    tokio::time::sleep(std::time::Duration::from_millis(800)).await;
    assert!(
        !check.is_finished(),
        "the check gave up while the server was down"
    );
    server.restart().await;
    let outcome = within(check).await.unwrap();
    let id = held_id(&outcome);
    let pending = other.pending(None).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(pending[0].id, id);
}
