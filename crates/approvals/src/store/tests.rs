//! The store suite. Each check takes any [`ApprovalStore`], so another
//! backend (PostgreSQL) can run the same checks; the tests below run them on
//! SQLite files in temp dirs and on a real PostgreSQL server started by the
//! tests (`keel_test_support::PostgresServer`).

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::rules::{Lifetime, RuleScope};

fn request(id: &str, session: &str, call: &str, created_at: i64) -> NewRequest {
    NewRequest {
        id: id.to_owned(),
        workspace: "/ws".to_owned(),
        session_id: session.to_owned(),
        call_id: call.to_owned(),
        tool: "bash".to_owned(),
        operation: None,
        args: json!({"command": "cargo publish"}),
        digest: "d1".to_owned(),
        class: Class::Send,
        reason: "`cargo` is not a known read-only program".to_owned(),
        understood: true,
        offer: Some(AlwaysOffer {
            label: "Always allow `cargo publish …`".to_owned(),
            tool: "bash".to_owned(),
            operation: None,
            scope: RuleScope::Command {
                prefix: vec!["cargo".to_owned(), "publish".to_owned()],
            },
        }),
        delivery: Delivery::Wait,
        created_at,
        expires_at: created_at + 1_000,
    }
}

fn approve(at: i64) -> DecisionUpdate {
    DecisionUpdate {
        status: Status::Approved,
        note: None,
        by_message: false,
        stop_turn: false,
        decided_by: Some("tester".to_owned()),
        approved_by: Some(ApprovedBy::User),
        rule_id: None,
        idempotency_key: Some("k1".to_owned()),
        decided_at: at,
        audit: None,
    }
}

