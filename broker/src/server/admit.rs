//! Connection admission: whether a new QUIC connection attempt is served, asked to prove its
//! address first (a QUIC Retry), or refused.
//!
//! The decision is a pure function of the broker's phase, the connections already admitted and
//! not yet ended, the handshakes in progress and whether the attempt's address is already
//! validated. The counts are the broker's own, taken at admission: quinn's
//! `Endpoint::open_connections` only counts a connection once its task has polled it, so in a
//! burst it lags behind the attempts already admitted (measured: 91 admitted under a cap of
//! 64). The budgets come from the config: `max_connections` and `handshake_retry_threshold`.
//!
//! Admission has two steps. An attempt that is served first enters the pending handshakes
//! ([`Pending`]): at most `max_pending_handshakes` in all and `max_pending_handshakes_per_source`
//! from one source address, of which an eighth is kept for the addresses of peers
//! ([`PeerSources`]), so strangers that never finish their handshake cannot keep a member's
//! peer link out. A pending connection holds a small fixed grant (`server::buffers`) and has
//! `handshake_timeout_ms` for TLS and `Hello` together; only a connection whose `Hello`
//! succeeded reserves its windows from `connection_buffer_budget_bytes`. Each refusal and each
//! Retry moves a counter (`starling_quic_refused_total{reason}`, `starling_quic_retries_total`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::metrics::quic_refusal;

/// Why a connection attempt was refused: the label of `starling_quic_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The broker is starting or draining.
    NotServing,
    /// `max_connections` connections are open.
    MaxConnections,
    /// `connection_buffer_budget_bytes` has no room for even the smallest windows (see
    /// `server::buffers`).
    BufferBudget,
    /// `max_pending_handshakes` handshakes are in progress (strangers: all but the peers'
    /// share of them).
    PendingHandshakes,
    /// `max_pending_handshakes_per_source` handshakes from the attempt's address are in
    /// progress.
    PendingPerSource,
    /// The connection did not complete TLS and `Hello` within `handshake_timeout_ms`.
    HandshakeTimeout,
}

impl Refusal {
    /// The metric label.
    pub const fn label(self) -> &'static str {
        match self {
            Refusal::NotServing => quic_refusal::NOT_SERVING,
            Refusal::MaxConnections => quic_refusal::MAX_CONNECTIONS,
            Refusal::BufferBudget => quic_refusal::CONNECTION_BUFFER_BUDGET,
            Refusal::PendingHandshakes => quic_refusal::PENDING_HANDSHAKES,
            Refusal::PendingPerSource => quic_refusal::PENDING_PER_SOURCE,
            Refusal::HandshakeTimeout => quic_refusal::HANDSHAKE_TIMEOUT,
        }
    }
}

/// What to do with one connection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Serve it.
    Accept,
    /// Answer with a QUIC Retry; the client comes back with a token proving its address.
    Retry,
    /// Refuse it (QUIC `CONNECTION_REFUSED`).
    Refuse(Refusal),
}

/// The broker's state as one attempt arrives.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Whether the broker serves new connections (not starting, not draining).
    pub serving: bool,
    /// Whether the broker is draining: it still takes its peers' connections (a new owner
    /// reads the logs it hands over, `durable::transfer`), nobody else's.
    pub draining: bool,
    /// Whether the attempt comes from a peer's address ([`PeerSources`]; the certificate
    /// decides the role after the handshake).
    pub peer: bool,
    /// Connections admitted and not yet ended, handshaking ones included.
    pub open: usize,
    /// Handshakes in progress.
    pub handshaking: usize,
    /// Whether the attempt already proved its address (it carries a Retry token).
    pub validated: bool,
}

/// The budgets, from the config.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `max_connections`.
    pub max_connections: usize,
    /// `handshake_retry_threshold`.
    pub retry_threshold: usize,
}

