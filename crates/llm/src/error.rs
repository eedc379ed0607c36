//! Typed provider errors.
//!
//! This module owns [`Error`] / [`ErrorKind`]: the classification of HTTP
//! failures (status + body + `retry-after` headers), transport failures and
//! stream failures into kinds the agent loop can act on (retry, compact,
//! report). It must not know about any dialect's request format, and its
//! messages must never contain credentials: they name the URL (without its
//! query string) and quote at most [`MAX_BODY_CHARS`] characters of body.
//!
//! Wire names ([`ErrorKind::as_wire`], stored as an assistant message's
//! `errorKind`): `unauthorized`, `badRequest`, `contextWindowExceeded`,
//! `rateLimitExceeded`, `serverOverloaded`, `modelNotFound`, `connection`,
//! `streamCut`, `timeout`, `aborted` (for [`ErrorKind::Cancelled`], matching
//! the `aborted` stop reason), `decode`, `other`.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;
use serde_json::Value;

/// Result of provider operations.
pub type Result<T> = std::result::Result<T, Error>;

/// How many characters of a response body an error message quotes.
pub const MAX_BODY_CHARS: usize = 300;

/// What went wrong, coarsely enough to decide what to do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// 401/403: missing or wrong credentials.
    Unauthorized,
    /// 400/413/422 that is not a context overflow.
    BadRequest,
    /// The prompt does not fit the model's context window.
    ContextWindowExceeded,
    /// 429.
    RateLimitExceeded,
    /// 5xx / 529 / "overloaded".
    ServerOverloaded,
    /// 404: unknown model or endpoint.
    ModelNotFound,
    /// Connecting or sending failed (refused, reset, DNS, TLS).
    Connection,
    /// The response body ended or broke before the response was complete.
    StreamCut,
    /// No response headers within the request timeout, or no bytes within the
    /// idle timeout.
    Timeout,
    /// The caller cancelled the request.
    Cancelled,
    /// The server sent something that could not be understood.
    Decode,
    /// Anything else (for example an unclassified HTTP status).
    Other,
}

impl ErrorKind {
    /// The camelCase name of this kind on the wire (see the module docs).
    pub fn as_wire(self) -> &'static str {
        match self {
            ErrorKind::Unauthorized => "unauthorized",
            ErrorKind::BadRequest => "badRequest",
            ErrorKind::ContextWindowExceeded => "contextWindowExceeded",
            ErrorKind::RateLimitExceeded => "rateLimitExceeded",
            ErrorKind::ServerOverloaded => "serverOverloaded",
            ErrorKind::ModelNotFound => "modelNotFound",
            ErrorKind::Connection => "connection",
            ErrorKind::StreamCut => "streamCut",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "aborted",
            ErrorKind::Decode => "decode",
            ErrorKind::Other => "other",
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_wire())
    }
}

