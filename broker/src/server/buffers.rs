//! The connection buffer budget (`connection_buffer_budget_bytes`): the QUIC windows granted to
//! all open connections together.
//!
//! Every connection may make the broker buffer up to its connection receive window (data a
//! client sent and the broker has not read yet), its send window (data written and not yet
//! acknowledged) and its frame allowance (partial frames read and not yet complete; see
//! `server::frames`: as much as the receive window, at least one largest frame). Granting the configured windows to every connection
//! let four hostile connections pin 1 GiB. Here each admitted connection reserves a [`Grant`]
//! of all three ([`cost`]) out of one budget:
//!
//! - the configured windows while they fit in what is left of the budget's upper half;
//! - otherwise a [`share`]: each window at most an eighth of what is left of the upper half,
//!   rounded down to a power of two (so few distinct transport configs exist and each is built
//!   once), and at least the floor ([`CONNECTION_WINDOW_FLOOR`], or the configured window if
//!   smaller); the lower half of the budget only ever goes to floor grants;
//! - nothing when even the floor does not fit: the attempt is refused.
//!
//! The grant is reserved once the connection's `Hello` succeeded and released when the
//! connection's task ends. The granted total is the `starling_connection_buffer_bytes` gauge.
//! Before its `Hello` a connection has the pending grant instead: it is accepted with a server
//! config ([`Buffers::pending_server_config`]) whose windows are [`PENDING_CONNECTION_WINDOW`]
//! and which allows one stream (the `Hello` stream). Its stream window is already the one the
//! grant the budget would make at accept ([`Buffers::tentative`]) implies, so the streams
//! opened after the full grant is applied (`Connection::set_receive_window`, `set_send_window`,
//! `set_max_concurrent_bi_streams`) get it. The pending grants are bounded by
//! `max_pending_handshakes` (`server::admit`), not by this budget, so strangers that never
//! authenticate take none of it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use prometheus::IntGauge;
use starling_config::BrokerConfig;
use starling_config::validate::{CONNECTION_WINDOW_FLOOR, PENDING_CONNECTION_WINDOW};

use crate::error::BrokerError;
use crate::server::frames::Allowance;
use crate::transport::{Windows, transport_config_with};

/// What a connection granted `windows` takes of the budget: both windows and its frame allowance
/// (as much as the receive window, at least `frame` bytes: one largest frame with its header).
pub fn cost(windows: Windows, frame: u64) -> u64 {
    windows.total().saturating_add(windows.recv.max(frame))
}

/// What the next connection is granted when `remaining` bytes of a `budget` are left, or `None`
/// when even the floor does not fit. Only the upper half of the budget is handed out in full
/// grants and shares; the lower half is kept for floor grants, so a budget that fills still
/// admits `budget / 2 / cost(floor)` more connections instead of running out after a few
/// ever-smaller shares.
pub fn share(
    remaining: u64,
    budget: u64,
    configured: Windows,
    floor: Windows,
    frame: u64,
) -> Option<Windows> {
    let spare = remaining.saturating_sub(budget / 2);
    if cost(configured, frame) <= spare {
        return Some(configured);
    }
    let eighth = pow2_at_most(spare / 8);
    let granted = Windows {
        recv: configured.recv.min(eighth).max(floor.recv),
        send: configured.send.min(eighth).max(floor.send),
    };
    (cost(granted, frame) <= remaining).then_some(granted)
}

/// The largest power of two not above `x` (0 for 0).
fn pow2_at_most(x: u64) -> u64 {
    match x {
        0 => 0,
        x => 1 << (63 - x.leading_zeros()),
    }
}

/// The budget's account: bytes granted to open connections.
struct Account {
    granted: parking_lot::Mutex<u64>,
    gauge: IntGauge,
}

impl Account {
    fn release(&self, bytes: u64) {
        let mut granted = self.granted.lock();
        *granted = granted.saturating_sub(bytes);
        self.gauge.set(i64::try_from(*granted).unwrap_or(i64::MAX));
    }
}

