//! The memory-fit formula, defined once: the most memory a broker with a given config can be
//! made to hold ([`worst_case`]), the check of that figure against a pod's memory limit
//! ([`check_fit`]), and the byte budgets a tier derives from its memory limit
//! ([`MemoryBudgets::for_limit`]).
//!
//! The broker runs [`check_fit`] at start against its cgroup's memory limit, and the operator
//! runs it against the pod's limit before it renders anything, so a spec that could be
//! OOM-killed under load is refused up front with the knobs and the numbers.
//!
//! The worst case is a sum of terms, one per budget the broker enforces:
//!
//! | term | bytes |
//! |---|---|
//! | runtime baseline | [`BASELINE_BYTES`] |
//! | cache | `cache_max_bytes` (entries are charged their overhead too) |
//! | retained tails | `replay_max_total_bytes` |
//! | de-duplication windows | `dedup_max_total_bytes` (message ids, each charged its bytes plus its slots) |
//! | durable consumers' pending messages | `consumer_pending_max_bytes` (payloads, each charged its bytes plus its bookkeeping) |
//! | connection buffers | `connection_buffer_budget_bytes` (windows and frame allowances of every client connection) |
//! | publish data in flight | `max_inflight_publish_bytes` (read from clients and not yet in a sealed batch) |
//! | `persisted` acks waiting for an fsync | `max_pending_persisted_ack_bytes` (each ack charged what it holds until written) |
//! | subscriber queues | `subscriber_queue_budget_bytes` |
//! | topics | `max_topics` × [`TOPIC_BYTES`] |
//! | subscriptions | `max_subscriptions` × [`SUBSCRIPTION_BYTES`] |
//! | connections | `max_connections` × [`CONNECTION_BYTES`] (state besides the buffers) |
//! | pending handshakes | `max_pending_handshakes` × [`PENDING_CONNECTION_BYTES`] (the fixed grant before `Hello`) |
//! | peer links | peers × connections per link × 2 × `cluster_peer_window_bytes` |
//! | UDP buffers | (1 + peers) × (2 × (`udp_recv_buffer_bytes` + `udp_send_buffer_bytes`) + [`QUINN_RECEIVE_DATAGRAMS`] × what `quic_max_mtu_discovery` exceeds 1472 by) |
//!
//! A peer link is a client of the other member with the profile's (and tier's) connection
//! pools ([`crate::ClientTuning`]), each connection with a receive and a send window of
//! `cluster_peer_window_bytes`. The peer term needs the number of other members, which only
//! the operator knows (replicas − 1); the broker checks with the members it has at start.
//!
//! Each UDP socket (the listener, and one endpoint per peer link) may hold its receive and
//! send buffers in kernel memory, which cgroup v2 charges to the pod. Linux lets a socket hold
//! twice the size asked for ([`KERNEL_BUFFER_FACTOR`]; the other half is for its bookkeeping),
//! so that is what is counted. A size of 0 leaves the OS default, which the baseline covers.
//! quinn's own receive buffer of each endpoint holds [`QUINN_RECEIVE_DATAGRAMS`] datagrams of
//! the largest size it accepts, 1472 bytes unless `quic_max_mtu_discovery` is larger (the
//! baseline covers the default's 2.9 MiB; a jumbo-frame bound adds the difference).
//!
//! A tier (and the operator, for an admin's tier override or `spec.resources`) derives the
//! byte budgets and the object caps from the pod's memory limit ([`MemoryBudgets`]): half of
//! the limit for the byte budgets, 5/64 for the objects, which leaves the baseline and the peer
//! links in the rest.

use std::fmt;

use crate::knobs::BrokerConfig;
use crate::validate::PENDING_CONNECTION_BYTES;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// Memory of an idle broker: the runtime, TLS, metrics and the binary itself. An idle broker
/// measures about 9 MiB of RSS; the rest is headroom for allocator fragmentation.
pub const BASELINE_BYTES: u64 = 64 * MIB;
/// One live topic besides its retained tail and its messages in flight: its task, channel and
/// batcher. Measured about 10 KiB (the `a_topic_flood…` integration test prints it).
pub const TOPIC_BYTES: u64 = 16 * KIB;
/// One subscription besides its queued batches: its queue, lane slot and stream task.
pub const SUBSCRIPTION_BYTES: u64 = 8 * KIB;
/// One connection besides its buffers: QUIC connection state, its tasks, TLS session.
pub const CONNECTION_BYTES: u64 = 64 * KIB;
/// How much kernel memory a UDP socket may hold per byte of `SO_RCVBUF`/`SO_SNDBUF` asked for:
/// Linux doubles the size it is given (up to `net.core.rmem_max`/`wmem_max`, doubled too).
pub const KERNEL_BUFFER_FACTOR: u64 = 2;
/// Datagrams quinn's receive buffer of one endpoint holds on Linux: 64 GRO segments for each
/// of the 32 datagrams of a batch.
pub const QUINN_RECEIVE_DATAGRAMS: u64 = 64 * 32;

