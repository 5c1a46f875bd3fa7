//! What both ends of a Starling QUIC connection agree on below the frames: the broker's default
//! port and the UDP datagram sizes an endpoint may use. The broker's config validation
//! (`starling-config`) and the SDK's path settings (`starling-client`) both take them from here.

/// Default UDP port of the broker's QUIC listener.
pub const DEFAULT_QUIC_PORT: u16 = 7400;

/// Smallest and largest accepted UDP payload sizes of `quic_initial_mtu` and
/// `quic_max_mtu_discovery` (and of the SDK's `PathTuning`): QUIC's minimum datagram size, and
/// the largest datagram whose segmentation-offload batches Linux accepts. quinn 0.11 hands the
/// kernel up to 10 datagrams of the path's MTU in one `sendmsg` (`MAX_TRANSMIT_SEGMENTS` in
/// `quinn/src/connection.rs`); Linux refuses a batch over 65,507 bytes, an IPv4 datagram's
/// largest UDP payload, with `EMSGSIZE`, and quinn-udp 0.5 takes that for a lost MTU probe and
/// drops the batch without a word. Above 6550 (10 × 6550 = 65,500) every full batch is lost:
/// measured on loopback, 8952 ran at 0.73–0.76× of 1452 until black-hole detection fell back to
/// 1200, and 6551–7000 crawled at about 5 MB/s (`docs/benchmarks/optimisation-log.md`, "Jumbo
/// datagrams on loopback").
pub const QUIC_MTU_RANGE: (u16, u16) = (1200, 6550);

/// The largest UDP payload a quinn endpoint accepts from its peers by default (1500-byte
/// Ethernet minus the IPv4 and UDP headers). A `quic_max_mtu_discovery` above it raises it to
/// match, on the broker and in the SDK.
pub const QUINN_MAX_UDP_PAYLOAD: u16 = 1472;
