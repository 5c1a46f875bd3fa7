//! Validation of a resolved [`BrokerConfig`]: impossible combinations are refused with a message
//! naming the field.

use crate::enums::AuthMode;
use crate::error::{ConfigError, FieldError};
use crate::knobs::BrokerConfig;

/// Largest value a QUIC variable-length integer (and so any QUIC window) can hold.
pub const QUIC_VARINT_MAX: u64 = (1 << 62) - 1;
/// Smallest accepted flow-control window.
pub const MIN_WINDOW: u64 = 16 * 1024;
/// Smallest and largest accepted `max_frame_bytes`.
pub const FRAME_BYTES_RANGE: (u32, u32) = (64 * 1024, 64 * 1024 * 1024);
/// Largest accepted `event_batch_max_delay_us` (one second).
pub const MAX_BATCH_DELAY_US: u64 = 1_000_000;
/// Largest accepted lane and worker counts.
pub const MAX_LANES: u32 = 64;
/// The smallest receive or send window a connection is granted from
/// `connection_buffer_budget_bytes` (or the configured window, if smaller).
pub const CONNECTION_WINDOW_FLOOR: u64 = 1024 * 1024;
/// The receive and send windows of a connection whose handshake (TLS and `Hello`) is still in
/// progress: enough for a `Hello` and the answer to it. The full grant comes after `Hello`.
pub const PENDING_CONNECTION_WINDOW: u64 = 8 * 1024;
/// The largest `Hello` frame payload the broker reads before the client is authenticated.
pub const HANDSHAKE_FRAME_BYTES: u32 = 4 * 1024;
/// What one pending handshake holds of buffers: both windows and one `Hello` with its header.
pub const PENDING_CONNECTION_BYTES: u64 =
    2 * PENDING_CONNECTION_WINDOW + HANDSHAKE_FRAME_BYTES as u64 + 8;
/// Bytes reserved in a frame for the EventBatch header and per-event prefixes of a full batch.
pub const EVENT_BATCH_OVERHEAD: u64 = 64;
// The UDP datagram sizes are the protocol's (`starling_proto::quic`), shared with the SDK.
pub use starling_proto::quic::{QUIC_MTU_RANGE, QUINN_MAX_UDP_PAYLOAD};
/// Largest accepted `udp_recv_buffer_bytes` and `udp_send_buffer_bytes` (256 MiB).
pub const MAX_UDP_BUFFER_BYTES: u64 = 256 << 20;
/// Largest accepted `quic_ack_eliciting_threshold`.
pub const MAX_ACK_ELICITING_THRESHOLD: u64 = 64;
/// Smallest and largest accepted `quic_max_ack_delay_us`: quinn's `min_ack_delay` (1 ms, its
/// timer granularity) and QUIC's default `max_ack_delay` (25 ms).
pub const ACK_DELAY_US_RANGE: (u64, u64) = (1_000, 25_000);

/// Inclusive bounds of one numeric knob that hold whatever else is set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnobRange {
    /// Knob name.
    pub knob: &'static str,
    /// Smallest accepted value.
    pub min: Option<u64>,
    /// Largest accepted value.
    pub max: Option<u64>,
}

/// An order between two numeric knobs: `lhs ≤ rhs`, or `lhs < rhs` when `strict`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnobPair {
    /// The knob that must be the smaller one.
    pub lhs: &'static str,
    /// The knob that bounds it.
    pub rhs: &'static str,
    /// `lhs < rhs` instead of `lhs ≤ rhs`.
    pub strict: bool,
}

/// The few values a numeric knob may take when they are not a range: the shared validation
/// refuses any other, and the operator's CRD schema lists them as the field's `enum`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnobOneOf {
    /// Knob name.
    pub knob: &'static str,
    /// The accepted values, ascending.
    pub values: &'static [u64],
    /// Why only these, for the refusal's message.
    pub why: &'static str,
}

impl KnobOneOf {
    /// Whether `value` is one of the accepted values.
    pub fn allows(&self, value: u64) -> bool {
        self.values.contains(&value)
    }