/// One term of the worst case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    /// What it is.
    pub what: &'static str,
    /// The knobs that set it (lower one of them to shrink the term).
    pub knobs: &'static str,
    /// Bytes.
    pub bytes: u64,
}

/// The worst case of a config, term by term.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    /// The terms, in the order of the table above.
    pub terms: Vec<Term>,
}

impl Estimate {
    /// The sum of the terms (saturating).
    pub fn total(&self) -> u64 {
        self.terms
            .iter()
            .fold(0u64, |sum, t| sum.saturating_add(t.bytes))
    }
}

/// The config does not fit the memory limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the config can make a broker hold {} but its memory limit is {}: {}; lower the largest of these knobs or raise the memory limit",
    human(.estimate.total()),
    human(*.limit),
    terms(.estimate)
)]
pub struct MemoryFitError {
    /// The pod's memory limit (bytes).
    pub limit: u64,
    /// The worst case that does not fit.
    pub estimate: Estimate,
}

/// The most memory `cfg` lets a broker hold, with `peers` other members.
pub fn worst_case(cfg: &BrokerConfig, peers: u32) -> Estimate {
    let times = |n: u32, each: u64| u64::from(n).saturating_mul(each);
    let pools = crate::ClientTuning::resolve(cfg.profile, cfg.tier);
    let link_connections = pools.pub_conn_pool + pools.event_conn_pool + pools.cache_conn_pool;
    let per_link =
        u64::from(link_connections).saturating_mul(cfg.cluster_peer_window_bytes.saturating_mul(2));
    let larger_datagrams = cfg
        .quic_max_mtu_discovery
        .saturating_sub(crate::validate::QUINN_MAX_UDP_PAYLOAD);
    let per_socket = cfg
        .udp_recv_buffer_bytes
        .saturating_add(cfg.udp_send_buffer_bytes)
        .saturating_mul(KERNEL_BUFFER_FACTOR)
        .saturating_add(QUINN_RECEIVE_DATAGRAMS * u64::from(larger_datagrams));
    Estimate {
        terms: vec![
            Term {
                what: "runtime baseline",
                knobs: "(fixed)",
                bytes: BASELINE_BYTES,
            },
            Term {
                what: "cache",
                knobs: "cache_max_bytes",
                bytes: cfg.cache_max_bytes,
            },
            Term {
                what: "retained tails",
                knobs: "replay_max_total_bytes",
                bytes: cfg.replay_max_total_bytes,
            },
            Term {
                what: "de-duplication windows",
                knobs: "dedup_max_total_bytes",
                bytes: cfg.dedup_max_total_bytes,
            },
            Term {
                what: "durable consumers' pending messages",
                knobs: "consumer_pending_max_bytes",
                bytes: cfg.consumer_pending_max_bytes,
            },
            Term {
                what: "connection buffers",
                knobs: "connection_buffer_budget_bytes",
                bytes: cfg.connection_buffer_budget_bytes,
            },
            Term {
                what: "publish data in flight",
                knobs: "max_inflight_publish_bytes",
                bytes: cfg.max_inflight_publish_bytes,
            },
            Term {
                what: "persisted acks waiting for an fsync",
                knobs: "max_pending_persisted_ack_bytes",
                bytes: cfg.max_pending_persisted_ack_bytes,
            },
            Term {
                what: "subscriber queues",
                knobs: "subscriber_queue_budget_bytes",
                bytes: cfg.subscriber_queue_budget_bytes,
            },
            Term {
                what: "topics",
                knobs: "max_topics",
                bytes: times(cfg.max_topics, TOPIC_BYTES),
            },
            Term {
                what: "subscriptions",
                knobs: "max_subscriptions",
                bytes: times(cfg.max_subscriptions, SUBSCRIPTION_BYTES),
            },
            Term {
                what: "connections",
                knobs: "max_connections",
                bytes: times(cfg.max_connections, CONNECTION_BYTES),
            },
            Term {
                what: "pending handshakes",
                knobs: "max_pending_handshakes",
                bytes: times(cfg.max_pending_handshakes, PENDING_CONNECTION_BYTES),
            },
            Term {
                what: "peer links",
                knobs: "cluster_peer_window_bytes",
                bytes: times(peers, per_link),
            },
            Term {
                what: "UDP buffers",
                knobs: "udp_recv_buffer_bytes, udp_send_buffer_bytes, quic_max_mtu_discovery",
                bytes: times(peers.saturating_add(1), per_socket),
            },
        ],
    }
}

