//! Who may use the inbox: the login token, browser sessions, CSRF tokens,
//! the `Host`/`Origin` checks and the login rate limit.
//!
//! Owns [`Auth`]: the token (compared in constant time) is exchanged for a
//! session cookie (`HttpOnly`, `SameSite=Strict`, `Secure` behind TLS);
//! every session has its own CSRF token that every form carries; a request
//! whose `Host` is not one the inbox is served as, or a change whose
//! `Origin` (or `Referer`) is not the inbox's own, is refused; failed logins
//! are limited per minute. Randomness comes from the kernel. It must not
//! know pages or approvals.

use std::collections::HashMap;
use std::io::Read;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use subtle::ConstantTimeEq;

/// The session cookie's name.
pub const COOKIE: &str = "keel_inbox";
/// Failed logins allowed per [`LOGIN_WINDOW`] (then `429`).
pub const LOGIN_FAILURES_PER_WINDOW: usize = 5;
/// The window of the login rate limit.
pub const LOGIN_WINDOW: Duration = Duration::from_secs(60);
/// How long a browser session lasts.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 60 * 60);

/// How the inbox is reached, for the `Host` and `Origin` checks and the
/// cookie's `Secure` flag.
#[derive(Debug, Clone)]
pub struct Served {
    /// `Host` values accepted (`127.0.0.1:4600`, `localhost:4600`, the
    /// public URL's host).
    pub hosts: Vec<String>,
    /// Served behind TLS (a `https://` public URL): cookies are `Secure`.
    pub tls: bool,
}

struct Session {
    csrf: String,
    expires: Instant,
}

/// The token, the sessions and the login limit of one inbox.
pub struct Auth {
    token: String,
    served: Served,
    sessions: Mutex<HashMap<String, Session>>,
    failures: Mutex<Vec<Instant>>,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// Not logged in (or the session expired).
    Login,
    /// A `Host` the inbox is not served as.
    Host,
    /// A change from another origin, or without a valid CSRF token.
    Forged,
    /// Too many failed logins.
    TooMany,
}

/// `n` random bytes from the kernel, hex-encoded.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

