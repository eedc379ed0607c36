//! Waits and decisions in one engine: approve, always, decline, stop,
//! superseded, expiry, cancel, parallel calls, races.

use tokio_util::sync::CancellationToken;

use super::*;
use crate::rules::{Lifetime, RuleScope};

#[tokio::test]
async fn approve_wakes_the_wait_and_runs_once() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    let engine = f.engine.clone();
    let wait_id = id.clone();
    let waiter = tokio::spawn(async move {
        engine
            .wait(&wait_id, &CancellationToken::new())
            .await
            .unwrap()
    });
    let decided = f
        .engine
        .decide(&id, Decision::Approve, "alice", None)
        .await
        .unwrap();
    assert_eq!(decided.status, Status::Approved);
    assert_eq!(decided.approved_by, Some(ApprovedBy::User));
    assert_eq!(decided.revision, 1);
    let resolution = within(waiter).await.unwrap();
    assert_eq!(
        resolution,
        Resolution::Approved {
            request_id: id.clone(),
            rule_id: None
        }
    );
    assert_eq!(resolution.message_for_model(), None);
    let out = f.engine.settle(resolution.clone()).await;
    assert_eq!(
        out,
        GateOutcome::Allow {
            approved_by: ApprovedBy::User,
            rule_ids: vec![],
            request_id: Some(id.clone())
        }
    );
    // Settling the same approval again does not run it twice.
    let again = f.engine.settle(resolution).await;
    assert!(deny_message(&again).contains("may or may not have happened"));
    f.engine
        .finish(&id, Some("published".to_owned()), false)
        .await
        .unwrap();
    let row = f.engine.request(&id).await.unwrap();
    assert!(row.consumed_at.is_some() && row.finished_at.is_some());
}