/// Checks that [`worst_case`] fits `limit` bytes, returning the estimate either way.
pub fn check_fit(cfg: &BrokerConfig, peers: u32, limit: u64) -> Result<Estimate, MemoryFitError> {
    let estimate = worst_case(cfg, peers);
    if estimate.total() <= limit {
        Ok(estimate)
    } else {
        Err(MemoryFitError { limit, estimate })
    }
}

/// The byte budgets and object caps a broker gets from its pod's memory limit when a tier
/// sizes it: half of the limit for the byte budgets, 5/64 for the objects (at the per-object
/// sizes above), which leaves about 27 % for the baseline and the peer links.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudgets {
    /// `cache_max_bytes`: 1/8 of the limit.
    pub cache_max_bytes: u64,
    /// `connection_buffer_budget_bytes`: 3/16.
    pub connection_buffer_budget_bytes: u64,
    /// `replay_max_total_bytes`: 1/32.
    pub replay_max_total_bytes: u64,
    /// `dedup_max_total_bytes`: 1/64 (taken from the retained tails' 1/16: both are what
    /// topics keep of their recent past).
    pub dedup_max_total_bytes: u64,
    /// `consumer_pending_max_bytes`: 1/64 (taken from the retained tails too: both hold
    /// recent messages for readers).
    pub consumer_pending_max_bytes: u64,
    /// `max_inflight_publish_bytes`: 7/128 (1/16 less the pending acks' 1/128).
    pub max_inflight_publish_bytes: u64,
    /// `max_pending_persisted_ack_bytes`: 1/128 (taken from the publish data's 1/16: both are
    /// what publishes hold on their way to their ack).
    pub max_pending_persisted_ack_bytes: u64,
    /// `max_pending_persisted_ack_bytes_per_connection`: 1/512, a quarter of the whole.
    pub max_pending_persisted_ack_bytes_per_connection: u64,
    /// `subscriber_queue_budget_bytes`: 1/16.
    pub subscriber_queue_budget_bytes: u64,
    /// `max_topics`: 1/32 of the limit in [`TOPIC_BYTES`].
    pub max_topics: u32,
    /// `max_subscriptions`: 1/32 in [`SUBSCRIPTION_BYTES`].
    pub max_subscriptions: u32,
    /// `max_connections`: 1/64 in [`CONNECTION_BYTES`].
    pub max_connections: u32,
    /// `quic_max_mtu_discovery`: 6550 from [`LARGE_DATAGRAMS_FROM`] on, else 1452 (quinn's
    /// own bound). Each endpoint accepting 6550-byte datagrams holds about 10 MiB more of
    /// receive buffers ([`QUINN_RECEIVE_DATAGRAMS`] of them), once per peer link too, which
    /// would take a small broker past its limit.
    pub quic_max_mtu_discovery: u16,
}

/// The memory limit from which [`MemoryBudgets`] keeps 6550-byte datagrams.
pub const LARGE_DATAGRAMS_FROM: u64 = 512 * MIB;

impl MemoryBudgets {
    /// The budgets for a memory limit of `limit` bytes.
    pub fn for_limit(limit: u64) -> MemoryBudgets {
        let count = |share: u64, each: u64| u32::try_from(share / each).unwrap_or(u32::MAX).max(1);
        MemoryBudgets {
            cache_max_bytes: limit / 8,
            connection_buffer_budget_bytes: limit / 16 * 3,
            replay_max_total_bytes: limit / 32,
            dedup_max_total_bytes: limit / 64,
            consumer_pending_max_bytes: limit / 64,
            max_inflight_publish_bytes: limit / 16 - limit / 128,
            max_pending_persisted_ack_bytes: limit / 128,
            max_pending_persisted_ack_bytes_per_connection: limit / 512,
            subscriber_queue_budget_bytes: limit / 16,
            max_topics: count(limit / 32, TOPIC_BYTES),
            max_subscriptions: count(limit / 32, SUBSCRIPTION_BYTES),
            max_connections: count(limit / 64, CONNECTION_BYTES),
            quic_max_mtu_discovery: if limit >= LARGE_DATAGRAMS_FROM {
                crate::validate::QUIC_MTU_RANGE.1
            } else {
                1452
            },
        }
    }

