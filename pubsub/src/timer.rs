//! A sub-millisecond timer for batch deadlines.
//!
//! tokio's timer wheel has a 1 ms resolution, which would turn the latency profile's 100 µs
//! batch delay into up to a millisecond. Deadlines shorter than [`HIRES_BELOW`] away are served
//! by one background thread that sleeps on a condition variable until the earliest deadline
//! and wakes the waiting tasks; longer ones use tokio's timer.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// Deadlines closer than this use the high-resolution thread.
pub const HIRES_BELOW: Duration = Duration::from_millis(2);

#[derive(Default)]
struct State {
    heap: BinaryHeap<Reverse<(Instant, u64)>>,
    wakers: HashMap<u64, Waker>,
    next_id: u64,
}

struct Inner {
    state: Mutex<State>,
    cv: Condvar,
}

fn inner() -> &'static Arc<Inner> {
    static TIMER: OnceLock<Arc<Inner>> = OnceLock::new();
    TIMER.get_or_init(|| {
        let inner = Arc::new(Inner { state: Mutex::new(State::default()), cv: Condvar::new() });
        let thread_inner = Arc::clone(&inner);
        let spawned = std::thread::Builder::new()
            .name("starling-hires-timer".into())
            .spawn(move || run(&thread_inner));
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the high-resolution timer thread; short batch delays fall back to polling");
        }
        inner
    })
}

fn run(inner: &Inner) {
    let mut st = inner.state.lock();
    loop {
        let now = Instant::now();
        while let Some(Reverse((deadline, id))) = st.heap.peek().copied() {
            if deadline > now {
                break;
            }
            st.heap.pop();
            if let Some(w) = st.wakers.remove(&id) {
                w.wake();
            }
        }
        match st.heap.peek().copied() {
            Some(Reverse((deadline, _))) => {
                let _ = inner.cv.wait_until(&mut st, deadline);
            }
            None => inner.cv.wait(&mut st),
        }
    }
}

/// A future that completes at `deadline`.
pub struct HiResSleep {
    deadline: Instant,
    id: Option<u64>,
}

impl Future for HiResSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        let inner = inner();
        let mut st = inner.state.lock();
        match self.id {
            Some(id) => {
                st.wakers.insert(id, cx.waker().clone());
            }
            None => {
                let id = st.next_id;
                st.next_id += 1;
                st.wakers.insert(id, cx.waker().clone());
                let earliest = st.heap.peek().map(|Reverse((d, _))| *d);
                st.heap.push(Reverse((self.deadline, id)));
                self.id = Some(id);
                if earliest.is_none_or(|e| self.deadline < e) {
                    inner.cv.notify_one();
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for HiResSleep {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            inner().state.lock().wakers.remove(&id);
        }
    }
}

/// Sleeps until `deadline` (on tokio's clock, which a test may pause) with sub-millisecond
/// precision for near deadlines: those wait on this thread for the same time from now.
pub async fn sleep_until(deadline: tokio::time::Instant) {
    let now = tokio::time::Instant::now();
    if deadline <= now {
        return;
    }
    let left = deadline - now;
    if left < HIRES_BELOW {
        HiResSleep {
            deadline: Instant::now() + left,
            id: None,
        }
        .await;
    } else {
        tokio::time::sleep_until(deadline).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn short_sleeps_are_sub_millisecond_and_never_early() {
        let mut overshoots = Vec::new();
        for _ in 0..21 {
            let deadline = Instant::now() + Duration::from_micros(150);
            sleep_until(tokio::time::Instant::from_std(deadline)).await;
            let now = Instant::now();
            assert!(now >= deadline, "woke early");
            overshoots.push(now - deadline);
        }
        overshoots.sort();
        // The median is robust to the odd preemption on a loaded 2-core machine; tokio's own
        // timer would put it near a whole millisecond.
        let median = overshoots[overshoots.len() / 2];
        assert!(
            median < Duration::from_millis(1),
            "median overshoot {median:?}"
        );
    }

    #[tokio::test]
    async fn dropped_sleeps_unregister() {
        // Other tests share the timer thread, so look only at this sleep's own registration.
        let mut sleep = Box::pin(HiResSleep {
            deadline: Instant::now() + Duration::from_secs(1),
            id: None,
        });
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        assert!(sleep.as_mut().poll(&mut cx).is_pending());
        let id = sleep.id.expect("registered on first poll");
        assert!(inner().state.lock().wakers.contains_key(&id));
        drop(sleep);
        assert!(
            !inner().state.lock().wakers.contains_key(&id),
            "a dropped sleep leaves no waker behind"
        );
    }
}
