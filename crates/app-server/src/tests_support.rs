//! Helpers for this crate's unit tests.

use std::time::Duration;

/// Polls `condition` every 5 ms for at most 5 s; panics when it stays false.
pub async fn eventually(mut condition: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not met within 5 s"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