    /// Writes the budgets into `cfg`.
    pub fn apply_to(&self, cfg: &mut BrokerConfig) {
        self.apply_unset(cfg, &[]);
    }

    /// Writes the budgets into `cfg`, except the knobs named in `kept` (what the operator does
    /// for the effective memory limit: a knob the user set explicitly stays theirs). When the
    /// cache shrinks below `cache_shards` shards of `cache_max_value_bytes`, the shard count is
    /// lowered (to a power of two, at least 1) unless it is kept too.
    pub fn apply_unset(&self, cfg: &mut BrokerConfig, kept: &[&str]) {
        let set = |name: &str| !kept.contains(&name);
        if set("cache_max_bytes") {
            cfg.cache_max_bytes = self.cache_max_bytes;
        }
        if set("connection_buffer_budget_bytes") {
            cfg.connection_buffer_budget_bytes = self.connection_buffer_budget_bytes;
        }
        if set("replay_max_total_bytes") {
            cfg.replay_max_total_bytes = self.replay_max_total_bytes;
        }
        if set("dedup_max_total_bytes") {
            cfg.dedup_max_total_bytes = self.dedup_max_total_bytes;
        }
        if set("consumer_pending_max_bytes") {
            cfg.consumer_pending_max_bytes = self.consumer_pending_max_bytes;
        }
        if set("max_inflight_publish_bytes") {
            cfg.max_inflight_publish_bytes = self.max_inflight_publish_bytes;
        }
        if set("max_pending_persisted_ack_bytes") {
            cfg.max_pending_persisted_ack_bytes = self.max_pending_persisted_ack_bytes;
        }
        if set("max_pending_persisted_ack_bytes_per_connection") {
            cfg.max_pending_persisted_ack_bytes_per_connection = self
                .max_pending_persisted_ack_bytes_per_connection
                .min(cfg.max_pending_persisted_ack_bytes);
        }
        if set("subscriber_queue_budget_bytes") {
            cfg.subscriber_queue_budget_bytes = self.subscriber_queue_budget_bytes;
        }
        if set("max_topics") {
            cfg.max_topics = self.max_topics;
        }
        if set("max_subscriptions") {
            cfg.max_subscriptions = self.max_subscriptions;
        }
        if set("max_connections") {
            cfg.max_connections = self.max_connections;
        }
        // An initial datagram size above the bound (set on purpose) keeps the bound it needs.
        if set("quic_max_mtu_discovery") && cfg.quic_initial_mtu <= self.quic_max_mtu_discovery {
            cfg.quic_max_mtu_discovery = self.quic_max_mtu_discovery;
        }
        if set("cache_shards") {
            let fit = cfg.cache_max_bytes / u64::from(cfg.cache_max_value_bytes.max(1));
            let most = if fit == 0 { 1 } else { 1u64 << fit.ilog2() };
            cfg.cache_shards = cfg
                .cache_shards
                .min(u32::try_from(most).unwrap_or(u32::MAX))
                .max(1);
        }
    }
}

