//! Cache hand-off between members.
//!
//! - **Push.** After a membership change, and whenever a peer stores a key here that this
//!   broker does not own, every entry this broker holds but does not own is written to its
//!   owner (with its remaining TTL) and removed here. Entries whose owner cannot be reached
//!   stay and are retried every poll interval.
//! - **Drain.** On SIGTERM a member pushes its own entries to the member that owns them when it
//!   is gone (rendezvous over the other members), so a rolling restart or a scale-down does
//!   not empty its share of the cache; the push above brings them back when it returns. The
//!   drain dials an owner even while its link is marked unreachable ([`Peers::client_now`]),
//!   and what a round could not hand over gets another round (always a second one, with a
//!   fresh dial; more while they make progress) within half of what is left of
//!   `drain_timeout_ms`: an entry left here is lost with the process.
//! - **Pull on miss** (asked by `server::cache`, done by [`super::forward`]): for
//!   `cluster_handoff_window_ms` after a change or a start, a miss at the owner asks the member
//!   that held the key before.
//!
//! Why the drain retries (the rolling restart that lost keys). A restart of member A makes its
//! neighbour B dial A while A's old process drains: the draining process refuses the connection,
//! and B marks the link to A unreachable for `cluster_peer_timeout_ms` (requests fail fast
//! meanwhile). When B itself got SIGTERM within that window (the next step of a fast rollout,
//! and every time with optimised builds), a single drain round got `Unavailable` for A at once
//! and left every entry whose successor was A in the exiting process: B's own keys that A
//! was to hold in B's absence, and A's keys not yet pushed back to it. The restarted B then missed them
//! and its pull found nothing at A. A link to A's old process that B still held failed the
//! same way. The drain now dials regardless of the mark and retries once with a fresh link
//! (`scale::a_drain_right_after_a_restart_hands_off_every_key` in `tests/cluster`).
//!
//! [`Handoff`] holds only what the pushes use: the cluster view, the cache, the peer links and
//! the metrics.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use starling_placement::Kind;
use tokio::sync::{Notify, watch};

use super::peers::Peers;
use super::{Cluster, Member, MemberSet, Route, route_in};
use crate::cache::{Cache, ExportedEntry};
use crate::metrics::Metrics;

/// How a push reaches an owner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dial {
    /// Fail fast while the owner's link is marked unreachable (the retried background push).
    FailFast,
    /// Dial even then (the drain: nothing retries after it).
    Now,
}

/// What a push round achieved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    /// Entries written to their owner and removed here.
    pub moved: usize,
    /// Entries left here because their owner could not be reached.
    pub left: usize,
}

/// The cache hand-off: pushes entries to their owners.
pub struct Handoff {
    cluster: Arc<Cluster>,
    cache: Arc<Cache>,
    peers: Arc<Peers>,
    metrics: Arc<Metrics>,
    /// Wakes [`run`] (a peer stored a key this broker does not own).
    wake: Arc<Notify>,
}

impl Handoff {
    /// A hand-off of `cache`'s entries over `peers`, by `cluster`'s view.
    pub fn new(
        cluster: Arc<Cluster>,
        cache: Arc<Cache>,
        peers: Arc<Peers>,
        metrics: Arc<Metrics>,
    ) -> Handoff {
        Handoff {
            cluster,
            cache,
            peers,
            metrics,
            wake: Arc::new(Notify::new()),
        }
    }

    /// Asks for a push round soon (a peer stored a key this broker does not own).
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Pushes every entry this broker holds but does not own in the current view.
    pub async fn push_foreign(&self) -> Pushed {
        let cluster = &self.cluster;
        let entries = self
            .cache
            .export_where(|k| cluster.route(Kind::CacheKey, k) != Route::Local);
        self.push(entries, Dial::FailFast, |key| {
            match cluster.route(Kind::CacheKey, key) {
                Route::Peer(m) => Some(m),
                Route::Local => None,
            }
        })
        .await
    }

