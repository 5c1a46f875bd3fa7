//! [`PublishWindow`]: the bound on the bytes of fire-and-forget publishes one publish stream
//! has written that the broker has not acknowledged yet
//! ([`ClientConfig::publish_window_bytes`](crate::ClientConfig::publish_window_bytes)).
//!
//! A fire-and-forget publish has no answer, so without this nothing tells a client how far
//! its broker is behind: a publisher faster than the broker (or than the subscribers, under
//! `block`) fills the broker's stream receive window (64 MiB in the balanced profile) and every
//! message behind that backlog waits for all of it. The window keeps the backlog of one
//! stream to about `publish_window_bytes`, the way a NATS client's pending limit does:
//!
//! - every publish takes credit for its bytes, and waits while the window has none;
//! - one publish in each quarter window (a *mark*) asks for the broker's `PublishAck`, which
//!   the broker gives at its `ack_level` (on receipt in the balanced profile);
//! - the mark's answer (an ack, a refusal, or the stream's end) gives back the credit of the
//!   mark and of every unmarked publish taken since the mark before it.
//!
//! Acks cost one small frame per quarter window, and the stream keeps three quarters of a
//! window in flight while a mark's ack is on its way, so a publisher loses throughput only when
//! the round trip of one ack takes longer than a quarter window's worth of sending.
//!
//! Hand-written on tokio's [`Semaphore`] (which holds the credit): the marking is this
//! protocol's; no library knows when a Starling publish may ask for an ack.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Semaphore;

/// Smallest window accepted by [`crate::ClientConfig`]: smaller ones would ask for an ack every
/// few frames.
pub const MIN_PUBLISH_WINDOW: u64 = 64 * 1024;
/// Largest window accepted by [`crate::ClientConfig`] (the credit is counted in `u32` units).
pub const MAX_PUBLISH_WINDOW: u64 = 1 << 30;

/// The credit of one publish stream.
#[derive(Debug)]
pub(crate) struct PublishWindow {
    credit: Arc<Semaphore>,
    /// Bytes taken since the last mark.
    unmarked: AtomicU64,
    /// Every `chunk` bytes, a publish becomes a mark.
    chunk: u64,
    /// Most credit one publish takes (a larger frame is counted as this much), so a publish
    /// never waits for more credit than the window gives back once every mark is answered.
    max_cost: u32,
}

/// The credit a mark gives back when dropped: its own and that of the unmarked publishes
/// before it.
#[derive(Debug)]
pub(crate) struct Mark {
    credit: Arc<Semaphore>,
    bytes: u64,
}

impl Drop for Mark {
    fn drop(&mut self) {
        self.credit
            .add_permits(usize::try_from(self.bytes).unwrap_or(usize::MAX));
    }
}

impl PublishWindow {
    /// A window of `bytes` (clamped to `MIN_PUBLISH_WINDOW..=MAX_PUBLISH_WINDOW`).
    pub(crate) fn new(bytes: u64) -> Self {
        let size = bytes.clamp(MIN_PUBLISH_WINDOW, MAX_PUBLISH_WINDOW);
        let chunk = size / 4;
        PublishWindow {
            credit: Arc::new(Semaphore::new(usize::try_from(size).unwrap_or(usize::MAX))),
            unmarked: AtomicU64::new(0),
            chunk,
            max_cost: u32::try_from(size - chunk).unwrap_or(u32::MAX),
        }
    }

