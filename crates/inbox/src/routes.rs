//! The inbox's routes: login, the inbox and its live updates, decisions,
//! workspaces (mode, rules, history), and the static files.
//!
//! Owns the HTTP surface and the checks every request passes first (`Host`,
//! then a session for pages, then origin and CSRF for changes), and the
//! security headers of every response. A form works without JavaScript
//! (a change answers `303 See Other` back to the page); the script only
//! keeps the inbox live. It must not know how cards look inside.

use std::sync::Arc;
use std::time::Duration;

use axum::Form;
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures::Stream;
use keel_approvals::{Decision, Delivery, Lifetime, Mode, RequestFilter, Status};
use serde::Deserialize;

use crate::auth::Refusal;
use crate::cards::{card, history_line};
use crate::context::call_context;
use crate::html::{esc, page, when};
use crate::{DECIDER, Inbox};

/// How often the live stream looks at the store when nothing tells it to
/// (the store's change feed wakes it at once: another process held or
/// decided a call).
const BACKSTOP: Duration = Duration::from_secs(5);
/// Requests a workspace's history shows.
const HISTORY: usize = 30;

const CSS: &str = include_str!("../assets/inbox.css");
const JS: &str = include_str!("../assets/inbox.js");

/// The policy every page is served with: nothing from anywhere else, no
/// inline script or style, forms only to the inbox itself.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

type Shared = Arc<Inbox>;

/// The inbox's routes.
pub fn router(inbox: Arc<Inbox>) -> Router {
    Router::new()
        .route("/", get(index))
        .route("/login", get(login_page).post(login))
        .route("/logout", post(logout))
        .route("/fragment/inbox", get(fragment))
        .route("/events", get(events))
        .route("/requests/{id}/decide", post(decide))
        .route("/workspaces", get(workspaces))
        .route("/workspace", get(workspace))
        .route("/workspace/mode", post(set_mode))
        .route("/rules/{id}/remove", post(remove_rule))
        .route("/static/inbox.css", get(css))
        .route("/static/inbox.js", get(js))
        .layer(middleware::from_fn_with_state(inbox.clone(), guard))
        .with_state(inbox)
}

/// `Host` first; security headers on every answer.
async fn guard(State(inbox): State<Shared>, req: Request, next: Next) -> Response {
    let mut res = if inbox.auth.host_ok(req.headers()) {
        next.run(req).await
    } else {
        (
            StatusCode::BAD_REQUEST,
            "This inbox is not served under that host name.",
        )
            .into_response()
    };
    let h = res.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    res
}

fn refused(r: Refusal) -> Response {
    match r {
        Refusal::Login => Redirect::to("/login").into_response(),
        Refusal::Host => (StatusCode::BAD_REQUEST, "wrong host").into_response(),
        Refusal::Forged => (
            StatusCode::FORBIDDEN,
            "Refused: this change did not come from the inbox's own page.",
        )
            .into_response(),
        Refusal::TooMany => (
            StatusCode::TOO_MANY_REQUESTS,
            Html(page(
                "keel inbox",
                None,
                None,
                "<p class=\"error\">Too many failed logins. Wait a minute.</p>",
            )),
        )
            .into_response(),
    }
}

