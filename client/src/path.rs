//! [`PathTuning`]: how QUIC connections use their network path (UDP socket buffers, datagram
//! sizes, congestion controller, ACK frequency), and the quinn endpoints bound with it. The
//! SDK's endpoints and the broker's listener are both built here, so the settings mean the same
//! on either side; the broker fills it from its knobs of the same names
//! (`starling_broker::transport::path_tuning`).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};
use quinn::{AckFrequencyConfig, EndpointConfig, MtuDiscoveryConfig, TransportConfig, VarInt};
use socket2::{Domain, Protocol, Socket, Type};
use starling_proto::quic::{QUIC_MTU_RANGE, QUINN_MAX_UDP_PAYLOAD};

/// The congestion controller of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum CongestionController {
    /// CUBIC (quinn's default).
    #[default]
    Cubic,
    /// NewReno.
    NewReno,
    /// BBR.
    Bbr,
}

impl CongestionController {
    /// The name the broker's `quic_congestion_controller` knob uses.
    pub fn as_str(self) -> &'static str {
        match self {
            CongestionController::Cubic => "cubic",
            CongestionController::NewReno => "new_reno",
            CongestionController::Bbr => "bbr",
        }
    }
}

/// How connections use their network path. Each field is the client's side of a broker knob:
/// `udp_recv_buffer_bytes`, `udp_send_buffer_bytes`, `quic_initial_mtu`,
/// `quic_max_mtu_discovery`, `quic_max_mtu_from_route`, `quic_congestion_controller`,
/// `quic_ack_eliciting_threshold` and `quic_max_ack_delay_us` (see `docs/configuration.md`);
/// [`PathTuning::default`] is what every broker profile sets. A connection uses
/// [`PathTuning::towards`] its peer, which settles the discovery bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathTuning {
    /// Receive buffer asked of the kernel for each endpoint's UDP socket (bytes); 0 leaves the
    /// OS default.
    pub udp_recv_buffer_bytes: usize,
    /// Send buffer asked of the kernel for each endpoint's UDP socket (bytes); 0 leaves the OS
    /// default.
    pub udp_send_buffer_bytes: usize,
    /// UDP payload size connections start with, before path MTU discovery (at least 1200).
    pub initial_mtu: u16,
    /// Largest UDP payload size path MTU discovery probes for. Above 1472 the endpoint also
    /// accepts datagrams that large from its peers (quinn's `max_udp_payload_size`), which is
    /// what lets the other side's discovery go past 1472.
    pub max_mtu: u16,
    /// Whether [`PathTuning::towards`] caps `max_mtu` at what the route to the peer carries
    /// (`quic_max_mtu_from_route`).
    pub max_mtu_from_route: bool,
    /// Congestion controller of every connection.
    pub congestion_controller: CongestionController,
    /// ACK frequency: ack-eliciting packets the other side may receive before it must ACK.
    /// `None` with `max_ack_delay` also `None`: the extension is not asked for.
    pub ack_eliciting_threshold: Option<u32>,
    /// ACK frequency: the longest the other side may delay an ACK. `None`: its own.
    pub max_ack_delay: Option<Duration>,
}

impl Default for PathTuning {
    /// The OS's socket buffers, datagrams from 1200 bytes up to what the route carries (at most
    /// 6550), CUBIC, no ACK frequency: what every broker profile sets.
    fn default() -> PathTuning {
        PathTuning {
            udp_recv_buffer_bytes: 0,
            udp_send_buffer_bytes: 0,
            initial_mtu: QUIC_MTU_RANGE.0,
            max_mtu: QUIC_MTU_RANGE.1,
            max_mtu_from_route: true,
            congestion_controller: CongestionController::Cubic,
            ack_eliciting_threshold: None,
            max_ack_delay: None,
        }
    }
}

impl PathTuning {
    /// The tuning of one connection to `peer`: with `max_mtu_from_route`, the discovery bound
    /// is capped at the largest UDP payload the route towards `peer` carries (1452, quinn's
    /// default, where the kernel cannot say), and the initial size at that bound.
    pub fn towards(&self, peer: SocketAddr) -> PathTuning {
        if !self.max_mtu_from_route {
            return *self;
        }
        let (min_mtu, _) = QUIC_MTU_RANGE;
        let route = crate::route_mtu::udp_payload_towards(peer)
            .map_or(QUINN_DEFAULT_MAX_MTU, |p| {
                u16::try_from(p).unwrap_or(u16::MAX)
            });
        let max_mtu = self.max_mtu.min(route).max(min_mtu);
        PathTuning {
            max_mtu,
            initial_mtu: self.initial_mtu.min(max_mtu),
            max_mtu_from_route: false,
            ..*self
        }
    }

