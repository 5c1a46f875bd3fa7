//! The three deployment tiers: how big a broker cluster is.
//!
//! A tier fixes replicas, per-broker CPU and memory, the publish capacity the autoscaler plans
//! with, and the capacity-bound knobs (pools, queue depths, lanes, cache size). Figures follow
//! the reference sizing guidelines (`shared/reference/performance-tuning.md`, "Sizing
//! Guidelines"): requests take the low end of each range, limits the high end.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::enums::Tier;
use crate::knobs::BrokerConfig;
use crate::memory::MemoryBudgets;
use crate::quantity::parse_units;

/// CPU and memory of one broker pod, as Kubernetes quantities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// CPU request, e.g. `"2"` or `"500m"`.
    pub cpu_request: String,
    /// CPU limit.
    pub cpu_limit: String,
    /// Memory request, e.g. `"2Gi"`.
    pub memory_request: String,
    /// Memory limit.
    pub memory_limit: String,
}

/// The most brokers one cluster may run, whether set by `spec.replicas`, `/scale` or a tier
/// override. Every broker keeps a QUIC link to every other one, so a cluster of `n` holds
/// `n(n-1)/2` links and each membership change re-places topics across all `n`; 100 (4,950
/// links) is far beyond the largest tier (5) yet small enough that the member list and every
/// object rendered from it stay a few KiB. Without a cap, one spec with `replicas: 2147483647`
/// made the operator build a member list of about 170 GB.
pub const MAX_REPLICAS: u32 = 100;

/// Everything a tier sets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct TierSizing {
    /// Default broker replicas (1 / 3 / 5: one broker, then the smallest odd counts that survive
    /// one and two pod losses).
    pub replicas: u32,
    /// Per-broker CPU and memory.
    pub resources: Resources,
    /// Aggregate publish rate (msg/s) the tier is sized for; the autoscaler's 100 % mark.
    pub capacity_msgs_per_sec: u64,
    /// Client publish connection pool.
    pub pub_conn_pool: u32,
    /// Client event connection pool.
    pub event_conn_pool: u32,
    /// Client cache connection pool.
    pub cache_conn_pool: u32,
    /// Ceiling on `event_batch_max_events`: the profile's value is kept when it is smaller.
    pub event_batch_max_events: u32,
    /// Replaces `pub_queue_depth`.
    pub pub_queue_depth: u32,
    /// Replaces `subscriber_queue_capacity`.
    pub subscriber_queue_capacity: u32,
    /// Replaces `subscriber_writer_lanes`.
    pub subscriber_writer_lanes: u32,
}

fn resources(cpu: (&str, &str), mem: (&str, &str)) -> Resources {
    Resources {
        cpu_request: cpu.0.to_string(),
        cpu_limit: cpu.1.to_string(),
        memory_request: mem.0.to_string(),
        memory_limit: mem.1.to_string(),
    }
}

impl Tier {
    /// The tier's sizing table row.
    pub fn sizing(self) -> TierSizing {
        match self {
            Tier::Small => TierSizing {
                replicas: 1,
                resources: resources(("2", "2"), ("2Gi", "4Gi")),
                capacity_msgs_per_sec: 10_000,
                pub_conn_pool: 2,
                event_conn_pool: 4,
                cache_conn_pool: 4,
                event_batch_max_events: 32,
                pub_queue_depth: 512,
                subscriber_queue_capacity: 64,
                subscriber_writer_lanes: 2,
            },
            Tier::Medium => TierSizing {
                replicas: 3,
                resources: resources(("4", "8"), ("4Gi", "8Gi")),
                capacity_msgs_per_sec: 100_000,
                pub_conn_pool: 4,
                event_conn_pool: 8,
                cache_conn_pool: 8,
                event_batch_max_events: 64,
                pub_queue_depth: 1024,
                subscriber_queue_capacity: 128,
                subscriber_writer_lanes: 4,
            },
            Tier::Large => TierSizing {
                replicas: 5,
                resources: resources(("16", "32"), ("16Gi", "32Gi")),
                capacity_msgs_per_sec: 500_000,
                pub_conn_pool: 8,
                event_conn_pool: 16,
                cache_conn_pool: 16,
                event_batch_max_events: 128,
                pub_queue_depth: 2048,
                subscriber_queue_capacity: 256,
                subscriber_writer_lanes: 8,
            },
        }
    }

