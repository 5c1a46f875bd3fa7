//! Client-side pool sizing, from the same profile and tier tables the broker uses.
//!
//! These are a client's connection and stream pools per profile: the broker's links to its peers
//! use them (`cluster::peers`), and the memory-fit formula's peer term counts them. The Rust SDK
//! does not depend on this crate: its presets (`starling_client::Profile::pools`) hold the same
//! values, and a test of the SDK checks them against this table.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::enums::{Profile, Tier};

/// Connection and stream pool sizes for a client SDK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClientTuning {
    /// QUIC connections used for publishing.
    pub pub_conn_pool: u32,
    /// Publish streams per publishing connection.
    pub pub_streams_per_conn: u32,
    /// QUIC connections over which subscriptions are spread.
    pub event_conn_pool: u32,
    /// QUIC connections used for cache operations.
    pub cache_conn_pool: u32,
    /// Cache streams per cache connection (concurrent cache ops = pool × streams).
    pub cache_streams_per_conn: u32,
}

impl ClientTuning {
    /// Pool sizes of a profile, with a tier's pool sizing on top when one is given.
    pub fn resolve(profile: Profile, tier: Option<Tier>) -> Self {
        let mut t = match profile {
            Profile::Balanced => ClientTuning {
                pub_conn_pool: 4,
                pub_streams_per_conn: 2,
                event_conn_pool: 8,
                cache_conn_pool: 8,
                cache_streams_per_conn: 4,
            },
            Profile::Latency => ClientTuning {
                pub_conn_pool: 2,
                pub_streams_per_conn: 1,
                event_conn_pool: 4,
                cache_conn_pool: 8,
                cache_streams_per_conn: 4,
            },
            Profile::Throughput => ClientTuning {
                pub_conn_pool: 8,
                pub_streams_per_conn: 4,
                event_conn_pool: 16,
                cache_conn_pool: 16,
                cache_streams_per_conn: 8,
            },
        };
        if let Some(tier) = tier {
            let s = tier.sizing();
            t.pub_conn_pool = s.pub_conn_pool;
            t.event_conn_pool = s.event_conn_pool;
            t.cache_conn_pool = s.cache_conn_pool;
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_replaces_pool_sizes_but_not_streams() {
        let t = ClientTuning::resolve(Profile::Throughput, Some(Tier::Small));
        assert_eq!(
            (t.pub_conn_pool, t.event_conn_pool, t.cache_conn_pool),
            (2, 4, 4)
        );
        assert_eq!(t.pub_streams_per_conn, 4);
        assert_eq!(
            ClientTuning::resolve(Profile::Latency, None).pub_conn_pool,
            2
        );
    }
}
