//! Logins, forged requests, escaping, decisions, rules, modes and the live
//! stream, over real HTTP.

use futures::StreamExt;
use keel_approvals::Status;

use super::{Lab, TOKEN, WAIT};

#[tokio::test]
async fn nothing_is_served_or_changed_without_a_login() {
    let lab = Lab::new().await;
    let id = lab.hold_bash("curl https://example.com").await;
    let (status, _) = lab.get("/", "").await;
    assert_eq!(status, 303);
    assert_eq!(lab.get("/fragment/inbox", "").await.0, 401);
    assert_eq!(lab.get("/events", "").await.0, 401);
    let forged = format!("{}=made-up", keel_inbox::COOKIE);
    assert_eq!(lab.get("/fragment/inbox", &forged).await.0, 401);
    let s = lab
        .post(
            &format!("/requests/{id}/decide"),
            &forged,
            &[("action", "approve"), ("csrf", "x")],
        )
        .await;
    assert_eq!(s, 303, "redirected to the login");
    assert_eq!(
        lab.engine.request(&id).await.unwrap().status,
        Status::Pending
    );
}

#[tokio::test]
async fn a_wrong_token_fails_and_logins_are_rate_limited() {
    let lab = Lab::new().await;
    for _ in 0..keel_inbox::LOGIN_FAILURES_PER_WINDOW {
        let r = lab
            .client
            .post(format!("{}/login", lab.base))
            .header("origin", &lab.base)
            .form(&[("token", "wrong")])
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        assert!(r.headers().get("set-cookie").is_none());
    }
    let r = lab
        .client
        .post(format!("{}/login", lab.base))
        .header("origin", &lab.base)
        .form(&[("token", TOKEN)])
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        429,
        "the right token after five wrong ones waits"
    );
}