async fn requests_round_trip(store: &dyn ApprovalStore) {
    let stored = store
        .insert_request(request("a1", "s1", "c1", 10))
        .await
        .unwrap();
    assert_eq!(stored.status, Status::Pending);
    assert_eq!(stored.revision, 0);
    assert_eq!(stored.args, json!({"command": "cargo publish"}));
    assert!(stored.offer.is_some());
    assert_eq!(
        store.get_request("a1").await.unwrap().as_ref(),
        Some(&stored)
    );
    assert_eq!(store.get_request("nope").await.unwrap(), None);
    // A retry whose first answer was lost finds its own row, not a second.
    let retried = store
        .insert_request(request("a1", "s1", "c1", 10))
        .await
        .unwrap();
    assert_eq!(retried, stored);
    // The same id for another call is refused, and the row is untouched.
    let err = store
        .insert_request(request("a1", "s1", "other-call", 11))
        .await
        .unwrap_err();
    assert!(
        matches!(err, crate::Error::RequestIdTaken(ref id) if id == "a1"),
        "{err}"
    );
    assert_eq!(
        store.get_request("a1").await.unwrap().as_ref(),
        Some(&stored)
    );

    let mut draft = request("a2", "s1", "c1", 20);
    draft.delivery = Delivery::Draft;
    draft.offer = None;
    draft.workspace = "/other".to_owned();
    store.insert_request(draft).await.unwrap();
    store
        .insert_request(request("a3", "s2", "c9", 30))
        .await
        .unwrap();

    let latest = store.latest_for_call("s1", "c1").await.unwrap().unwrap();
    assert_eq!(latest.id, "a2", "newest row for the call");
    assert_eq!(latest.offer, None);
    assert_eq!(store.latest_for_call("s1", "zz").await.unwrap(), None);

    let all = store.list_requests(RequestFilter::default()).await.unwrap();
    let ids: Vec<_> = all.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a3", "a2", "a1"], "newest first");
    // None consumed yet: the filter keeps all, alone or beside others.
    let unconsumed = |session_id: Option<&str>| RequestFilter {
        session_id: session_id.map(str::to_owned),
        unconsumed: true,
        ..Default::default()
    };
    assert_eq!(store.list_requests(unconsumed(None)).await.unwrap(), all);
    assert_eq!(
        store
            .list_requests(unconsumed(Some("s2")))
            .await
            .unwrap()
            .len(),
        1
    );
    let ws = store
        .list_requests(RequestFilter {
            workspace: Some("/ws".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(ws.len(), 2);
    let drafts = store
        .list_requests(RequestFilter {
            delivery: Some(Delivery::Draft),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(drafts.len(), 1);
    let limited = store
        .list_requests(RequestFilter {
            session_id: Some("s1".to_owned()),
            status: Some(Status::Pending),
            limit: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(limited.len(), 1);
    assert_eq!(limited[0].id, "a2");
}

async fn decisions_are_compare_and_swap(store: &dyn ApprovalStore) {
    store
        .insert_request(request("b1", "s", "c", 1))
        .await
        .unwrap();
    let decided = store.decide("b1", 0, approve(5)).await.unwrap().unwrap();
    assert_eq!(decided.status, Status::Approved);
    assert_eq!(decided.revision, 1);
    assert_eq!(decided.decided_at, Some(5));
    assert_eq!(decided.approved_by, Some(ApprovedBy::User));
    assert_eq!(decided.idempotency_key.as_deref(), Some("k1"));
    // A stale revision, and a second decision on a decided row, both lose,
    // and a losing decision writes no audit line.
    let with_audit = |at: i64, detail: &str| DecisionUpdate {
        audit: Some(NewAudit {
            at,
            workspace: "/w".to_owned(),
            request_id: Some("b1".to_owned()),
            outcome: "approved".to_owned(),
            detail: detail.to_owned(),
            ..NewAudit::default()
        }),
        ..approve(at)
    };
    assert_eq!(
        store.decide("b1", 0, with_audit(6, "lost")).await.unwrap(),
        None
    );
    assert_eq!(store.decide("b1", 1, approve(6)).await.unwrap(), None);
    assert_eq!(store.decide("missing", 0, approve(6)).await.unwrap(), None);

    // A winning decision writes its audit line in the same commit.
    store
        .insert_request(request("b3", "s", "c3", 1))
        .await
        .unwrap();
    let won = DecisionUpdate {
        audit: Some(NewAudit {
            at: 6,
            workspace: "/w".to_owned(),
            request_id: Some("b3".to_owned()),
            outcome: "approved".to_owned(),
            detail: "won".to_owned(),
            ..NewAudit::default()
        }),
        ..approve(6)
    };
    assert!(store.decide("b3", 0, won).await.unwrap().is_some());
    let lines = store.audit(AuditFilter::default()).await.unwrap();
    let details: Vec<&str> = lines.iter().map(|l| l.entry.detail.as_str()).collect();
    assert!(details.contains(&"won"), "{details:?}");
    assert!(!details.contains(&"lost"), "{details:?}");

    // Consume and finish happen once.
    assert!(store.consume("b1", 7).await.unwrap());
    assert!(!store.consume("b1", 8).await.unwrap());
    assert!(
        store
            .finish("b1", 9, Some("ok".to_owned()), false)
            .await
            .unwrap()
    );
    assert!(!store.finish("b1", 10, None, true).await.unwrap());
    let row = store.get_request("b1").await.unwrap().unwrap();
    assert_eq!((row.consumed_at, row.finished_at), (Some(7), Some(9)));
    assert_eq!(row.outcome.as_deref(), Some("ok"));

    // A pending row cannot be consumed.
    store
        .insert_request(request("b2", "s", "c2", 1))
        .await
        .unwrap();
    assert!(!store.consume("b2", 7).await.unwrap());
    store
        .mark_reported(&["b1".to_owned(), "b2".to_owned()], 11)
        .await
        .unwrap();
    assert_eq!(
        store.get_request("b2").await.unwrap().unwrap().reported_at,
        Some(11)
    );
}

async fn rules_modes_and_audit(store: &dyn ApprovalStore) {
    let rule = Rule {
        id: "r1".to_owned(),
        workspace: "/ws".to_owned(),
        tool: "bash".to_owned(),
        operation: None,
        scope: RuleScope::Command {
            prefix: vec!["cargo".to_owned(), "test".to_owned()],
        },
        lifetime: Lifetime::Session {
            session_id: "s1".to_owned(),
        },
        label: "Always allow `cargo test …`".to_owned(),
        created_at: 1,
        created_from: Some("a1".to_owned()),
        last_matched_at: None,
        match_count: 0,
    };
    store.insert_rule(rule.clone()).await.unwrap();
    let mut other = rule.clone();
    other.id = "r2".to_owned();
    other.workspace = "/other".to_owned();
    other.scope = RuleScope::PathGlob {
        glob: "src/**".to_owned(),
    };
    other.lifetime = Lifetime::Permanent;
    other.created_at = 2;
    store.insert_rule(other.clone()).await.unwrap();

    assert_eq!(
        store.list_rules(Some("/ws")).await.unwrap(),
        std::slice::from_ref(&rule)
    );
    assert_eq!(
        store.list_rules(None).await.unwrap(),
        [rule.clone(), other.clone()]
    );
    store.touch_rules(&["r1".to_owned()], 50).await.unwrap();
    store.touch_rules(&["r1".to_owned()], 60).await.unwrap();
    let touched = store.get_rule("r1").await.unwrap().unwrap();
    assert_eq!(
        (touched.match_count, touched.last_matched_at),
        (2, Some(60))
    );
    assert!(store.delete_rule("r1").await.unwrap());
    assert!(!store.delete_rule("r1").await.unwrap());
    assert_eq!(store.get_rule("r1").await.unwrap(), None);

    assert_eq!(store.get_mode("/ws").await.unwrap(), None);
    store.set_mode("/ws", Mode::Everything, 1).await.unwrap();
    store.set_mode("/ws", Mode::MoneyOnly, 2).await.unwrap();
    assert_eq!(store.get_mode("/ws").await.unwrap(), Some(Mode::MoneyOnly));
    assert_eq!(store.get_mode("/other").await.unwrap(), None);

    for (i, outcome) in ["held", "approved"].into_iter().enumerate() {
        store
            .append_audit(NewAudit {
                at: i as i64,
                workspace: "/ws".to_owned(),
                call_id: Some("c1".to_owned()),
                request_id: Some("a1".to_owned()),
                class: Some(Class::Send),
                mode: Some(Mode::Outside),
                outcome: outcome.to_owned(),
                rule_ids: vec!["r9".to_owned()],
                detail: "d".to_owned(),
                ..Default::default()
            })
            .await
            .unwrap();
    }
    let lines = store
        .audit(AuditFilter {
            call_id: Some("c1".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    let outcomes: Vec<_> = lines.iter().map(|l| l.entry.outcome.as_str()).collect();
    assert_eq!(outcomes, ["approved", "held"]);
    assert_eq!(lines[0].entry.rule_ids, ["r9"]);
    assert_eq!(lines[0].entry.mode, Some(Mode::Outside));
    let none = store
        .audit(AuditFilter {
            call_id: Some("zz".to_owned()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty());
}

async fn sqlite(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(dir.path().join("keel.db")).await.unwrap()
}

#[tokio::test]
async fn sqlite_requests_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    requests_round_trip(&sqlite(&dir).await).await;
}

#[tokio::test]
async fn sqlite_decisions_are_compare_and_swap() {
    let dir = tempfile::tempdir().unwrap();
    decisions_are_compare_and_swap(&sqlite(&dir).await).await;
}

#[tokio::test]
async fn sqlite_rules_modes_and_audit() {
    let dir = tempfile::tempdir().unwrap();
    rules_modes_and_audit(&sqlite(&dir).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_of_many_racing_deciders_wins_across_connections() {
    let dir = tempfile::tempdir().unwrap();
    let a: Arc<dyn ApprovalStore> = Arc::new(sqlite(&dir).await);
    let b: Arc<dyn ApprovalStore> = Arc::new(sqlite(&dir).await);
    a.insert_request(request("race", "s", "c", 1))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            store.decide("race", 0, approve(i)).await.unwrap().is_some()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        if t.await.unwrap() {
            wins += 1;
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(b.get_request("race").await.unwrap().unwrap().revision, 1);
}

#[tokio::test]
async fn rows_survive_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = sqlite(&dir).await;
        store
            .insert_request(request("p1", "s", "c", 1))
            .await
            .unwrap();
        store.set_mode("/ws", Mode::Everything, 1).await.unwrap();
    }
    let store = sqlite(&dir).await;
    assert_eq!(
        store.get_request("p1").await.unwrap().unwrap().status,
        Status::Pending
    );
    assert_eq!(store.get_mode("/ws").await.unwrap(), Some(Mode::Everything));
    assert!(store.path().ends_with("keel.db"));
}

#[tokio::test]
async fn open_creates_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/home/keel.db");
    SqliteStore::open(&path).await.unwrap();
    assert!(path.exists());
}

#[test]
fn string_enums_round_trip() {
    for s in [
        Status::Pending,
        Status::Approved,
        Status::Declined,
        Status::Expired,
        Status::Cancelled,
    ] {
        assert_eq!(s.as_str().parse::<Status>().unwrap(), s);
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
    for d in [Delivery::Wait, Delivery::Draft] {
        assert_eq!(d.as_str().parse::<Delivery>().unwrap(), d);
    }
    for a in [ApprovedBy::Auto, ApprovedBy::Rule, ApprovedBy::User] {
        assert_eq!(a.to_string().parse::<ApprovedBy>().unwrap(), a);
    }
    assert!("maybe".parse::<Status>().is_err());
}

// ----- the same suite on a real PostgreSQL server -----

/// A fresh database on a throwaway server (or `KEEL_TEST_POSTGRES_URL`),
/// or `None` when this machine has no PostgreSQL (outside CI).
async fn postgres() -> Option<(keel_test_support::PostgresServer, String)> {
    let server = keel_test_support::PostgresServer::start().await?;
    let url = server.database().await;
    Some((server, url))
}

#[tokio::test]
async fn postgres_runs_the_store_suite() {
    let Some((_server, url)) = postgres().await else {
        return;
    };
    let store = PostgresStore::open(&url).await.unwrap();
    requests_round_trip(&store).await;
    decisions_are_compare_and_swap(&store).await;
    rules_modes_and_audit(&store).await;
    let mut draft = request("d1", "s-drafts", "c1", 1);
    draft.delivery = Delivery::Draft;
    store.insert_request(draft).await.unwrap();
    assert!(store.has_unreported_drafts("s-drafts").await.unwrap());
    assert!(!store.has_unreported_drafts("s1-none").await.unwrap());
    store.mark_reported(&["d1".to_owned()], 5).await.unwrap();
    assert!(!store.has_unreported_drafts("s-drafts").await.unwrap());

    // Rows outlive the connection; opening again does not migrate twice.
    drop(store);
    let again = PostgresStore::open(&url).await.unwrap();
    assert_eq!(
        again.get_request("a1").await.unwrap().unwrap().status,
        Status::Pending
    );
    assert_eq!(again.get_mode("/ws").await.unwrap(), Some(Mode::MoneyOnly));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_only_one_of_many_racing_deciders_wins_across_connections() {
    let Some((_server, url)) = postgres().await else {
        return;
    };
    // Two stores opening a new database at once both migrate safely.
    let (a, b) = tokio::join!(PostgresStore::open(&url), PostgresStore::open(&url));
    let a: Arc<dyn ApprovalStore> = Arc::new(a.unwrap());
    let b: Arc<dyn ApprovalStore> = Arc::new(b.unwrap());
    a.insert_request(request("race", "s", "c", 1))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for i in 0..16 {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.push(tokio::spawn(async move {
            store.decide("race", 0, approve(i)).await.unwrap().is_some()
        }));
    }
    let mut wins = 0;
    for t in tasks {
        if t.await.unwrap() {
            wins += 1;
        }
    }
    assert_eq!(wins, 1);
    assert_eq!(b.get_request("race").await.unwrap().unwrap().revision, 1);
}

#[tokio::test]
async fn postgres_refuses_a_database_written_by_a_newer_keel() {
    let Some((_server, url)) = postgres().await else {
        return;
    };
    PostgresStore::open(&url).await.unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    client
        .batch_execute("UPDATE keel_approvals_schema SET version = version + 1")
        .await
        .unwrap();
    let err = PostgresStore::open(&url).await.unwrap_err();
    assert!(matches!(err, Error::SchemaTooNew { .. }), "{err}");
}

#[tokio::test]
async fn postgres_store_reconnects_after_the_server_dropped_it() {
    let Some((_server, url)) = postgres().await else {
        return;
    };
    let store = PostgresStore::open(&url).await.unwrap();
    store
        .insert_request(request("r1", "s", "c", 1))
        .await
        .unwrap();
    // Another session ends every other connection to this database.
    keel_test_support::PostgresServer::drop_connections(&url).await;
    // The first call after that may fail with the closed connection; the
    // store then opens a new one.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match store.get_request("r1").await {
            Ok(row) => {
                assert_eq!(row.unwrap().id, "r1");
                break;
            }
            Err(e) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "never reconnected: {e}"
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}
