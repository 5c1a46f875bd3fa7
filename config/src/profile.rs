//! The three performance profiles and every value each one sets.
//!
//! Figures come from the reference tuning guide (`shared/reference/performance-tuning.md`).
//! Where the guide gives no figure for a profile, the balanced value is used; knobs the guide
//! does not cover at all (timeouts, frame limit, cache bounds) are Starling's own defaults and
//! are the same in every profile. The QUIC path knobs (UDP socket buffers, MTU, congestion
//! controller, ACK frequency) keep the OS's and quinn's defaults in every profile: the guide
//! gives no figure for them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::enums::{
    AckLevel, AuthMode, CongestionController, LaneShard, LogFormat, Profile, SlowSubscriberPolicy,
    StorageFsync,
};
use crate::knobs::BrokerConfig;
use crate::{DEFAULT_HTTP_PORT, DEFAULT_QUIC_PORT};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

impl Profile {
    /// The profile's complete configuration, before any tier sizing or override.
    pub fn config(self) -> BrokerConfig {
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let balanced = BrokerConfig {
            profile: Profile::Balanced,
            tier: None,
            quic_listen: SocketAddr::new(any, DEFAULT_QUIC_PORT),
            http_listen: SocketAddr::new(any, DEFAULT_HTTP_PORT),
            tls_cert_file: None,
            tls_key_file: None,
            log_format: LogFormat::Text,
            log_level: "info".to_string(),
            auth_mode: AuthMode::Required,
            auth_users_file: None,
            auth_users_secret: None,
            auth_client_ca_file: None,
            auth_reload_interval_ms: 2_000,
            event_conn_recv_window: 256 * MIB,
            event_stream_recv_window: 64 * MIB,
            event_send_window: 256 * MIB,
            cache_conn_recv_window: 256 * MIB,
            cache_stream_recv_window: 64 * MIB,
            max_concurrent_streams: 1024,
            idle_timeout_ms: 30_000,
            keep_alive_interval_ms: 5_000,
            max_frame_bytes: (4 * MIB) as u32,
            udp_recv_buffer_bytes: 0,
            udp_send_buffer_bytes: 0,
            quic_initial_mtu: 1200,
            quic_max_mtu_discovery: 6550,
            quic_max_mtu_from_route: true,
            quic_congestion_controller: CongestionController::Cubic,
            quic_ack_eliciting_threshold: None,
            quic_max_ack_delay_us: None,
            max_connections: 4096,
            handshake_retry_threshold: 128,
            handshake_timeout_ms: 5_000,
            max_pending_handshakes: 128,
            max_pending_handshakes_per_source: 32,
            stream_first_frame_timeout_ms: 10_000,
            stream_idle_timeout_ms: 300_000,
            max_topics: 16_384,
            max_subscriptions: 65_536,
            max_subscriptions_per_connection: 512,
            max_wildcard_subscriptions_per_connection: 16,
            max_groups_per_subject: 64,
            max_group_members: 1024,
            max_consumers_per_topic: 64,
            max_consumer_members: 256,
            max_consumer_ack_pending: 10_000,
            consumer_pending_max_bytes: 32 * MIB,
            max_reply_inboxes_per_user: 1024,
            max_headers_per_message: 32,
            max_header_bytes_per_message: 8 * 1024,
            max_inflight_publish_bytes: 256 * MIB,
            max_pending_persisted_ack_bytes: 32 * MIB,
            max_pending_persisted_ack_bytes_per_connection: 8 * MIB,
            max_publish_batch_items: 16_384,
            connection_buffer_budget_bytes: 2 * GIB,
            event_batch_max_events: 64,
            event_batch_max_bytes: (64 * KIB) as u32,
            event_batch_max_delay_us: 250,
            fanout_batch_size: 64,
            publish_chunk_bytes: (16 * KIB) as u32,
            pub_queue_depth: 1024,
            pub_workers_per_conn: 2,
            subscriber_queue_capacity: 128,
            subscriber_queue_budget_bytes: 256 * MIB,
            subscriber_lane_queue_depth: 8192,
            subscriber_writer_lanes: 4,
            max_subscriber_writer_lanes: 8,
            subscriber_lane_shard: LaneShard::Auto,
            slow_subscriber_policy: SlowSubscriberPolicy::DropOld,
            ack_level: AckLevel::Received,
            replay_window_ms: 30_000,
            replay_max_bytes: 4 * MIB,
            replay_max_total_bytes: 256 * MIB,
            dedup_window_ms: 120_000,
            dedup_max_ids: 100_000,
            max_msg_id_bytes: 128,
            dedup_max_total_bytes: 32 * MIB,
            durable_topics: Vec::new(),
            storage_dir: None,
            durable_replicas: 1,
            storage_fsync: StorageFsync::Always,
            storage_fsync_interval_ms: 100,
            storage_retention_max_bytes: 0,
            storage_retention_max_age_ms: 0,
            topics_file: None,
            cache_max_bytes: GIB,
            cache_shards: 64,
            cache_max_value_bytes: MIB as u32,
            drain_timeout_ms: 10_000,
            cluster_members_file: None,
            cluster_members_configmap: None,
            cluster_poll_interval_ms: 1_000,
            cluster_peer_cert_file: None,
            cluster_peer_key_file: None,
            cluster_peer_uri: None,
            cluster_peer_window_bytes: 2 * MIB,
            cluster_peer_timeout_ms: 1_000,
            cluster_handoff_window_ms: 30_000,
            replica_rpc_timeout_ms: 5_000,
            replica_heartbeat_ms: 100,
            replica_election_timeout_ms: 300,
            max_replica_rpcs_per_connection: 256,
            max_concurrent_replica_moves: 8,
        };
        match self {
            Profile::Balanced => balanced,
            Profile::Latency => BrokerConfig {
                profile: Profile::Latency,
                event_conn_recv_window: 64 * MIB,
                event_stream_recv_window: 16 * MIB,
                event_send_window: 64 * MIB,
                event_batch_max_events: 8,
                event_batch_max_bytes: (32 * KIB) as u32,
                event_batch_max_delay_us: 100,
                fanout_batch_size: 8,
                ack_level: AckLevel::Committed,
                pub_queue_depth: 512,
                pub_workers_per_conn: 1,
                subscriber_queue_capacity: 64,
                subscriber_writer_lanes: 2,
                ..balanced
            },
            Profile::Throughput => BrokerConfig {
                profile: Profile::Throughput,
                event_conn_recv_window: 512 * MIB,
                event_stream_recv_window: 128 * MIB,
                event_send_window: 512 * MIB,
                event_batch_max_events: 256,
                event_batch_max_bytes: MIB as u32,
                event_batch_max_delay_us: 2_000,
                fanout_batch_size: 256,
                ack_level: AckLevel::Received,
                pub_queue_depth: 4096,
                pub_workers_per_conn: 4,
                subscriber_queue_capacity: 256,
                subscriber_writer_lanes: 8,
                max_subscriber_writer_lanes: 8,
                publish_chunk_bytes: (32 * KIB) as u32,
                connection_buffer_budget_bytes: 4 * GIB,
                ..balanced
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reference_figures_per_profile() {
        let b = Profile::Balanced.config();
        assert_eq!(
            (
                b.event_batch_max_events,
                b.event_batch_max_delay_us,
                b.fanout_batch_size
            ),
            (64, 250, 64)
        );
        assert_eq!(
            (
                b.pub_queue_depth,
                b.subscriber_queue_capacity,
                b.subscriber_writer_lanes
            ),
            (1024, 128, 4)
        );
        assert_eq!(b.event_conn_recv_window, 268_435_456);
        let l = Profile::Latency.config();
        assert_eq!(
            (
                l.event_batch_max_events,
                l.event_batch_max_delay_us,
                l.fanout_batch_size
            ),
            (8, 100, 8)
        );
        assert_eq!(
            (l.event_stream_recv_window, l.event_batch_max_bytes),
            (16_777_216, 32_768)
        );
        assert_eq!(l.ack_level, AckLevel::Committed);
        assert_eq!(l.profile, Profile::Latency);
        let t = Profile::Throughput.config();
        assert_eq!(
            (
                t.event_batch_max_events,
                t.event_batch_max_bytes,
                t.event_batch_max_delay_us
            ),
            (256, 1_048_576, 2000)
        );
        assert_eq!(
            (
                t.pub_queue_depth,
                t.subscriber_queue_capacity,
                t.subscriber_writer_lanes
            ),
            (4096, 256, 8)
        );
        assert_eq!(t.publish_chunk_bytes, 32_768);
        assert_eq!(t.ack_level, AckLevel::Received);
    }

    #[test]
    fn every_profile_is_valid() {
        for p in Profile::ALL {
            assert_eq!(
                p.config().validate().map_err(|e| e.to_string()),
                Ok(()),
                "{p}"
            );
        }
    }
}