/// Decides one attempt. A validated attempt is never asked again; the connection budget applies
/// to every attempt, validated or not, so Retry cannot be used to get past it.
pub fn decide(load: Load, limits: Limits) -> Admission {
    let admits = load.serving || (load.draining && load.peer);
    if !admits {
        Admission::Refuse(Refusal::NotServing)
    } else if load.open >= limits.max_connections {
        Admission::Refuse(Refusal::MaxConnections)
    } else if !load.validated && load.handshaking >= limits.retry_threshold {
        Admission::Retry
    } else {
        Admission::Accept
    }
}

/// The pending handshakes' budgets, from the config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingLimits {
    /// `max_pending_handshakes`: all pending handshakes, peers' included.
    pub max: usize,
    /// `max_pending_handshakes_per_source`: pending handshakes from one stranger's address.
    pub per_source: usize,
}

impl PendingLimits {
    /// The share of [`PendingLimits::max`] only peers' addresses may use: an eighth, at least 1.
    pub fn reserved_for_peers(self) -> usize {
        (self.max / 8).max(1).min(self.max)
    }
}

/// Whether one more handshake may start, with `total` in progress and `from_source` of them from
/// the attempt's address. A peer's address may use every slot and is not held to the per-source
/// cap (a member opens its pools of connections at once); a stranger's may use all but the
/// peers' share, and at most `per_source` at a time.
pub fn pending_decision(
    total: usize,
    from_source: usize,
    peer: bool,
    limits: PendingLimits,
) -> Result<(), Refusal> {
    if peer {
        return if total < limits.max {
            Ok(())
        } else {
            Err(Refusal::PendingHandshakes)
        };
    }
    if from_source >= limits.per_source {
        Err(Refusal::PendingPerSource)
    } else if total >= limits.max.saturating_sub(limits.reserved_for_peers()) {
        Err(Refusal::PendingHandshakes)
    } else {
        Ok(())
    }
}

#[derive(Debug, Default)]
struct PendingCounts {
    total: usize,
    by_source: HashMap<IpAddr, usize>,
}

/// The handshakes in progress (QUIC and TLS, then `Hello`), overall and per source address.
#[derive(Debug)]
pub struct Pending {
    counts: Arc<parking_lot::Mutex<PendingCounts>>,
    limits: PendingLimits,
}

impl Pending {
    /// No handshake in progress yet.
    pub fn new(limits: PendingLimits) -> Pending {
        Pending {
            counts: Arc::default(),
            limits,
        }
    }

    /// Handshakes in progress now.
    pub fn count(&self) -> usize {
        self.counts.lock().total
    }

    /// Counts a handshake from `source` until the returned slot drops, or says why not.
    pub fn try_enter(&self, source: IpAddr, peer: bool) -> Result<PendingSlot, Refusal> {
        let mut counts = self.counts.lock();
        let from_source = counts.by_source.get(&source).copied().unwrap_or(0);
        pending_decision(counts.total, from_source, peer, self.limits)?;
        counts.total += 1;
        *counts.by_source.entry(source).or_insert(0) += 1;
        Ok(PendingSlot {
            counts: Arc::clone(&self.counts),
            source,
        })
    }
}

/// One handshake in progress; dropping it (once `Hello` succeeded, or the attempt failed)
/// ends the count.
#[derive(Debug)]
pub struct PendingSlot {
    counts: Arc<parking_lot::Mutex<PendingCounts>>,
    source: IpAddr,
}

impl Drop for PendingSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.by_source.get_mut(&self.source) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_source.remove(&self.source);
            }
        }
    }
}

/// How many peer addresses [`PeerSources`] remembers; the oldest is forgotten first.
pub const LEARNED_PEER_SOURCES: usize = 256;

/// The addresses peer links come from, for the peers' share of the pending handshakes: the
/// members' addresses that are IP literals, and the source addresses of connections that
/// authenticated with the peer certificate (learned, at most [`LEARNED_PEER_SOURCES`]). A
/// member is only known by its DNS name until its first peer link succeeds.
#[derive(Debug, Default)]
pub struct PeerSources {
    learned: parking_lot::Mutex<(HashSet<IpAddr>, VecDeque<IpAddr>)>,
}