/// One connection's windows and frame allowance, held against the budget until dropped.
pub struct Grant {
    windows: Windows,
    allowance: Allowance,
    bytes: u64,
    account: Arc<Account>,
}

impl Grant {
    /// The windows granted.
    pub fn windows(&self) -> Windows {
        self.windows
    }

    /// The bytes of partial frames the connection's streams may hold.
    pub fn allowance(&self) -> &Allowance {
        &self.allowance
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        self.account.release(self.bytes);
    }
}

/// The budget and the quinn server configs of the grants made so far.
pub struct Buffers {
    budget: u64,
    configured: Windows,
    floor: Windows,
    frame: u64,
    account: Arc<Account>,
    cfg: Arc<BrokerConfig>,
    /// The endpoint's server config and the pending config built from it, replaced together
    /// when the TLS material is reloaded.
    configs: parking_lot::Mutex<Configs>,
}

struct Configs {
    base: quinn::ServerConfig,
    /// By stream window and the (initial, largest) datagram sizes of the path.
    pending: HashMap<(u64, u16, u16), Arc<quinn::ServerConfig>>,
}

impl Buffers {
    /// A budget of `cfg.connection_buffer_budget_bytes`; `base` is the endpoint's server config
    /// (TLS, Retry keys), whose transport is replaced per grant; `gauge` shows the granted total.
    pub fn new(cfg: Arc<BrokerConfig>, base: quinn::ServerConfig, gauge: IntGauge) -> Buffers {
        let configured = Windows::configured(&cfg);
        Buffers {
            budget: cfg.connection_buffer_budget_bytes,
            configured,
            floor: Windows {
                recv: configured.recv.min(CONNECTION_WINDOW_FLOOR),
                send: configured.send.min(CONNECTION_WINDOW_FLOOR),
            },
            frame: Allowance::bytes(0, cfg.max_frame_bytes),
            account: Arc::new(Account {
                granted: parking_lot::Mutex::new(0),
                gauge,
            }),
            cfg,
            configs: parking_lot::Mutex::new(Configs {
                base,
                pending: HashMap::new(),
            }),
        }
    }

    /// The windows the next connection would be granted now, or `None` when the budget has no
    /// room for even the floor (nothing is reserved: an attempt that would find no room after
    /// its handshake is refused before it).
    pub fn tentative(&self) -> Option<Windows> {
        let granted = *self.account.granted.lock();
        share(
            self.budget.saturating_sub(granted),
            self.budget,
            self.configured,
            self.floor,
            self.frame,
        )
    }

    /// Reserves an authenticated connection's windows, or `None` when the budget has no room
    /// for even the floor.
    pub fn reserve(&self) -> Option<Grant> {
        let mut granted = self.account.granted.lock();
        let windows = share(
            self.budget.saturating_sub(*granted),
            self.budget,
            self.configured,
            self.floor,
            self.frame,
        )?;
        let bytes = cost(windows, self.frame);
        *granted += bytes;
        self.account
            .gauge
            .set(i64::try_from(*granted).unwrap_or(i64::MAX));
        Some(Grant {
            windows,
            allowance: Allowance::new(Allowance::bytes(windows.recv, self.cfg.max_frame_bytes)),
            bytes,
            account: Arc::clone(&self.account),
        })
    }