#[tokio::test]
async fn gate_checks_and_waits_in_one_step() {
    let f = Fixture::new().await;
    let engine = f.engine.clone();
    let gate = tokio::spawn(async move {
        engine
            .gate(&bash("c1", "cargo publish"), &CancellationToken::new())
            .await
    });
    let p = pending_for(&f.engine, "c1").await;
    f.engine
        .decide(&p.id, Decision::Approve, "alice", None)
        .await
        .unwrap();
    let out = within(gate).await.unwrap();
    assert!(
        matches!(
            out,
            GateOutcome::Allow {
                approved_by: ApprovedBy::User,
                ..
            }
        ),
        "{out:?}"
    );
    // Nothing left pending.
    assert!(f.engine.pending(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn declines_reach_the_model() {
    let f = Fixture::new().await;
    let cases = [
        (
            Decision::Decline {
                note: Some("use the staging registry".to_owned()),
                stop_turn: false,
            },
            "The user declined this; nothing happened. Their note: use the staging registry",
            false,
        ),
        (
            Decision::Decline {
                note: None,
                stop_turn: false,
            },
            "The user declined this; nothing happened. Don't try to get the same outcome another way.",
            false,
        ),
        (
            Decision::Decline {
                note: None,
                stop_turn: true,
            },
            "The user declined this; nothing happened. Don't try to get the same outcome another way.",
            true,
        ),
    ];
    for (i, (decision, message, stop)) in cases.into_iter().enumerate() {
        let call_id = format!("c{i}");
        let engine = f.engine.clone();
        let c = bash(&call_id, "cargo publish");
        let gate = tokio::spawn(async move { engine.gate(&c, &CancellationToken::new()).await });
        let p = pending_for(&f.engine, &call_id).await;
        f.engine.decide(&p.id, decision, "bob", None).await.unwrap();
        let out = within(gate).await.unwrap();
        assert_eq!(
            out,
            GateOutcome::Deny {
                message: message.to_owned(),
                request_id: Some(p.id.clone()),
                stop_turn: stop
            }
        );
    }
}

#[tokio::test]
async fn a_second_decision_is_refused_and_a_repeat_is_idempotent() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    let first = f
        .engine
        .decide(&id, Decision::Approve, "alice", Some("key-1"))
        .await
        .unwrap();
    let repeat = f
        .engine
        .decide(&id, Decision::Approve, "alice", Some("key-1"))
        .await
        .unwrap();
    assert_eq!(first, repeat);
    let decline = Decision::Decline {
        note: None,
        stop_turn: false,
    };
    match f.engine.decide(&id, decline, "bob", Some("key-1")).await {
        Err(e @ Error::AlreadyDecided { .. }) => {
            assert_eq!(
                e.to_string(),
                format!("approval request {id} was already approved by alice")
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        f.engine.decide(&id, Decision::Approve, "carol", None).await,
        Err(Error::AlreadyDecided { .. })
    ));
    assert!(matches!(
        f.engine
            .decide("apr_missing", Decision::Approve, "x", None)
            .await,
        Err(Error::RequestNotFound(_))
    ));
}

#[tokio::test]
async fn racing_decisions_on_two_engines_have_one_winner() {
    let f = Fixture::new().await;
    let other = f.another().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    let mut tasks = Vec::new();
    for i in 0..8 {
        let engine = if i % 2 == 0 {
            f.engine.clone()
        } else {
            other.clone()
        };
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let d = if i % 3 == 0 {
                Decision::Approve
            } else {
                Decision::Decline {
                    note: Some(format!("no {i}")),
                    stop_turn: false,
                }
            };
            engine.decide(&id, d, &format!("p{i}"), None).await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        match within(t).await.unwrap() {
            Ok(_) => ok += 1,
            Err(Error::AlreadyDecided { .. } | Error::Conflict { .. }) => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(ok, 1);
    assert_eq!(f.engine.request(&id).await.unwrap().revision, 1);
}

#[tokio::test]
async fn approve_always_saves_a_rule_for_the_next_call() {
    let f = Fixture::new().await;
    let id = held_id(
        &f.engine
            .gate_check(&bash("c1", "cargo publish --dry-run"))
            .await,
    );
    let decided = f
        .engine
        .decide(
            &id,
            Decision::ApproveAlways {
                scope: None,
                lifetime: Lifetime::Permanent,
            },
            "alice",
            None,
        )
        .await
        .unwrap();
    let rule_id = decided.rule_id.clone().unwrap();
    let rules = f.engine.rules(Some("/ws")).await.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(rules[0].id, rule_id);
    assert_eq!(rules[0].created_from.as_deref(), Some(id.as_str()));
    assert_eq!(rules[0].label, "Always allow `cargo publish …`");
    let out = f
        .engine
        .settle(Resolution::from_record(&decided).unwrap())
        .await;
    assert!(
        matches!(out, GateOutcome::Allow { ref rule_ids, .. } if rule_ids == std::slice::from_ref(&rule_id))
    );

    let next = f.engine.gate_check(&bash("c2", "cargo publish")).await;
    assert!(
        matches!(next, GateOutcome::Allow { approved_by: ApprovedBy::Rule, ref rule_ids, .. } if rule_ids == std::slice::from_ref(&rule_id))
    );

    // Session-scoped rules only apply in their session.
    let id = held_id(&f.engine.gate_check(&bash("c3", "npm publish")).await);
    f.engine
        .decide(
            &id,
            Decision::ApproveAlways {
                scope: None,
                lifetime: Lifetime::Session {
                    session_id: "s1".to_owned(),
                },
            },
            "alice",
            None,
        )
        .await
        .unwrap();
    assert!(matches!(
        f.engine.gate_check(&bash("c4", "npm publish")).await,
        GateOutcome::Allow {
            approved_by: ApprovedBy::Rule,
            ..
        }
    ));
    let mut elsewhere = bash("c5", "npm publish");
    elsewhere.session_id = "s2".to_owned();
    assert!(matches!(
        f.engine.gate_check(&elsewhere).await,
        GateOutcome::Held { .. }
    ));
}

#[tokio::test]
async fn approve_always_is_refused_for_money_and_unclear_calls() {
    let f = Fixture::new().await;
    let always = Decision::ApproveAlways {
        scope: None,
        lifetime: Lifetime::Permanent,
    };
    for (call_id, cmd) in [("m1", "rm -rf build"), ("u1", "bash -c 'cargo publish'")] {
        let id = held_id(&f.engine.gate_check(&bash(call_id, cmd)).await);
        let r = f.engine.decide(&id, always.clone(), "alice", None).await;
        assert!(matches!(r, Err(Error::RuleRefused(_))), "{cmd}: {r:?}");
        assert_eq!(f.engine.request(&id).await.unwrap().status, Status::Pending);
        // An explicit scope does not get around it either.
        let explicit = Decision::ApproveAlways {
            scope: Some(RuleScope::Tool),
            lifetime: Lifetime::Permanent,
        };
        assert!(f.engine.decide(&id, explicit, "alice", None).await.is_err());
    }
    assert!(f.engine.rules(None).await.unwrap().is_empty());
}

#[tokio::test]
async fn expiry_tells_the_model_nothing_happened() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    let engine = f.engine.clone();
    let wait_id = id.clone();
    let waiter =
        tokio::spawn(async move { engine.wait(&wait_id, &CancellationToken::new()).await });
    f.clock.advance(7 * 24 * 60 * 60 * 1000 + 1);
    let resolution = within(waiter).await.unwrap().unwrap();
    assert_eq!(
        resolution,
        Resolution::Expired {
            request_id: id.clone()
        }
    );
    let out = f.engine.settle(resolution).await;
    assert_eq!(
        deny_message(&out),
        "The user did not answer in time; nothing happened."
    );
    let row = f.engine.request(&id).await.unwrap();
    assert_eq!(row.status, Status::Expired);
    assert_eq!(row.decided_by.as_deref(), Some("expiry"));
    assert!(matches!(
        f.engine.decide(&id, Decision::Approve, "late", None).await,
        Err(Error::AlreadyDecided { ref status, .. }) if status == "expired"
    ));
}

#[tokio::test]
async fn expiry_is_applied_by_listing_and_per_class() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(0);
    let config = EngineConfig {
        class_ttl: vec![(Class::Money, Duration::from_secs(60))],
        ..test_config()
    };
    let engine =
        ApprovalEngine::open_sqlite_with(dir.path().join("k.db"), Arc::new(clock.clone()), config)
            .await
            .unwrap();
    engine.gate_check(&bash("m", "rm -rf x")).await;
    engine.gate_check(&bash("s", "cargo publish")).await;
    clock.advance(61_000);
    let pending = engine.pending(None).await.unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].call_id, "s");
}

#[tokio::test]
async fn cancel_ends_the_wait_and_marks_the_row() {
    let f = Fixture::new().await;
    let cancel = CancellationToken::new();
    let engine = f.engine.clone();
    let token = cancel.clone();
    let gate = tokio::spawn(async move { engine.gate(&bash("c1", "cargo publish"), &token).await });
    let p = pending_for(&f.engine, "c1").await;
    cancel.cancel();
    let out = within(gate).await.unwrap();
    assert!(
        matches!(
            out,
            GateOutcome::Deny {
                stop_turn: true,
                ..
            }
        ),
        "{out:?}"
    );
    let row = f.engine.request(&p.id).await.unwrap();
    assert_eq!(row.status, Status::Cancelled);
    assert!(matches!(
        f.engine
            .decide(&p.id, Decision::Approve, "late", None)
            .await,
        Err(Error::AlreadyDecided { .. })
    ));
}

#[tokio::test]
async fn a_new_message_declines_the_waiting_calls() {
    let f = Fixture::new().await;
    let a = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    let b = held_id(&f.engine.gate_check(&bash("c2", "npm publish")).await);
    let mut other_session = bash("c3", "cargo publish");
    other_session.session_id = "s2".to_owned();
    let c = held_id(&f.engine.gate_check(&other_session).await);
    let mut declined = f
        .engine
        .decline_waiting("s1", "actually, bump the version first", "user")
        .await
        .unwrap();
    declined.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(declined, expected);
    let resolution = within(f.engine.wait(&a, &CancellationToken::new()))
        .await
        .unwrap();
    assert_eq!(
        resolution.message_for_model().unwrap(),
        "The user sent a message instead of answering; nothing happened. Their message: actually, bump the version first"
    );
    assert_eq!(f.engine.request(&c).await.unwrap().status, Status::Pending);
}

#[tokio::test]
async fn parallel_calls_each_get_a_row_and_all_resolve() {
    let f = Fixture::new().await;
    let mut gates = Vec::new();
    for i in 0..3 {
        let engine = f.engine.clone();
        let c = bash(&format!("p{i}"), &format!("cargo publish -p crate{i}"));
        gates.push(tokio::spawn(async move {
            engine.gate(&c, &CancellationToken::new()).await
        }));
    }
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(pending_for(&f.engine, &format!("p{i}")).await.id);
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3);
    f.engine
        .decide(&ids[0], Decision::Approve, "a", None)
        .await
        .unwrap();
    for id in &ids[1..] {
        let d = Decision::Decline {
            note: None,
            stop_turn: false,
        };
        f.engine.decide(id, d, "a", None).await.unwrap();
    }
    let mut allowed = 0;
    for g in gates {
        if matches!(within(g).await.unwrap(), GateOutcome::Allow { .. }) {
            allowed += 1;
        }
    }
    assert_eq!(allowed, 1);
}