    /// The accepted values in words: `1, 3 or 5`.
    pub fn words(&self) -> String {
        let all: Vec<String> = self.values.iter().map(u64::to_string).collect();
        match all.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            Some((last, _)) => last.clone(),
            None => String::new(),
        }
    }
}

const fn range(knob: &'static str, min: Option<u64>, max: Option<u64>) -> KnobRange {
    KnobRange { knob, min, max }
}

const fn window(knob: &'static str) -> KnobRange {
    range(knob, Some(MIN_WINDOW), Some(QUIC_VARINT_MAX))
}

const fn at_least_one(knob: &'static str) -> KnobRange {
    range(knob, Some(1), None)
}

const fn le(lhs: &'static str, rhs: &'static str) -> KnobPair {
    KnobPair {
        lhs,
        rhs,
        strict: false,
    }
}

/// Every single-knob range. `validate` enforces them, and the operator turns the same table into
/// admission rules.
pub const KNOB_RANGES: &[KnobRange] = &[
    window("event_conn_recv_window"),
    window("event_stream_recv_window"),
    window("event_send_window"),
    window("cache_conn_recv_window"),
    window("cache_stream_recv_window"),
    range("max_concurrent_streams", Some(4), Some(1 << 20)),
    // An hour: a dead peer's connection (and everything it holds) is released within it, and the
    // value always fits QUIC's idle-timeout varint, so nothing that validates fails at start.
    range("idle_timeout_ms", Some(1_000), Some(3_600_000)),
    range(
        "max_frame_bytes",
        Some(FRAME_BYTES_RANGE.0 as u64),
        Some(FRAME_BYTES_RANGE.1 as u64),
    ),
    range("udp_recv_buffer_bytes", None, Some(MAX_UDP_BUFFER_BYTES)),
    range("udp_send_buffer_bytes", None, Some(MAX_UDP_BUFFER_BYTES)),
    range(
        "quic_initial_mtu",
        Some(QUIC_MTU_RANGE.0 as u64),
        Some(QUIC_MTU_RANGE.1 as u64),
    ),
    range(
        "quic_max_mtu_discovery",
        Some(QUIC_MTU_RANGE.0 as u64),
        Some(QUIC_MTU_RANGE.1 as u64),
    ),
    range(
        "quic_ack_eliciting_threshold",
        None,
        Some(MAX_ACK_ELICITING_THRESHOLD),
    ),
    range(
        "quic_max_ack_delay_us",
        Some(ACK_DELAY_US_RANGE.0),
        Some(ACK_DELAY_US_RANGE.1),
    ),
    range("max_connections", Some(1), Some(1 << 20)),
    range("handshake_retry_threshold", None, Some(1 << 20)),
    range("handshake_timeout_ms", Some(500), Some(60_000)),
    range("max_pending_handshakes", Some(1), Some(1 << 16)),
    range("max_pending_handshakes_per_source", Some(1), Some(1 << 16)),
    range("stream_first_frame_timeout_ms", Some(100), Some(600_000)),
    range("stream_idle_timeout_ms", Some(100), Some(3_600_000)),
    range("max_topics", Some(1), Some(1 << 24)),
    range("max_subscriptions", Some(1), Some(1 << 24)),
    range("max_subscriptions_per_connection", Some(1), Some(1 << 20)),
    range(
        "max_wildcard_subscriptions_per_connection",
        Some(1),
        Some(1 << 16),
    ),
    range("max_groups_per_subject", Some(1), Some(1 << 16)),
    range("max_group_members", Some(1), Some(1 << 20)),
    range("max_consumers_per_topic", Some(1), Some(1 << 16)),
    range("max_consumer_members", Some(1), Some(1 << 20)),
    range("max_consumer_ack_pending", Some(1), Some(1 << 20)),
    range("consumer_pending_max_bytes", Some(1), Some(1 << 40)),
    range("max_reply_inboxes_per_user", Some(1), Some(1 << 20)),
    range("max_headers_per_message", Some(1), Some(1 << 16)),
    range("max_header_bytes_per_message", Some(16), Some(1 << 20)),
    range("max_inflight_publish_bytes", Some(1 << 16), Some(1 << 40)),
    range(
        "max_pending_persisted_ack_bytes",
        Some(1 << 12),
        Some(1 << 40),
    ),
    range(
        "max_pending_persisted_ack_bytes_per_connection",
        Some(1 << 12),
        Some(1 << 40),
    ),
    range("max_publish_batch_items", Some(1), Some(1 << 20)),
    // Room for at least one connection at the floor with the default frame size (a larger
    // `max_frame_bytes` needs more: see `least_connection_grant`); at most 4 TiB.
    range(
        "connection_buffer_budget_bytes",
        Some(8 << 20),
        Some(1 << 42),
    ),
    at_least_one("event_batch_max_events"),
    at_least_one("event_batch_max_bytes"),
    range("event_batch_max_delay_us", None, Some(MAX_BATCH_DELAY_US)),
    at_least_one("fanout_batch_size"),
    range("publish_chunk_bytes", Some(1024), None),
    at_least_one("pub_queue_depth"),
    range("pub_workers_per_conn", Some(1), Some(MAX_LANES as u64)),
    at_least_one("subscriber_queue_capacity"),
    at_least_one("subscriber_lane_queue_depth"),
    at_least_one("subscriber_writer_lanes"),
    range(
        "max_subscriber_writer_lanes",
        Some(1),
        Some(MAX_LANES as u64),
    ),
    range("cache_shards", Some(1), Some(4096)),
    at_least_one("cache_max_value_bytes"),
    range("drain_timeout_ms", None, Some(3_600_000)),
    range("replay_window_ms", None, Some(600_000)),
    range("replay_max_bytes", None, Some(1 << 30)),
    range("replay_max_total_bytes", None, Some(1 << 40)),
    range("dedup_window_ms", None, Some(3_600_000)),
    range("dedup_max_ids", None, Some(1 << 24)),
    range(
        "max_msg_id_bytes",
        Some(1),
        Some(starling_proto::MAX_MSG_ID_LEN as u64),
    ),
    range("dedup_max_total_bytes", None, Some(1 << 40)),
    range("cluster_poll_interval_ms", Some(50), Some(60_000)),
    range("cluster_peer_timeout_ms", Some(50), Some(60_000)),
    range("cluster_handoff_window_ms", None, Some(3_600_000)),
    range("replica_rpc_timeout_ms", Some(50), Some(600_000)),
    range("replica_heartbeat_ms", Some(20), Some(60_000)),
    range("replica_election_timeout_ms", Some(50), Some(300_000)),
    range("max_replica_rpcs_per_connection", Some(1), Some(1 << 16)),
    range("max_concurrent_replica_moves", Some(1), Some(1 << 16)),
    range("auth_reload_interval_ms", Some(100), Some(60_000)),
    range("cluster_peer_window_bytes", Some(64 * 1024), Some(1 << 30)),
    range("storage_fsync_interval_ms", Some(1), Some(60_000)),
];

