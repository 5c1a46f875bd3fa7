//! Durable topics over real QUIC: a restart on the same storage directory keeps every
//! `persisted` message and its position (`restart`), a real `starling-broker` process
//! killed with SIGKILL in the middle of acked publishing loses no acked message (`sigkill`),
//! and a subscription from a time starts at the first record stamped at or after it, then
//! continues live (`from_time`), `GET /storage` reports the volume (`storage_endpoint`), and
//! one publish stream keeps more `persisted` acks waiting for an `interval` fsync than its
//! request window, within the pending-ack budget (`pending_acks`), and per-topic policies
//! from a topics document, re-read while the broker runs (`topics_file`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

#[path = "../integration/common.rs"]
mod common;
mod consumers;
mod from_time;
mod headers;
mod pending_acks;
mod restart;
mod sigkill;
mod storage_endpoint;
mod topics_file;

use std::collections::HashSet;

use starling_client::Subscription;
use starling_proto::Position;

/// A resume position older than any stream: replays everything the log still holds.
pub const FROM_THE_START: Position = Position { stream: 1, seq: 0 };

/// Reads events until none arrives for `quiet`; returns their payload indices and positions.
pub async fn drain(sub: &mut Subscription, quiet: std::time::Duration) -> Vec<(u32, Position)> {
    let mut out = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(quiet, sub.next_event()).await {
        let ev = ev.expect("event");
        out.push((common::index(&ev.payload), ev.position));
    }
    out
}

/// Like [`drain`], but waits up to [`common::SOON`] for the first event: for reads that must
/// return something, where the first event may come late on a loaded machine (a log opened
/// and its time index searched on a blocking thread after a restart).
pub async fn drain_some(
    sub: &mut Subscription,
    quiet: std::time::Duration,
) -> Vec<(u32, Position)> {
    let mut out = Vec::new();
    if let Ok(Some(ev)) = tokio::time::timeout(common::SOON, sub.next_event()).await {
        let ev = ev.expect("event");
        out.push((common::index(&ev.payload), ev.position));
        out.extend(drain(sub, quiet).await);
    }
    out
}

/// Asserts `got` is strictly increasing (in order, no duplicate), in payload index and in
/// position, and holds every index of `must`.
pub fn assert_ordered_and_complete(got: &[(u32, Position)], must: &[u32]) {
    for w in got.windows(2) {
        assert!(
            w[0].0 < w[1].0,
            "out of order or duplicated: {:?} then {:?}",
            w[0],
            w[1]
        );
        let (a, b) = (w[0].1, w[1].1);
        assert!(
            (a.stream, a.seq) < (b.stream, b.seq),
            "positions not increasing: {a:?} then {b:?}"
        );
    }
    let seen: HashSet<u32> = got.iter().map(|(i, _)| *i).collect();
    let missing: Vec<u32> = must.iter().copied().filter(|i| !seen.contains(i)).collect();
    assert!(missing.is_empty(), "acked but not delivered: {missing:?}");
}
