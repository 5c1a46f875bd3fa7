//! Making appends durable and completing the acks that wait for it.
//!
//! [`Committer`] holds the `persisted` acks of a log's batches, in append order, each with
//! the position one past its batch, and completes them as syncs cover them. Under
//! `storage_fsync: always` it runs a group-commit thread: an append wakes it; it fsyncs once
//! for everything appended since its last fsync, completes the acks that fsync covers and
//! goes back to sleep, so appends made while one fsync runs share the next one. Under
//! `interval` the storage crate's [`Flusher`] syncs every period and reports here. Under
//! `never` an append is as durable as it gets once written, and acks complete at once.
//!
//! Each ack handed over is told so first ([`Waiter::handed_over`]): from then on it waits only
//! for an fsync, and a publish ack gives its stream's request-window place back
//! (`pubsub::pending_acks` bounds it instead).
//!
//! A failed fsync (here, in the flusher, or in the writer at a segment roll) poisons the log
//! for every handle: the acks waiting are refused, and so is every ack handed over later;
//! none completes until the log is reopened. The first failure is counted, logged and shown
//! in `starling_storage_failed_logs` once.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use starling_config::StorageFsync;
use starling_proto::{ErrorCode, Position};
use starling_storage::{Flusher, Fs, LogView, RealFs, Synced};

use super::metrics::StorageMetrics;

/// What waits for durability: a publish's ack (the topic task's ack token implements it).
pub trait Waiter: Send + 'static {
    /// It was handed to the log and now waits only for an fsync covering its record (called
    /// before it is queued, completed or refused here): it may give back what bounded it on
    /// its way (an ack's place in its stream's request window).
    fn handed_over(&mut self) {}
    /// The record is durable.
    fn durable(self);
    /// It will not become durable: refuse with a typed error.
    fn failed(self, code: ErrorCode, message: String);
}

/// Acks waiting for durability, and the group-commit thread or flusher that completes them.
#[derive(Debug)]
pub struct Committer<W: Waiter, F: Fs = RealFs> {
    inner: Arc<Inner<W, F>>,
    thread: Option<JoinHandle<()>>,
    flusher: Option<Flusher>,
}

#[derive(Debug)]
struct Inner<W, F: Fs> {
    view: LogView<F>,
    state: Mutex<State<W>>,
    wake: Condvar,
    metrics: StorageMetrics,
    topic: String,
    /// The log's poisoning was counted (in `errors` and `failed_logs`) and logged.
    reported: AtomicBool,
}

#[derive(Debug)]
struct State<W> {
    waiting: VecDeque<(Position, Vec<W>)>,
    /// Appended since the group-commit thread's last fsync.
    dirty: bool,
    stop: bool,
}

impl<W> Default for State<W> {
    fn default() -> Self {
        State {
            waiting: VecDeque::new(),
            dirty: false,
            stop: false,
        }
    }
}

impl<W: Waiter + std::fmt::Debug, F: Fs> Committer<W, F> {
    /// Starts what syncs `view` under `mode` (`interval`: every `every`).
    pub fn start(
        topic: &str,
        view: LogView<F>,
        mode: StorageFsync,
        every: Duration,
        metrics: StorageMetrics,
    ) -> std::io::Result<Committer<W, F>> {
        let inner = Arc::new(Inner {
            view: view.clone(),
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            metrics,
            topic: topic.to_string(),
            reported: AtomicBool::new(false),
        });
        let mut committer = Committer {
            inner: Arc::clone(&inner),
            thread: None,
            flusher: None,
        };
        match mode {
            StorageFsync::Always => {
                let thread = std::thread::Builder::new()
                    .name("starling-group-commit".into())
                    .spawn(move || inner.group_commit())?;
                committer.thread = Some(thread);
            }
            StorageFsync::Interval => {
                committer.flusher = Some(Flusher::spawn(view, every, move |r| inner.synced(r))?);
            }
            StorageFsync::Never => {}
        }
        Ok(committer)
    }

    /// Something was appended: under `always`, wake the group-commit thread.
    pub fn appended(&self) {
        if self.thread.is_some() {
            self.inner.state.lock().dirty = true;
            self.inner.wake.notify_one();
        }
    }

    /// Completes `acks` once every record before `next` is durable (at once if it is).
    /// Refuses them at once if the log is poisoned and they are not durable already.
    pub fn wait(&self, next: Position, mut acks: Vec<W>) {
        if acks.is_empty() {
            return;
        }
        acks.iter_mut().for_each(W::handed_over);
        let mut state = self.inner.state.lock();
        let durable = Synced {
            durable_next: self.inner.view.durable_next(),
            took: None,
        };
        if state.waiting.is_empty() && durable.covers(next) {
            drop(state);
            acks.into_iter().for_each(W::durable);
            return;
        }
        // The poison is set before a failed sync takes this lock to refuse what waits: an
        // ack queued after that is refused here, never left waiting for a sync that will
        // not succeed.
        if let Some(why) = self.inner.view.failure() {
            drop(state);
            let why = format!("the topic's durable log is stopped: {why}");
            for ack in acks {
                ack.failed(ErrorCode::Internal, why.clone());
            }
            return;
        }
        state.waiting.push_back((next, acks));
    }