fn failed(status: StatusCode, text: &str) -> Response {
    (
        status,
        Html(page(
            "keel inbox",
            None,
            None,
            &format!(
                "<p class=\"error\">{}</p><p><a href=\"/\">Back to the inbox</a></p>",
                esc(text)
            ),
        )),
    )
        .into_response()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

async fn login_page(State(inbox): State<Shared>, headers: HeaderMap) -> Response {
    if inbox.auth.session(&headers).is_some() {
        return Redirect::to("/").into_response();
    }
    Html(page(
        "keel inbox: log in",
        None,
        None,
        "<form method=\"post\" action=\"/login\" class=\"login\">\
         <label for=\"token\">Token (printed by <code>keel approvals serve</code>)</label>\
         <input type=\"password\" id=\"token\" name=\"token\" autocomplete=\"current-password\" required>\
         <button type=\"submit\" class=\"allow\">Log in</button></form>",
    ))
    .into_response()
}

#[derive(Deserialize)]
struct LoginForm {
    token: String,
}

async fn login(
    State(inbox): State<Shared>,
    headers: HeaderMap,
    Form(f): Form<LoginForm>,
) -> Response {
    if !inbox.auth.same_origin(&headers) {
        return refused(Refusal::Forged);
    }
    match inbox.auth.login(&f.token) {
        Ok(session) => (
            StatusCode::SEE_OTHER,
            [
                (header::LOCATION, "/".to_owned()),
                (header::SET_COOKIE, inbox.auth.set_cookie(&session)),
            ],
        )
            .into_response(),
        Err(Refusal::TooMany) => refused(Refusal::TooMany),
        Err(_) => {
            tracing::warn!("inbox: a login with a wrong token");
            (
                StatusCode::UNAUTHORIZED,
                Html(page(
                    "keel inbox: log in",
                    None,
                    None,
                    "<p class=\"error\">That token is not this inbox's.</p>\
                     <p><a href=\"/login\">Try again</a></p>",
                )),
            )
                .into_response()
        }
    }
}

#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

async fn logout(
    State(inbox): State<Shared>,
    headers: HeaderMap,
    Form(f): Form<CsrfForm>,
) -> Response {
    match inbox.auth.change_ok(&headers, &f.csrf) {
        Ok(session) => {
            inbox.auth.logout(&session);
            (
                StatusCode::SEE_OTHER,
                [
                    (header::LOCATION, "/login".to_owned()),
                    (header::SET_COOKIE, inbox.auth.clear_cookie()),
                ],
            )
                .into_response()
        }
        Err(r) => refused(r),
    }
}

/// The cards of every pending call, newest first, and how many.
async fn cards(inbox: &Inbox, csrf: &str) -> Result<(String, usize), String> {
    let mut pending = inbox
        .engine
        .pending(None)
        .await
        .map_err(|e| e.to_string())?;
    pending.sort_by_key(|r| std::cmp::Reverse(r.created_at));
    let now = now_ms();
    let mut out = String::new();
    for r in &pending {
        let Ok(row) = inbox.engine.request(&r.id).await else {
            continue;
        };
        let ctx = call_context(&inbox.sessions, &r.workspace, &r.session_id, &r.call_id).await;
        out.push_str(&card(r, &row, &ctx, csrf, now));
    }
    if pending.is_empty() {
        out.push_str("<p class=\"empty\">Nothing is waiting for you.</p>");
    }
    Ok((out, pending.len()))
}

async fn index(State(inbox): State<Shared>, headers: HeaderMap) -> Response {
    let Some((_, csrf)) = inbox.auth.session(&headers) else {
        return refused(Refusal::Login);
    };
    match cards(&inbox, &csrf).await {
        Ok((cards, n)) => Html(page(
            "keel inbox",
            Some(n),
            Some(&csrf),
            &format!(
                "<section id=\"cards\" aria-live=\"polite\" data-count=\"{n}\">{cards}</section>"
            ),
        ))
        .into_response(),
        Err(e) => failed(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("The approvals store cannot be read: {e}"),
        ),
    }
}

async fn fragment(State(inbox): State<Shared>, headers: HeaderMap) -> Response {
    let Some((_, csrf)) = inbox.auth.session(&headers) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    match cards(&inbox, &csrf).await {
        Ok((cards, n)) => ([("x-pending-count", n.to_string())], Html(cards)).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
    }
}

/// `changed` (data: the number of pending calls) whenever a call is held
/// or decided anywhere on the store.
async fn events(State(inbox): State<Shared>, headers: HeaderMap) -> Response {
    if inbox.auth.session(&headers).is_none() {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    Sse::new(changes(inbox))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn changes(inbox: Shared) -> impl Stream<Item = Result<Event, std::convert::Infallible>> {
    // Listen before the first look, so nothing between the two is missed.
    let feed = inbox.engine.subscribe_changes();
    futures::stream::unfold(
        (inbox, None::<String>, feed),
        |(inbox, last, mut feed)| async move {
            loop {
                let now = match inbox.engine.pending(None).await {
                    Ok(p) => {
                        let mut ids: Vec<String> = p.into_iter().map(|r| r.id).collect();
                        ids.sort();
                        ids
                    }
                    Err(_) => Vec::new(),
                };
                let print = now.join(",");
                if last.as_deref() != Some(print.as_str()) {
                    let event = Event::default()
                        .event("changed")
                        .data(now.len().to_string());
                    return Some((Ok(event), (inbox, Some(print), feed)));
                }
                tokio::select! {
                    () = feed.changed() => {}
                    () = tokio::time::sleep(BACKSTOP) => {}
                }
            }
        },
    )
}

#[derive(Deserialize)]
struct DecideForm {
    #[serde(default)]
    csrf: String,
    action: String,
    #[serde(default)]
    note: String,
}

async fn decide(
    State(inbox): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(f): Form<DecideForm>,
) -> Response {
    if let Err(r) = inbox.auth.change_ok(&headers, &f.csrf) {
        return refused(r);
    }
    let Ok(row) = inbox.engine.request(&id).await else {
        return failed(StatusCode::NOT_FOUND, &format!("No request {id}."));
    };
    let note = Some(f.note.trim().to_owned()).filter(|n| !n.is_empty());
    let draft = row.delivery == Delivery::Draft;
    let decision = match (f.action.as_str(), draft) {
        ("approve", false) | ("send", true) => Decision::Approve,
        ("always", false) => Decision::ApproveAlways {
            scope: None,
            lifetime: Lifetime::Permanent,
        },
        ("decline", false) | ("discard", true) => Decision::Decline {
            note,
            stop_turn: false,
        },
        (other, _) => {
            return failed(
                StatusCode::BAD_REQUEST,
                &format!("Unknown action {other:?}."),
            );
        }
    };
    let decided = match inbox.engine.decide(&id, decision, DECIDER, None).await {
        Ok(d) => d,
        Err(e) => return failed(StatusCode::CONFLICT, &e.to_string()),
    };
    if draft && decided.status == Status::Approved {
        match &inbox.drafts {
            Some(sender) => {
                if let Err(e) = sender.send(&inbox.engine, &decided).await {
                    return failed(StatusCode::INTERNAL_SERVER_ERROR, &format!("Not sent: {e}"));
                }
            }
            None => {
                return failed(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Approved, but this inbox cannot run drafts; `keel approvals send` can.",
                );
            }
        }
    }
    Redirect::to("/").into_response()
}

async fn workspaces(State(inbox): State<Shared>, headers: HeaderMap) -> Response {
    let Some((_, csrf)) = inbox.auth.session(&headers) else {
        return refused(Refusal::Login);
    };
    let mut names: Vec<String> = Vec::new();
    let recent = inbox
        .engine
        .requests(RequestFilter {
            limit: Some(500),
            ..RequestFilter::default()
        })
        .await
        .unwrap_or_default();
    let rules = inbox.engine.rules(None).await.unwrap_or_default();
    for w in recent
        .iter()
        .map(|r| &r.workspace)
        .chain(rules.iter().map(|r| &r.workspace))
    {
        if !names.contains(w) {
            names.push(w.clone());
        }
    }
    let list: String = names
        .iter()
        .map(|w| {
            format!(
                "<li><a href=\"/workspace?w={}\">{}</a></li>",
                esc(&encode(w)),
                esc(w)
            )
        })
        .collect();
    let body = if names.is_empty() {
        "<p class=\"empty\">No workspace has asked anything yet.</p>".to_owned()
    } else {
        format!("<h2>Workspaces</h2><ul class=\"workspaces\">{list}</ul>")
    };
    Html(page("keel inbox: workspaces", None, Some(&csrf), &body)).into_response()
}

#[derive(Deserialize)]
struct WorkspaceQuery {
    w: String,
}

async fn workspace(
    State(inbox): State<Shared>,
    headers: HeaderMap,
    Query(q): Query<WorkspaceQuery>,
) -> Response {
    let Some((_, csrf)) = inbox.auth.session(&headers) else {
        return refused(Refusal::Login);
    };
    let w = q.w;
    let mode = inbox.engine.mode(&w).await.unwrap_or_default();
    let options: String = Mode::ALL
        .iter()
        .map(|m| {
            format!(
                "<option value=\"{}\"{}>{}</option>",
                m.as_str(),
                if *m == mode { " selected" } else { "" },
                esc(m.label())
            )
        })
        .collect();
    let csrf_field = format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">",
        esc(&csrf)
    );
    let w_field = format!("<input type=\"hidden\" name=\"w\" value=\"{}\">", esc(&w));
    let rules = inbox.engine.rules(Some(&w)).await.unwrap_or_default();
    let rules_html: String = rules
        .iter()
        .map(|r| {
            format!(
                "<li><span>{}</span> <span class=\"meta\">saved {} · matched {} times</span>\
                 <form method=\"post\" action=\"/rules/{}/remove\" class=\"inline\">{csrf_field}{w_field}\
                 <button type=\"submit\">Remove</button></form></li>",
                esc(&r.label),
                esc(&when(r.created_at)),
                r.match_count,
                esc(&r.id)
            )
        })
        .collect();
    let history = inbox
        .engine
        .requests(RequestFilter {
            workspace: Some(w.clone()),
            limit: Some(HISTORY),
            ..RequestFilter::default()
        })
        .await
        .unwrap_or_default();
    let history_html: String = history
        .iter()
        .filter(|r| !r.is_pending())
        .map(history_line)
        .collect();
    let body = format!(
        "<h2 class=\"ws\">{}</h2>\
         <section><h3>Ask before</h3><form method=\"post\" action=\"/workspace/mode\">{csrf_field}{w_field}\
         <select name=\"mode\" aria-label=\"Approval mode\">{options}</select> \
         <button type=\"submit\">Save</button></form></section>\
         <section><h3>Allowed without asking</h3><ul class=\"rules\">{}</ul></section>\
         <section><h3>Recent decisions</h3><ul class=\"history\">{}</ul></section>",
        esc(&w),
        if rules_html.is_empty() {
            "<li class=\"empty\">No rules.</li>".to_owned()
        } else {
            rules_html
        },
        if history_html.is_empty() {
            "<li class=\"empty\">Nothing decided yet.</li>".to_owned()
        } else {
            history_html
        }
    );
    Html(page("keel inbox: workspace", None, Some(&csrf), &body)).into_response()
}

#[derive(Deserialize)]
struct ModeForm {
    #[serde(default)]
    csrf: String,
    w: String,
    mode: String,
}

async fn set_mode(
    State(inbox): State<Shared>,
    headers: HeaderMap,
    Form(f): Form<ModeForm>,
) -> Response {
    if let Err(r) = inbox.auth.change_ok(&headers, &f.csrf) {
        return refused(r);
    }
    let Ok(mode) = f.mode.parse::<Mode>() else {
        return failed(
            StatusCode::BAD_REQUEST,
            &format!("Unknown mode {:?}.", f.mode),
        );
    };
    if let Err(e) = inbox.engine.set_mode(&f.w, mode, DECIDER).await {
        return failed(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string());
    }
    Redirect::to(&format!("/workspace?w={}", encode(&f.w))).into_response()
}

#[derive(Deserialize)]
struct RuleForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    w: String,
}

async fn remove_rule(
    State(inbox): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    Form(f): Form<RuleForm>,
) -> Response {
    if let Err(r) = inbox.auth.change_ok(&headers, &f.csrf) {
        return refused(r);
    }
    if let Err(e) = inbox.engine.remove_rule(&id, DECIDER).await {
        return failed(StatusCode::NOT_FOUND, &e.to_string());
    }
    Redirect::to(&format!("/workspace?w={}", encode(&f.w))).into_response()
}

async fn css() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        JS,
    )
        .into_response()
}

/// `text` percent-encoded for a query value.
fn encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
