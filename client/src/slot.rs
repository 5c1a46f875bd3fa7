//! [`LazySlot`]: one pool entry (a connection or a stream) that is opened on
//! first use and reopened on the next use after it died. Concurrent users of
//! an empty slot wait for a single open instead of racing.

use std::future::Future;

use crate::ClientError;

/// Something that can tell whether it is still usable.
pub(crate) trait Alive {
    /// `false` once the connection or stream is gone for good.
    fn is_alive(&self) -> bool;
}

/// A lazily (re)opened pool entry.
pub(crate) struct LazySlot<T> {
    current: parking_lot::Mutex<Option<T>>,
    opening: tokio::sync::Mutex<()>,
}

impl<T> Default for LazySlot<T> {
    fn default() -> Self {
        LazySlot {
            current: parking_lot::Mutex::new(None),
            opening: tokio::sync::Mutex::new(()),
        }
    }
}

impl<T: Clone + Alive> LazySlot<T> {
    /// The current entry if it is alive.
    pub(crate) fn live(&self) -> Option<T> {
        self.current
            .lock()
            .as_ref()
            .filter(|t| t.is_alive())
            .cloned()
    }

    /// The current entry, or a fresh one from `open` when it is missing or dead.
    pub(crate) async fn get_or_open<F, Fut>(&self, open: F) -> Result<T, ClientError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        if let Some(t) = self.live() {
            return Ok(t);
        }
        let _opening = self.opening.lock().await;
        if let Some(t) = self.live() {
            return Ok(t);
        }
        let fresh = open().await?;
        *self.current.lock() = Some(fresh.clone());
        Ok(fresh)
    }

    /// Stores `value` (used to seed the slot with an eagerly opened entry).
    pub(crate) fn set(&self, value: T) {
        *self.current.lock() = Some(value);
    }

    /// Removes and returns the entry, alive or not.
    pub(crate) fn take(&self) -> Option<T> {
        self.current.lock().take()
    }
}

/// `n` empty slots.
pub(crate) fn slots<T>(n: usize) -> Vec<LazySlot<T>> {
    (0..n.max(1)).map(|_| LazySlot::default()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[derive(Clone)]
    struct Flag(Arc<AtomicBool>, usize);

    impl Alive for Flag {
        fn is_alive(&self) -> bool {
            self.0.load(Ordering::SeqCst)
        }
    }

    #[tokio::test]
    async fn opens_once_and_reopens_after_death() {
        let slot = LazySlot::default();
        let opens = AtomicUsize::new(0);
        let open = || async {
            let n = opens.fetch_add(1, Ordering::SeqCst);
            Ok(Flag(Arc::new(AtomicBool::new(true)), n))
        };
        let a = slot.get_or_open(open).await.ok();
        let b = slot.get_or_open(open).await.ok();
        assert_eq!(a.as_ref().map(|f| f.1), Some(0));
        assert_eq!(b.as_ref().map(|f| f.1), Some(0));
        if let Some(a) = &a {
            a.0.store(false, Ordering::SeqCst);
        }
        assert!(slot.live().is_none());
        let c = slot.get_or_open(open).await.ok();
        assert_eq!(c.map(|f| f.1), Some(1));
        assert!(slot.take().is_some());
        assert!(slot.take().is_none());
    }

    #[tokio::test]
    async fn open_errors_leave_the_slot_empty() {
        let slot: LazySlot<Flag> = LazySlot::default();
        let r = slot
            .get_or_open(|| async { Err(ClientError::Timeout) })
            .await;
        assert!(matches!(r, Err(ClientError::Timeout)));
        assert!(slot.live().is_none());
        assert_eq!(slots::<Flag>(0).len(), 1);
    }
}
