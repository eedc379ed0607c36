//! Tracing setup: logs go to stderr (filtered by `RUST_LOG`, default `warn`)
//! or to a file, never to stdout.

use std::fs::OpenOptions;
use std::path::Path;
use std::sync::Mutex;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

/// Keeps logging alive for the process lifetime.
pub struct LogGuard;

pub fn init(file: Option<&Path>) -> anyhow::Result<LogGuard> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true);
    match file {
        Some(path) => {
            let f = OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(Mutex::new(f))
                .try_init()
                .map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))?;
        }
        None => {
            builder
                .with_writer(std::io::stderr)
                .try_init()
                .map_err(|e| anyhow::anyhow!("cannot set up logging: {e}"))?;
        }
    }
    Ok(LogGuard)
}