    /// Waits for credit for a publish of `len` bytes. `Some` when this publish is a mark: it
    /// asks for the broker's ack, and the credit comes back when the [`Mark`] is dropped after
    /// the answer.
    ///
    /// Never waits forever while the broker answers: at most a quarter window is unmarked, so
    /// once every mark is answered at least `max_cost` credit is free.
    pub(crate) async fn reserve(&self, len: usize) -> Option<Mark> {
        let cost = u32::try_from(len).unwrap_or(u32::MAX).min(self.max_cost);
        // The semaphore is never closed.
        if let Ok(permit) = self.credit.acquire_many(cost).await {
            permit.forget();
        }
        let mut current = self.unmarked.load(Ordering::Relaxed);
        loop {
            let taken = current + u64::from(cost);
            let (left, mark) = if taken >= self.chunk {
                (0, Some(taken))
            } else {
                (taken, None)
            };
            match self.unmarked.compare_exchange_weak(
                current,
                left,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    return mark.map(|bytes| Mark {
                        credit: Arc::clone(&self.credit),
                        bytes,
                    });
                }
                Err(seen) => current = seen,
            }
        }
    }

    /// Credit free now.
    #[cfg(test)]
    fn available(&self) -> usize {
        self.credit.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::time::Duration;

    use futures::FutureExt;
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// For any frame sizes and any order of answers: the credit out (live marks plus the
        /// unmarked rest) and the credit free always add up to the window, and a publish waits
        /// only while some mark is unanswered.
        #[test]
        fn credit_adds_up_and_answers_always_unblock(
            sizes in proptest::collection::vec(0usize..3 * MIN_PUBLISH_WINDOW as usize, 1..200),
            answer_every in 1usize..6,
        ) {
            let w = PublishWindow::new(MIN_PUBLISH_WINDOW);
            let mut marks: VecDeque<Mark> = VecDeque::new();
            for (i, len) in sizes.iter().enumerate() {
                let reserved = loop {
                    if let Some(r) = w.reserve(*len).now_or_never() {
                        break r;
                    }
                    // It waits: answer the oldest mark. With none left it would wait forever.
                    prop_assert!(marks.pop_front().is_some(), "publish {} waits for nothing", i);
                };
                marks.extend(reserved);
                if i % answer_every == 0 {
                    marks.pop_front();
                }
                let out = marks.iter().map(|m| m.bytes).sum::<u64>()
                    + w.unmarked.load(Ordering::Relaxed);
                prop_assert_eq!(w.available() as u64 + out, MIN_PUBLISH_WINDOW);
                prop_assert!(w.unmarked.load(Ordering::Relaxed) < w.chunk);
            }
        }
    }

    #[tokio::test]
    async fn every_quarter_window_is_marked_and_its_answer_gives_the_credit_back() {
        let w = PublishWindow::new(MIN_PUBLISH_WINDOW);
        let quarter = MIN_PUBLISH_WINDOW / 4;
        let frame = usize::try_from(quarter / 4).unwrap_or(1);
        let mut marks = Vec::new();
        for i in 1..=12 {
            let r = w.reserve(frame).await;
            assert_eq!(r.is_some(), i % 4 == 0, "publish {i}");
            marks.extend(r);
        }
        // Three quarters are out; the fourth is free.
        assert_eq!(w.available() as u64, quarter);
        drop(marks.remove(0));
        assert_eq!(w.available() as u64, 2 * quarter);
        drop(marks);
        assert_eq!(w.available() as u64, MIN_PUBLISH_WINDOW);
    }

    #[tokio::test]
    async fn a_full_window_waits_for_an_answer() {
        let w = Arc::new(PublishWindow::new(MIN_PUBLISH_WINDOW));
        let quarter = usize::try_from(MIN_PUBLISH_WINDOW / 4).unwrap_or(1);
        let first = w.reserve(3 * quarter).await;
        assert!(first.is_some(), "crossing a quarter makes a mark");
        let second = w.reserve(quarter).await;
        assert!(second.is_some());
        // Nothing is free: the next publish waits until a mark is answered.
        let waiting = {
            let w = Arc::clone(&w);
            tokio::spawn(async move { w.reserve(10).await.is_some() })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        drop(second);
        assert_eq!(
            tokio::time::timeout(Duration::from_secs(5), waiting)
                .await
                .ok()
                .and_then(Result::ok),
            Some(false)
        );
        drop(first);
    }

    #[tokio::test]
    async fn a_frame_larger_than_the_window_is_counted_as_three_quarters() {
        let w = PublishWindow::new(MIN_PUBLISH_WINDOW);
        let huge = w.reserve(10 * 1024 * 1024).await;
        assert!(huge.is_some());
        assert_eq!(w.available() as u64, MIN_PUBLISH_WINDOW / 4);
        drop(huge);
        // Sizes are clamped to the accepted range.
        assert_eq!(PublishWindow::new(0).available() as u64, MIN_PUBLISH_WINDOW);
        assert_eq!(
            PublishWindow::new(u64::MAX).available() as u64,
            MAX_PUBLISH_WINDOW
        );
    }
}
