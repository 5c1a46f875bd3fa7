//! Small enumerated value types used by broker knobs, including the names of the performance
//! profiles ([`Profile`]) and deployment tiers ([`Tier`]) a config records. What each profile
//! and tier sets lives in `profile.rs` and `tier.rs`, which build on the knob list.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How subscribers are assigned to writer lanes. Every policy pins a subscriber to exactly one
/// lane for its lifetime, which is what preserves per-subscriber order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LaneShard {
    /// Currently the same as `subscriber_id_hash`, which measured best in the reference sweeps.
    Auto,
    /// Lane = hash(subscription id) mod lanes.
    SubscriberIdHash,
    /// Lane = hash(connection id) mod lanes: all subscriptions of one connection share a lane.
    ConnectionIdHash,
    /// Lanes are handed out in turn as subscriptions arrive.
    RoundRobinPin,
}

/// What happens when a subscriber's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SlowSubscriberPolicy {
    /// Discard the incoming batch for that subscriber and count it.
    DropNew,
    /// Discard the oldest queued batch for that subscriber and count it.
    DropOld,
    /// Wait for room: the topic stalls, which pushes back on publishers through QUIC flow control.
    Block,
}

/// Whether clients must authenticate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuthMode {
    /// Every client authenticates (a client certificate or a token known to the users
    /// document) and every publish, subscribe and cache operation is checked against its
    /// permissions.
    Required,
    /// No authentication and no permission checks: anyone who reaches the port may do
    /// anything, including joining as a peer when no client CA is set. For development only.
    None,
}

/// When an acked publish is acknowledged (the knob `ack_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AckLevel {
    /// As soon as the broker has accepted the message into its publish pipeline (in memory).
    Received,
    /// Once the message's batch has been enqueued to every subscriber of its topic.
    Committed,
    /// Once the message's batch is in the topic's durable log under `storage_fsync`; on a
    /// topic that is not durable, the same as `committed`.
    Persisted,
}

impl AckLevel {
    /// The level the deprecated boolean `ack_on_commit` meant.
    pub fn from_ack_on_commit(on: bool) -> AckLevel {
        if on {
            AckLevel::Committed
        } else {
            AckLevel::Received
        }
    }
}

/// When durable logs are fsynced (the knob `storage_fsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StorageFsync {
    /// Before a `persisted` ack; appends made while an fsync runs share the next one.
    Always,
    /// Every `storage_fsync_interval_ms`, in the background.
    Interval,
    /// Never explicitly: the OS writes back in its own time.
    Never,
}

/// The congestion controller of QUIC connections (the knob `quic_congestion_controller`): one
/// of quinn's three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CongestionController {
    /// CUBIC (RFC 9438), quinn's default: loss-based, grows its window fast after a loss.
    Cubic,
    /// NewReno (RFC 9002's reference controller): loss-based, halves on loss and grows by one
    /// datagram per round trip.
    NewReno,
    /// BBR (quinn's experimental implementation): paces at its estimate of the path's
    /// bandwidth and round trip instead of backing off on every loss.
    Bbr,
}

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

macro_rules! snake_enum_str {
    ($ty:ty { $($variant:ident => $name:literal),* $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$ty] = &[$(<$ty>::$variant),*];
            /// The name used in YAML, flags and environment variables.
            pub fn as_str(self) -> &'static str {
                match self { $(<$ty>::$variant => $name),* }
            }
        }
        impl ::std::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result { f.write_str(self.as_str()) }
        }
        impl ::std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok(<$ty>::$variant),)*
                    other => Err(format!(
                        "unknown value `{other}`, expected one of: {}",
                        [$($name),*].join(", ")
                    )),
                }
            }
        }
    };
}

snake_enum_str!(LaneShard {
    Auto => "auto",
    SubscriberIdHash => "subscriber_id_hash",
    ConnectionIdHash => "connection_id_hash",
    RoundRobinPin => "round_robin_pin",
});
snake_enum_str!(SlowSubscriberPolicy {
    DropNew => "drop_new",
    DropOld => "drop_old",
    Block => "block",
});
snake_enum_str!(LogFormat { Text => "text", Json => "json" });
snake_enum_str!(AckLevel {
    Received => "received",
    Committed => "committed",
    Persisted => "persisted",
});
snake_enum_str!(StorageFsync {
    Always => "always",
    Interval => "interval",
    Never => "never",
});
snake_enum_str!(AuthMode { Required => "required", None => "none" });
snake_enum_str!(CongestionController {
    Cubic => "cubic",
    NewReno => "new_reno",
    Bbr => "bbr",
});

/// A performance profile: a named trade-off between latency, throughput and memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// General purpose; the default.
    #[default]
    Balanced,
    /// Small batches, small windows, acks on commit: lowest tail latency.
    Latency,
    /// Large batches, large windows, deep queues: highest throughput.
    Throughput,
}

snake_enum_str!(Profile {
    Balanced => "balanced",
    Latency => "latency",
    Throughput => "throughput",
});

/// A deployment tier.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// Under 10k msg/s.
    #[default]
    Small,
    /// 10k–100k msg/s.
    Medium,
    /// 100k–500k msg/s.
    Large,
}

snake_enum_str!(Tier {
    Small => "small",
    Medium => "medium",
    Large => "large",
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_from_str_and_serde() {
        for v in LaneShard::ALL {
            assert_eq!(v.as_str().parse::<LaneShard>(), Ok(*v));
            let yaml = serde_saphyr::to_string(v).unwrap_or_default();
            assert_eq!(yaml.trim(), v.as_str());
        }
        assert!("fast".parse::<SlowSubscriberPolicy>().is_err());
        for v in CongestionController::ALL {
            assert_eq!(v.as_str().parse::<CongestionController>(), Ok(*v));
            let yaml = serde_saphyr::to_string(v).unwrap_or_default();
            assert_eq!(yaml.trim(), v.as_str());
        }
    }
}