/// Every knob whose values are a short list ([`KnobOneOf`]). `validate` enforces them, and the
/// operator turns the same table into the CRD's `enum` and an admission rule.
pub const KNOB_ONE_OF: &[KnobOneOf] = &[KnobOneOf {
    knob: "durable_replicas",
    values: &[1, 3, 5],
    why: "a majority of an even count tolerates no more failures than one copy fewer",
}];

/// Every order between two knobs. `validate` enforces them, and the operator turns the same
/// table into admission rules.
pub const KNOB_PAIRS: &[KnobPair] = &[
    le("event_stream_recv_window", "event_conn_recv_window"),
    le("cache_stream_recv_window", "cache_conn_recv_window"),
    KnobPair {
        lhs: "keep_alive_interval_ms",
        rhs: "idle_timeout_ms",
        strict: true,
    },
    le("publish_chunk_bytes", "max_frame_bytes"),
    le(
        "max_pending_handshakes_per_source",
        "max_pending_handshakes",
    ),
    le(
        "max_pending_persisted_ack_bytes_per_connection",
        "max_pending_persisted_ack_bytes",
    ),
    le("quic_initial_mtu", "quic_max_mtu_discovery"),
    le("subscriber_writer_lanes", "max_subscriber_writer_lanes"),
    KnobPair {
        lhs: "replica_heartbeat_ms",
        rhs: "replica_election_timeout_ms",
        strict: true,
    },
];

