//! Drafts of unattended runs.

use super::*;
use crate::store::Delivery;

fn unattended(call_id: &str, command: &str) -> CallContext {
    CallContext {
        unattended: true,
        ..bash(call_id, command)
    }
}

fn drafted_id(outcome: &GateOutcome) -> String {
    match outcome {
        GateOutcome::Drafted { request, message } => {
            assert!(message.contains(&request.id), "{message}");
            assert_eq!(request.delivery, Delivery::Draft);
            request.id.clone()
        }
        other => panic!("expected a draft, got {other:?}"),
    }
}

#[tokio::test]
async fn a_sent_draft_runs_once_and_the_agent_hears_the_outcome_once() {
    let f = Fixture::new().await;
    // Unattended reads still run.
    assert!(is_auto(&f.engine.gate_check(&unattended("r", "ls")).await));
    let id = drafted_id(
        &f.engine
            .gate_check(&unattended("d1", "cargo publish"))
            .await,
    );
    // Announced again: the same draft.
    assert_eq!(
        drafted_id(
            &f.engine
                .gate_check(&unattended("d1", "cargo publish"))
                .await
        ),
        id
    );
    assert_eq!(
        f.engine.pending(None).await.unwrap()[0].delivery,
        Delivery::Draft
    );
    assert!(f.engine.take_draft_outcomes("s1").await.unwrap().is_empty());
    assert!(matches!(
        f.engine.claim_draft(&id).await,
        Err(Error::NotClaimable { .. })
    ));

    // Later, from the CLI (another process).
    let cli = f.another().await;
    let sent = cli.send_draft(&id, "alice").await.unwrap();
    assert_eq!(sent.status, Status::Approved);
    // Sending twice gets the same answer.
    assert_eq!(cli.send_draft(&id, "alice").await.unwrap(), sent);
    let claimed = cli.claim_draft(&id).await.unwrap();
    assert_eq!(claimed.args, json!({"command": "cargo publish"}));
    assert!(matches!(
        cli.claim_draft(&id).await,
        Err(Error::NotClaimable { .. })
    ));
    // Not finished yet: nothing to tell.
    assert!(f.engine.take_draft_outcomes("s1").await.unwrap().is_empty());
    cli.finish(&id, Some("Uploaded keel v0.1.0".to_owned()), false)
        .await
        .unwrap();

    let told = f.engine.take_draft_outcomes("s1").await.unwrap();
    assert_eq!(told.len(), 1);
    assert_eq!(told[0].request_id, id);
    assert_eq!(told[0].call_id, "d1");
    assert!(
        told[0].message.contains("was sent by the user and ran"),
        "{}",
        told[0].message
    );
    assert!(told[0].message.ends_with("Result: Uploaded keel v0.1.0"));
    assert!(f.engine.take_draft_outcomes("s1").await.unwrap().is_empty());
}

#[tokio::test]
async fn declined_and_expired_drafts_are_told_too() {
    let f = Fixture::new().await;
    let a = drafted_id(
        &f.engine
            .gate_check(&unattended("d1", "cargo publish"))
            .await,
    );
    let b = drafted_id(&f.engine.gate_check(&unattended("d2", "npm publish")).await);
    f.engine
        .decide(
            &a,
            Decision::Decline {
                note: Some("wait for review".to_owned()),
                stop_turn: false,
            },
            "alice",
            None,
        )
        .await
        .unwrap();
    // A new message in the session does not touch drafts.
    assert!(
        f.engine
            .decline_waiting("s1", "hi", "user")
            .await
            .unwrap()
            .is_empty()
    );
    f.clock.advance(8 * 24 * 60 * 60 * 1000);
    let told = f.engine.take_draft_outcomes("s1").await.unwrap();
    let by_id = |id: &str| told.iter().find(|o| o.request_id == id).unwrap();
    assert_eq!(by_id(&a).status, Status::Declined);
    assert!(by_id(&a).message.ends_with("Their note: wait for review"));
    assert_eq!(by_id(&b).status, Status::Expired);
    assert!(by_id(&b).message.contains("did not answer in time"));
}

#[tokio::test]
async fn only_drafts_can_be_sent() {
    let f = Fixture::new().await;
    let id = held_id(&f.engine.gate_check(&bash("w1", "cargo publish")).await);
    assert!(matches!(
        f.engine.send_draft(&id, "alice").await,
        Err(Error::NotClaimable { .. })
    ));
    assert_eq!(f.engine.request(&id).await.unwrap().status, Status::Pending);
}