/// A provider failure. `Display` is a one-line message fit for a user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
    /// The HTTP status, when the server answered with one.
    pub status: Option<u16>,
    /// How long the server asked us to wait before retrying.
    pub retry_after: Option<Duration>,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
            status: None,
            retry_after: None,
        }
    }

    /// The caller cancelled the request.
    pub fn cancelled() -> Self {
        Error::new(ErrorKind::Cancelled, "request cancelled")
    }

    /// Whether trying the same request again may succeed: rate limits,
    /// overload and other 5xx, connection failures, cut streams and
    /// timeouts. Auth, bad requests, unknown models, context overflow,
    /// decode errors and cancellation are final.
    pub fn is_retryable(&self) -> bool {
        match self.kind {
            ErrorKind::RateLimitExceeded
            | ErrorKind::ServerOverloaded
            | ErrorKind::Connection
            | ErrorKind::StreamCut
            | ErrorKind::Timeout => true,
            ErrorKind::Other => self.status.is_some_and(|s| s >= 500 || s == 408),
            ErrorKind::Unauthorized
            | ErrorKind::BadRequest
            | ErrorKind::ContextWindowExceeded
            | ErrorKind::ModelNotFound
            | ErrorKind::Cancelled
            | ErrorKind::Decode => false,
        }
    }

    /// Classifies a non-success HTTP response.
    ///
    /// The message reads `HTTP 401 Unauthorized from URL: DETAIL`, where
    /// DETAIL is the provider's `error.message` when the body is JSON that
    /// has one, else the (capped) body text.
    pub fn from_http(status: u16, headers: &HeaderMap, body: &str, url: &str) -> Self {
        let detail = body_detail(body);
        let kind = classify_http(status, body);
        let reason = reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("");
        let mut message = format!("HTTP {status}");
        if !reason.is_empty() {
            message.push(' ');
            message.push_str(reason);
        }
        message.push_str(" from ");
        message.push_str(&redact_url(url));
        if !detail.is_empty() {
            message.push_str(": ");
            message.push_str(&detail);
        }
        Error {
            kind,
            message,
            status: Some(status),
            retry_after: parse_retry_after(headers, SystemTime::now()),
        }
    }

    /// Classifies an error object sent inside a stream (for example a
    /// `data: {"error":{…}}` event), using its code, type and message.
    pub fn from_stream_error(error: &Value, url: &str) -> Self {
        let detail = error_message(error).unwrap_or_else(|| cap(&error.to_string()));
        let code = [&error["code"], &error["type"], &error["error"]["code"]]
            .iter()
            .filter_map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(" ");
        let haystack = format!("{code} {detail}").to_ascii_lowercase();
        let kind = if is_context_overflow(&haystack) {
            ErrorKind::ContextWindowExceeded
        } else if haystack.contains("rate_limit") || haystack.contains("rate limit") {
            ErrorKind::RateLimitExceeded
        } else if haystack.contains("overloaded")
            || haystack.contains("server_error")
            || haystack.contains("unavailable")
        {
            ErrorKind::ServerOverloaded
        } else {
            ErrorKind::Other
        };
        let status = error["status"]
            .as_u64()
            .or_else(|| error["code"].as_u64())
            .and_then(|s| u16::try_from(s).ok());
        Error {
            kind,
            message: format!("error in stream from {}: {detail}", redact_url(url)),
            status,
            retry_after: None,
        }
    }

    /// A transport error from reqwest (connect, send, body read).
    pub fn from_transport(err: reqwest::Error, url: &str) -> Self {
        let err = err.without_url();
        let kind = if err.is_timeout() {
            ErrorKind::Timeout
        } else {
            ErrorKind::Connection
        };
        let what = if err.is_connect() {
            "cannot connect to"
        } else {
            "request failed to"
        };
        Error::new(
            kind,
            format!("{what} {}: {}", redact_url(url), error_chain(&err)),
        )
    }
}

/// `err` and its sources joined with `: ` (reqwest's own `Display` hides the
/// useful part, such as "connection refused", in the source chain). Any URL
/// in the chain loses its query string.
pub(crate) fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        let text = e.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        current = e.source();
    }
    redact_urls_in(&parts.join(": "))
}

/// The URL without its query string or fragment (some providers take keys
/// as query parameters) and without user info.
pub(crate) fn redact_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or("").to_owned(),
    }
}

/// Strips query strings (and user info) from every URL inside free text.
fn redact_urls_in(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = ["http://", "https://"]
        .iter()
        .filter_map(|scheme| rest.find(scheme))
        .min()
    {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '\'' | '>' | ']'))
            .unwrap_or(tail.len());
        let url = tail[..end].trim_end_matches([':', ',', '.', ';']);
        out.push_str(&redact_url(url));
        rest = &tail[url.len()..];
    }
    out.push_str(rest);
    out
}

/// `error.message` (or `error` as a string, or a top-level `message`) of a
/// JSON error body.
fn error_message(value: &Value) -> Option<String> {
    let candidates = [
        &value["error"]["message"],
        &value["error"],
        &value["message"],
        &value["detail"],
    ];
    candidates
        .iter()
        .find_map(|v| v.as_str())
        .filter(|s| !s.trim().is_empty())
        .map(cap)
}

/// The part of an error body worth showing: the provider's message when the
/// body is JSON, else the trimmed body text, capped.
fn body_detail(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(v) => error_message(&v).unwrap_or_else(|| cap(body.trim())),
        Err(_) => cap(body.trim()),
    }
}

