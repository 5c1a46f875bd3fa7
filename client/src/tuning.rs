//! [`ClientTuning`] and [`TransportTuning`]: how big a client's pools are, and its QUIC windows,
//! timers and path settings. A [`Profile`](crate::Profile) presets both (`profile.rs`).

use std::time::Duration;

use crate::path::PathTuning;

/// QUIC transport settings of the client's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportTuning {
    /// Per-stream receive window on publish/subscribe connections (bytes).
    pub event_stream_recv_window: u64,
    /// Connection receive window on publish/subscribe connections (bytes).
    pub event_conn_recv_window: u64,
    /// Per-stream receive window on cache connections (bytes).
    pub cache_stream_recv_window: u64,
    /// Connection receive window on cache connections (bytes).
    pub cache_conn_recv_window: u64,
    /// Interval of QUIC keep-alive packets.
    pub keep_alive_interval: Duration,
    /// A connection silent for this long is considered dead.
    pub idle_timeout: Duration,
    /// Send window of every connection: how much written data may wait unacknowledged.
    /// `None`: quinn's default (about 10 MB).
    pub send_window: Option<u64>,
    /// UDP socket buffers, datagram sizes, congestion controller and ACK frequency.
    pub path: PathTuning,
}

/// Connection and stream pool sizes of a [`Client`](crate::Client).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
