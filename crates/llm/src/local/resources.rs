//! What the machine can give a local model: threads and memory.
//!
//! Owns the choice of llama.cpp threads when none are configured (every
//! core on a small machine, fewer while other processes keep cores busy:
//! threads that must share a core with a busy process slow the whole
//! model down), and the memory checks that turn "this will not fit" into a
//! clear error before llama.cpp allocates (an allocation that fails inside
//! llama.cpp may abort the process, and with overcommit it may "succeed"
//! and get the process killed later). Reads `/proc` on Linux; elsewhere it
//! assumes an idle machine and checks nothing. It knows nothing of
//! llama.cpp itself: callers pass the model's dimensions.
#![cfg_attr(not(feature = "local"), allow(dead_code))]

use std::time::Duration;

/// How long the CPU use of other processes is sampled.
const SAMPLE: Duration = Duration::from_millis(250);

/// Bytes reserved for llama.cpp's compute buffers and the rest of keel on
/// top of the weights and the KV cache.
const OVERHEAD: u64 = 384 << 20;

/// The threads llama.cpp uses when none are configured and the machine is
/// idle: every core on a machine with one or two (on two idle cores
/// generation is about 1.5 times and prompt evaluation twice as fast with
/// 2 threads as with 1), else one core less; at most 8.
pub fn default_threads() -> u32 {
    let threads = if cores() <= 2 { cores() } else { cores() - 1 };
    threads.clamp(1, 8)
}

/// The threads for a model context created now, when none are
/// configured: [`default_threads`], less the cores that other processes
/// keep busy at this moment (sampled for a quarter of a second), at
/// least 1. Returns the threads and the busy cores seen.
pub fn threads_now() -> (u32, f64) {
    let busy = busy_cores_elsewhere(SAMPLE).unwrap_or(0.0);
    (threads_for(default_threads(), cores(), busy), busy)
}

/// `max` threads on `cores` cores of which `busy` are used by others:
/// the free cores, rounded, between 1 and `max`.
pub fn threads_for(max: u32, cores: u32, busy: f64) -> u32 {
    let free = (f64::from(cores) - busy).max(0.0);
    let free = (free + 0.5).floor() as u32;
    free.clamp(1, max.max(1))
}

fn cores() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

/// Cores' worth of CPU time used by processes other than this one during
/// `window` (Linux; `None` elsewhere).
fn busy_cores_elsewhere(window: Duration) -> Option<f64> {
    let read = || -> Option<(CpuTimes, u64)> {
        let all = parse_cpu_line(&std::fs::read_to_string("/proc/stat").ok()?)?;
        let me = parse_self_ticks(&std::fs::read_to_string("/proc/self/stat").ok()?)?;
        Some((all, me))
    };
    let (a0, s0) = read()?;
    std::thread::sleep(window);
    let (a1, s1) = read()?;
    Some(busy_between(a0, s0, a1, s1, cores()))
}

/// The aggregate `cpu` line of `/proc/stat`, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CpuTimes {
    pub busy: u64,
    pub total: u64,
}

/// Parses the first (`cpu `) line of `/proc/stat`: user nice system idle
/// iowait irq softirq steal (guest time is already in user).
pub(crate) fn parse_cpu_line(stat: &str) -> Option<CpuTimes> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|x| x.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    let total: u64 = v.iter().sum();
    Some(CpuTimes {
        busy: total - idle,
        total,
    })
}

/// utime + stime of `/proc/self/stat` (fields 14 and 15, counted after
/// the parenthesised command name, which may contain spaces).
pub(crate) fn parse_self_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Busy cores of other processes between two samples.
pub(crate) fn busy_between(a0: CpuTimes, s0: u64, a1: CpuTimes, s1: u64, cores: u32) -> f64 {
    let total = a1.total.saturating_sub(a0.total);
    if total == 0 || cores == 0 {
        return 0.0;
    }
    let others = a1
        .busy
        .saturating_sub(a0.busy)
        .saturating_sub(s1.saturating_sub(s0));
    // `total` counts every core's ticks.
    others as f64 / (total as f64 / f64::from(cores))
}

/// Memory available now (Linux `MemAvailable`), in bytes.
pub fn mem_available() -> Option<u64> {
    parse_mem_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

pub(crate) fn parse_mem_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The shape of a model that sizes its KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelShape {
    pub layers: u32,
    pub embedding: u32,
    pub heads: u32,
    pub kv_heads: u32,
    /// The context the model was trained for.
    pub train_context: u32,
}

impl ModelShape {
    /// Bytes of an f16 KV cache for `context` tokens.
    pub fn kv_bytes(&self, context: u32) -> u64 {
        let head = u64::from(self.embedding) / u64::from(self.heads.max(1));
        let per_token = u64::from(self.layers) * 2 * head * u64::from(self.kv_heads) * 2;
        per_token * u64::from(context)
    }
}

/// Fails when the weights in `file_bytes` clearly do not fit in
/// `available` bytes (before loading).
pub fn check_weights(file_bytes: u64, available: Option<u64>) -> Result<(), String> {
    let Some(available) = available else {
        return Ok(());
    };
    let needed = file_bytes + OVERHEAD;
    if needed > available {
        return Err(format!(
            "out of memory: the model needs about {} and only {} is available; close other programs or use a smaller model (`keel models pull --small`)",
            gib(needed),
            gib(available)
        ));
    }
    Ok(())
}

/// Fails when a `context`-token context is longer than the model was
/// trained for, or its KV cache does not fit in `available` bytes (after
/// loading; the weights are already counted in `available`).
pub fn check_context(
    shape: &ModelShape,
    context: u32,
    available: Option<u64>,
) -> Result<(), String> {
    if shape.train_context > 0 && context > shape.train_context {
        return Err(format!(
            "context_size {context} is larger than this model supports ({} tokens): lower [providers.local] context_size",
            shape.train_context
        ));
    }
    let Some(available) = available else {
        return Ok(());
    };
    let needed = shape.kv_bytes(context) + OVERHEAD;
    if needed > available {
        let fits = (available.saturating_sub(OVERHEAD)) / shape.kv_bytes(1).max(1);
        return Err(format!(
            "out of memory: a {context}-token context needs about {} more and only {} is available; lower [providers.local] context_size (about {} tokens fit now)",
            gib(needed),
            gib(available),
            fits / 256 * 256
        ));
    }
    Ok(())
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

#[cfg(test)]
#[path = "resources_tests.rs"]
mod tests;
