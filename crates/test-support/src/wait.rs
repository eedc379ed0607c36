//! Polling helpers for asynchronous test conditions.
//!
//! This module owns [`wait_until`]: a bounded poll loop so tests never hang
//! on a condition that does not come true. It knows nothing about keel.

use std::time::Duration;

/// Polls `condition` every 10 ms until it returns `true`, or fails after
/// `timeout`.
pub async fn wait_until(
    timeout: Duration,
    mut condition: impl FnMut() -> bool,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            anyhow::bail!("condition not met within {timeout:?}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn waits_and_times_out() {
        let n = AtomicUsize::new(0);
        wait_until(Duration::from_secs(5), || {
            n.fetch_add(1, Ordering::SeqCst) >= 3
        })
        .await
        .unwrap();
        assert!(
            wait_until(Duration::from_millis(30), || false)
                .await
                .is_err()
        );
    }
}