fn equal(a: &str, b: &str) -> bool {
    a.len() == b.len() && bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

impl Auth {
    pub fn new(token: String, served: Served) -> Self {
        Self {
            token,
            served,
            sessions: Mutex::new(HashMap::new()),
            failures: Mutex::new(Vec::new()),
        }
    }

    /// Checks `Host` against how the inbox is served.
    pub fn host_ok(&self, headers: &HeaderMap) -> bool {
        let Some(host) = headers.get("host").and_then(|h| h.to_str().ok()) else {
            return false;
        };
        self.served
            .hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Whether a state change comes from the inbox's own pages: its
    /// `Origin` (else `Referer`) names one of the inbox's hosts.
    pub fn same_origin(&self, headers: &HeaderMap) -> bool {
        let from = headers
            .get("origin")
            .or_else(|| headers.get("referer"))
            .and_then(|h| h.to_str().ok());
        let Some(from) = from else {
            return false;
        };
        let scheme = if self.served.tls {
            "https://"
        } else {
            "http://"
        };
        let Some(rest) = from.strip_prefix(scheme) else {
            return false;
        };
        let host = rest.split('/').next().unwrap_or_default();
        self.served
            .hosts
            .iter()
            .any(|h| h.eq_ignore_ascii_case(host))
    }

    /// Logs in with `token`: a new session id, or why not.
    pub fn login(&self, token: &str) -> Result<String, Refusal> {
        let now = Instant::now();
        {
            let mut failures = self.failures.lock().unwrap_or_else(|e| e.into_inner());
            failures.retain(|t| now.duration_since(*t) < LOGIN_WINDOW);
            if failures.len() >= LOGIN_FAILURES_PER_WINDOW {
                return Err(Refusal::TooMany);
            }
            if !equal(token.trim(), &self.token) {
                failures.push(now);
                return Err(Refusal::Login);
            }
        }
        let (id, csrf) = match (random_hex(32), random_hex(32)) {
            (Ok(id), Ok(csrf)) => (id, csrf),
            _ => return Err(Refusal::Login),
        };
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        sessions.retain(|_, s| s.expires > now);
        sessions.insert(
            id.clone(),
            Session {
                csrf,
                expires: now + SESSION_TTL,
            },
        );
        Ok(id)
    }

    /// Ends a session.
    pub fn logout(&self, session: &str) {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(session);
    }

    /// The session of the request's cookie and its CSRF token.
    pub fn session(&self, headers: &HeaderMap) -> Option<(String, String)> {
        let id = cookie(headers, COOKIE)?;
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let (key, s) = sessions.iter().find(|(k, _)| equal(k, &id))?;
        (s.expires > Instant::now()).then(|| (key.clone(), s.csrf.clone()))
    }

    /// Checks a state change: a session, the inbox's own origin, and the
    /// session's CSRF token in the form.
    pub fn change_ok(&self, headers: &HeaderMap, csrf: &str) -> Result<String, Refusal> {
        let Some((id, expected)) = self.session(headers) else {
            return Err(Refusal::Login);
        };
        if !self.same_origin(headers) || !equal(csrf, &expected) {
            return Err(Refusal::Forged);
        }
        Ok(id)
    }

    /// The `Set-Cookie` value of a new session.
    pub fn set_cookie(&self, session: &str) -> String {
        let secure = if self.served.tls { "; Secure" } else { "" };
        format!(
            "{COOKIE}={session}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{secure}",
            SESSION_TTL.as_secs()
        )
    }

    /// The `Set-Cookie` value that ends a session.
    pub fn clear_cookie(&self) -> String {
        format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
    }
}

/// The value of cookie `name` in the request.
fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all("cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn auth() -> Auth {
        Auth::new(
            "secret-token".into(),
            Served {
                hosts: vec!["127.0.0.1:4600".into()],
                tls: false,
            },
        )
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn a_session_needs_the_token_and_changes_need_origin_and_csrf() {
        let a = auth();
        assert_eq!(a.login("wrong"), Err(Refusal::Login));
        let id = a.login("secret-token").unwrap();
        let cookie = format!("{COOKIE}={id}");
        let (_, csrf) = a.session(&headers(&[("cookie", &cookie)])).unwrap();
        let good = headers(&[("cookie", &cookie), ("origin", "http://127.0.0.1:4600")]);
        assert!(a.change_ok(&good, &csrf).is_ok());
        assert_eq!(a.change_ok(&good, "nope"), Err(Refusal::Forged));
        let cross = headers(&[("cookie", &cookie), ("origin", "http://evil.example")]);
        assert_eq!(a.change_ok(&cross, &csrf), Err(Refusal::Forged));
        let none = headers(&[("cookie", &cookie)]);
        assert_eq!(a.change_ok(&none, &csrf), Err(Refusal::Forged));
        assert_eq!(
            a.change_ok(&headers(&[("origin", "http://127.0.0.1:4600")]), &csrf),
            Err(Refusal::Login)
        );
        assert!(a.set_cookie(&id).contains("HttpOnly; SameSite=Strict"));
        a.logout(&id);
        assert!(a.session(&headers(&[("cookie", &cookie)])).is_none());
    }

    #[test]
    fn failed_logins_are_limited_and_hosts_checked() {
        let a = auth();
        for _ in 0..LOGIN_FAILURES_PER_WINDOW {
            assert_eq!(a.login("x"), Err(Refusal::Login));
        }
        assert_eq!(a.login("secret-token"), Err(Refusal::TooMany));
        assert!(a.host_ok(&headers(&[("host", "127.0.0.1:4600")])));
        assert!(!a.host_ok(&headers(&[("host", "evil.example")])));
        assert!(!a.host_ok(&HeaderMap::new()));
    }
}
