//! What one scripted request gets back.
//!
//! This module owns [`MockResponse`] (an SSE stream or an HTTP error, plus the
//! misbehaviour modifiers: delays, cuts, stalls) and [`SseEvent`] (one event
//! of an SSE body and its exact bytes on the wire). It knows nothing about
//! any dialect's JSON: the dialect modules build the events.
//!
//! SSE wire format written here: `event: NAME\n` (only for named events),
//! then one `data: LINE\n` per line of data, then a blank line; comments are
//! `: TEXT\n\n`; [`SseEvent::Raw`] is written byte for byte.

use std::time::Duration;

use serde_json::Value;

/// One event of a server-sent-events body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    /// A dispatched event: optional `event:` name and its data (multi-line
    /// data is written as several `data:` lines).
    Event { name: Option<String>, data: String },
    /// A comment line such as `: keep-alive` (clients must ignore it).
    Comment(String),
    /// Bytes written as they are, for malformed-stream tests.
    Raw(String),
}

impl SseEvent {
    /// An unnamed event carrying `data`.
    pub fn data(data: impl Into<String>) -> Self {
        SseEvent::Event {
            name: None,
            data: data.into(),
        }
    }

    /// An unnamed event whose data is `value` serialised as compact JSON.
    pub fn json(value: &Value) -> Self {
        SseEvent::data(value.to_string())
    }

    /// A named event (`event: NAME`) whose data is `value` as compact JSON.
    pub fn named_json(name: impl Into<String>, value: &Value) -> Self {
        SseEvent::Event {
            name: Some(name.into()),
            data: value.to_string(),
        }
    }

    /// The event's bytes on the wire, terminating blank line included.
    pub fn encode(&self) -> String {
        match self {
            SseEvent::Event { name, data } => {
                let mut out = String::new();
                if let Some(name) = name {
                    out.push_str("event: ");
                    out.push_str(name);
                    out.push('\n');
                }
                for line in data.split('\n') {
                    out.push_str("data: ");
                    out.push_str(line);
                    out.push('\n');
                }
                out.push('\n');
                out
            }
            SseEvent::Comment(text) => format!(": {text}\n\n"),
            SseEvent::Raw(raw) => raw.clone(),
        }
    }
}

/// Splits a whole SSE body (a fixture file) into events, each written byte
/// for byte ([`SseEvent::Raw`]) with its terminating blank line, so
/// [`MockResponse::cut_after`] and [`MockResponse::stall_after`] count
/// real events. Works with LF and CRLF line ends.
pub fn sse_from_text(text: &str) -> Vec<SseEvent> {
    let separator = if text.contains("\r\n\r\n") {
        "\r\n\r\n"
    } else {
        "\n\n"
    };
    text.split_inclusive(separator)
        .filter(|part| !part.trim().is_empty())
        .map(|part| SseEvent::Raw(part.to_owned()))
        .collect()
}

/// The body of a scripted response.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Body {
    /// `200 OK`, `content-type: text/event-stream`, these events in order.
    Sse(Vec<SseEvent>),
    /// An HTTP error with a JSON body.
    Error { status: u16, body: Value },
}

/// The scripted answer to one request.
///
/// Build one with [`MockResponse::sse`], [`MockResponse::error`] or a
/// dialect's whole-answer shortcut (for example [`MockResponse::text`]), then
/// chain modifiers. `cut_after` and `stall_after` only apply to SSE bodies.
#[derive(Debug, Clone, PartialEq)]
pub struct MockResponse {
    pub(crate) body: Body,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) delay_headers: Option<Duration>,
    pub(crate) delay_each: Option<Duration>,
    pub(crate) cut_after: Option<usize>,
    pub(crate) stall_after: Option<usize>,
}

impl MockResponse {
    fn with_body(body: Body) -> Self {
        MockResponse {
            body,
            headers: Vec::new(),
            delay_headers: None,
            delay_each: None,
            cut_after: None,
            stall_after: None,
        }
    }

    /// A `200` SSE stream of these events, in order, then a clean close.
    pub fn sse(events: Vec<SseEvent>) -> Self {
        MockResponse::with_body(Body::Sse(events))
    }

    /// An HTTP error: `status` with `json_body` as the body.
    pub fn error(status: u16, json_body: Value) -> Self {
        MockResponse::with_body(Body::Error {
            status,
            body: json_body,
        })
    }

    /// Adds a response header (for example `retry-after: 2`).
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Waits this long before sending the response headers.
    pub fn delay_headers(mut self, delay: Duration) -> Self {
        self.delay_headers = Some(delay);
        self
    }

    /// Waits this long before each event.
    pub fn delay_each(mut self, delay: Duration) -> Self {
        self.delay_each = Some(delay);
        self
    }

    /// Sends the first `n` events, then half of the next one (or half a data
    /// line when there is none), then aborts the connection: no `[DONE]`, no
    /// clean end of the chunked body.
    pub fn cut_after(mut self, n: usize) -> Self {
        self.cut_after = Some(n);
        self
    }

    /// Sends the first `n` events, then hangs without closing (until the
    /// client goes away or the server is dropped).
    pub fn stall_after(mut self, n: usize) -> Self {
        self.stall_after = Some(n);
        self
    }

    /// The SSE events of this response (empty for an error response).
    pub fn events(&self) -> &[SseEvent] {
        match &self.body {
            Body::Sse(events) => events,
            Body::Error { .. } => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_encode_as_sse() {
        assert_eq!(SseEvent::data("a\nb").encode(), "data: a\ndata: b\n\n");
        assert_eq!(
            SseEvent::named_json("x", &json!({"k":1})).encode(),
            "event: x\ndata: {\"k\":1}\n\n"
        );
        assert_eq!(
            SseEvent::Comment("keep-alive".into()).encode(),
            ": keep-alive\n\n"
        );
    }

    #[test]
    fn fixture_text_splits_into_raw_events() {
        let text = "event: a\ndata: 1\n\n: ping\n\ndata: 2\ndata: 3\n\n";
        let events = sse_from_text(text);
        assert_eq!(events.len(), 3);
        assert_eq!(events[0], SseEvent::Raw("event: a\ndata: 1\n\n".into()));
        let rejoined: String = events.iter().map(SseEvent::encode).collect();
        assert_eq!(rejoined, text);
        let crlf = text.replace('\n', "\r\n");
        assert_eq!(sse_from_text(&crlf).len(), 3);
    }
}
