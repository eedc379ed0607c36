//! An incremental server-sent-events parser: bytes in, events out.
//!
//! This module owns the SSE framing rules of the WHATWG HTML standard
//! ("Interpreting an event stream"), and nothing else: it does not know what
//! the `data` of an event means (the dialect modules do) nor where the bytes
//! come from.
//!
//! Rules implemented:
//! - lines end with LF, CRLF or CR; a CR at the end of one chunk followed by
//!   an LF at the start of the next is one line end, not two;
//! - bytes are buffered until a line is complete, so a UTF-8 character split
//!   across chunks decodes correctly (invalid UTF-8 is replaced, not fatal);
//! - a leading byte-order mark is skipped;
//! - `field: value` with one optional space after the colon stripped; a line
//!   without a colon is a field with an empty value;
//! - `data` lines are joined with `\n`; `event` sets the type (default
//!   `message`); `id` sets the last event id (ignored if it contains NUL);
//!   `retry` and unknown fields are ignored; lines starting with `:` are
//!   comments (`: keep-alive`);
//! - a blank line dispatches the event, unless no `data` line was seen;
//! - at end of input a pending event is not dispatched;
//!   [`SseParser::is_mid_event`] tells whether one was left (a cut stream);
//! - one event (its pending line and data) holds at most
//!   [`MAX_EVENT_BYTES`]; past that the parser stops taking input and
//!   [`SseParser::overflowed`] says so, so memory stays bounded by the cap.

/// The most one event may hold: 16 MiB.
pub const MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, `message` when absent.
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last event id seen so far in the stream, if any.
    pub id: Option<String>,
}

/// Incremental parser state. Feed it with [`SseParser::push`].
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the current, not yet terminated line.
    line: Vec<u8>,
    /// The previous chunk ended with CR: skip an LF at the start of the next.
    skip_lf: bool,
    /// No line has been completed yet (BOM handling).
    started: bool,
    data: String,
    has_data: bool,
    event: Option<String>,
    last_id: Option<String>,
    /// A field line was seen since the last dispatch.
    pending_fields: bool,
    /// The cap on one event (0: [`MAX_EVENT_BYTES`]).
    limit: usize,
    /// An event grew past the cap; no more input is taken.
    overflowed: bool,
}

const BOM: &[u8] = "\u{feff}".as_bytes();

impl SseParser {
    pub fn new() -> Self {
        SseParser::default()
    }

    /// A parser whose events hold at most `limit` bytes.
    pub fn with_limit(limit: usize) -> Self {
        SseParser {
            limit,
            ..SseParser::default()
        }
    }

