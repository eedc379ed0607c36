//! Tracing setup: logs go to stderr (filtered by `RUST_LOG`, default `warn`)
//! or to a file, never to stdout.
//!
//! Without `RUST_LOG` (the usual case) the filter is a plain level per
//! target, so the directive parser and the per-span filter state are never
//! set up. llama.cpp's own lines (the binding's target `llama-cpp-2`, and
//! `llama.cpp` and `ggml`) show only when they are errors: its warnings
//! are about model files a user cannot change (`RUST_LOG=llama-cpp-2=info`
//! shows them).

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;

/// Keeps logging alive for the process lifetime.
pub struct LogGuard;

/// Installs the global subscriber: `$builder` with the writer the caller
/// chose (stderr or the log file).
macro_rules! install {
    ($builder:expr, $file:expr) => {
        match $file {
            Some(f) => $builder
                .with_ansi(false)
                .with_writer(Mutex::new(f))
                .try_init()
                .map_err(|e| e.to_string()),
            None => $builder
                .with_writer(std::io::stderr)
                .try_init()
                .map_err(|e| e.to_string()),
        }
    };
}

pub fn init(file: Option<&Path>) -> anyhow::Result<LogGuard> {
    let file = match file {
        Some(path) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?,
        ),
        None => None,
    };
    let builder = tracing_subscriber::fmt().with_target(true);
    // An unset or unparsable RUST_LOG means the default level.
    let env_filter = std::env::var_os(EnvFilter::DEFAULT_ENV)
        .and_then(|_| EnvFilter::try_from_default_env().ok());
    let installed = match env_filter {
        Some(filter) => install!(builder.with_env_filter(filter), file),
        None => {
            use tracing_subscriber::layer::SubscriberExt;
            use tracing_subscriber::util::SubscriberInitExt;
            let targets = tracing_subscriber::filter::Targets::new()
                .with_default(LevelFilter::WARN)
                .with_target("llama-cpp-2", LevelFilter::ERROR)
                .with_target("llama.cpp", LevelFilter::ERROR)
                .with_target("ggml", LevelFilter::ERROR);
            let builder = builder.with_max_level(LevelFilter::WARN);
            match file {
                Some(f) => builder
                    .with_ansi(false)
                    .with_writer(Mutex::new(f))
                    .finish()
                    .with(targets)
                    .try_init()
                    .map_err(|e| e.to_string()),
                None => builder
                    .with_writer(std::io::stderr)
                    .finish()
                    .with(targets)
                    .try_init()
                    .map_err(|e| e.to_string()),
            }
        }
    };
    installed.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))?;
    Ok(LogGuard)
}
