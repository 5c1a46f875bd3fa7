//! One poller for the documents the broker re-reads while it runs: the users document
//! (`auth::reload`), the member list (`cluster::source`) and the listener's TLS files
//! (`tls_reload`). [`poll`] reads a [`Watched`] document every interval until the stop signal
//! (or until what it feeds is gone) and hands each read to it; a read or an apply that fails is
//! logged once for as long as it fails the same way, and what is in force stays. What a change
//! is, what putting it in force means and what is counted are each document's own.

use std::time::Duration;

use tokio::sync::watch;

/// A document the broker re-reads.
pub trait Watched: Send {
    /// What one read yields.
    type Doc: Send;

    /// Whether what the document feeds is still there; the poller ends when it is not.
    fn alive(&self) -> bool {
        true
    }

    /// Reads the document now.
    fn read(&self) -> impl Future<Output = Result<Self::Doc, String>> + Send;

    /// Puts a read in force (nothing when it did not change), or says why it does not take:
    /// what is in force then stays.
    fn apply(&mut self, doc: Self::Doc) -> Result<(), String>;

    /// The warning logged when a read or an apply fails (with the error beside it).
    fn failure(&self) -> String;
}

/// Reads `watched` every `every` and applies each read until `stop` changes, or until
/// [`Watched::alive`] says it feeds nothing any more.
pub async fn poll<W: Watched>(mut watched: W, every: Duration, mut stop: watch::Receiver<bool>) {
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
        if !watched.alive() {
            return;
        }
        let outcome = match watched.read().await {
            Ok(doc) => watched.apply(doc),
            Err(e) => Err(e),
        };
        match outcome {
            Ok(()) => last_error = None,
            Err(e) => {
                if last_error.as_deref() != Some(e.as_str()) {
                    tracing::warn!(error = %e, "{}", watched.failure());
                }
                last_error = Some(e);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use parking_lot::Mutex;

    use super::*;

    /// A document whose reads are scripted, and which records what was applied.
    struct Script {
        reads: Arc<Mutex<VecDeque<Result<u32, String>>>>,
        applied: Arc<Mutex<Vec<u32>>>,
        alive: Arc<AtomicBool>,
    }

    impl Watched for Script {
        type Doc = u32;

        fn alive(&self) -> bool {
            self.alive.load(Ordering::SeqCst)
        }

        fn read(&self) -> impl Future<Output = Result<u32, String>> + Send {
            let next = self
                .reads
                .lock()
                .pop_front()
                .unwrap_or(Err("no more reads".into()));
            async move { next }
        }

        fn apply(&mut self, doc: u32) -> Result<(), String> {
            if doc == 0 {
                return Err("zero does not take".into());
            }
            self.applied.lock().push(doc);
            Ok(())
        }

        fn failure(&self) -> String {
            "cannot reload the script".into()
        }
    }

    fn script(reads: Vec<Result<u32, String>>) -> (Script, Arc<Mutex<Vec<u32>>>, Arc<AtomicBool>) {
        let applied = Arc::new(Mutex::new(Vec::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let s = Script {
            reads: Arc::new(Mutex::new(reads.into())),
            applied: Arc::clone(&applied),
            alive: Arc::clone(&alive),
        };
        (s, applied, alive)
    }

    const EVERY: Duration = Duration::from_millis(100);

    #[tokio::test(start_paused = true)]
    async fn every_read_is_applied_once_per_interval_and_failures_do_not_stop_it() {
        let (s, applied, _alive) =
            script(vec![Ok(1), Err("unreadable".into()), Ok(0), Ok(2), Ok(2)]);
        let (_stop_tx, stop) = watch::channel(false);
        let task = tokio::spawn(poll(s, EVERY, stop));
        tokio::time::sleep(EVERY / 2).await;
        assert!(
            applied.lock().is_empty(),
            "nothing before the first interval"
        );
        for seen in [vec![1], vec![1], vec![1], vec![1, 2], vec![1, 2, 2]] {
            tokio::time::sleep(EVERY).await;
            assert_eq!(*applied.lock(), seen);
        }
        assert!(!task.is_finished());
        task.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn the_stop_signal_and_a_gone_consumer_end_it() {
        let (s, applied, _alive) = script(vec![Ok(1), Ok(2)]);
        let (stop_tx, stop) = watch::channel(false);
        let task = tokio::spawn(poll(s, EVERY, stop));
        tokio::time::sleep(EVERY + EVERY / 2).await;
        assert_eq!(*applied.lock(), [1]);
        let _ = stop_tx.send(true);
        assert!(task.await.is_ok());
        tokio::time::sleep(EVERY * 3).await;
        assert_eq!(*applied.lock(), [1], "nothing read after the stop");

        let (s, applied, alive) = script(vec![Ok(1), Ok(2)]);
        let (_stop_tx, stop) = watch::channel(false);
        let task = tokio::spawn(poll(s, EVERY, stop));
        tokio::time::sleep(EVERY + EVERY / 2).await;
        alive.store(false, Ordering::SeqCst);
        assert!(task.await.is_ok(), "ends at the next interval");
        assert_eq!(*applied.lock(), [1]);
    }
}
