//! Waits that survive a crash: two engine instances on one database file
//! stand for two keel processes, or keel before and after a restart.

use tokio_util::sync::CancellationToken;

use super::*;

#[tokio::test]
async fn a_decision_by_another_process_reaches_the_wait() {
    let f = Fixture::new().await;
    let cli = f.another().await;
    let engine = f.engine.clone();
    let gate = tokio::spawn(async move {
        engine
            .gate(&bash("c1", "cargo publish"), &CancellationToken::new())
            .await
    });
    // The other process sees the pending row and decides it; no in-process
    // nudge reaches the waiting engine, only its re-read of the row.
    let p = pending_for(&cli, "c1").await;
    cli.decide(
        &p.id,
        Decision::Decline {
            note: Some("not today".to_owned()),
            stop_turn: false,
        },
        "cli",
        None,
    )
    .await
    .unwrap();
    let out = within(gate).await.unwrap();
    assert_eq!(
        deny_message(&out),
        "The user declined this; nothing happened. Their note: not today"
    );
}

#[tokio::test]
async fn pending_rows_survive_a_restart_and_can_be_decided() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    drop(f.engine.clone());

    // "keel restarts": a new engine on the same file.
    let restarted = f.another().await;
    let pending = restarted.pending(Some("/ws")).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].id, id);
    assert_eq!(pending[0].title, "keel wants to run `cargo publish`");

    // The session resumes and announces the same call again: same request.
    let again = restarted.gate_check(&bash("c1", "cargo publish")).await;
    assert_eq!(held_id(&again), id);

    restarted
        .decide(&id, Decision::Approve, "alice", None)
        .await
        .unwrap();
    // The decision is visible to the first engine too.
    assert_eq!(
        f.engine.request(&id).await.unwrap().status,
        Status::Approved
    );
    let resolution = within(restarted.wait(&id, &CancellationToken::new()))
        .await
        .unwrap();
    assert!(matches!(
        restarted.settle(resolution).await,
        GateOutcome::Allow { .. }
    ));
}

#[tokio::test]
async fn a_decision_made_while_keel_was_down_is_honoured_once() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    // keel is "down"; the CLI decides on the file.
    let cli = f.another().await;
    cli.decide(&id, Decision::Approve, "cli", None)
        .await
        .unwrap();
    // keel comes back and re-announces the call: it runs, once.
    let restarted = f.another().await;
    let out = restarted.gate_check(&bash("c1", "cargo publish")).await;
    assert_eq!(
        out,
        GateOutcome::Allow {
            approved_by: ApprovedBy::User,
            rule_ids: vec![],
            request_id: Some(id.clone())
        }
    );
    restarted
        .finish(&id, Some("ok".to_owned()), false)
        .await
        .unwrap();
    // The same call id with the same args later is a new request.
    let later = restarted.gate_check(&bash("c1", "cargo publish")).await;
    assert_ne!(held_id(&later), id);
}

#[tokio::test]
async fn a_decline_made_while_down_reaches_the_model_once() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    f.another()
        .await
        .decide(
            &id,
            Decision::Decline {
                note: Some("wrong crate".to_owned()),
                stop_turn: false,
            },
            "cli",
            None,
        )
        .await
        .unwrap();
    let restarted = f.another().await;
    let out = restarted.gate_check(&bash("c1", "cargo publish")).await;
    assert!(deny_message(&out).ends_with("Their note: wrong crate"));
    // Consumed: announcing it again is a fresh request.
    assert!(matches!(
        restarted.gate_check(&bash("c1", "cargo publish")).await,
        GateOutcome::Held { .. }
    ));
}

#[tokio::test]
async fn an_approved_call_cut_off_by_a_crash_is_not_run_twice() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    f.engine
        .decide(&id, Decision::Approve, "alice", None)
        .await
        .unwrap();
    // The first process claims it and starts running it, then dies.
    assert!(f.engine.claim(&id).await.unwrap());
    let restarted = f.another().await;
    let out = restarted.gate_check(&bash("c1", "cargo publish")).await;
    assert!(
        deny_message(&out).contains("may or may not have happened"),
        "{out:?}"
    );
    let row = restarted.request(&id).await.unwrap();
    assert!(row.finished_at.is_some() && row.outcome_is_error);
    let why = restarted.explain("c1").await.unwrap();
    assert!(why.iter().any(|l| l.entry.outcome == "maybe_ran"));
}

#[tokio::test]
async fn a_changed_call_under_the_same_id_is_a_new_request() {
    let f = Fixture::new().await;
    let first = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    let second = held_id(
        &f.engine
            .gate_check(&bash("c1", "cargo publish -p other"))
            .await,
    );
    assert_ne!(first, second);
    assert_eq!(f.engine.pending(None).await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_wait_started_after_restart_sees_an_earlier_expiry() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    f.clock.advance(8 * 24 * 60 * 60 * 1000);
    let restarted = f.another().await;
    let out = restarted.gate_check(&bash("c1", "cargo publish")).await;
    assert_eq!(
        deny_message(&out),
        "The user did not answer in time; nothing happened."
    );
    assert_eq!(
        restarted.request(&id).await.unwrap().status,
        Status::Expired
    );
}