impl PeerSources {
    /// Remembers `ip` as a peer's address (a connection from it presented the peer certificate).
    pub fn learn(&self, ip: IpAddr) {
        let ip = canonical(ip);
        let mut learned = self.learned.lock();
        let (set, order) = &mut *learned;
        if !set.insert(ip) {
            return;
        }
        order.push_back(ip);
        if order.len() > LEARNED_PEER_SOURCES
            && let Some(oldest) = order.pop_front()
        {
            set.remove(&oldest);
        }
    }

    /// Whether `ip` is a peer's address: learned, or one of `member_addrs` (`host:port`).
    pub fn contains<'a>(
        &self,
        ip: IpAddr,
        member_addrs: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        let ip = canonical(ip);
        self.learned.lock().0.contains(&ip)
            || member_addrs.into_iter().any(|a| {
                a.parse::<std::net::SocketAddr>()
                    .is_ok_and(|s| canonical(s.ip()) == ip)
            })
    }
}

/// `ip` with an IPv4-mapped IPv6 address turned into the IPv4 address it maps (a dual-stack
/// socket reports IPv4 peers that way).
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Counts things in progress: admitted connections, or handshakes. Each one holds a [`Slot`]
/// until it is over, whichever way it ends.
#[derive(Debug, Default)]
pub struct InProgress(Arc<AtomicUsize>);

impl InProgress {
    /// How many are in progress now.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one more until the returned slot drops.
    pub fn enter(&self) -> Slot {
        self.0.fetch_add(1, Ordering::Relaxed);
        Slot(Arc::clone(&self.0))
    }

    /// Counts one more until the returned slot drops, unless `max` are in progress already.
    pub fn try_enter(&self, max: usize) -> Option<Slot> {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(&self.0)))
    }
}