    /// Writes the datagram sizes, the congestion controller and the ACK frequency into a
    /// connection's transport config, as they are (use [`PathTuning::towards`] first for a
    /// connection to a known peer). With `cubic`, no ACK frequency and the sizes 1200 and
    /// 1452, it writes quinn's own defaults.
    pub fn apply(&self, tc: &mut TransportConfig) {
        tc.initial_mtu(self.initial_mtu);
        let mut discovery = MtuDiscoveryConfig::default();
        discovery.upper_bound(self.max_mtu);
        tc.mtu_discovery_config(Some(discovery));
        match self.congestion_controller {
            CongestionController::Cubic => {
                tc.congestion_controller_factory(Arc::new(CubicConfig::default()))
            }
            CongestionController::NewReno => {
                tc.congestion_controller_factory(Arc::new(NewRenoConfig::default()))
            }
            CongestionController::Bbr => {
                tc.congestion_controller_factory(Arc::new(BbrConfig::default()))
            }
        };
        if self.ack_eliciting_threshold.is_some() || self.max_ack_delay.is_some() {
            let mut ack = AckFrequencyConfig::default();
            if let Some(n) = self.ack_eliciting_threshold {
                ack.ack_eliciting_threshold(VarInt::from_u32(n));
            }
            ack.max_ack_delay(self.max_ack_delay);
            tc.ack_frequency_config(Some(ack));
        }
    }

    /// The largest UDP payload the endpoint accepts from peers: quinn's default (1472), or
    /// `max_mtu` when that is larger.
    pub fn max_udp_payload(&self) -> u16 {
        self.max_mtu.max(QUINN_MAX_UDP_PAYLOAD)
    }

    /// A quinn endpoint on a UDP socket bound at `addr` with this tuning's socket buffers,
    /// serving `server` when given, and what the kernel granted of the buffers. A buffer the
    /// kernel capped is logged once per process (see [`BufferGrant::capped`]).
    pub fn endpoint(
        &self,
        addr: SocketAddr,
        server: Option<quinn::ServerConfig>,
    ) -> io::Result<(quinn::Endpoint, UdpBuffers)> {
        let (socket, buffers) =
            bind_udp(addr, self.udp_recv_buffer_bytes, self.udp_send_buffer_bytes)?;
        let mut config = EndpointConfig::default();
        config
            .max_udp_payload_size(self.max_udp_payload())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        let runtime =
            quinn::default_runtime().ok_or_else(|| io::Error::other("no async runtime found"))?;
        let endpoint = quinn::Endpoint::new(config, server, socket, runtime)?;
        Ok((endpoint, buffers))
    }
}

/// quinn's own discovery bound: a 1500-byte Ethernet MTU less the IPv6 and UDP headers, safe
/// over both address families.
const QUINN_DEFAULT_MAX_MTU: u16 = 1452;

/// How many bytes a kernel reports per byte of socket buffer asked for: Linux doubles the size
/// it is given (the other half is for its bookkeeping) and reports the doubled size.
const REPORTED_PER_BYTE: usize = if cfg!(any(target_os = "linux", target_os = "android")) {
    2
} else {
    1
};

/// One socket buffer: the size asked for and the size the kernel reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferGrant {
    /// Bytes asked for; 0 left the OS default.
    pub asked: usize,
    /// The size the kernel reports after the request (`getsockopt`); on Linux twice the size
    /// it granted.
    pub effective: usize,
}

impl BufferGrant {
    /// Whether the kernel granted less than was asked: on Linux, a reported size below twice
    /// the request means the request was capped at `net.core.rmem_max`/`wmem_max`.
    pub fn capped(&self) -> bool {
        self.asked > 0 && self.effective < self.asked.saturating_mul(REPORTED_PER_BYTE)
    }
}

/// Both buffers of one UDP socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpBuffers {
    /// The receive buffer (`SO_RCVBUF`).
    pub recv: BufferGrant,
    /// The send buffer (`SO_SNDBUF`).
    pub send: BufferGrant,
}

static WARNED_RECV: AtomicBool = AtomicBool::new(false);
static WARNED_SEND: AtomicBool = AtomicBool::new(false);

/// Binds a UDP socket at `addr` (an IPv6 one dual-stack where the OS allows it) with `recv` and
/// `send` bytes of kernel buffers (0 leaves the OS default), and reads back what the kernel
/// granted.
fn bind_udp(addr: SocketAddr, recv: usize, send: usize) -> io::Result<(UdpSocket, UdpBuffers)> {
    let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    if addr.is_ipv6()
        && let Err(e) = socket.set_only_v6(false)
    {
        tracing::debug!(%e, "cannot make the UDP socket dual-stack");
    }
    let context = |what: &'static str, bytes: usize| {
        move |e: io::Error| io::Error::new(e.kind(), format!("{what} of {bytes} bytes: {e}"))
    };
    if recv > 0 {
        socket
            .set_recv_buffer_size(recv)
            .map_err(context("UDP receive buffer", recv))?;
    }
    if send > 0 {
        socket
            .set_send_buffer_size(send)
            .map_err(context("UDP send buffer", send))?;
    }
    socket.bind(&addr.into())?;
    let buffers = UdpBuffers {
        recv: BufferGrant {
            asked: recv,
            effective: socket.recv_buffer_size()?,
        },
        send: BufferGrant {
            asked: send,
            effective: socket.send_buffer_size()?,
        },
    };
    warn_once(
        &WARNED_RECV,
        buffers.recv,
        "receive",
        "udp_recv_buffer_bytes",
        "rmem_max",
    );
    warn_once(
        &WARNED_SEND,
        buffers.send,
        "send",
        "udp_send_buffer_bytes",
        "wmem_max",
    );
    Ok((socket.into(), buffers))
}

