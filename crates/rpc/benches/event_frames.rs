//! Micro-benchmark of event → frame encoding in RPC mode: a `message_update`
//! carrying one text delta, as a canonical event frame (the envelope with
//! `session_id`, `seq`, `frame_id` and `payload`) and flat (pi style), and a
//! `tool_execution_end` with a few KiB of output for scale. Each iteration
//! produces the bytes that go on the wire, without the LF.
//! Run with `cargo bench -p keel-rpc --bench event_frames`.
#![allow(clippy::print_stdout, clippy::print_stderr)] // a benchmark reports on the terminal

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keel_protocol::{AgentEvent, AssistantMessageEvent};
use keel_rpc::{EventFramer, EventStyle, SeqCounters};

const SESSION: &str = "0196a6c2-4a7e-7c61-9d38-3a5f2b1e8c77";

fn text_delta() -> AgentEvent {
    AgentEvent::MessageUpdate {
        assistant_message_event: AssistantMessageEvent::TextDelta {
            content_index: 0,
            delta: " the parser".to_owned(),
        },
    }
}

fn bench_frames(c: &mut Criterion) {
    let counters = SeqCounters::default();
    let canonical = EventFramer::new(EventStyle::Canonical, SESSION, &counters);
    let flat = EventFramer::new(EventStyle::Flat, SESSION, &counters);
    let delta = text_delta();
    let Ok(sample) = canonical.encode(&delta) else {
        return;
    };

    let mut g = c.benchmark_group("rpc/encode_text_delta");
    g.throughput(Throughput::Elements(1));
    g.bench_function("canonical", |b| {
        b.iter(|| canonical.encode(black_box(&delta)).map(|v| v.len()))
    });
    g.bench_function("flat", |b| {
        b.iter(|| flat.encode(black_box(&delta)).map(|v| v.len()))
    });
    g.finish();
    eprintln!(
        "canonical text-delta frame: {} bytes: {}",
        sample.len(),
        String::from_utf8_lossy(&sample)
    );

    let output = "test result: ok. 42 passed; 0 failed\n".repeat(100);
    let Ok(end) = serde_json::from_value::<AgentEvent>(serde_json::json!({
        "type": "tool_execution_end",
        "toolCallId": "call_1",
        "toolName": "bash",
        "result": {"content": [{"type": "text", "text": output}], "details": null},
        "isError": false
    })) else {
        return;
    };
    let mut g = c.benchmark_group("rpc/encode_tool_end_3k");
    g.throughput(Throughput::Bytes(output.len() as u64));
    g.bench_function("canonical", |b| {
        b.iter(|| canonical.encode(black_box(&end)).map(|v| v.len()))
    });
    g.finish();
}

criterion_group!(benches, bench_frames);
criterion_main!(benches);
