//! Waits woken by another process's decision without polling for it: the
//! engines here re-read their rows only once an hour, so a wait that ends
//! within the test's timeout was woken by the store's change feed
//! (`PRAGMA data_version` on SQLite, `LISTEN/NOTIFY` on PostgreSQL). The
//! same scenario runs on both stores.

use tokio_util::sync::CancellationToken;

use super::*;

/// Polls only as a backstop nobody reaches in a test.
fn no_polling() -> EngineConfig {
    EngineConfig {
        poll_interval: Duration::from_secs(3600),
        ..EngineConfig::default()
    }
}

/// A call held by `waiting` and decided by `deciding` (its own connection)
/// ends its wait approved.
async fn another_process_decides(waiting: ApprovalEngine, deciding: ApprovalEngine, call_id: &str) {
    another_process_decides_after(waiting, deciding, call_id, async || {}).await;
}

/// Like [`another_process_decides`], with `meanwhile` happening while the
/// call waits, before the decision.
async fn another_process_decides_after(
    waiting: ApprovalEngine,
    deciding: ApprovalEngine,
    call_id: &str,
    meanwhile: impl AsyncFnOnce(),
) {
    let id = held_id(&waiting.gate_check(&bash(call_id, "cargo publish")).await);
    let wait_id = id.clone();
    let wait = tokio::spawn(async move { waiting.wait(&wait_id, &CancellationToken::new()).await });
    // Let the wait take its first look, so the decision lands mid-wait.
    tokio::time::sleep(Duration::from_millis(200)).await;
    meanwhile().await;
    deciding
        .decide(&id, Decision::Approve, "other", None)
        .await
        .unwrap();
    let resolution = within(wait).await.unwrap().unwrap();
    assert!(
        matches!(resolution, Resolution::Approved { .. }),
        "{resolution:?}"
    );
}

/// A call held by another process ticks this store's feed (what the web
/// inbox listens to), after the feed's own start tick.
async fn a_new_held_call_ticks_the_feed(listening: ApprovalEngine, holding: ApprovalEngine) {
    let feed = listening.store().change_feed().expect("a change feed");
    let mut sub = feed.subscribe();
    within(sub.changed()).await;
    let quiet = tokio::time::timeout(Duration::from_millis(300), sub.changed()).await;
    assert!(quiet.is_err(), "ticked with nothing written");
    held_id(&holding.gate_check(&bash("new", "cargo publish")).await);
    within(sub.changed()).await;
}

#[tokio::test]
async fn sqlite_a_new_held_call_ticks_the_feed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let open = || ApprovalEngine::open_sqlite_with(&db, clock.clone(), no_polling());
    a_new_held_call_ticks_the_feed(open().await.unwrap(), open().await.unwrap()).await;
}

#[tokio::test]
async fn postgres_a_new_held_call_ticks_the_feed() {
    let Some(server) = keel_test_support::PostgresServer::start().await else {
        return;
    };
    let location = StoreLocation::Postgres {
        url: server.database().await,
    };
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let open = || ApprovalEngine::open_at(&location, clock.clone(), no_polling());
    a_new_held_call_ticks_the_feed(open().await.unwrap(), open().await.unwrap()).await;
}

#[tokio::test]
async fn sqlite_a_decision_by_another_connection_wakes_the_wait() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keel.db");
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let open = || ApprovalEngine::open_sqlite_with(&db, clock.clone(), no_polling());
    let (waiting, deciding) = (open().await.unwrap(), open().await.unwrap());
    another_process_decides(waiting, deciding, "c1").await;
}

#[tokio::test]
async fn postgres_a_decision_by_another_connection_wakes_the_wait() {
    let Some(server) = keel_test_support::PostgresServer::start().await else {
        return;
    };
    let url = server.database().await;
    let location = StoreLocation::Postgres { url: url.clone() };
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let open = || ApprovalEngine::open_at(&location, clock.clone(), no_polling());
    let (waiting, deciding) = (open().await.unwrap(), open().await.unwrap());
    another_process_decides(waiting.clone(), deciding.clone(), "c1").await;

    // The server drops every connection (a restart, a failover): the
    // listener reconnects and the next wait is woken all the same.
    keel_test_support::PostgresServer::drop_connections(&url).await;
    // The stores' own connections come back on their next call.
    within(async {
        while waiting.pending(None).await.is_err() || deciding.pending(None).await.is_err() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    another_process_decides(waiting, deciding, "c2").await;
}

/// The server crashes while a call waits and is down for a while: the
/// wait goes on (it cannot look, so it waits to look again) and ends with
/// the decision taken once the server is back.
#[tokio::test(flavor = "multi_thread")]
async fn postgres_a_wait_outlives_a_server_restart() {
    let Some(mut server) = keel_test_support::PostgresServer::start().await else {
        return;
    };
    let location = StoreLocation::Postgres {
        url: server.database().await,
    };
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let often = EngineConfig {
        poll_interval: Duration::from_millis(100),
        ..EngineConfig::default()
    };
    let open = || ApprovalEngine::open_at(&location, clock.clone(), often.clone());
    let (waiting, deciding) = (open().await.unwrap(), open().await.unwrap());
    another_process_decides_after(waiting, deciding, "c1", async || {
        server.crash().await;
        // Several looks fail meanwhile; a wait that ended on them fails
        // the decision's check below.
        tokio::time::sleep(Duration::from_secs(1)).await;
        server.restart().await;
    })
    .await;
}