/// One thing in progress; dropping it ends the count.
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_connections: 10,
        retry_threshold: 4,
    };

    fn load(open: usize, handshaking: usize, validated: bool) -> Load {
        Load {
            serving: true,
            draining: false,
            peer: false,
            open,
            handshaking,
            validated,
        }
    }

    #[test]
    fn attempts_are_served_until_a_budget_is_reached() {
        assert_eq!(decide(load(0, 0, false), LIMITS), Admission::Accept);
        assert_eq!(decide(load(9, 3, false), LIMITS), Admission::Accept);
        assert_eq!(
            decide(load(10, 0, true), LIMITS),
            Admission::Refuse(Refusal::MaxConnections)
        );
        assert_eq!(decide(load(5, 4, false), LIMITS), Admission::Retry);
        assert_eq!(decide(load(5, 400, true), LIMITS), Admission::Accept);
        let stopping = Load {
            serving: false,
            ..load(0, 0, true)
        };
        assert_eq!(
            decide(stopping, LIMITS),
            Admission::Refuse(Refusal::NotServing)
        );
        // Draining: a peer's address is still served (within the budgets), nobody else.
        let draining = Load {
            serving: false,
            draining: true,
            ..load(0, 0, true)
        };
        assert_eq!(
            decide(draining, LIMITS),
            Admission::Refuse(Refusal::NotServing)
        );
        let peer = Load {
            peer: true,
            ..draining
        };
        assert_eq!(decide(peer, LIMITS), Admission::Accept);
        assert_eq!(
            decide(Load { open: 10, ..peer }, LIMITS),
            Admission::Refuse(Refusal::MaxConnections)
        );
        let starting = Load {
            serving: false,
            peer: true,
            ..load(0, 0, true)
        };
        assert_eq!(
            decide(starting, LIMITS),
            Admission::Refuse(Refusal::NotServing)
        );
    }

    #[test]
    fn a_zero_threshold_asks_every_new_address_to_prove_itself() {
        let always = Limits {
            retry_threshold: 0,
            ..LIMITS
        };
        assert_eq!(decide(load(0, 0, false), always), Admission::Retry);
        assert_eq!(decide(load(0, 0, true), always), Admission::Accept);
    }

    #[test]
    fn a_slot_counts_until_it_drops() {
        let h = InProgress::default();
        let a = h.enter();
        let b = h.enter();
        assert_eq!(h.count(), 2);
        drop(a);
        assert_eq!(h.count(), 1);
        drop(b);
        assert_eq!(h.count(), 0);
    }

    const PENDING: PendingLimits = PendingLimits {
        max: 16,
        per_source: 4,
    };

    #[test]
    fn strangers_get_all_but_the_peers_share_and_each_source_a_few() {
        assert_eq!(PENDING.reserved_for_peers(), 2);
        assert_eq!(pending_decision(0, 0, false, PENDING), Ok(()));
        assert_eq!(pending_decision(13, 3, false, PENDING), Ok(()));
        assert_eq!(
            pending_decision(5, 4, false, PENDING),
            Err(Refusal::PendingPerSource)
        );
        assert_eq!(
            pending_decision(14, 0, false, PENDING),
            Err(Refusal::PendingHandshakes)
        );
        // The peers' share: a peer's address gets in where strangers no longer do, and is not
        // held to the per-source cap.
        assert_eq!(pending_decision(14, 9, true, PENDING), Ok(()));
        assert_eq!(pending_decision(15, 0, true, PENDING), Ok(()));
        assert_eq!(
            pending_decision(16, 0, true, PENDING),
            Err(Refusal::PendingHandshakes)
        );
        let one = PendingLimits {
            max: 1,
            per_source: 1,
        };
        assert_eq!(one.reserved_for_peers(), 1);
        assert_eq!(
            pending_decision(0, 0, false, one),
            Err(Refusal::PendingHandshakes)
        );
    }

    #[test]
    fn pending_slots_count_per_source_until_they_drop() {
        let pending = Pending::new(PENDING);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let held: Vec<_> = (0..4)
            .map(|_| pending.try_enter(a, false).unwrap())
            .collect();
        assert_eq!(
            pending.try_enter(a, false).err(),
            Some(Refusal::PendingPerSource)
        );
        let other = pending.try_enter(b, false).unwrap();
        assert_eq!(pending.count(), 5);
        drop(held);
        assert_eq!(pending.count(), 1);
        assert!(pending.try_enter(a, false).is_ok());
        drop(other);
        assert_eq!(pending.count(), 0);
        assert!(pending.counts.lock().by_source.is_empty());
    }

    #[test]
    fn peer_sources_are_members_addresses_and_learned_peers() {
        let peers = PeerSources::default();
        let member: IpAddr = "10.1.2.3".parse().unwrap();
        let members = ["10.1.2.3:7400", "broker-1.starling:7400"];
        assert!(peers.contains(member, members));
        let mapped: IpAddr = "::ffff:10.1.2.3".parse().unwrap();
        assert!(peers.contains(mapped, members));
        let stranger: IpAddr = "10.9.9.9".parse().unwrap();
        assert!(!peers.contains(stranger, members));
        peers.learn(stranger);
        assert!(peers.contains(stranger, members));
        for i in 0..LEARNED_PEER_SOURCES as u32 {
            peers.learn(IpAddr::from((0x0a00_0000u32 + i).to_be_bytes()));
        }
        assert!(
            !peers.contains(stranger, members),
            "the oldest is forgotten"
        );
    }

    #[test]
    fn try_enter_stops_at_the_maximum() {
        let h = InProgress::default();
        let a = h.try_enter(2);
        let b = h.try_enter(2);
        assert!(a.is_some() && b.is_some());
        assert!(h.try_enter(2).is_none());
        drop(a);
        assert!(h.try_enter(2).is_some());
    }
}