fn warn_once(warned: &AtomicBool, grant: BufferGrant, what: &str, knob: &str, sysctl: &str) {
    if grant.capped() && !warned.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            asked = grant.asked,
            granted = grant.effective,
            "the kernel capped the UDP {what} buffer: {knob} asked for {} bytes and the kernel \
             reports {} (Linux reports twice the size it grants); raise net.core.{sysctl} to \
             at least {} on the node (`sysctl -w net.core.{sysctl}={}`; it is not a namespaced \
             sysctl, so a pod cannot set it) or lower {knob}",
            grant.asked,
            grant.effective,
            grant.asked,
            grant.asked,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;

    #[test]
    fn every_profile_keeps_the_os_buffers_and_follows_the_route_up_to_6550() {
        for p in Profile::ALL {
            let t = p.transport().path;
            assert_eq!(
                (t.udp_recv_buffer_bytes, t.udp_send_buffer_bytes),
                (0, 0),
                "{p}"
            );
            assert_eq!((t.initial_mtu, t.max_mtu), (1200, 6550), "{p}");
            assert!(t.max_mtu_from_route, "{p}");
            assert_eq!(t.congestion_controller, CongestionController::Cubic);
            assert_eq!((t.ack_eliciting_threshold, t.max_ack_delay), (None, None));
            assert_eq!(
                t.max_udp_payload(),
                6550,
                "the endpoint accepts what it may probe for"
            );
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn towards_caps_the_bound_at_the_route_and_settles_it() {
        let base = PathTuning::default();
        let loopback: SocketAddr = "127.0.0.1:7400".parse().unwrap();
        // Loopback carries 65535-byte datagrams: the configured bound stays.
        let t = base.towards(loopback);
        assert_eq!((t.initial_mtu, t.max_mtu), (1200, 6550));
        assert!(
            !t.max_mtu_from_route,
            "settled: a second towards changes nothing"
        );
        assert_eq!(t.towards("10.0.0.1:1".parse().unwrap()), t);
        // A lower configured bound is never raised by the route.
        let mut low = base;
        low.max_mtu = 1452;
        assert_eq!(low.towards(loopback).max_mtu, 1452);
        // Off: the configured bound as it is.
        let mut fixed = base;
        fixed.max_mtu_from_route = false;
        assert_eq!(fixed.towards(loopback), fixed);
    }

    #[test]
    fn the_route_bound_is_at_least_quics_minimum_and_caps_the_initial_size() {
        let t = PathTuning {
            initial_mtu: 6550,
            ..PathTuning::default()
        };
        // The discard port of an address in TEST-NET-1: routed (or not) but never reached.
        let settled = t.towards("192.0.2.1:9".parse().unwrap());
        let (min_mtu, max_mtu) = QUIC_MTU_RANGE;
        assert!(
            (min_mtu..=max_mtu).contains(&settled.max_mtu),
            "{settled:?}"
        );
        assert!(settled.initial_mtu <= settled.max_mtu, "{settled:?}");
    }

    #[test]
    fn the_endpoint_accepts_the_discovery_bound_and_at_least_quinns_default() {
        let mut t = PathTuning {
            max_mtu: 6550,
            ..PathTuning::default()
        };
        assert_eq!(t.max_udp_payload(), 6550);
        t.max_mtu = 1300;
        assert_eq!(t.max_udp_payload(), 1472);
    }

    #[test]
    fn capped_compares_with_what_the_kernel_reports_for_a_full_grant() {
        let full = BufferGrant {
            asked: 1 << 20,
            effective: REPORTED_PER_BYTE << 20,
        };
        assert!(!full.capped());
        let short = BufferGrant {
            asked: 4 << 20,
            effective: 425_984,
        };
        assert!(short.capped());
        let default = BufferGrant {
            asked: 0,
            effective: 212_992,
        };
        assert!(!default.capped(), "nothing asked, nothing capped");
    }

    #[tokio::test]
    async fn an_endpoint_reads_back_its_buffers() {
        let small = 64 * 1024;
        let t = PathTuning {
            udp_recv_buffer_bytes: small,
            udp_send_buffer_bytes: small,
            ..PathTuning::default()
        };
        let (endpoint, buffers) = t
            .endpoint("127.0.0.1:0".parse().expect("addr"), None)
            .expect("endpoint");
        // 64 KiB is below every kernel's default cap, so it is granted in full.
        assert_eq!(buffers.recv.asked, small);
        assert!(!buffers.recv.capped(), "{buffers:?}");
        assert!(!buffers.send.capped(), "{buffers:?}");
        assert!(buffers.recv.effective >= small, "{buffers:?}");
        endpoint.close(0u32.into(), b"");
    }
}
