//! The broker's knobs as the SDK's settings, for the broker's own SDK connections (its peer
//! links, `cluster::peers`) and for the bench: [`path_tuning`], the SDK's [`PathTuning`] of a
//! broker config, and [`sdk_profile`], the SDK's profile of the same name. The SDK does not
//! know the broker's config (it does not depend on `starling-config`), so the mapping is here.

use std::time::Duration;

use starling_client::{CongestionController, PathTuning};
use starling_config::{BrokerConfig, Profile};

/// The path settings of a broker config (a profile's, or a broker's resolved one): its knobs
/// `udp_recv_buffer_bytes`, `udp_send_buffer_bytes`, `quic_initial_mtu`,
/// `quic_max_mtu_discovery`, `quic_max_mtu_from_route`, `quic_congestion_controller`,
/// `quic_ack_eliciting_threshold` and `quic_max_ack_delay_us`.
pub fn path_tuning(c: &BrokerConfig) -> PathTuning {
    let bytes = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    PathTuning {
        udp_recv_buffer_bytes: bytes(c.udp_recv_buffer_bytes),
        udp_send_buffer_bytes: bytes(c.udp_send_buffer_bytes),
        initial_mtu: c.quic_initial_mtu,
        max_mtu: c.quic_max_mtu_discovery,
        max_mtu_from_route: c.quic_max_mtu_from_route,
        congestion_controller: match c.quic_congestion_controller {
            starling_config::CongestionController::Cubic => CongestionController::Cubic,
            starling_config::CongestionController::NewReno => CongestionController::NewReno,
            starling_config::CongestionController::Bbr => CongestionController::Bbr,
        },
        ack_eliciting_threshold: c.quic_ack_eliciting_threshold,
        max_ack_delay: c.quic_max_ack_delay_us.map(Duration::from_micros),
    }
}

/// The SDK's profile of the same name as the broker's `profile` (the SDK's presets hold the
/// client-side values of the broker profile of that name).
pub fn sdk_profile(profile: Profile) -> starling_client::Profile {
    match profile {
        Profile::Balanced => starling_client::Profile::Balanced,
        Profile::Latency => starling_client::Profile::Latency,
        Profile::Throughput => starling_client::Profile::Throughput,
    }
}
