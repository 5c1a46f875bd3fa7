//! Leadership fencing: a [`Fence`] turns *lost* once, when this replica stops leading, and never
//! turns back. The reconciler and the autoscaler select on it, so no write of theirs starts after
//! the lease is lost; the elector ([`crate::leader`]) holds the one [`Fencer`] that trips it.
//! [`Fence::guard`] is the one way a reconcile is fenced, and [`Fence::or_shutdown`] the one
//! way a controller stops, for every controller of the operator.

use std::future::Future;

use tokio::sync::watch;

use crate::error::{Error, Result};

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

    /// Runs `work` fenced: it does not start once leadership is lost, and is dropped at its
    /// next await when leadership is lost while it runs; both give [`Error::Leadership`].
    pub async fn guard<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        if self.is_lost() {
            return Err(Error::Leadership("not the leader any more".into()));
        }
        tokio::select! {
            biased;
            () = self.lost() => Err(Error::Leadership("lost the lease during a reconcile".into())),
            r = work => r,
        }
    }

    /// Completes when `shutdown` turns true or leadership is lost: when a controller stops.
    pub async fn or_shutdown(self, mut shutdown: watch::Receiver<bool>) {
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => {}
            () = self.lost() => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn guard_refuses_after_and_drops_during_a_loss() {
        let (fencer, f) = fence();
        assert_eq!(f.guard(async { Ok(7) }).await.ok(), Some(7));
        let g = f.clone();
        let slow = tokio::spawn(async move {
            g.guard(async {
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(())
            })
            .await
        });
        tokio::time::sleep(Duration::from_secs(1)).await;
        fencer.trip();
        let r = slow.await.unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(r, Err(Error::Leadership(m)) if m.contains("during")));
        let r = f.guard(async { Ok(()) }).await;
        assert!(matches!(r, Err(Error::Leadership(m)) if m.contains("not the leader")));
    }

    #[tokio::test(start_paused = true)]
    async fn or_shutdown_completes_on_either() {
        let (tx, rx) = watch::channel(false);
        let stop = tokio::spawn(Fence::never().or_shutdown(rx));
        tx.send_replace(true);
        assert!(stop.await.is_ok());
        let (fencer, f) = fence();
        let (_tx, rx) = watch::channel(false);
        let stop = tokio::spawn(f.or_shutdown(rx));
        fencer.trip();
        assert!(stop.await.is_ok());
    }

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