    /// The writer found the log poisoned (a failed fsync at a segment roll): refuse what
    /// waits and count the failure once.
    pub fn poisoned(&self) {
        if let Some(why) = self.inner.view.failure() {
            self.inner.synced(Err(starling_storage::Error::Failed(why)));
        }
    }
}

impl<W: Waiter, F: Fs> Drop for Committer<W, F> {
    fn drop(&mut self) {
        if self.inner.reported.load(Ordering::Acquire) {
            self.inner.metrics.failed_logs.dec();
        }
        {
            let mut state = self.inner.state.lock();
            state.stop = true;
        }
        self.inner.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(f) = self.flusher.take() {
            f.stop();
        }
        // Both ran a last sync; anything still waiting was not made durable.
        let left = std::mem::take(&mut self.inner.state.lock().waiting);
        for (_, acks) in left {
            for ack in acks {
                ack.failed(
                    ErrorCode::Unavailable,
                    "the topic's durable log closed before the message was durable".to_string(),
                );
            }
        }
    }
}

impl<W: Waiter, F: Fs> Inner<W, F> {
    fn group_commit(&self) {
        loop {
            {
                let mut state = self.state.lock();
                while !state.dirty && !state.stop {
                    self.wake.wait(&mut state);
                }
                if !state.dirty && state.stop {
                    return;
                }
                state.dirty = false;
            }
            self.synced(self.view.sync());
        }
    }

    /// Completes what a sync covered, or refuses everything waiting when it failed.
    fn synced(&self, outcome: starling_storage::Result<Synced>) {
        match outcome {
            Ok(synced) => {
                if let Some(took) = synced.took {
                    self.metrics.fsync_seconds.observe(took.as_secs_f64());
                }
                let mut done = Vec::new();
                {
                    let mut state = self.state.lock();
                    while state
                        .waiting
                        .front()
                        .is_some_and(|(n, _)| synced.covers(*n))
                    {
                        if let Some((_, acks)) = state.waiting.pop_front() {
                            done.extend(acks);
                        }
                    }
                }
                done.into_iter().for_each(W::durable);
            }
            Err(e) => {
                let left = std::mem::take(&mut self.state.lock().waiting);
                // After a failed fsync the log stays stopped and every later sync (the
                // interval flusher's included) answers `Failed`: counted and logged once.
                if !self.reported.swap(true, Ordering::AcqRel) {
                    self.metrics.errors.inc();
                    self.metrics.failed_logs.inc();
                    tracing::error!(topic = %self.topic, error = %e, "durable log fsync failed: the log is stopped (no append, no persisted ack) until the topic reopens it");
                }
                let why = format!("the topic's durable log failed to sync: {e}");
                for (_, acks) in left {
                    for ack in acks {
                        ack.failed(ErrorCode::Internal, why.clone());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    use starling_storage::{FsyncPolicy, Log, LogConfig};

    use super::*;
    use crate::durable::StorageMetrics;

    #[derive(Debug)]
    struct Done(Arc<AtomicUsize>, Arc<AtomicUsize>);

    impl Waiter for Done {
        fn durable(self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn failed(self, _: ErrorCode, _: String) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn run(mode: StorageFsync, appends: u64) -> (usize, usize, u64) {
        let dir = tempfile::tempdir().unwrap();
        let fsync = match mode {
            StorageFsync::Never => FsyncPolicy::Never,
            _ => FsyncPolicy::Interval(Duration::from_millis(5)),
        };
        let config = LogConfig {
            fsync,
            ..LogConfig::default()
        };
        let (mut log, _) = Log::open(dir.path(), config).unwrap();
        let metrics = StorageMetrics::register(&prometheus::Registry::new()).unwrap();
        let committer: Committer<Done> =
            Committer::start("t", log.view(), mode, Duration::from_millis(5), metrics).unwrap();
        let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        for i in 0..appends {
            let at = Position { stream: 7, seq: i };
            let appended = log.append(at, 1, b"payload").unwrap();
            committer.appended();
            committer.wait(appended.next, vec![Done(ok.clone(), failed.clone())]);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while ok.load(Ordering::SeqCst) < appends as usize && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let fsyncs = log.stats().fsyncs;
        drop(committer);
        (
            ok.load(Ordering::SeqCst),
            failed.load(Ordering::SeqCst),
            fsyncs,
        )
    }

    #[test]
    fn group_commit_completes_every_wait_with_shared_fsyncs() {
        let (ok, failed, fsyncs) = run(StorageFsync::Always, 500);
        eprintln!("group commit: {fsyncs} fsyncs for 500 appends");
        assert_eq!((ok, failed), (500, 0));
        assert!(
            (1..=500).contains(&fsyncs),
            "{fsyncs} fsyncs for 500 appends"
        );
    }

    #[test]
    fn the_interval_flusher_completes_waits() {
        let (ok, failed, fsyncs) = run(StorageFsync::Interval, 50);
        assert_eq!((ok, failed), (50, 0));
        assert!(fsyncs >= 1);
    }

    #[test]
    fn never_completes_at_once_without_fsync() {
        let (ok, failed, fsyncs) = run(StorageFsync::Never, 20);
        assert_eq!((ok, failed, fsyncs), (20, 0, 0));
    }
}
