//! Publish de-duplication's window: the message ids one topic saw recently, each with when it
//! was seen and what the caller keeps for it (the topic task keeps the original's event
//! number, to answer a repeat with the original's ack), expired by age (`dedup_window_ms`)
//! and by count (`dedup_max_ids`, oldest first), and looked up by id. Pure: time is passed
//! in, nothing is spawned, so the tests drive it deterministically.
//!
//! Memory is charged at what an entry costs ([`entry_cost`]): the id's bytes, once (the map
//! and the order queue share one `Arc<str>`), plus [`ENTRY_OVERHEAD`]. The window reports its
//! bytes ([`Window::bytes`]) and what each call freed, so the broker can hold all topics'
//! windows within one budget (`dedup_max_total_bytes`).
//!
//! Hand-written rather than a cache crate: what is needed is exact expiry by insertion age
//! and insertion count with the caller's clock, and removal of an entry whose original
//! failed; a TTL/LRU cache evicts by use and reads its own clock.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// Bytes one entry costs besides its id's bytes: the `Arc<str>`'s counts (16), the map's slot
/// (key 16, value and time 32, its control byte and load-factor slack: about 64) and the order
/// queue's slot (key, time, serial: 40), rounded up for the tables' doubling (a table is at
/// most half empty after it grew).
pub const ENTRY_OVERHEAD: usize = 192;

/// What one entry for an id of `id_len` bytes costs.
pub const fn entry_cost(id_len: usize) -> usize {
    id_len + ENTRY_OVERHEAD
}

/// A window's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// How long an id is remembered after it was first seen.
    pub window: Duration,
    /// Most ids remembered at once; a new one past it evicts the oldest.
    pub max_ids: usize,
}

impl Limits {
    /// Whether a window with these limits remembers anything (neither is 0).
    pub fn remembers(&self) -> bool {
        self.max_ids > 0 && !self.window.is_zero()
    }
}

#[derive(Debug)]
struct Entry<V> {
    value: V,
    serial: u64,
}

/// The ids one topic saw within its window.
#[derive(Debug)]
pub struct Window<V> {
    limits: Limits,
    ids: HashMap<Arc<str>, Entry<V>>,
    /// Every inserted id in insertion order, with when it was seen and its serial (an entry
    /// removed from `ids` early leaves its slot here until it reaches the front).
    order: VecDeque<(Arc<str>, Instant, u64)>,
    next_serial: u64,
    bytes: usize,
}