/// `text` cut to [`MAX_BODY_CHARS`] characters, on one line.
fn cap(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(MAX_BODY_CHARS) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

fn is_context_overflow(lower: &str) -> bool {
    [
        "context_length_exceeded",
        "maximum context length",
        "context length",
        "context window",
        "too many tokens",
        "prompt is too long",
        "input is too long",
        "exceeds the context",
    ]
    .iter()
    .any(|needle| lower.contains(needle))
}

/// The kind of a non-success HTTP status with this body.
pub fn classify_http(status: u16, body: &str) -> ErrorKind {
    let lower = body.to_ascii_lowercase();
    match status {
        401 | 403 => ErrorKind::Unauthorized,
        404 => ErrorKind::ModelNotFound,
        429 => ErrorKind::RateLimitExceeded,
        408 => ErrorKind::Timeout,
        400 | 413 | 422 if is_context_overflow(&lower) => ErrorKind::ContextWindowExceeded,
        400 | 413 | 422 => ErrorKind::BadRequest,
        503 | 529 => ErrorKind::ServerOverloaded,
        _ if lower.contains("overloaded") => ErrorKind::ServerOverloaded,
        // Other 5xx stay `Other` with their status, which `is_retryable`
        // treats as transient.
        _ => ErrorKind::Other,
    }
}

/// `retry-after-ms` (milliseconds), else `retry-after` (seconds, possibly
/// fractional, or an HTTP date, counted from `now`).
pub fn parse_retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|s| !s.is_empty())
    };
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn http_statuses_classify() {
        assert_eq!(classify_http(401, ""), ErrorKind::Unauthorized);
        assert_eq!(classify_http(403, ""), ErrorKind::Unauthorized);
        assert_eq!(classify_http(404, ""), ErrorKind::ModelNotFound);
        assert_eq!(classify_http(429, ""), ErrorKind::RateLimitExceeded);
        assert_eq!(classify_http(400, "bad field"), ErrorKind::BadRequest);
        assert_eq!(classify_http(422, "nope"), ErrorKind::BadRequest);
        for body in [
            r#"{"error":{"code":"context_length_exceeded"}}"#,
            "This model's maximum context length is 8192 tokens",
            "too many tokens",
            "prompt is too long: 210000 tokens > 200000 maximum",
        ] {
            assert_eq!(classify_http(400, body), ErrorKind::ContextWindowExceeded);
        }
        assert_eq!(
            classify_http(413, "Prompt is too long"),
            ErrorKind::ContextWindowExceeded
        );
        assert_eq!(classify_http(503, ""), ErrorKind::ServerOverloaded);
        assert_eq!(classify_http(529, ""), ErrorKind::ServerOverloaded);
        assert_eq!(
            classify_http(500, "overloaded_error"),
            ErrorKind::ServerOverloaded
        );
        assert_eq!(classify_http(500, "boom"), ErrorKind::Other);
    }

    #[test]
    fn message_is_one_clear_line_without_secrets() {
        let body =
            r#"{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}"#;
        let e = Error::from_http(
            401,
            &HeaderMap::new(),
            body,
            "http://user:pw@127.0.0.1:9/v1/chat/completions?key=sk-secret",
        );
        assert_eq!(e.kind, ErrorKind::Unauthorized);
        assert_eq!(
            e.to_string(),
            "HTTP 401 Unauthorized from http://127.0.0.1:9/v1/chat/completions: Incorrect API key provided"
        );
        assert!(!e.is_retryable());

        let long = "x\n".repeat(1000);
        let e = Error::from_http(502, &HeaderMap::new(), &long, "http://h/v1");
        assert!(
            e.message.chars().count() < MAX_BODY_CHARS + 60,
            "{}",
            e.message
        );
        assert!(!e.message.contains('\n'));
        assert!(e.is_retryable());
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "2")]), now),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            parse_retry_after(
                &headers(&[("retry-after", "2"), ("retry-after-ms", "1500")]),
                now
            ),
            Some(Duration::from_millis(1500))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", &date)]), now),
            Some(Duration::from_secs(30))
        );
        let past = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", &past)]), now),
            Some(Duration::ZERO)
        );
        assert_eq!(
            parse_retry_after(&headers(&[("retry-after", "soon")]), now),
            None
        );
        assert_eq!(parse_retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn retryability_and_wire_names() {
        let mut e = Error::new(ErrorKind::Other, "x");
        assert!(!e.is_retryable());
        e.status = Some(500);
        assert!(e.is_retryable());
        assert!(Error::new(ErrorKind::StreamCut, "x").is_retryable());
        assert!(Error::new(ErrorKind::Timeout, "x").is_retryable());
        assert!(!Error::cancelled().is_retryable());
        assert!(!Error::new(ErrorKind::ContextWindowExceeded, "x").is_retryable());
        assert_eq!(ErrorKind::Cancelled.as_wire(), "aborted");
        assert_eq!(
            ErrorKind::ContextWindowExceeded.as_wire(),
            "contextWindowExceeded"
        );
    }

    #[test]
    fn stream_errors_classify() {
        let e = Error::from_stream_error(
            &serde_json::json!({"message":"Rate limit reached","type":"rate_limit_error"}),
            "http://h/v1/chat/completions",
        );
        assert_eq!(e.kind, ErrorKind::RateLimitExceeded);
        assert!(e.message.contains("Rate limit reached"));
    }

    #[test]
    fn transport_chain_drops_queries() {
        assert_eq!(
            redact_urls_in("error sending request for url (http://h/x?key=abc): refused"),
            "error sending request for url (http://h/x): refused"
        );
        assert_eq!(
            redact_urls_in("see https://a:b@h:8/p?k=1, then http://h/"),
            "see https://h:8/p, then http://h/"
        );
    }
}
