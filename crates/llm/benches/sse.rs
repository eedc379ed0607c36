//! Micro-benchmark of the SSE parser on a realistic Chat Completions stream.
//!
//! The stream is what an OpenAI-compatible server sends for a 400-token
//! answer: a role chunk, one `chat.completion.chunk` per token, a finish
//! chunk, a usage chunk and `[DONE]`. It is fed to [`SseParser`] in chunks
//! of the sizes a socket delivers (one event per read, 1 KiB and 16 KiB
//! reads) and in tiny 7-byte pieces (worst case: every line split).
//! Run with `cargo bench -p keel-llm --bench sse`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keel_llm::sse::SseParser;

/// The body of one streamed answer of `tokens` text deltas.
fn chat_stream(tokens: usize) -> Vec<u8> {
    let head = r#"{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4.1-2025-04-14","system_fingerprint":"fp_4d2e0f3f3c","choices":[{"index":0,"delta":"#;
    let mut out = Vec::new();
    let mut event = |delta: &str, finish: &str| {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(head.as_bytes());
        out.extend_from_slice(delta.as_bytes());
        out.extend_from_slice(br#","logprobs":null,"finish_reason":"#);
        out.extend_from_slice(finish.as_bytes());
        out.extend_from_slice(b"}]}\n\n");
    };
    event(
        r#"{"role":"assistant","content":"","refusal":null}"#,
        "null",
    );
    let words = [
        "The",
        " function",
        " returns",
        " early",
        " when",
        " the",
        " list",
        " is",
    ];
    for i in 0..tokens {
        event(
            &format!(r#"{{"content":"{}"}}"#, words[i % words.len()]),
            "null",
        );
    }
    event("{}", r#""stop""#);
    out.extend_from_slice(
        br#"data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4.1-2025-04-14","choices":[],"usage":{"prompt_tokens":1204,"completion_tokens":400,"total_tokens":1604,"prompt_tokens_details":{"cached_tokens":1024}}}"#,
    );
    out.extend_from_slice(b"\n\ndata: [DONE]\n\n");
    out
}

/// Parses `body` in pieces of `chunk` bytes; returns the number of events.
fn parse(body: &[u8], chunk: usize) -> usize {
    let mut parser = SseParser::new();
    let mut n = 0;
    for piece in body.chunks(chunk) {
        n += parser.push(piece).len();
    }
    n
}

/// Parses `body` one event per push (a server that flushes every event).
fn parse_per_event(pieces: &[&[u8]]) -> usize {
    let mut parser = SseParser::new();
    pieces.iter().map(|p| parser.push(p).len()).sum()
}

fn bench_sse(c: &mut Criterion) {
    let body = chat_stream(400);
    let events: Vec<&[u8]> = body
        .split_inclusive(|&b| b == b'\n')
        .collect::<Vec<_>>()
        .chunks(2)
        .map(|pair| {
            let start = pair[0].as_ptr() as usize - body.as_ptr() as usize;
            let len: usize = pair.iter().map(|l| l.len()).sum();
            &body[start..start + len]
        })
        .collect();
    assert_eq!(parse(&body, 1024), 404, "fixture should hold 404 events");

    let mut g = c.benchmark_group("sse/chat_completions_400_deltas");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function("one_event_per_read", |b| {
        b.iter(|| parse_per_event(black_box(&events)))
    });
    for chunk in [1024usize, 16 * 1024] {
        g.bench_function(format!("reads_of_{chunk}_bytes"), |b| {
            b.iter(|| parse(black_box(&body), chunk))
        });
    }
    g.bench_function("reads_of_7_bytes", |b| {
        b.iter(|| parse(black_box(&body), 7))
    });
    g.finish();
}

criterion_group!(benches, bench_sse);
criterion_main!(benches);