impl<V> Window<V> {
    /// An empty window.
    pub fn new(limits: Limits) -> Self {
        Window {
            limits,
            ids: HashMap::new(),
            order: VecDeque::new(),
            next_serial: 0,
            bytes: 0,
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Forgets the ids seen more than the window before `now`; returns the bytes freed.
    pub fn expire(&mut self, now: Instant) -> usize {
        let mut freed = 0;
        while let Some((_, at, _)) = self.order.front() {
            if now.saturating_duration_since(*at) < self.limits.window {
                break;
            }
            freed += self.pop_oldest();
        }
        freed
    }

    /// What was kept for `id`, if it is in the window (call [`Window::expire`] first for an
    /// exact answer at `now`).
    pub fn get(&self, id: &str) -> Option<&V> {
        self.ids.get(id).map(|e| &e.value)
    }

    /// What was kept for `id`, to change in place (its age and place in the order stay).
    pub fn get_mut(&mut self, id: &str) -> Option<&mut V> {
        self.ids.get_mut(id).map(|e| &mut e.value)
    }

    /// Remembers `id` (not in the window) as seen at `now` with `value`, evicting the oldest
    /// ids past `max_ids`. Returns the bytes freed by the eviction (the new entry's
    /// [`entry_cost`] is added to [`Window::bytes`]). With `max_ids` 0 nothing is kept.
    pub fn insert(&mut self, id: &str, value: V, now: Instant) -> usize {
        if self.limits.max_ids == 0 {
            return 0;
        }
        let mut freed = 0;
        if let Some(old) = self.ids.remove(id) {
            // Not expected (the caller looks first), but a second insert replaces the first
            // and its order slot is left to age out as a stale one.
            drop(old);
        }
        while self.order.len() >= self.limits.max_ids {
            freed += self.pop_oldest();
        }
        let key: Arc<str> = Arc::from(id);
        let serial = self.next_serial;
        self.next_serial += 1;
        self.ids.insert(Arc::clone(&key), Entry { value, serial });
        self.order.push_back((key, now, serial));
        self.bytes += entry_cost(id.len());
        freed
    }

    /// Forgets `id` now (its original was refused, so a retry is a new message). Its bytes
    /// stay charged until its slot in the order ages out. Returns whether it was there.
    pub fn remove(&mut self, id: &str) -> bool {
        self.ids.remove(id).is_some()
    }

    /// When the oldest id expires, if there is one.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.order
            .front()
            .map(|(_, at, _)| *at + self.limits.window)
    }

    /// Ids remembered (removed ones not counted).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether nothing is charged (no id remembered and no stale slot).
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Bytes charged: [`entry_cost`] of every slot of the order queue.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Forgets everything; returns the bytes freed.
    pub fn clear(&mut self) -> usize {
        self.ids.clear();
        self.order.clear();
        std::mem::take(&mut self.bytes)
    }

    fn pop_oldest(&mut self) -> usize {
        let Some((key, _, serial)) = self.order.pop_front() else {
            return 0;
        };
        if self.ids.get(&*key).is_some_and(|e| e.serial == serial) {
            self.ids.remove(&*key);
        }
        let cost = entry_cost(key.len());
        self.bytes -= cost;
        cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(ms: u64, max: usize) -> Limits {
        Limits {
            window: Duration::from_millis(ms),
            max_ids: max,
        }
    }

    #[test]
    fn a_repeat_within_the_window_is_found_and_after_it_is_not() {
        let t0 = Instant::now();
        let mut w = Window::new(limits(1000, 10));
        assert_eq!(w.insert("a", 7u64, t0), 0);
        assert_eq!(w.bytes(), entry_cost(1));
        w.expire(t0 + Duration::from_millis(999));
        assert_eq!(w.get("a"), Some(&7));
        assert_eq!(w.next_expiry(), Some(t0 + Duration::from_millis(1000)));
        assert_eq!(w.expire(t0 + Duration::from_millis(1000)), entry_cost(1));
        assert_eq!(w.get("a"), None);
        assert!(w.is_empty());
        assert_eq!(w.bytes(), 0);
    }

    #[test]
    fn the_count_evicts_the_oldest_first() {
        let t0 = Instant::now();
        let mut w = Window::new(limits(60_000, 2));
        w.insert("a", 1u64, t0);
        w.insert("b", 2, t0);
        assert_eq!(w.insert("ccc", 3, t0), entry_cost(1), "a goes");
        assert_eq!(w.get("a"), None);
        assert_eq!(w.get("b"), Some(&2));
        assert_eq!(w.get("ccc"), Some(&3));
        assert_eq!(w.bytes(), entry_cost(1) + entry_cost(3));
    }

    #[test]
    fn a_removed_id_is_new_again_and_its_slot_ages_out() {
        let t0 = Instant::now();
        let mut w = Window::new(limits(100, 10));
        w.insert("a", 1u64, t0);
        assert!(w.remove("a"));
        assert_eq!(w.get("a"), None);
        assert_eq!(w.len(), 0);
        assert!(!w.is_empty(), "the stale slot is still charged");
        let t1 = t0 + Duration::from_millis(50);
        w.insert("a", 2, t1);
        // The stale slot expires without taking the new entry with it.
        w.expire(t0 + Duration::from_millis(100));
        assert_eq!(w.get("a"), Some(&2));
        assert_eq!(w.bytes(), entry_cost(1));
        w.expire(t1 + Duration::from_millis(100));
        assert!(w.is_empty());
        assert_eq!(w.bytes(), 0);
    }

    #[test]
    fn no_room_keeps_nothing() {
        let mut w = Window::new(limits(100, 0));
        w.insert("a", 1u64, Instant::now());
        assert_eq!(w.get("a"), None);
        assert_eq!(w.bytes(), 0);
    }

    #[test]
    fn clear_frees_every_byte() {
        let t0 = Instant::now();
        let mut w = Window::new(limits(100, 10));
        w.insert("a", 1u64, t0);
        w.insert("bb", 1, t0);
        w.remove("a");
        assert_eq!(w.clear(), entry_cost(1) + entry_cost(2));
        assert_eq!(w.bytes(), 0);
        assert!(w.is_empty());
    }

    /// One step of a random sequence.
    #[derive(Debug, Clone)]
    enum Op {
        /// Time passes (ms), then the id is looked up and, when absent, inserted.
        See(u64, u8),
        /// The id is removed.
        Remove(u8),
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0u64..40, 0u8..12).prop_map(|(dt, id)| Op::See(dt, id)),
            1 => (0u8..12).prop_map(Op::Remove),
        ]
    }

    proptest::proptest! {
        /// Against a model that keeps every insertion in a list (id, time, value, live) and
        /// answers a lookup by scanning it: the same ids are found with the same values, and
        /// the window's bytes are the cost of the slots the model still holds.
        #[test]
        fn agrees_with_a_list_model(
            window_ms in 1u64..200,
            max_ids in 0usize..6,
            ops in proptest::collection::vec(op(), 0..200),
        ) {
            let t0 = Instant::now();
            let mut now = t0;
            let mut w = Window::new(limits(window_ms, max_ids));
            // (id, seen at, value, still findable)
            let mut model: Vec<(String, Instant, u64, bool)> = Vec::new();
            let window = Duration::from_millis(window_ms);
            for (n, op) in ops.into_iter().enumerate() {
                let n = n as u64;
                match op {
                    Op::See(dt, id) => {
                        now += Duration::from_millis(dt);
                        let id = format!("id-{id}");
                        w.expire(now);
                        model.retain(|(_, at, _, _)| now.saturating_duration_since(*at) < window);
                        let expected = model
                            .iter()
                            .find(|(i, _, _, live)| *live && *i == id)
                            .map(|(_, _, v, _)| *v);
                        proptest::prop_assert_eq!(w.get(&id).copied(), expected);
                        if expected.is_none() {
                            w.insert(&id, n, now);
                            if max_ids > 0 {
                                while model.len() >= max_ids {
                                    model.remove(0);
                                }
                                model.push((id, now, n, true));
                            }
                        }
                    }
                    Op::Remove(id) => {
                        let id = format!("id-{id}");
                        let was = model.iter_mut().find(|(i, _, _, live)| *live && *i == id);
                        let expected = was.is_some();
                        if let Some(e) = was {
                            e.3 = false;
                        }
                        proptest::prop_assert_eq!(w.remove(&id), expected);
                    }
                }
                let bytes: usize = model.iter().map(|(i, _, _, _)| entry_cost(i.len())).sum();
                proptest::prop_assert_eq!(w.bytes(), bytes);
                proptest::prop_assert_eq!(w.len(), model.iter().filter(|e| e.3).count());
                proptest::prop_assert!(w.len() <= max_ids);
            }
        }
    }
}