    /// The next larger tier, if any.
    pub fn up(self) -> Option<Tier> {
        match self {
            Tier::Small => Some(Tier::Medium),
            Tier::Medium => Some(Tier::Large),
            Tier::Large => None,
        }
    }

    /// The next smaller tier, if any.
    pub fn down(self) -> Option<Tier> {
        match self {
            Tier::Small => None,
            Tier::Medium => Some(Tier::Small),
            Tier::Large => Some(Tier::Medium),
        }
    }
}

impl TierSizing {
    /// The byte budgets of this sizing's memory limit ([`MemoryBudgets::for_limit`]), or
    /// `None` when the limit is not a quantity.
    pub fn memory_budgets(&self) -> Option<MemoryBudgets> {
        parse_units(&self.resources.memory_limit).map(MemoryBudgets::for_limit)
    }

    /// Applies this sizing to a profile's config: replaces the capacity knobs and the byte
    /// budgets (from the memory limit, [`crate::memory`]) and caps the batch size.
    /// `max_subscriber_writer_lanes` is raised when needed so the tier's lane count fits.
    pub fn apply_to(&self, cfg: &mut BrokerConfig) {
        if let Some(budgets) = self.memory_budgets() {
            budgets.apply_to(cfg);
        }
        cfg.event_batch_max_events = cfg.event_batch_max_events.min(self.event_batch_max_events);
        cfg.pub_queue_depth = self.pub_queue_depth;
        cfg.subscriber_queue_capacity = self.subscriber_queue_capacity;
        cfg.subscriber_writer_lanes = self.subscriber_writer_lanes;
        cfg.max_subscriber_writer_lanes = cfg
            .max_subscriber_writer_lanes
            .max(self.subscriber_writer_lanes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;

    #[test]
    fn reference_sizing_per_tier() {
        let s = Tier::Small.sizing();
        assert_eq!(
            (
                s.replicas,
                s.capacity_msgs_per_sec,
                s.subscriber_writer_lanes
            ),
            (1, 10_000, 2)
        );
        let m = Tier::Medium.sizing();
        assert_eq!(
            (m.replicas, m.capacity_msgs_per_sec, m.pub_queue_depth),
            (3, 100_000, 1024)
        );
        let l = Tier::Large.sizing();
        assert_eq!(
            (
                l.replicas,
                l.capacity_msgs_per_sec,
                l.subscriber_queue_capacity
            ),
            (5, 500_000, 256)
        );
        assert_eq!(l.resources.memory_limit, "32Gi");
    }

    #[test]
    fn tier_caps_batch_and_replaces_queues() {
        let mut cfg = Profile::Latency.config();
        Tier::Large.sizing().apply_to(&mut cfg);
        assert_eq!(
            cfg.event_batch_max_events, 8,
            "latency's smaller batch survives the cap"
        );
        assert_eq!(cfg.subscriber_writer_lanes, 8);
        let mut cfg = Profile::Throughput.config();
        Tier::Small.sizing().apply_to(&mut cfg);
        assert_eq!(cfg.event_batch_max_events, 32);
        assert_eq!(cfg.pub_queue_depth, 512);
    }

    #[test]
    fn up_and_down_walk_the_ladder() {
        assert_eq!(Tier::Small.up(), Some(Tier::Medium));
        assert_eq!(Tier::Large.up(), None);
        assert_eq!(Tier::Small.down(), None);
        assert!(Tier::Small < Tier::Large);
    }
}