    /// The server config an attempt from `remote` is accepted with: the pending grant's
    /// windows, one stream, the stream window of the grant it would get now (`tentative`), and
    /// the path settings towards `remote` (`quic_max_mtu_from_route`: its datagrams as large as
    /// the route carries). Built once per stream window (a power of two or a configured value)
    /// and datagram sizes (one per route MTU), so few, and per TLS material.
    pub fn pending_server_config(
        &self,
        tentative: Windows,
        remote: SocketAddr,
    ) -> Result<Arc<quinn::ServerConfig>, BrokerError> {
        let stream_window = self.cfg.event_stream_recv_window.min(tentative.recv);
        let path = crate::client_settings::path_tuning(&self.cfg).towards(remote);
        let key = (stream_window, path.initial_mtu, path.max_mtu);
        let mut configs = self.configs.lock();
        if let Some(c) = configs.pending.get(&key) {
            return Ok(Arc::clone(c));
        }
        let windows = Windows {
            recv: PENDING_CONNECTION_WINDOW,
            send: PENDING_CONNECTION_WINDOW,
        };
        let mut transport = transport_config_with(&self.cfg, windows, &path)?;
        transport.max_concurrent_bidi_streams(quinn::VarInt::from_u32(1));
        transport.stream_receive_window(quinn::VarInt::from_u64(stream_window).map_err(|_| {
            BrokerError::TooLarge {
                field: "event_stream_recv_window",
                value: stream_window,
                quic: true,
            }
        })?);
        let mut server = configs.base.clone();
        server.transport_config(Arc::new(transport));
        let server = Arc::new(server);
        configs.pending.insert(key, Arc::clone(&server));
        Ok(server)
    }

    /// Serves new connections with `crypto` (reloaded TLS material): returns the endpoint's new
    /// server config. The Retry token keys and transport settings are kept; established
    /// connections keep the material they were accepted with.
    pub fn set_crypto(&self, crypto: Arc<dyn quinn::crypto::ServerConfig>) -> quinn::ServerConfig {
        let mut configs = self.configs.lock();
        configs.base.crypto = crypto;
        configs.pending.clear();
        configs.base.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const CONFIGURED: Windows = Windows {
        recv: 256 * MIB,
        send: 256 * MIB,
    };
    const FLOOR: Windows = Windows {
        recv: MIB,
        send: MIB,
    };
    const FRAME: u64 = 4 * MIB + 8;
    const BUDGET: u64 = 2048 * MIB;

    fn share_of(remaining: u64) -> Option<Windows> {
        share(remaining, BUDGET, CONFIGURED, FLOOR, FRAME)
    }

    #[test]
    fn the_configured_windows_while_they_fit_then_shares_then_the_floor_then_nothing() {
        assert_eq!(cost(CONFIGURED, FRAME), 768 * MIB);
        assert_eq!(share_of(BUDGET), Some(CONFIGURED));
        assert_eq!(share_of(1792 * MIB), Some(CONFIGURED));
        // 1524 - 1024 = 500 MiB spare; an eighth is 62.5 MiB: 32 MiB, a power of two.
        let s = share_of(1524 * MIB);
        assert_eq!(s.map(Windows::total), Some(64 * MIB));
        // Less than 8 MiB spare, the floor: 1 MiB windows and one largest frame.
        assert_eq!(cost(FLOOR, FRAME), 6 * MIB + 8);
        assert_eq!(share_of(1031 * MIB), Some(FLOOR));
        assert_eq!(share_of(7 * MIB), Some(FLOOR));
        assert_eq!(share_of(6 * MIB + 8), Some(FLOOR));
        assert_eq!(share_of(6 * MIB + 7), None);
        assert_eq!(share_of(0), None);
    }

    #[test]
    fn a_filling_budget_grants_ever_smaller_shares_and_never_more_than_itself() {
        let budget = 64 * MIB;
        let (mut used, mut n, mut last) = (0, 0, u64::MAX);
        while let Some(w) = share(budget - used, budget, CONFIGURED, FLOOR, FRAME) {
            assert!(w.total() <= last);
            last = w.total();
            used += cost(w, FRAME);
            n += 1;
        }
        assert!(used <= budget);
        assert!(budget - used < cost(FLOOR, FRAME));
        // The lower half went to floor grants only.
        assert!(
            n >= 2 + (budget / 2) / cost(FLOOR, FRAME),
            "{n} connections"
        );
    }

    #[test]
    fn a_window_smaller_than_the_floor_is_granted_whole() {
        let small = Windows {
            recv: 64 << 10,
            send: 64 << 10,
        };
        assert_eq!(
            share(192 << 10, 1 << 20, small, small, 64 << 10),
            Some(small)
        );
        assert_eq!(share(191 << 10, 1 << 20, small, small, 64 << 10), None);
    }
}
