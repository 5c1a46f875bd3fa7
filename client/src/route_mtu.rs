//! The largest UDP payload the route towards a peer carries, read from the kernel: a UDP socket
//! connected to the peer (which sends nothing) reports the route's MTU through `IP_MTU` or
//! `IPV6_MTU` (Linux). [`crate::PathTuning::towards`] caps path MTU discovery with it when
//! `quic_max_mtu_from_route` is set. Hand-written because it is two system calls; `rustix`
//! wraps the socket option so no unsafe code is needed.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};

/// IPv4 (20) and UDP (8) header bytes in front of a UDP payload.
pub(crate) const IPV4_UDP_HEADERS: u32 = 28;
/// IPv6 (40) and UDP (8) header bytes in front of a UDP payload.
pub(crate) const IPV6_UDP_HEADERS: u32 = 48;

/// The largest UDP payload of one unfragmented datagram on the route towards `peer`, or `None`
/// when the kernel cannot say (no route, another OS).
pub(crate) fn udp_payload_towards(peer: SocketAddr) -> Option<u32> {
    let local: SocketAddr = if peer.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(local).ok()?;
    socket.connect(peer).ok()?;
    let (mtu, headers) = route_mtu(&socket, peer)?;
    mtu.checked_sub(headers)
}

#[cfg(target_os = "linux")]
fn route_mtu(socket: &UdpSocket, peer: SocketAddr) -> Option<(u32, u32)> {
    use rustix::net::sockopt;
    if peer.is_ipv6() {
        Some((sockopt::ipv6_mtu(socket).ok()?, IPV6_UDP_HEADERS))
    } else {
        Some((sockopt::ip_mtu(socket).ok()?, IPV4_UDP_HEADERS))
    }
}

#[cfg(not(target_os = "linux"))]
fn route_mtu(_socket: &UdpSocket, _peer: SocketAddr) -> Option<(u32, u32)> {
    None
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn loopback_carries_far_more_than_ethernet() {
        // Linux's loopback MTU is 65536 (65535 reported for IPv4 routes).
        let v4 = udp_payload_towards("127.0.0.1:9".parse().unwrap()).unwrap();
        assert!(v4 >= 65_000 - IPV4_UDP_HEADERS, "{v4}");
    }
}
