//! Test helpers shared by the SSE dialects' decoder tests: writing SSE
//! events, unwrapping decoded items, reading text and tool arguments back
//! out of events, and checking that chunk boundaries do not matter.
//!
//! It knows the SSE framing and [`ModelEvent`], no dialect's event names.

use serde_json::{Value, json};

use crate::{ModelEvent, Result};

/// One SSE event `name` whose data is `data` with `type: name` added (as
/// both the Responses and the Messages APIs send them).
pub fn ev(name: &str, mut data: Value) -> String {
    data["type"] = json!(name);
    format!("event: {name}\ndata: {data}\n\n")
}

/// The events of a stream that must not have failed.
pub fn ok(items: Vec<Result<ModelEvent>>) -> Vec<ModelEvent> {
    items.into_iter().map(|i| i.unwrap()).collect()
}

/// The assistant text of `events`, joined.
pub fn text_of(events: &[ModelEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::TextDelta(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The argument JSON of tool call `index`, joined.
pub fn args_of(events: &[ModelEvent], index: u32) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::ToolCallDelta { index: i, delta } if *i == index => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

/// `fixture` decodes the same whole, cut into chunks of each of `sizes`
/// bytes, and with CRLF line ends.
pub fn assert_any_split_decodes_the_same(
    decode: impl Fn(&[&[u8]]) -> Vec<Result<ModelEvent>>,
    fixture: &str,
    sizes: &[usize],
) {
    let whole = decode(&[fixture.as_bytes()]);
    for size in sizes {
        let chunks: Vec<&[u8]> = fixture.as_bytes().chunks(*size).collect();
        assert_eq!(decode(&chunks), whole, "chunk size {size}");
    }
    let crlf = fixture.replace('\n', "\r\n");
    assert_eq!(decode(&[crlf.as_bytes()]), whole, "CRLF line ends");
}
