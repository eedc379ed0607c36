//! Micro-benchmark of NDJSON framing: splitting a byte stream into frames
//! ([`FrameReader`]) and writing frames ([`FrameWriter`], and the writer
//! task behind a [`keel_jsonl::FrameSender`]).
//!
//! The input is 1,000 frames of the size RPC traffic has (a ~230-byte event
//! frame carrying a text delta), delivered by an in-memory reader in one
//! piece and in 4 KiB reads (what a pipe hands out). Output goes to
//! `tokio::io::sink()`, so only framing is measured.
//! Run with `cargo bench -p keel-jsonl --bench framing`.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use keel_jsonl::{DEFAULT_MAX_FRAME_BYTES, FrameReader, FrameWriter, spawn_writer};
use tokio::runtime::Runtime;

const FRAME: &str = r#"{"type":"event","protocol_version":2,"session_id":"0196a6c2-4a7e-7c61-9d38-3a5f2b1e8c77","seq":42,"frame_id":"evt_0196a6c24a7e7c619d383a5f2b1e8c77","payload":{"event_type":"message_update","event":{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":" world"}}}}"#;
const FRAMES: usize = 1000;

fn input() -> Vec<u8> {
    let mut out = Vec::with_capacity((FRAME.len() + 1) * FRAMES);
    for _ in 0..FRAMES {
        out.extend_from_slice(FRAME.as_bytes());
        out.push(b'\n');
    }
    out
}

/// An `AsyncRead` over a slice that hands out at most `chunk` bytes a read.
struct Chunked<'a> {
    data: &'a [u8],
    chunk: usize,
}

impl tokio::io::AsyncRead for Chunked<'_> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let n = self.chunk.min(self.data.len()).min(buf.remaining());
        let (head, tail) = self.data.split_at(n);
        buf.put_slice(head);
        self.data = tail;
        std::task::Poll::Ready(Ok(()))
    }
}

async fn read_all<R: tokio::io::AsyncRead + Unpin>(r: R) -> usize {
    let mut frames = FrameReader::new(r, DEFAULT_MAX_FRAME_BYTES);
    let mut n = 0;
    while let Some(item) = frames.next_frame().await {
        if item.is_ok() {
            n += 1;
        }
    }
    n
}

fn bench_framing(c: &mut Criterion) {
    let Ok(rt) = tokio::runtime::Builder::new_current_thread().build() else {
        return;
    };
    let rt: Runtime = rt;
    let data = input();
    assert_eq!(rt.block_on(read_all(&data[..])), FRAMES);

    let mut g = c.benchmark_group("jsonl/1000_frames");
    g.throughput(Throughput::Bytes(data.len() as u64));
    g.bench_function("read/one_buffer", |b| {
        b.iter(|| rt.block_on(read_all(black_box(&data[..]))))
    });
    g.bench_function("read/4k_reads", |b| {
        b.iter(|| {
            rt.block_on(read_all(Chunked {
                data: black_box(&data[..]),
                chunk: 4096,
            }))
        })
    });
    g.bench_function("write/frame_writer", |b| {
        b.iter(|| {
            rt.block_on(async {
                let mut w = FrameWriter::new(tokio::io::sink());
                for _ in 0..FRAMES {
                    let _ = w.write_frame(black_box(FRAME.as_bytes())).await;
                }
                let _ = w.flush().await;
            })
        })
    });
    g.bench_function("write/sender_and_task", |b| {
        b.iter(|| {
            rt.block_on(async {
                let (tx, task) = spawn_writer(tokio::io::sink());
                for _ in 0..FRAMES {
                    let _ = tx.send_bytes(black_box(FRAME.as_bytes()).to_vec()).await;
                }
                drop(tx);
                let _ = task.await;
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench_framing);
criterion_main!(benches);
