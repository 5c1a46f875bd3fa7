//! Leadership fencing: a [`Fence`] turns *lost* once, when this replica stops leading, and never
//! turns back. The reconciler and the autoscaler select on it, so no write of theirs starts after
//! the lease is lost; the elector ([`crate::leader`]) holds the one [`Fencer`] that trips it.

use tokio::sync::watch;

/// Trips the fences made with it (see [`fence`]). Dropping it trips them too: an elector that
/// has gone away no longer vouches for the lease.
#[derive(Debug)]
pub struct Fencer(watch::Sender<bool>);

impl Fencer {
    /// Marks leadership lost, for good.
    pub fn trip(&self) {
        self.0.send_replace(true);
    }
}

/// Whether this replica may still write. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Fence(Option<watch::Receiver<bool>>);

/// A fence and the [`Fencer`] that trips it.
pub fn fence() -> (Fencer, Fence) {
    let (tx, rx) = watch::channel(false);
    (Fencer(tx), Fence(Some(rx)))
}

impl Fence {
    /// A fence that never trips (leader election disabled, or tests).
    pub fn never() -> Self {
        Fence(None)
    }

    /// True once leadership is lost (or its [`Fencer`] is gone).
    pub fn is_lost(&self) -> bool {
        match &self.0 {
            None => false,
            Some(rx) => *rx.borrow() || rx.has_changed().is_err(),
        }
    }

    /// Completes when leadership is lost; never for [`Fence::never`].
    pub async fn lost(&self) {
        match &self.0 {
            None => std::future::pending::<()>().await,
            Some(rx) => {
                let mut rx = rx.clone();
                // An error means the fencer is gone: lost as well.
                let _ = rx.wait_for(|lost| *lost).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn trips_once_for_every_clone_and_on_drop() {
        let (fencer, f) = fence();
        let g = f.clone();
        assert!(!f.is_lost());
        let waiting = tokio::time::timeout(Duration::from_secs(1), g.lost()).await;
        assert!(waiting.is_err(), "not lost yet");
        fencer.trip();
        assert!(f.is_lost() && g.is_lost());
        g.lost().await;

        let (fencer, f) = fence();
        drop(fencer);
        assert!(f.is_lost());
        f.lost().await;

        let never = Fence::never();
        assert!(!never.is_lost());
        let waiting = tokio::time::timeout(Duration::from_secs(3600), never.lost()).await;
        assert!(waiting.is_err());
    }
}
