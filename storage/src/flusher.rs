//! [`Flusher`]: a background thread that syncs a log every interval, for the `Interval`
//! fsync policy, and reports each sync to a callback (where the broker completes `persisted`
//! acks up to [`Synced::durable_next`] and observes the fsync time).

use std::io;
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::error::Result;
use crate::fs::Fs;
use crate::log::{LogView, Synced};

/// A running flusher; dropping it (or [`Flusher::stop`]) stops the thread after a last sync.
#[derive(Debug)]
pub struct Flusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Flusher {
    /// Starts a thread that calls [`LogView::sync`] every `every` and passes the outcome to
    /// `on_sync` (also when there was nothing to sync, with `took: None`).
    pub fn spawn<S, F>(view: LogView<F>, every: Duration, mut on_sync: S) -> io::Result<Flusher>
    where
        S: FnMut(Result<Synced>) + Send + 'static,
        F: Fs,
    {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let thread = thread::Builder::new()
            .name("starling-log-flush".into())
            .spawn(move || {
                let (lock, cv) = &*flag;
                let mut deadline = Instant::now() + every;
                loop {
                    let stopping = {
                        let mut stopped = lock.lock();
                        while !*stopped && Instant::now() < deadline {
                            cv.wait_until(&mut stopped, deadline);
                        }
                        *stopped
                    };
                    on_sync(view.sync());
                    if stopping {
                        return;
                    }
                    deadline += every;
                    let now = Instant::now();
                    if deadline < now {
                        deadline = now + every;
                    }
                }
            })?;
        Ok(Flusher {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread after one last sync and waits for it.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock() = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.halt();
    }
}
