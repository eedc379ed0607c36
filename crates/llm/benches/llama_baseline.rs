//! llama.cpp's own speed on a model file, without keel: the baseline for
//! the local dialect's tokens per second.
//!
//! `KEEL_BENCH_MODEL=path.gguf [KEEL_THREADS=2] cargo bench -p keel-llm
//! --features local --bench llama_baseline` loads the model with keel's
//! context window (8,192), evaluates a fixed prompt of about 1,200 tokens
//! (what keel's context holds during the quickstart task: its prompt and
//! tools, the task and a few tool results; generation slows as the
//! context grows) in batches of 128 and generates 128 tokens greedily, with
//! nothing but llama.cpp (no chat template, grammar, parsing or events),
//! and prints both rates. Run
//! `benches/local_tasks.py` (or `keel exec` with `RUST_LOG=keel_llm=info`)
//! on the same file and threads to compare: keel logs `prefill_tok_s` and
//! `gen_tok_s` for every model call.

#![allow(clippy::print_stdout, clippy::print_stderr)] // a bench reports on the terminal

use std::num::NonZeroU32;
use std::time::Instant;

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::sampling::LlamaSampler;

const BATCH: usize = 128;
const GENERATE: usize = 128;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Some(path) = std::env::var_os("KEEL_BENCH_MODEL") else {
        eprintln!("llama_baseline: set KEEL_BENCH_MODEL to a GGUF file; skipped");
        return Ok(());
    };
    let threads: i32 = std::env::var("KEEL_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(2);
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(false));
    let backend = LlamaBackend::init()?;
    let model = LlamaModel::load_from_file(&backend, &path, &LlamaModelParams::default())?;
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(8192))
        .with_n_batch(512)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model.new_context(&backend, params)?;
    let text = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
        .to_owned()
        + &"Write a long story about a lighthouse keeper and the sea. ".repeat(95)
        + "<|im_end|>\n<|im_start|>assistant\n";
    let tokens = model.vocab().tokenize(text.as_bytes(), false, true);
    let mut batch = LlamaBatch::new(BATCH, 1);
    let started = Instant::now();
    for (c, chunk) in tokens.chunks(BATCH).enumerate() {
        batch.clear();
        for (i, t) in chunk.iter().enumerate() {
            let at = c * BATCH + i;
            batch.add(*t, at as i32, &[0], at + 1 == tokens.len())?;
        }
        ctx.decode(&mut batch)?;
    }
    let prefill = started.elapsed().as_secs_f64();
    let mut sampler = LlamaSampler::greedy();
    let mut pos = tokens.len() as i32;
    let started = Instant::now();
    let mut generated = 0;
    while generated < GENERATE {
        let token = sampler.sample(&ctx, -1);
        generated += 1;
        batch.clear();
        batch.add(token, pos, &[0], true)?;
        pos += 1;
        ctx.decode(&mut batch)?;
    }
    let generation = started.elapsed().as_secs_f64();
    println!(
        "llama.cpp alone, {threads} threads: prompt {} tokens at {:.1} tokens/s, generation {generated} tokens at {:.1} tokens/s ({})",
        tokens.len(),
        tokens.len() as f64 / prefill,
        generated as f64 / generation,
        std::path::Path::new(&path).display()
    );
    Ok(())
}
