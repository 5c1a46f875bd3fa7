//! Pure routing arithmetic: which pool slot a topic or request goes to.

use std::sync::atomic::{AtomicUsize, Ordering};

/// 64-bit FNV-1a of `bytes` (the workspace's one definition, in `starling-placement`):
/// stable across processes and Rust versions, unlike `DefaultHasher`.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    starling_placement::hash::fnv1a(starling_placement::hash::FNV_OFFSET, bytes)
}

/// Position of a stream in a pool of `conns × streams_per_conn` streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StreamSlot {
    /// Index into the connection pool.
    pub(crate) conn: usize,
    /// Index into the flat stream pool (`conn * streams_per_conn + stream`).
    pub(crate) stream: usize,
}

impl StreamSlot {
    /// The slot for flat index `index` (taken modulo the pool size).
    pub(crate) fn from_index(index: usize, conns: usize, streams_per_conn: usize) -> Self {
        let per = streams_per_conn.max(1);
        let total = conns.max(1) * per;
        let stream = index % total;
        StreamSlot {
            conn: stream / per,
            stream,
        }
    }
}

/// The publish stream a topic always uses, so one client's publishes to one
/// topic stay in order.
pub(crate) fn topic_slot(topic: &str, conns: usize, streams_per_conn: usize) -> StreamSlot {
    // Truncation on 32-bit targets only drops high hash bits; still uniform.
    let index = fnv1a(topic.as_bytes()) as usize;
    StreamSlot::from_index(index, conns, streams_per_conn)
}

/// The stream a new request goes to when streams are filled in order: the first one (in pool
/// order, so the first connection's streams first) carrying fewer than `depth` requests, else
/// the least loaded one (the first of those on a tie). `loads` holds each stream's requests in
/// flight; an empty pool gives 0.
pub(crate) fn fill_first(loads: impl IntoIterator<Item = usize>, depth: usize) -> usize {
    let mut least = (0, usize::MAX);
    for (index, load) in loads.into_iter().enumerate() {
        if load < depth {
            return index;
        }
        if load < least.1 {
            least = (index, load);
        }
    }
    least.0
}

/// A wrapping round-robin counter.
#[derive(Debug, Default)]
pub(crate) struct RoundRobin(AtomicUsize);

impl RoundRobin {
    /// The next index in `0..n` (`n` of 0 is treated as 1).
    pub(crate) fn next(&self, n: usize) -> usize {
        self.0.fetch_add(1, Ordering::Relaxed) % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn fnv_reference_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn a_topic_always_maps_to_the_same_slot() {
        for topic in ["orders", "metrics.cpu", "x"] {
            let a = topic_slot(topic, 4, 2);
            assert_eq!(a, topic_slot(topic, 4, 2));
            assert!(a.stream < 8);
            assert_eq!(a.conn, a.stream / 2);
        }
    }

    #[test]
    fn topics_spread_over_every_slot() {
        let used: HashSet<usize> = (0..1000)
            .map(|i| topic_slot(&format!("topic-{i}"), 4, 2).stream)
            .collect();
        assert_eq!(used.len(), 8);
    }

    #[test]
    fn slot_layout_is_conn_major() {
        assert_eq!(
            StreamSlot::from_index(5, 3, 2),
            StreamSlot { conn: 2, stream: 5 }
        );
        assert_eq!(
            StreamSlot::from_index(6, 3, 2),
            StreamSlot { conn: 0, stream: 0 }
        );
        assert_eq!(
            StreamSlot::from_index(7, 0, 0),
            StreamSlot { conn: 0, stream: 0 }
        );
    }

    #[test]
    fn fill_first_fills_streams_in_order() {
        assert_eq!(fill_first([0, 0, 0], 4), 0);
        assert_eq!(fill_first([3, 0, 0], 4), 0);
        assert_eq!(fill_first([4, 0, 0], 4), 1);
        assert_eq!(fill_first([4, 4, 2], 4), 2);
        // Every stream full: the least loaded, the first on a tie.
        assert_eq!(fill_first([6, 5, 5], 4), 1);
        assert_eq!(fill_first([4, 4, 4], 4), 0);
        // A depth of 0 behaves like "every stream full".
        assert_eq!(fill_first([2, 1, 3], 0), 1);
        assert_eq!(fill_first([], 4), 0);
    }

    proptest::proptest! {
        /// The pick is in range, never skips a stream with room, and, when none has room, is
        /// no more loaded than any other.
        #[test]
        fn fill_first_picks_the_first_with_room_else_the_least_loaded(
            loads in proptest::collection::vec(0usize..100, 1..40),
            depth in 0usize..100,
        ) {
            let pick = fill_first(loads.iter().copied(), depth);
            proptest::prop_assert!(pick < loads.len());
            proptest::prop_assert!(loads[..pick].iter().all(|&l| l >= depth));
            if loads[pick] >= depth {
                proptest::prop_assert!(loads.iter().all(|&l| l >= loads[pick]));
                proptest::prop_assert!(loads[..pick].iter().all(|&l| l > loads[pick]));
            }
        }
    }

    #[test]
    fn round_robin_cycles() {
        let rr = RoundRobin::default();
        let seen: Vec<usize> = (0..5).map(|_| rr.next(3)).collect();
        assert_eq!(seen, vec![0, 1, 2, 0, 1]);
        assert_eq!(rr.next(0), 0);
    }
}