    /// On SIGTERM: pushes every entry to its owner among the OTHER members. A round that left
    /// entries is followed by another while the last one moved some, and always after the
    /// first (whose failure may be this broker's stale link or fail-fast mark rather than the
    /// owner's absence: the second dials afresh), until `until` (the caller also bounds it by
    /// the drain's deadline).
    pub async fn drain_to_successors(&self, until: Instant) -> Pushed {
        let mut moved = 0;
        let mut first = true;
        loop {
            let round = self.drain_round().await;
            moved += round.moved;
            let stuck = round.moved == 0 && !first;
            if round.left == 0 || stuck || Instant::now() >= until {
                return Pushed {
                    moved,
                    left: round.left,
                };
            }
            tracing::debug!(left = round.left, "drain: another cache hand-off round");
            first = false;
        }
    }

    /// One drain round: every entry still here to its owner among the other members.
    async fn drain_round(&self) -> Pushed {
        let view = self.cluster.view();
        let others: Vec<Member> = view
            .current
            .members()
            .iter()
            .filter(|m| m.id != self.cluster.self_id())
            .cloned()
            .collect();
        let Ok(rest) = MemberSet::new(others) else {
            return Pushed::default();
        };
        let entries = self.cache.export_where(|_| true);
        let me = self.cluster.self_id().to_string();
        self.push(entries, Dial::Now, |key| {
            match route_in(&rest, &me, Kind::CacheKey, key) {
                Route::Peer(m) => Some(m),
                Route::Local => None,
            }
        })
        .await
    }

    async fn push(
        &self,
        entries: Vec<ExportedEntry>,
        dial: Dial,
        owner_of: impl Fn(&[u8]) -> Option<Member>,
    ) -> Pushed {
        let mut by_owner: HashMap<String, (Member, Vec<ExportedEntry>)> = HashMap::new();
        for e in entries {
            if let Some(owner) = owner_of(&e.key) {
                by_owner
                    .entry(owner.id.clone())
                    .or_insert_with(|| (owner, Vec::new()))
                    .1
                    .push(e);
            }
        }
        let mut result = Pushed::default();
        for (_, (owner, entries)) in by_owner {
            let link = match dial {
                Dial::FailFast => self.peers.client(&owner).await,
                Dial::Now => self.peers.client_now(&owner).await,
            };
            let client = match link {
                Ok(c) => c,
                Err(_) => {
                    result.left += entries.len();
                    continue;
                }
            };
            let mut iter = entries.into_iter();
            for e in iter.by_ref() {
                match client
                    .cache_put(e.key.clone(), e.value.clone(), e.ttl)
                    .await
                {
                    Ok(_replaced) => {
                        self.cache.remove_exported(&e);
                        result.moved += 1;
                    }
                    Err(err) => {
                        self.peers.failed(&owner, &err).await;
                        result.left += 1;
                        break;
                    }
                }
            }
            result.left += iter.count();
        }
        if result.moved > 0 {
            self.metrics
                .cluster_handoff_keys
                .with_label_values(&["pushed"])
                .inc_by(result.moved as u64);
            tracing::info!(
                moved = result.moved,
                left = result.left,
                "cache entries handed off"
            );
        }
        result
    }
}

/// Runs push rounds on membership changes, on `wake` (a peer stored a foreign key) and, while
/// entries are left, every `every`.
pub async fn run(
    handoff: Weak<Handoff>,
    mut changes: watch::Receiver<u64>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let Some(wake) = handoff.upgrade().map(|h| Arc::clone(&h.wake)) else {
        return;
    };
    let mut pending = false;
    loop {
        tokio::select! {
            () = wake.notified() => {}
            r = changes.changed() => if r.is_err() { return },
            () = tokio::time::sleep(every), if pending => {}
            _ = stop.changed() => return,
        }
        let Some(handoff) = handoff.upgrade() else {
            return;
        };
        pending = handoff.push_foreign().await.left > 0;
    }
}