    /// Whether an event grew past the cap (the stream must be given up).
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }

    fn over(&mut self, more: usize) -> bool {
        let limit = if self.limit == 0 {
            MAX_EVENT_BYTES
        } else {
            self.limit
        };
        if self.line.len() + self.data.len() + more > limit {
            self.overflowed = true;
            self.line = Vec::new();
            self.data = String::new();
        }
        self.overflowed
    }

    /// Parses `chunk` and returns the events it completed, in order.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if self.overflowed {
            return events;
        }
        let mut rest = chunk;
        if self.skip_lf {
            self.skip_lf = false;
            if let Some(tail) = rest.strip_prefix(b"\n") {
                rest = tail;
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            if self.over(pos) {
                return events;
            }
            self.line.extend_from_slice(&rest[..pos]);
            let terminator = rest[pos];
            rest = &rest[pos + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            let line = std::mem::take(&mut self.line);
            if let Some(event) = self.process_line(&line) {
                events.push(event);
            }
        }
        if !self.over(rest.len()) {
            self.line.extend_from_slice(rest);
        }
        events
    }

    /// Whether input ended in the middle of an event: an unterminated line,
    /// or fields not yet dispatched by a blank line.
    pub fn is_mid_event(&self) -> bool {
        !self.line.is_empty() || self.pending_fields
    }

    fn process_line(&mut self, raw: &[u8]) -> Option<SseEvent> {
        let mut raw = raw;
        if !self.started {
            self.started = true;
            raw = raw.strip_prefix(BOM).unwrap_or(raw);
        }
        if raw.is_empty() {
            return self.dispatch();
        }
        if raw.first() == Some(&b':') {
            return None;
        }
        let line = String::from_utf8_lossy(raw);
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line.as_ref(), ""),
        };
        self.pending_fields = true;
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_owned()),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_owned()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        self.pending_fields = false;
        let event = self.event.take();
        if !self.has_data {
            return None;
        }
        self.has_data = false;
        let mut data = std::mem::take(&mut self.data);
        if data.ends_with('\n') {
            data.pop();
        }
        Some(SseEvent {
            event: event.unwrap_or_else(|| "message".to_owned()),
            data,
            id: self.last_id.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_of(events: &[SseEvent]) -> Vec<&str> {
        events.iter().map(|e| e.data.as_str()).collect()
    }

    /// Feeds `chunks` one by one and collects every event.
    fn feed(chunks: &[&[u8]]) -> (Vec<SseEvent>, SseParser) {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for c in chunks {
            out.extend(p.push(c));
        }
        (out, p)
    }

    #[test]
    fn one_event_past_the_cap_stops_the_parser() {
        let mut p = SseParser::with_limit(64);
        assert_eq!(p.push(b"data: small\n\n").len(), 1);
        let big = format!("data: {}", "x".repeat(40));
        assert!(p.push(big.as_bytes()).is_empty());
        assert!(!p.overflowed());
        assert!(p.push(big.as_bytes()).is_empty());
        assert!(p.overflowed(), "two pieces of one line past the cap");
        assert!(p.push(b"\n\ndata: after\n\n").is_empty());
        let mut p = SseParser::with_limit(64);
        let many = "data: 0123456789\n".repeat(8);
        assert!(p.push(many.as_bytes()).is_empty());
        assert!(p.overflowed(), "many data lines of one event");
    }

    #[test]
    fn lines_split_across_chunks() {
        let (events, p) = feed(&[b"da", b"ta: hel", b"lo\n", b"\ndata: x\n\n"]);
        assert_eq!(data_of(&events), ["hello", "x"]);
        assert_eq!(events[0].event, "message");
        assert!(!p.is_mid_event());
    }

    #[test]
    fn every_byte_its_own_chunk() {
        let input = b"event: a\r\ndata: 1\r\n\r\ndata: 2\r\rdata: 3\n\n";
        let chunks: Vec<&[u8]> = input.chunks(1).collect();
        let (events, p) = feed(&chunks);
        assert_eq!(data_of(&events), ["1", "2", "3"]);
        assert_eq!(events[0].event, "a");
        assert_eq!(events[1].event, "message");
        assert!(!p.is_mid_event());
    }

    #[test]
    fn crlf_and_cr_line_ends() {
        let (events, _) = feed(&[b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]);
        assert_eq!(data_of(&events), ["a", "b", "c"]);
    }

    #[test]
    fn cr_at_chunk_end_then_lf_is_one_line_end() {
        // Were the LF counted as a second line end, "data: 1" would be
        // dispatched as soon as the LF arrives and "data: 2" would be a
        // separate event.
        let (events, p) = feed(&[b"data: 1\r", b"\ndata: 2\r", b"\n\r", b"\n"]);
        assert_eq!(data_of(&events), ["1\n2"]);
        assert!(!p.is_mid_event());
    }

    #[test]
    fn multi_line_data_and_space_stripping() {
        let (events, _) = feed(&[b"data: one\ndata:two\ndata:  three\ndata\n\n"]);
        assert_eq!(data_of(&events), ["one\ntwo\n three\n"]);
    }

    #[test]
    fn done_sentinel_is_plain_data() {
        let (events, _) = feed(&[b"data: {\"a\":1}\n\ndata: [DONE]\n\n"]);
        assert_eq!(data_of(&events), ["{\"a\":1}", "[DONE]"]);
    }

    #[test]
    fn comments_and_empty_events_are_ignored() {
        let (events, p) =
            feed(&[b": keep-alive\n\n:ping\n\nevent: x\n\nretry: 5\nfoo: bar\n\ndata: y\n\n"]);
        assert_eq!(data_of(&events), ["y"]);
        assert_eq!(
            events[0].event, "message",
            "an event type without data must not leak"
        );
        assert!(!p.is_mid_event());
    }

    #[test]
    fn ids_persist_and_nul_ids_are_ignored() {
        let (events, _) = feed(&[b"id: 7\ndata: a\n\ndata: b\n\nid: x\0y\ndata: c\n\n"]);
        let ids: Vec<_> = events.iter().map(|e| e.id.as_deref()).collect();
        assert_eq!(ids, [Some("7"), Some("7"), Some("7")]);
    }

    #[test]
    fn cut_mid_event_is_detected() {
        let (events, p) = feed(&[b"data: whole\n\n", b"data: {\"half"]);
        assert_eq!(data_of(&events), ["whole"]);
        assert!(p.is_mid_event());

        // A complete line but no blank line yet is still mid-event.
        let (events, p) = feed(&[b"data: x\n"]);
        assert!(events.is_empty());
        assert!(p.is_mid_event());

        // A trailing comment only is not an event, but its line is unterminated.
        let (_, p) = feed(&[b"data: x\n\n: keep"]);
        assert!(p.is_mid_event());
        let (_, p) = feed(&[b"data: x\n\n: keep-alive\n"]);
        assert!(!p.is_mid_event());
    }

    #[test]
    fn utf8_split_across_chunks() {
        let text = "data: héllo 🦀\n\n".as_bytes();
        // Split inside the 4-byte crab and inside the 2-byte é.
        let crab = text.len() - 4;
        let (events, _) = feed(&[&text[..8], &text[8..crab], &text[crab..]]);
        assert_eq!(data_of(&events), ["héllo 🦀"]);
        let chunks: Vec<&[u8]> = text.chunks(1).collect();
        let (events, _) = feed(&chunks);
        assert_eq!(data_of(&events), ["héllo 🦀"]);
    }

    #[test]
    fn leading_bom_is_skipped() {
        let (events, _) = feed(&[&BOM[..2], &BOM[2..], b"data: a\n\n"]);
        assert_eq!(data_of(&events), ["a"]);
    }
}
