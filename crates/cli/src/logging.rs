//! Tracing setup: logs go to stderr (filtered by `RUST_LOG`, default `warn`)
//! or to a file, never to stdout.
//!
//! Without `RUST_LOG` (the usual case) the filter is a plain level, so the
//! directive parser and the per-span filter state are never set up.

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
                .try_init(),
            None => $builder.with_writer(std::io::stderr).try_init(),
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
        None => install!(builder.with_max_level(LevelFilter::WARN), file),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))?;
    Ok(LogGuard)
}
