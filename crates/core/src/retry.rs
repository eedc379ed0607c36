//! Automatic retries of failed model calls.
//!
//! This module owns the [`RetryPolicy`] (whether to retry, how often, how
//! long to wait) and the backoff it computes: exponential from
//! `base_delay`, capped at `max_delay`, with "equal jitter" (half the
//! delay fixed, half drawn from a seed the caller derives from the session
//! clock, so the loop stays deterministic given its inputs). A server's
//! `retry-after` is honoured exactly; one asking for longer than
//! `max_delay` is not waited for (the call fails at once, as pi does).
//!
//! What is retried is [`keel_llm::Error::is_retryable`]: rate limits,
//! overload and other 5xx, connection failures, idle timeouts and streams
//! cut before completion. The turn loop ([`crate::run`]) decides when to
//! ask, emits the `auto_retry_*` events and waits through
//! [`Clock::sleep`](crate::Clock::sleep).

use std::time::Duration;

/// How failed model calls are retried.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Whether to retry at all (a session can toggle it at run time).
    pub enabled: bool,
    /// Most retries after the first call fails.
    pub max_retries: u32,
    /// The wait before the first retry (doubled for each next one).
    pub base_delay: Duration,
    /// The longest wait between two calls.
    pub max_delay: Duration,
}

/// Default [`RetryPolicy::max_retries`].
pub const DEFAULT_MAX_RETRIES: u32 = 3;
/// Default [`RetryPolicy::base_delay`].
pub const DEFAULT_BASE_DELAY: Duration = Duration::from_secs(2);
/// Default [`RetryPolicy::max_delay`].
pub const DEFAULT_MAX_DELAY: Duration = Duration::from_secs(30);

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            enabled: true,
            max_retries: DEFAULT_MAX_RETRIES,
            base_delay: DEFAULT_BASE_DELAY,
            max_delay: DEFAULT_MAX_DELAY,
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn disabled() -> Self {
        RetryPolicy {
            enabled: false,
            ..RetryPolicy::default()
        }
    }

    /// The wait before retry number `attempt` (from 1) after `error`, or
    /// `None` when the call must not be retried: the error is final, the
    /// retries are used up, or the server asks for a longer wait than
    /// `max_delay`. Does not look at `enabled`.
    pub fn delay(&self, attempt: u32, error: &keel_llm::Error, seed: u64) -> Option<Duration> {
        if attempt == 0 || attempt > self.max_retries || !error.is_retryable() {
            return None;
        }
        if let Some(after) = error.retry_after {
            return (after <= self.max_delay).then_some(after);
        }
        let doubling = 1u32 << (attempt - 1).min(20);
        let full = self.base_delay.saturating_mul(doubling).min(self.max_delay);
        let half = full / 2;
        Some(half + half.mul_f64(unit_interval(seed)))
    }
}

/// A number in `[0, 1)` from `seed` (splitmix64).
fn unit_interval(seed: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// A seed for the jitter of one retry: the session, the time and the
/// attempt.
pub(crate) fn jitter_seed(session_id: &str, now_ms: i64, attempt: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in session_id.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h ^ (now_ms as u64).rotate_left(17) ^ u64::from(attempt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use keel_llm::{Error, ErrorKind};

    fn err(kind: ErrorKind) -> Error {
        Error::new(kind, "x")
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let p = RetryPolicy::default();
        for seed in [0, 1, 42, u64::MAX] {
            let d1 = p
                .delay(1, &err(ErrorKind::RateLimitExceeded), seed)
                .unwrap();
            assert!(
                d1 >= Duration::from_secs(1) && d1 <= Duration::from_secs(2),
                "{d1:?}"
            );
            let d3 = p.delay(3, &err(ErrorKind::StreamCut), seed).unwrap();
            assert!(
                d3 >= Duration::from_secs(4) && d3 <= Duration::from_secs(8),
                "{d3:?}"
            );
        }
        let long = RetryPolicy {
            max_retries: 30,
            ..RetryPolicy::default()
        };
        let d = long.delay(30, &err(ErrorKind::Timeout), 7).unwrap();
        assert!(d <= DEFAULT_MAX_DELAY);
        assert_eq!(p.delay(4, &err(ErrorKind::Timeout), 7), None);
        assert_eq!(p.delay(0, &err(ErrorKind::Timeout), 7), None);
    }

    #[test]
    fn final_errors_are_not_retried() {
        let p = RetryPolicy::default();
        for kind in [
            ErrorKind::Unauthorized,
            ErrorKind::BadRequest,
            ErrorKind::ContextWindowExceeded,
            ErrorKind::ModelNotFound,
            ErrorKind::Cancelled,
        ] {
            assert_eq!(p.delay(1, &err(kind), 0), None, "{kind:?}");
        }
        let mut e = err(ErrorKind::Other);
        assert_eq!(p.delay(1, &e, 0), None);
        e.status = Some(502);
        assert!(p.delay(1, &e, 0).is_some());
    }

    #[test]
    fn retry_after_is_honoured_up_to_the_cap() {
        let p = RetryPolicy::default();
        let mut e = err(ErrorKind::RateLimitExceeded);
        e.retry_after = Some(Duration::from_millis(7_500));
        assert_eq!(p.delay(1, &e, 99), Some(Duration::from_millis(7_500)));
        e.retry_after = Some(Duration::from_secs(31));
        assert_eq!(p.delay(1, &e, 99), None);
    }

    #[test]
    fn seeds_spread() {
        let a = unit_interval(jitter_seed("s", 1, 1));
        let b = unit_interval(jitter_seed("s", 1, 2));
        assert!((0.0..1.0).contains(&a) && (0.0..1.0).contains(&b));
        assert_ne!(a, b);
    }
}
