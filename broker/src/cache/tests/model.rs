//! Randomised operation sequences checked against a simple reference model
//! (uses `proptest`). The model keeps each shard as a plain vector in
//! recency order and recomputes everything by linear scans.

use std::time::{Duration, Instant};

use bytes::Bytes;
use proptest::prelude::*;

use super::assert_consistent;
use crate::cache::{Cache, CacheConfig, CacheError, CacheStats, ENTRY_OVERHEAD};

const MAX_VALUE_BYTES: usize = 250;
const SHARD_BUDGET: u64 = 2000;

#[derive(Debug, Clone)]
enum Op {
    Put {
        key: u8,
        len: usize,
        ttl_ms: Option<u64>,
    },
    Get {
        key: u8,
    },
    Delete {
        key: u8,
    },
    Advance {
        ms: u64,
    },
    Sweep {
        budget: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, 0usize..300, proptest::option::of(0u64..40))
            .prop_map(|(key, len, ttl_ms)| Op::Put { key, len, ttl_ms }),
        3 => (0u8..12).prop_map(|key| Op::Get { key }),
        1 => (0u8..12).prop_map(|key| Op::Delete { key }),
        2 => (0u64..25).prop_map(|ms| Op::Advance { ms }),
        1 => (0usize..4).prop_map(|budget| Op::Sweep { budget }),
    ]
}

fn key_bytes(key: u8) -> Vec<u8> {
    // Keys of varying length so sizes differ.
    format!("key{}", "x".repeat(usize::from(key))).into_bytes()
}

#[derive(Debug, Clone)]
struct ModelEntry {
    key: Vec<u8>,
    value: Vec<u8>,
    deadline: Option<Instant>,
    seq: u64,
}

impl ModelEntry {
    fn size(&self) -> u64 {
        (self.key.len() + self.value.len() + ENTRY_OVERHEAD) as u64
    }

    fn expired(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|d| d <= now)
    }
}

/// One shard: entries from least (index 0) to most recently used.
#[derive(Debug, Default)]
struct ModelShard {
    entries: Vec<ModelEntry>,
    next_seq: u64,
}

impl ModelShard {
    fn bytes(&self) -> u64 {
        self.entries.iter().map(ModelEntry::size).sum()
    }

    fn position(&self, key: &[u8]) -> Option<usize> {
        self.entries.iter().position(|e| e.key == key)
    }

    /// Position of the expired entry with the earliest (deadline, seq).
    fn earliest_expired(&self, now: Instant) -> Option<usize> {
        self.entries
            .iter()
            .enumerate()
            .filter(|(_, e)| e.expired(now))
            .min_by_key(|(_, e)| (e.deadline, e.seq))
            .map(|(i, _)| i)
    }
}

#[derive(Debug)]
struct Model {
    shards: Vec<ModelShard>,
    stats: CacheStats,
}

impl Model {
    fn new(shards: usize) -> Self {
        Self {
            shards: (0..shards).map(|_| ModelShard::default()).collect(),
            stats: CacheStats::default(),
        }
    }

    fn put(
        &mut self,
        shard: usize,
        key: Vec<u8>,
        value: Vec<u8>,
        ttl: Option<Duration>,
        now: Instant,
    ) -> Result<bool, CacheError> {
        if value.len() > MAX_VALUE_BYTES {
            return Err(CacheError::ValueTooLarge {
                size: value.len(),
                max: MAX_VALUE_BYTES,
            });
        }
        let size = (key.len() + value.len() + ENTRY_OVERHEAD) as u64;
        if size > SHARD_BUDGET {
            return Err(CacheError::ValueTooLarge {
                size: size as usize,
                max: SHARD_BUDGET as usize,
            });
        }
        self.stats.puts += 1;
        let s = &mut self.shards[shard];
        let mut replaced = false;
        if let Some(i) = s.position(&key) {
            if s.entries.remove(i).expired(now) {
                self.stats.expirations += 1;
            } else {
                replaced = true;
            }
        }
        let deadline = ttl.map(|ttl| now + ttl);
        if deadline.is_some_and(|d| d <= now) {
            return Ok(replaced);
        }
        while s.bytes() + size > SHARD_BUDGET {
            if let Some(i) = s.earliest_expired(now) {
                s.entries.remove(i);
                self.stats.expirations += 1;
            } else {
                s.entries.remove(0);
                self.stats.evictions += 1;
            }
        }
        let seq = s.next_seq;
        s.next_seq += 1;
        s.entries.push(ModelEntry {
            key,
            value,
            deadline,
            seq,
        });
        Ok(replaced)
    }