#[tokio::test]
async fn cancel_session_cancels_only_pending_rows() {
    let f = Fixture::new().await;
    let a = held_id(&f.engine.gate_check(&bash("c1", "cargo publish")).await);
    let b = held_id(&f.engine.gate_check(&bash("c2", "npm publish")).await);
    f.engine
        .decide(&b, Decision::Approve, "x", None)
        .await
        .unwrap();
    assert_eq!(
        f.engine.cancel_session("s1", "abort").await.unwrap(),
        std::slice::from_ref(&a)
    );
    assert!(!f.engine.cancel(&a, "abort").await.unwrap());
    assert_eq!(f.engine.request(&b).await.unwrap().status, Status::Approved);
}

#[tokio::test]
async fn decided_calls_no_turn_consumed_are_found_once_they_settle() {
    let f = Fixture::new().await;
    let settled = Duration::from_secs(10);
    let window = Duration::from_secs(3600);
    let approved = held_id(&f.engine.gate_check(&bash("r1", "cargo publish")).await);
    let consumed = held_id(&f.engine.gate_check(&bash("r2", "git push --force")).await);
    let pending = held_id(&f.engine.gate_check(&bash("r3", "curl example.com")).await);
    for id in [&approved, &consumed] {
        f.engine
            .decide(id, Decision::Approve, "cli", None)
            .await
            .unwrap();
    }
    assert!(f.engine.claim(&consumed).await.unwrap());
    let found = async |batch| {
        f.engine
            .decided_unconsumed(settled, window, batch)
            .await
            .unwrap()
    };
    // Just decided: still on its way through the first nudge.
    let now = found(50).await;
    assert!(now.is_empty(), "{now:?}");
    f.clock.advance(11_000);
    let now = found(50).await;
    assert_eq!(now, std::slice::from_ref(&approved));
    assert!(!now.contains(&pending));
    // Newer calls whose decision a turn did consume do not crowd an
    // unconsumed one out of a small batch.
    assert_eq!(found(1).await, std::slice::from_ref(&approved));
    // Long gone: left alone.
    f.clock.advance(3_600_000);
    let now = found(50).await;
    assert!(now.is_empty(), "{now:?}");
}
