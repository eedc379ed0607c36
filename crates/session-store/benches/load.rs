//! Micro-benchmark of opening a big session: [`load`] of a 100,000-entry
//! session file (written once through the store's own writer: user prompts,
//! assistant messages with a tool call, tool results of ~1 KiB, assistant
//! text), then what a mode does with it on resume: the messages of the
//! active branch, the session name and the last model.
//! Run with `cargo bench -p keel-session-store --bench load`.
#![allow(clippy::print_stdout, clippy::print_stderr)] // a benchmark reports on the terminal

use std::path::PathBuf;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use keel_protocol::Message;
use keel_session_store::{EntryBody, SessionStore, load};
use serde_json::json;

const ENTRIES: usize = 100_000;

fn messages() -> Vec<Message> {
    let output = "src/lib.rs:12: fn parse(input: &str) -> Result<Ast> {\n".repeat(18);
    [
        json!({"role":"user","content":[{"type":"text","text":"Find where the parser rejects trailing commas and fix it."}],"timestamp":1_767_000_000_000u64}),
        json!({"role":"assistant","content":[{"type":"text","text":"Let me look for the parser."},{"type":"toolCall","id":"call_1","name":"bash","arguments":{"command":"grep -rn 'fn parse' src"}}],"api":"openai-completions","provider":"openai","model":"gpt-4.1","usage":{"input":1042,"output":36,"cacheRead":0,"cacheWrite":0,"totalTokens":1078,"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}},"stopReason":"toolUse","timestamp":1_767_000_000_100u64}),
        json!({"role":"toolResult","toolCallId":"call_1","toolName":"bash","content":[{"type":"text","text":output}],"isError":false,"timestamp":1_767_000_000_200u64}),
        json!({"role":"assistant","content":[{"type":"text","text":"The parser is in src/lib.rs; the trailing comma is rejected in `parse_list`."}],"api":"openai-completions","provider":"openai","model":"gpt-4.1","usage":{"input":2042,"output":20,"cacheRead":1024,"cacheWrite":0,"totalTokens":2062,"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}},"stopReason":"stop","timestamp":1_767_000_000_300u64}),
    ]
    .into_iter()
    .filter_map(|v| serde_json::from_value(v).ok())
    .collect()
}

/// Writes the fixture; returns its path and the folder that holds it.
fn fixture(rt: &tokio::runtime::Runtime) -> Option<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir().ok()?;
    let store = SessionStore::new(dir.path().join("sessions"));
    let cwd = dir.path().join("work");
    let samples = messages();
    if samples.len() != 4 {
        return None;
    }
    let path = rt.block_on(async {
        let writer = store.create(&cwd, None).await.ok()?;
        for i in 0..ENTRIES {
            let message = samples[i % samples.len()].clone();
            writer.append(EntryBody::Message { message }).await.ok()?;
        }
        writer.close().await.ok()?;
        Some(writer.path().to_path_buf())
    })?;
    Some((dir, path))
}

fn bench_load(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let Some((_dir, path)) = fixture(&rt) else {
        eprintln!("could not write the fixture");
        return;
    };
    let mut g = c.benchmark_group("session_store/100k_entries");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("load", |b| {
        b.iter(|| rt.block_on(load(&path)).map(|s| s.entries.len()))
    });
    let Ok(loaded) = rt.block_on(load(&path)) else {
        return;
    };
    g.bench_function("messages_name_last_model", |b| {
        b.iter(|| (loaded.messages().len(), loaded.name(), loaded.last_model()))
    });
    g.finish();
}

criterion_group!(benches, bench_load);
criterion_main!(benches);
