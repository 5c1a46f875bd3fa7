//! [`Profile`]: the SDK's own presets. A profile names a trade-off between latency,
//! throughput and memory, and sets the client's pool sizes ([`ClientTuning`]) and QUIC windows
//! and timers ([`TransportTuning`]). The names are the broker's profiles' (a broker's
//! `profile:` knob), and each preset holds the client-side values of the broker profile of the
//! same name (its receive windows, keep-alive and idle timeout; its client pools), so a client
//! and a broker on one profile agree; a test with the broker's tables checks that they still do.
//! They are the SDK's settings all the same: the broker's knob table does not define them.

use std::time::Duration;

use crate::path::PathTuning;
use crate::tuning::{ClientTuning, TransportTuning};

const MIB: u64 = 1024 * 1024;

/// A performance profile of the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// General purpose; the default.
    #[default]
    Balanced,
    /// Small pools and windows: lowest tail latency.
    Latency,
    /// Large pools and windows: highest throughput.
    Throughput,
}

impl Profile {
    /// Every profile, in declaration order.
    pub const ALL: &'static [Profile] = &[Profile::Balanced, Profile::Latency, Profile::Throughput];

    /// The profile's name, as the broker's `profile:` knob and the CLI's `--profile` spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Balanced => "balanced",
            Profile::Latency => "latency",
            Profile::Throughput => "throughput",
        }
    }

    /// The profile's connection and stream pool sizes.
    pub fn pools(self) -> ClientTuning {
        match self {
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
        }
    }

    /// The profile's QUIC windows and timers; the path settings are [`PathTuning`]'s defaults
    /// in every profile.
    pub fn transport(self) -> TransportTuning {
        let (event_conn, event_stream) = match self {
            Profile::Balanced => (256 * MIB, 64 * MIB),
            Profile::Latency => (64 * MIB, 16 * MIB),
            Profile::Throughput => (512 * MIB, 128 * MIB),
        };
        TransportTuning {
            event_stream_recv_window: event_stream,
            event_conn_recv_window: event_conn,
            cache_stream_recv_window: 64 * MIB,
            cache_conn_recv_window: 256 * MIB,
            keep_alive_interval: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            send_window: None,
            path: PathTuning::default(),
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Profile {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Profile::ALL
            .iter()
            .copied()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Profile::ALL.iter().map(|p| p.as_str()).collect();
                format!("unknown value `{s}`, expected one of: {}", names.join(", "))
            })
    }
}

impl ClientTuning {
    /// The pool sizes of `profile` ([`Profile::pools`]).
    pub fn for_profile(profile: Profile) -> ClientTuning {
        profile.pools()
    }
}

impl TransportTuning {
    /// The windows, timers and path settings of `profile` ([`Profile::transport`]).
    pub fn for_profile(profile: Profile) -> TransportTuning {
        profile.transport()
    }
}

#[cfg(test)]
mod tests {
    //! The presets against the broker's tables (`starling-config`, a dev-dependency only).
    use super::*;

    fn broker(p: Profile) -> starling_config::Profile {
        match p {
            Profile::Balanced => starling_config::Profile::Balanced,
            Profile::Latency => starling_config::Profile::Latency,
            Profile::Throughput => starling_config::Profile::Throughput,
        }
    }

    #[test]
    fn names_parse_back_and_match_the_brokers() {
        assert_eq!(Profile::ALL.len(), starling_config::Profile::ALL.len());
        for p in Profile::ALL {
            assert_eq!(p.as_str(), broker(*p).as_str());
            assert_eq!(p.to_string().parse::<Profile>(), Ok(*p));
        }
        assert_eq!(
            "fast".parse::<Profile>(),
            Err("unknown value `fast`, expected one of: balanced, latency, throughput".into())
        );
    }

    #[test]
    fn each_preset_holds_the_broker_profiles_client_side_values() {
        for p in Profile::ALL {
            let c = broker(*p).config();
            let pools = starling_config::ClientTuning::resolve(broker(*p), None);
            let ours = p.pools();
            assert_eq!(
                (
                    ours.pub_conn_pool,
                    ours.pub_streams_per_conn,
                    ours.event_conn_pool,
                    ours.cache_conn_pool,
                    ours.cache_streams_per_conn
                ),
                (
                    pools.pub_conn_pool,
                    pools.pub_streams_per_conn,
                    pools.event_conn_pool,
                    pools.cache_conn_pool,
                    pools.cache_streams_per_conn
                ),
                "{p}"
            );
            let t = p.transport();
            assert_eq!(
                (
                    t.event_stream_recv_window,
                    t.event_conn_recv_window,
                    t.cache_stream_recv_window,
                    t.cache_conn_recv_window
                ),
                (
                    c.event_stream_recv_window,
                    c.event_conn_recv_window,
                    c.cache_stream_recv_window,
                    c.cache_conn_recv_window
                ),
                "{p}"
            );
            assert_eq!(
                (t.keep_alive_interval, t.idle_timeout, t.send_window),
                (
                    Duration::from_millis(c.keep_alive_interval_ms),
                    Duration::from_millis(c.idle_timeout_ms),
                    None
                ),
                "{p}"
            );
            let path = t.path;
            assert_eq!(
                (
                    path.udp_recv_buffer_bytes as u64,
                    path.udp_send_buffer_bytes as u64,
                    path.initial_mtu,
                    path.max_mtu,
                    path.max_mtu_from_route,
                    path.congestion_controller.as_str(),
                    path.ack_eliciting_threshold,
                    path.max_ack_delay.map(|d| d.as_micros() as u64),
                ),
                (
                    c.udp_recv_buffer_bytes,
                    c.udp_send_buffer_bytes,
                    c.quic_initial_mtu,
                    c.quic_max_mtu_discovery,
                    c.quic_max_mtu_from_route,
                    c.quic_congestion_controller.as_str(),
                    c.quic_ack_eliciting_threshold,
                    c.quic_max_ack_delay_us,
                ),
                "{p}"
            );
        }
    }
}
