//! Polling with a deadline.

use std::future::Future;
use std::time::Duration;

use crate::E2eError;

/// Polls `check` every 500 ms until it returns `Some`, or fails after `timeout`.
pub async fn until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> Result<T, E2eError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(E2eError::Timeout {
                what: what.to_string(),
                after: timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