struct Checker(Vec<FieldError>);

impl Checker {
    fn check(&mut self, ok: bool, field: &'static str, reason: impl FnOnce() -> String) {
        if !ok {
            self.0.push(FieldError {
                field,
                reason: reason(),
            });
        }
    }
}

impl BrokerConfig {
    /// What the smallest connection grant takes of `connection_buffer_budget_bytes`: its receive
    /// and send windows at the floor ([`CONNECTION_WINDOW_FLOOR`], or the configured window if
    /// smaller) and one largest frame with its 8-byte header (the least frame allowance).
    pub fn least_connection_grant(&self) -> u64 {
        let recv = self.event_conn_recv_window.min(CONNECTION_WINDOW_FLOOR);
        let send = self.event_send_window.min(CONNECTION_WINDOW_FLOOR);
        recv + send + recv.max(u64::from(self.max_frame_bytes) + 8)
    }

    /// Checks every rule and returns all violations at once.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let mut c = Checker(Vec::new());
        let values = self.knob_values();
        let num = |name: &str| {
            values
                .iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, v)| v.as_u64())
        };

        for r in KNOB_RANGES {
            let Some(v) = num(r.knob) else { continue };
            let reason = || match (r.min, r.max) {
                (Some(min), Some(max)) => format!("must be between {min} and {max}, got {v}"),
                (Some(min), None) => format!("must be at least {min}, got {v}"),
                (None, Some(max)) => format!("must be at most {max}, got {v}"),
                (None, None) => String::new(),
            };
            let ok = r.min.is_none_or(|min| v >= min) && r.max.is_none_or(|max| v <= max);
            c.check(ok, r.knob, reason);
        }
        for o in KNOB_ONE_OF {
            let Some(v) = num(o.knob) else { continue };
            c.check(o.allows(v), o.knob, || {
                format!("must be {} ({}), got {v}", o.words(), o.why)
            });
        }
        for p in KNOB_PAIRS {
            let (Some(l), Some(r)) = (num(p.lhs), num(p.rhs)) else {
                continue;
            };
            let ok = if p.strict { l < r } else { l <= r };
            let words = if p.strict {
                "be less than"
            } else {
                "not exceed"
            };
            c.check(ok, p.lhs, || format!("({l}) must {words} {} ({r})", p.rhs));
        }

        c.check(
            u64::from(self.event_batch_max_bytes) + EVENT_BATCH_OVERHEAD <= u64::from(self.max_frame_bytes),
            "event_batch_max_bytes",
            || {
                format!(
                    "({}) plus {EVENT_BATCH_OVERHEAD} bytes of framing must fit in max_frame_bytes ({})",
                    self.event_batch_max_bytes, self.max_frame_bytes
                )
            },
        );
        let per_shard =
            self.cache_max_bytes / u64::from(self.cache_shards.max(1)).next_power_of_two();
        c.check(u64::from(self.cache_max_value_bytes) <= per_shard, "cache_max_value_bytes", || {
            format!(
                "({}) must fit in one cache shard (cache_max_bytes / cache_shards = {per_shard})",
                self.cache_max_value_bytes
            )
        });
        let least = self.least_connection_grant();
        c.check(
            self.connection_buffer_budget_bytes >= least,
            "connection_buffer_budget_bytes",
            || {
                format!(
                    "({}) must hold at least one connection at the floor: two windows of at most \
                     {CONNECTION_WINDOW_FLOOR} bytes and one frame of max_frame_bytes ({}) with \
                     its header, {least} bytes",
                    self.connection_buffer_budget_bytes, self.max_frame_bytes
                )
            },
        );
        c.check(
            self.tls_cert_file.is_some() == self.tls_key_file.is_some(),
            if self.tls_cert_file.is_some() {
                "tls_key_file"
            } else {
                "tls_cert_file"
            },
            || "tls_cert_file and tls_key_file must be set together".to_string(),
        );
        c.check(
            self.cluster_members_file.is_none() || self.cluster_members_configmap.is_none(),
            "cluster_members_configmap",
            || "cluster_members_file and cluster_members_configmap are exclusive".to_string(),
        );
        c.check(
            self.subscriber_queue_budget_bytes >= u64::from(self.max_frame_bytes),
            "subscriber_queue_budget_bytes",
            || {
                format!(
                    "({}) must hold at least one batch of max_frame_bytes ({})",
                    self.subscriber_queue_budget_bytes, self.max_frame_bytes
                )
            },
        );
        c.check(
            self.auth_users_file.is_none() || self.auth_users_secret.is_none(),
            "auth_users_secret",
            || "auth_users_file and auth_users_secret are exclusive".to_string(),
        );
        c.check(
            self.cluster_peer_cert_file.is_some() == self.cluster_peer_key_file.is_some(),
            if self.cluster_peer_cert_file.is_some() {
                "cluster_peer_key_file"
            } else {
                "cluster_peer_cert_file"
            },
            || "cluster_peer_cert_file and cluster_peer_key_file must be set together".to_string(),
        );
        c.check(
            self.cluster_peer_uri
                .as_deref()
                .is_none_or(|u| u.contains(':') && u.len() <= 1024 && u.bytes().all(|b| b.is_ascii_graphic())),
            "cluster_peer_uri",
            || "cluster_peer_uri must be a URI (a scheme, `:`, then printable ASCII without spaces; at most 1024 bytes)".to_string(),
        );
        let clustered =
            self.cluster_members_file.is_some() || self.cluster_members_configmap.is_some();
        c.check(
            !clustered
                || self.auth_mode != AuthMode::Required
                || (self.cluster_peer_cert_file.is_some() && self.auth_client_ca_file.is_some()),
            "cluster_peer_cert_file",
            || {
                "a cluster with auth_mode `required` authenticates its peers by certificate: set \
                 cluster_peer_cert_file, cluster_peer_key_file and auth_client_ca_file"
                    .to_string()
            },
        );
        c.check(
            self.durable_topics.is_empty() || self.storage_dir.is_some(),
            "storage_dir",
            || {
                "durable_topics is set: storage_dir must name the directory of their logs"
                    .to_string()
            },
        );
        c.check(
            self.topics_file.is_none() || self.storage_dir.is_some(),
            "storage_dir",
            || {
                "topics_file is set: storage_dir must name the directory of the durable topics' logs"
                    .to_string()
            },
        );
        for topic in &self.durable_topics {
            if let Err(e) = starling_access::Pattern::parse(topic) {
                c.check(false, "durable_topics", || format!("`{topic}`: {e}"));
            }
        }
        c.check(!self.log_level.trim().is_empty(), "log_level", || {
            "must not be empty".to_string()
        });

        if c.0.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::Invalid(std::mem::take(&mut c.0)))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{ConfigOverrides, Profile, compose};

    fn errors(o: ConfigOverrides) -> String {
        compose(Profile::Balanced, None, &o)
            .validate()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    #[test]
    fn durable_topics_need_a_storage_dir_and_valid_patterns() {
        let msg = errors(ConfigOverrides {
            durable_topics: Some(vec!["orders.*".into()]),
            ..Default::default()
        });
        assert!(msg.contains("storage_dir"), "{msg}");
        let msg = errors(ConfigOverrides {
            durable_topics: Some(vec!["orders.>.x".into()]),
            storage_dir: Some(Some("/var/lib/starling".into())),
            ..Default::default()
        });
        assert!(
            msg.contains("durable_topics") && msg.contains("orders.>.x"),
            "{msg}"
        );
        let msg = errors(ConfigOverrides {
            topics_file: Some(Some("/etc/starling/topics/topics.json".into())),
            ..Default::default()
        });
        assert!(
            msg.contains("storage_dir") && msg.contains("topics_file"),
            "{msg}"
        );
        let ok = errors(ConfigOverrides {
            topics_file: Some(Some("/etc/starling/topics/topics.json".into())),
            durable_topics: Some(vec!["orders.*".into(), "audit.>".into(), "exact".into()]),
            storage_dir: Some(Some("/var/lib/starling".into())),
            ..Default::default()
        });
        assert!(ok.is_empty(), "{ok}");
    }

    #[test]
    fn durable_replicas_must_be_1_3_or_5() {
        for bad in [0, 2, 4, 6, 7] {
            let msg = errors(ConfigOverrides {
                durable_replicas: Some(bad),
                ..Default::default()
            });
            assert!(
                msg.contains("durable_replicas") && msg.contains("1, 3 or 5"),
                "{bad}: {msg}"
            );
        }
        for good in [1, 3, 5] {
            let msg = errors(ConfigOverrides {
                durable_replicas: Some(good),
                ..Default::default()
            });
            assert!(msg.is_empty(), "{good}: {msg}");
        }
    }

    #[test]
    fn a_one_of_rule_names_its_values_in_words() {
        use crate::validate::KnobOneOf;
        let o = |values: &'static [u64]| KnobOneOf {
            knob: "k",
            values,
            why: "",
        };
        assert_eq!(o(&[1, 3, 5]).words(), "1, 3 or 5");
        assert_eq!(o(&[2, 4]).words(), "2 or 4");
        assert_eq!(o(&[7]).words(), "7");
        assert!(o(&[1, 3, 5]).allows(3) && !o(&[1, 3, 5]).allows(4));
    }

    #[test]
    fn a_connection_buffer_budget_below_one_floor_grant_is_refused() {
        let msg = errors(ConfigOverrides {
            connection_buffer_budget_bytes: Some(8 << 20),
            max_frame_bytes: Some(16 << 20),
            ..Default::default()
        });
        assert!(
            msg.contains("connection_buffer_budget_bytes") && msg.contains("at the floor"),
            "{msg}"
        );
        let ok = errors(ConfigOverrides {
            connection_buffer_budget_bytes: Some(8 << 20),
            ..Default::default()
        });
        assert!(ok.is_empty(), "{ok}");
    }

    #[test]
    fn zero_batch_sizes_are_refused_by_name() {
        let msg = errors(ConfigOverrides {
            event_batch_max_events: Some(0),
            ..Default::default()
        });
        assert!(
            msg.contains("event_batch_max_events: must be at least 1"),
            "{msg}"
        );
        let msg = errors(ConfigOverrides {
            fanout_batch_size: Some(0),
            ..Default::default()
        });
        assert!(msg.contains("fanout_batch_size"), "{msg}");
    }

    #[test]
    fn an_idle_timeout_past_an_hour_is_refused_before_start() {
        let msg = errors(ConfigOverrides {
            idle_timeout_ms: Some(u64::MAX),
            ..Default::default()
        });
        assert!(msg.contains("idle_timeout_ms"), "{msg}");
        assert!(
            errors(ConfigOverrides {
                idle_timeout_ms: Some(3_600_000),
                ..Default::default()
            })
            .is_empty()
        );
    }

    #[test]
    fn stream_window_above_connection_window_is_refused() {
        let msg = errors(ConfigOverrides {
            event_stream_recv_window: Some(512 << 20),
            ..Default::default()
        });
        assert!(
            msg.contains("event_stream_recv_window") && msg.contains("event_conn_recv_window"),
            "{msg}"
        );
    }

    #[test]
    fn lanes_above_max_are_refused() {
        let msg = errors(ConfigOverrides {
            subscriber_writer_lanes: Some(9),
            ..Default::default()
        });
        assert!(
            msg.contains(
                "subscriber_writer_lanes: (9) must not exceed max_subscriber_writer_lanes (8)"
            ),
            "{msg}"
        );
    }

    #[test]
    fn batch_bytes_must_fit_a_frame_and_all_errors_are_reported() {
        let msg = errors(ConfigOverrides {
            event_batch_max_bytes: Some(8 << 20),
            pub_queue_depth: Some(0),
            ..Default::default()
        });
        assert!(
            msg.contains("event_batch_max_bytes") && msg.contains("pub_queue_depth"),
            "{msg}"
        );
    }

    #[test]
    fn udp_buffers_are_bounded_and_zero_is_the_os_default() {
        let ok = errors(ConfigOverrides {
            udp_recv_buffer_bytes: Some(0),
            udp_send_buffer_bytes: Some(4 << 20),
            ..Default::default()
        });
        assert!(ok.is_empty(), "{ok}");
        let msg = errors(ConfigOverrides {
            udp_recv_buffer_bytes: Some(1 << 30),
            udp_send_buffer_bytes: Some((256 << 20) + 1),
            ..Default::default()
        });
        assert!(
            msg.contains("udp_recv_buffer_bytes: must be at most 268435456, got 1073741824"),
            "{msg}"
        );
        assert!(msg.contains("udp_send_buffer_bytes"), "{msg}");
    }

    #[test]
    fn mtus_are_within_quic_bounds_and_initial_at_most_the_discovery_bound() {
        let msg = errors(ConfigOverrides {
            quic_initial_mtu: Some(1199),
            ..Default::default()
        });
        assert!(
            msg.contains("quic_initial_mtu: must be between 1200 and 6550, got 1199"),
            "{msg}"
        );
        let msg = errors(ConfigOverrides {
            quic_max_mtu_discovery: Some(6551),
            ..Default::default()
        });
        assert!(
            msg.contains("quic_max_mtu_discovery: must be between 1200 and 6550, got 6551"),
            "{msg}"
        );
        let msg = errors(ConfigOverrides {
            quic_initial_mtu: Some(1500),
            quic_max_mtu_discovery: Some(1452),
            ..Default::default()
        });
        assert!(
            msg.contains("quic_initial_mtu: (1500) must not exceed quic_max_mtu_discovery (1452)"),
            "{msg}"
        );
        let jumbo = errors(ConfigOverrides {
            quic_initial_mtu: Some(1400),
            quic_max_mtu_discovery: Some(6550),
            ..Default::default()
        });
        assert!(jumbo.is_empty(), "{jumbo}");
    }

    #[test]
    fn ack_frequency_knobs_are_optional_and_bounded() {
        let ok = errors(ConfigOverrides {
            quic_ack_eliciting_threshold: Some(Some(0)),
            quic_max_ack_delay_us: Some(Some(1_000)),
            ..Default::default()
        });
        assert!(ok.is_empty(), "{ok}");
        let msg = errors(ConfigOverrides {
            quic_ack_eliciting_threshold: Some(Some(65)),
            quic_max_ack_delay_us: Some(Some(999)),
            ..Default::default()
        });
        assert!(
            msg.contains("quic_ack_eliciting_threshold: must be at most 64, got 65"),
            "{msg}"
        );
        assert!(
            msg.contains("quic_max_ack_delay_us: must be between 1000 and 25000, got 999"),
            "{msg}"
        );
    }

    #[test]
    fn congestion_controllers_parse_by_name_and_others_are_refused() {
        use crate::{ConfigFile, CongestionController};
        let file = ConfigFile::from_yaml("quic_congestion_controller: new_reno\n", "test")
            .map_err(|e| e.to_string());
        assert_eq!(
            file.map(|f| f.quic_congestion_controller),
            Ok(Some(CongestionController::NewReno))
        );
        let bad = ConfigFile::from_yaml("quic_congestion_controller: vegas\n", "test")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            bad.contains("unknown variant `vegas`") && bad.contains("new_reno"),
            "{bad}"
        );
    }

    #[test]
    fn tls_files_come_in_pairs() {
        let msg = errors(ConfigOverrides {
            tls_cert_file: Some(Some("/tls/tls.crt".into())),
            ..Default::default()
        });
        assert!(msg.contains("tls_key_file"), "{msg}");
    }
}