/// Bytes in binary units, e.g. `3.5 GiB`.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn terms(estimate: &Estimate) -> String {
    let mut sorted: Vec<&Term> = estimate.terms.iter().filter(|t| t.bytes > 0).collect();
    sorted.sort_by_key(|t| std::cmp::Reverse(t.bytes));
    sorted
        .iter()
        .map(|t| format!("{} {} ({})", t.what, human(t.bytes), t.knobs))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Estimate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", human(self.total()), terms(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Profile, Tier, compose};

    #[test]
    fn every_profile_fits_every_tier_with_its_replicas() {
        for profile in Profile::ALL {
            for tier in Tier::ALL {
                let cfg = compose(*profile, Some(*tier), &Default::default());
                let sizing = tier.sizing();
                let limit = crate::quantity::parse_units(&sizing.resources.memory_limit)
                    .unwrap_or_default();
                let peers = sizing.replicas - 1;
                if let Err(e) = check_fit(&cfg, peers, limit) {
                    panic!("{profile} on {tier}: {e}");
                }
            }
        }
    }

    #[test]
    fn a_config_past_its_limit_is_refused_naming_knobs_and_numbers() {
        let mut cfg = Profile::Balanced.config();
        cfg.cache_max_bytes = 8 << 30;
        let err = check_fit(&cfg, 0, 4 << 30).unwrap_err().to_string();
        assert!(err.contains("memory limit is 4.0 GiB"), "{err}");
        assert!(
            err.starts_with("the config can make a broker hold "),
            "{err}"
        );
        let first = err.split(": ").nth(1).unwrap_or_default();
        assert!(
            first.starts_with("cache 8.0 GiB (cache_max_bytes)"),
            "largest term first: {err}"
        );
    }

    #[test]
    fn the_terms_add_up_and_peers_count_their_windows() {
        let cfg = Profile::Balanced.config();
        let alone = worst_case(&cfg, 0).total();
        let with_two = worst_case(&cfg, 2).total();
        let pools = crate::ClientTuning::resolve(cfg.profile, None);
        let conns = u64::from(pools.pub_conn_pool + pools.event_conn_pool + pools.cache_conn_pool);
        // Each peer link's endpoint also accepts datagrams up to the discovery bound.
        let larger_datagrams =
            QUINN_RECEIVE_DATAGRAMS * u64::from(cfg.quic_max_mtu_discovery - 1472);
        assert_eq!(
            with_two - alone,
            2 * conns * 2 * cfg.cluster_peer_window_bytes + 2 * larger_datagrams
        );
        let mut huge = cfg.clone();
        huge.max_topics = u32::MAX;
        huge.cache_max_bytes = u64::MAX;
        assert_eq!(worst_case(&huge, u32::MAX).total(), u64::MAX, "saturates");
    }

    #[test]
    fn udp_buffers_count_twice_per_endpoint_and_nothing_at_quinns_datagram_size() {
        let mut cfg = Profile::Balanced.config();
        cfg.quic_max_mtu_discovery = 1452;
        let term = |cfg: &BrokerConfig, peers: u32| {
            worst_case(cfg, peers)
                .terms
                .into_iter()
                .find(|t| t.what == "UDP buffers")
                .map(|t| t.bytes)
        };
        assert_eq!(term(&cfg, 2), Some(0), "the OS default is in the baseline");
        let mut set = cfg.clone();
        set.udp_recv_buffer_bytes = 4 << 20;
        set.udp_send_buffer_bytes = 1 << 20;
        // The listener and two peer links' endpoints, each holding twice what it asked for.
        assert_eq!(term(&set, 2), Some(3 * 2 * (5 << 20)));
        assert_eq!(
            worst_case(&set, 0).total() - worst_case(&cfg, 0).total(),
            2 * (5 << 20)
        );
        let mut jumbo = cfg.clone();
        jumbo.quic_max_mtu_discovery = 6550;
        assert_eq!(term(&jumbo, 0), Some(2048 * (6550 - 1472)));
    }

    #[test]
    fn budgets_scale_with_the_limit_and_fit_it() {
        let b = MemoryBudgets::for_limit(4 << 30);
        assert_eq!(b.cache_max_bytes, 512 << 20);
        assert_eq!(b.connection_buffer_budget_bytes, 768 << 20);
        let sum = b.cache_max_bytes
            + b.connection_buffer_budget_bytes
            + b.replay_max_total_bytes
            + b.dedup_max_total_bytes
            + b.consumer_pending_max_bytes
            + b.max_inflight_publish_bytes
            + b.max_pending_persisted_ack_bytes
            + b.subscriber_queue_budget_bytes;
        assert_eq!(sum, (4u64 << 30) / 2);
        assert_eq!(b.max_topics, 8192);
        assert_eq!(b.quic_max_mtu_discovery, 6550);
        let small = MemoryBudgets::for_limit(256 << 20);
        assert_eq!(
            small.quic_max_mtu_discovery, 1452,
            "large datagrams cost too much"
        );
        let mut jumbo_start = Profile::Balanced.config();
        jumbo_start.quic_initial_mtu = 4000;
        small.apply_to(&mut jumbo_start);
        assert_eq!(
            jumbo_start.quic_max_mtu_discovery, 6550,
            "an initial size above the bound keeps the bound it needs"
        );
        for limit in [256u64 << 20, 1 << 30, 4 << 30, 32 << 30] {
            for profile in Profile::ALL {
                let mut cfg = profile.config();
                MemoryBudgets::for_limit(limit).apply_to(&mut cfg);
                if let Err(e) = cfg.validate() {
                    panic!("{profile} at {}: {e}", human(limit));
                }
                let used = worst_case(&cfg, 0).total();
                assert!(
                    used <= limit,
                    "{profile} at {}: {}",
                    human(limit),
                    worst_case(&cfg, 0)
                );
            }
        }
    }

    #[test]
    fn human_units() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(1536), "1.5 KiB");
        assert_eq!(human(4 << 30), "4.0 GiB");
    }
}