    fn get(&mut self, shard: usize, key: &[u8], now: Instant) -> Option<Bytes> {
        let s = &mut self.shards[shard];
        let Some(i) = s.position(key) else {
            self.stats.misses += 1;
            return None;
        };
        let entry = s.entries.remove(i);
        if entry.expired(now) {
            self.stats.misses += 1;
            self.stats.expirations += 1;
            return None;
        }
        self.stats.hits += 1;
        let value = Bytes::from(entry.value.clone());
        s.entries.push(entry);
        Some(value)
    }

    fn delete(&mut self, shard: usize, key: &[u8], now: Instant) -> bool {
        let s = &mut self.shards[shard];
        let Some(i) = s.position(key) else {
            return false;
        };
        if s.entries.remove(i).expired(now) {
            self.stats.expirations += 1;
            false
        } else {
            self.stats.deletes += 1;
            true
        }
    }

    fn sweep(&mut self, now: Instant, budget: usize) -> usize {
        let mut total = 0;
        for s in &mut self.shards {
            for _ in 0..budget {
                let Some(i) = s.earliest_expired(now) else {
                    break;
                };
                s.entries.remove(i);
                total += 1;
            }
        }
        self.stats.expirations += total as u64;
        total
    }

    fn expected_stats(&self) -> CacheStats {
        CacheStats {
            entries: self.shards.iter().map(|s| s.entries.len() as u64).sum(),
            bytes: self.shards.iter().map(ModelShard::bytes).sum(),
            ..self.stats
        }
    }
}

fn run(shards: usize, ops: &[Op]) -> Result<(), TestCaseError> {
    let cache = Cache::new(CacheConfig {
        max_bytes: SHARD_BUDGET * shards as u64,
        shards,
        max_value_bytes: MAX_VALUE_BYTES,
    });
    prop_assert_eq!(cache.shard_budget(), SHARD_BUDGET);
    let mut model = Model::new(shards);
    let mut now = Instant::now();

    for (step, op) in ops.iter().enumerate() {
        match *op {
            Op::Put { key, len, ttl_ms } => {
                let k = key_bytes(key);
                let v = vec![step as u8; len];
                let ttl = ttl_ms.map(Duration::from_millis);
                let shard = cache.shard_index(&k);
                let got = cache.put_at(Bytes::from(k.clone()), Bytes::from(v.clone()), ttl, now);
                prop_assert_eq!(got, model.put(shard, k, v, ttl, now), "step {}", step);
            }
            Op::Get { key } => {
                let k = key_bytes(key);
                let shard = cache.shard_index(&k);
                prop_assert_eq!(
                    cache.get_at(&k, now),
                    model.get(shard, &k, now),
                    "step {}",
                    step
                );
            }
            Op::Delete { key } => {
                let k = key_bytes(key);
                let shard = cache.shard_index(&k);
                prop_assert_eq!(
                    cache.delete_at(&k, now),
                    model.delete(shard, &k, now),
                    "step {}",
                    step
                );
            }
            Op::Advance { ms } => now += Duration::from_millis(ms),
            Op::Sweep { budget } => {
                prop_assert_eq!(cache.sweep_expired(now, budget), model.sweep(now, budget));
            }
        }
        let expected = model.expected_stats();
        prop_assert_eq!(cache.stats(), expected, "step {}: {:?}", step, op);
        prop_assert_eq!(cache.bytes(), expected.bytes);
        prop_assert_eq!(cache.len() as u64, expected.entries);
        assert_consistent(&cache);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn single_shard_matches_model(ops in proptest::collection::vec(op(), 1..200)) {
        run(1, &ops)?;
    }

    #[test]
    fn four_shards_match_model(ops in proptest::collection::vec(op(), 1..200)) {
        run(4, &ops)?;
    }
}