#[tokio::test]
async fn forged_requests_change_nothing() {
    let lab = Lab::new().await;
    let id = lab.hold_bash("curl https://example.com").await;
    let (cookie, csrf) = lab.login().await;
    let path = format!("{}/requests/{id}/decide", lab.base);
    // A cross-site form: the browser sends the other site as its origin.
    let cross = lab
        .client
        .post(&path)
        .header("cookie", &cookie)
        .header("origin", "http://evil.example")
        .form(&[("action", "approve"), ("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(cross.status(), 403);
    // No CSRF token, or a wrong one.
    assert_eq!(
        lab.post(
            &format!("/requests/{id}/decide"),
            &cookie,
            &[("action", "approve")]
        )
        .await,
        403
    );
    assert_eq!(
        lab.post(
            &format!("/requests/{id}/decide"),
            &cookie,
            &[("action", "approve"), ("csrf", "0000")]
        )
        .await,
        403
    );
    // Another Host (DNS rebinding).
    let rebound = lab
        .client
        .post(&path)
        .header("cookie", &cookie)
        .header("host", "evil.example")
        .header("origin", "http://evil.example")
        .form(&[("action", "approve"), ("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 400);
    assert_eq!(
        lab.engine.request(&id).await.unwrap().status,
        Status::Pending
    );
    // The page's own form works, and is recorded as the web's decision.
    assert_eq!(
        lab.post(
            &format!("/requests/{id}/decide"),
            &cookie,
            &[("action", "approve"), ("csrf", &csrf)]
        )
        .await,
        303
    );
    let row = lab.engine.request(&id).await.unwrap();
    assert_eq!(
        (row.status, row.decided_by.as_deref()),
        (Status::Approved, Some("web"))
    );
    let audit = lab.engine.explain(&row.call_id).await.unwrap();
    assert!(
        audit
            .iter()
            .any(|a| a.entry.decider.as_deref() == Some("web")),
        "{audit:?}"
    );
}

#[tokio::test]
async fn every_page_is_strict_and_escapes_what_it_shows() {
    let lab = Lab::new().await;
    lab.hold_bash("echo '<script>window.pwned=1</script>' | curl -d @- https://x.example")
        .await;
    let (cookie, _) = lab.login().await;
    let r = lab
        .client
        .get(format!("{}/", lab.base))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(r.headers()["x-frame-options"], "DENY");
    let page = r.text().await.unwrap();
    assert!(
        page.contains("&lt;script&gt;window.pwned=1&lt;/script&gt;"),
        "{page}"
    );
    assert!(
        !page.contains("<script>window"),
        "markup from an argument got through"
    );
    assert!(page.contains("<title>(1) keel inbox</title>"), "{page}");
}

#[tokio::test]
async fn money_offers_no_always_and_rules_are_saved_and_removed() {
    let lab = Lab::new().await;
    let money = lab.hold_bash("rm -rf build").await;
    let send = lab.hold_bash("curl https://example.com/a").await;
    let (cookie, csrf) = lab.login().await;
    let page = lab.get("/", &cookie).await.1;
    let card = |id: &str| {
        let start = page.find(&format!("id=\"card-{id}\"")).unwrap();
        let end = page[start..].find("</article>").unwrap() + start;
        page[start..end].to_owned()
    };
    assert!(
        !card(&money).contains("value=\"always\""),
        "money offered always-allow"
    );
    let send_card = card(&send);
    assert!(
        send_card.contains("Saves the rule: Always allow"),
        "{send_card}"
    );
    assert_eq!(
        lab.post(
            &format!("/requests/{send}/decide"),
            &cookie,
            &[("action", "always"), ("csrf", &csrf)]
        )
        .await,
        303
    );
    let rules = lab.engine.rules(Some(&lab.ws)).await.unwrap();
    assert_eq!(rules.len(), 1, "{rules:?}");
    let ws_page = lab
        .get(&format!("/workspace?w={}", lab.ws), &cookie)
        .await
        .1;
    assert!(
        ws_page.contains(&keel_inbox::esc(&rules[0].label)),
        "{ws_page}"
    );
    assert!(
        ws_page.contains("approved"),
        "the history shows the decision: {ws_page}"
    );
    assert_eq!(
        lab.post(
            &format!("/rules/{}/remove", rules[0].id),
            &cookie,
            &[("csrf", &csrf), ("w", &lab.ws)]
        )
        .await,
        303
    );
    assert!(lab.engine.rules(Some(&lab.ws)).await.unwrap().is_empty());
    // Decline with a note: the note is what the model will read.
    assert_eq!(
        lab.post(
            &format!("/requests/{money}/decide"),
            &cookie,
            &[
                ("action", "decline"),
                ("note", "use cargo clean"),
                ("csrf", &csrf)
            ]
        )
        .await,
        303
    );
    let row = lab.engine.request(&money).await.unwrap();
    assert_eq!(
        (row.status, row.note.as_deref()),
        (Status::Declined, Some("use cargo clean"))
    );
    // The mode menu stores the workspace's mode.
    assert_eq!(
        lab.post(
            "/workspace/mode",
            &cookie,
            &[("csrf", &csrf), ("w", &lab.ws), ("mode", "everything")]
        )
        .await,
        303
    );
    assert_eq!(
        lab.engine.mode(&lab.ws).await.unwrap().as_str(),
        "everything"
    );
}

#[tokio::test]
async fn the_live_stream_reports_calls_held_and_decided_elsewhere() {
    let lab = Lab::new().await;
    let (cookie, _) = lab.login().await;
    let r = lab
        .client
        .get(format!("{}/events", lab.base))
        .header("cookie", &cookie)
        .timeout(std::time::Duration::from_secs(600))
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["content-type"], "text/event-stream");
    let mut body = r.bytes_stream();
    let mut seen = String::new();
    let mut next_count = async |seen: &mut String| -> String {
        loop {
            if let Some(at) = seen.find("event: changed\ndata: ") {
                let rest = &seen[at + "event: changed\ndata: ".len()..];
                if let Some(end) = rest.find('\n') {
                    let n = rest[..end].to_owned();
                    let cut = at + "event: changed\ndata: ".len() + end;
                    seen.drain(..cut);
                    return n;
                }
            }
            let chunk = tokio::time::timeout(WAIT, body.next())
                .await
                .unwrap()
                .unwrap()
                .unwrap();
            seen.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    assert_eq!(next_count(&mut seen).await, "0");
    let id = lab.hold_bash("curl https://example.com").await;
    assert_eq!(next_count(&mut seen).await, "1");
    lab.engine
        .decide(&id, keel_approvals::Decision::Approve, "cli", None)
        .await
        .unwrap();
    assert_eq!(next_count(&mut seen).await, "0");
}
