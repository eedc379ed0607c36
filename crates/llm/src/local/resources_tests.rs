//! Tests of the thread choice and the memory checks, on sample `/proc`
//! texts and model shapes.

use super::*;

/// Qwen2.5 1.5B: 28 layers, 1536 wide, 12 heads, 2 of them for keys and
/// values, trained for 32k tokens.
const QWEN_1_5B: ModelShape = ModelShape {
    layers: 28,
    embedding: 1536,
    heads: 12,
    kv_heads: 2,
    train_context: 32768,
};

#[test]
fn threads_leave_the_cores_others_keep_busy() {
    // Idle two-core machine: both.
    assert_eq!(threads_for(2, 2, 0.1), 2);
    // A build using most of both cores: one.
    assert_eq!(threads_for(2, 2, 1.8), 1);
    // A build using one core: one.
    assert_eq!(threads_for(2, 2, 1.0), 1);
    // Never fewer than one, never more than the maximum.
    assert_eq!(threads_for(2, 2, 5.0), 1);
    assert_eq!(threads_for(7, 8, 0.0), 7);
    assert_eq!(threads_for(7, 8, 3.2), 5);
    assert_eq!(threads_for(0, 1, 0.0), 1);
}

#[test]
fn proc_stat_and_self_stat_parse() {
    let stat = "cpu  100 5 50 800 20 1 2 3 0 0\ncpu0 50 2 25 400 10 0 1 1 0 0\nintr 1\n";
    let t = parse_cpu_line(stat).unwrap();
    assert_eq!(t.total, 100 + 5 + 50 + 800 + 20 + 1 + 2 + 3);
    assert_eq!(t.busy, 100 + 5 + 50 + 1 + 2 + 3);
    assert_eq!(parse_cpu_line("nothing here"), None);
    // A command name with spaces and a parenthesis.
    let me = "4242 (keel (a b)) S 1 4242 4242 0 -1 4194560 100 0 0 0 17 4 0 0 20 0 3 0";
    assert_eq!(parse_self_ticks(me), Some(21));
    assert_eq!(parse_self_ticks("garbage"), None);
}

#[test]
fn busy_cores_exclude_this_process() {
    let a0 = CpuTimes {
        busy: 1000,
        total: 5000,
    };
    // 100 ticks elapsed on each of 2 cores; 150 busy ticks, 30 of them ours.
    let a1 = CpuTimes {
        busy: 1150,
        total: 5200,
    };
    let busy = busy_between(a0, 10, a1, 40, 2);
    assert!((busy - 1.2).abs() < 1e-9, "{busy}");
    assert_eq!(busy_between(a0, 0, a0, 0, 2), 0.0);
}

#[test]
fn meminfo_parses() {
    let text = "MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   2048 kB\n";
    assert_eq!(parse_mem_available(text), Some(2048 * 1024));
    assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
}

#[test]
fn kv_cache_size_of_a_known_model() {
    // 28 layers × (K and V) × 256 values × 2 bytes = 28 KiB per token.
    assert_eq!(QWEN_1_5B.kv_bytes(1), 28 * 1024);
    assert_eq!(QWEN_1_5B.kv_bytes(8192), 224 << 20);
}

#[test]
fn weights_that_do_not_fit_are_out_of_memory() {
    assert!(check_weights(1 << 30, None).is_ok());
    assert!(check_weights(1 << 30, Some(4 << 30)).is_ok());
    let err = check_weights(1 << 30, Some(1 << 30)).unwrap_err();
    assert!(err.starts_with("out of memory"), "{err}");
    assert!(err.contains("keel models pull --small"), "{err}");
}

#[test]
fn contexts_too_long_or_too_big_are_clear_errors() {
    assert!(check_context(&QWEN_1_5B, 8192, Some(8 << 30)).is_ok());
    let err = check_context(&QWEN_1_5B, 65536, Some(64 << 30)).unwrap_err();
    assert!(
        err.contains("larger than this model supports (32768"),
        "{err}"
    );
    let err = check_context(&QWEN_1_5B, 32768, Some(512 << 20)).unwrap_err();
    assert!(err.starts_with("out of memory"), "{err}");
    assert!(err.contains("context_size"), "{err}");
    // 512 MiB - 384 MiB leaves 128 MiB: 4681 tokens, rounded down.
    assert!(err.contains("about 4608 tokens fit"), "{err}");
}
