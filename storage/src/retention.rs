//! Retention: which whole segments to delete, by the log's total bytes and by age. The
//! active (last) segment is never deleted. [`plan`] is the pure rule; the log applies it and
//! returns a [`RetentionReport`]. A log whose retention may change while it is open reads it
//! at each run from a [`RetentionSource`] (the broker's is the topics document in force).

/// Limits on what a log keeps; `None` keeps without limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Delete the oldest segments while the log holds more than this many bytes.
    pub max_bytes: Option<u64>,
    /// Delete segments whose newest record is older than this, in milliseconds.
    pub max_age_ms: Option<u64>,
}

/// Where an open log reads the retention in force at each retention run, so a changed
/// policy reaches it without a reopen (the broker's implementation reads the topics document
/// in force for one topic; a single-copy log and a replicated topic's committed log both use
/// it).
pub trait RetentionSource: Send + Sync + std::fmt::Debug {
    /// The retention in force now.
    fn retention_now(&self) -> RetentionPolicy;
}

/// What a segment looks like to the retention rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentSummary {
    /// Bytes of the segment.
    pub bytes: u64,
    /// Timestamp of its newest record, Unix milliseconds.
    pub last_ms: u64,
}

/// What one retention pass deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionReport {
    /// Segments deleted.
    pub segments: u64,
    /// Bytes deleted.
    pub bytes: u64,
    /// Records deleted.
    pub records: u64,
    /// Of the segments, those deleted for age (the rest for bytes).
    pub by_age: u64,
}

/// How many of the oldest `segments` (oldest first; the last is the active one) to delete at
/// `now_ms`, and how many of those for age: every segment older than `max_age_ms`, then the
/// oldest while more than `max_bytes` would remain. Never the last one.
pub fn plan(segments: &[SegmentSummary], policy: &RetentionPolicy, now_ms: u64) -> (usize, usize) {
    let deletable = segments.len().saturating_sub(1);
    let by_age = match policy.max_age_ms {
        Some(age) => segments[..deletable]
            .iter()
            .take_while(|s| now_ms.saturating_sub(s.last_ms) > age)
            .count(),
        None => 0,
    };
    let mut n = by_age;
    if let Some(max) = policy.max_bytes {
        let mut total: u64 = segments[n..].iter().map(|s| s.bytes).sum();
        while n < deletable && total > max {
            total -= segments[n].bytes;
            n += 1;
        }
    }
    (n, by_age)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seg(bytes: u64, last_ms: u64) -> SegmentSummary {
        SegmentSummary { bytes, last_ms }
    }

    #[test]
    fn the_active_segment_is_never_deleted() {
        let policy = RetentionPolicy {
            max_bytes: Some(0),
            max_age_ms: Some(0),
        };
        assert_eq!(plan(&[seg(10, 0)], &policy, 1000), (0, 0));
        assert_eq!(plan(&[], &policy, 1000), (0, 0));
        assert_eq!(plan(&[seg(10, 0), seg(10, 0)], &policy, 1000), (1, 1));
    }

    #[test]
    fn age_then_bytes() {
        let segs = [seg(100, 10), seg(100, 20), seg(100, 30), seg(100, 40)];
        let age = RetentionPolicy {
            max_bytes: None,
            max_age_ms: Some(15),
        };
        assert_eq!(
            plan(&segs, &age, 36),
            (2, 2),
            "10 and 20 are over 15 ms old at 36"
        );
        let bytes = RetentionPolicy {
            max_bytes: Some(250),
            max_age_ms: None,
        };
        assert_eq!(plan(&segs, &bytes, 0), (2, 0));
        let both = RetentionPolicy {
            max_bytes: Some(250),
            max_age_ms: Some(25),
        };
        assert_eq!(plan(&segs, &both, 36), (2, 1));
    }

    proptest! {
        #[test]
        fn plan_is_minimal_and_sufficient(
            segs in proptest::collection::vec((0u64..1000, 0u64..1000), 0..12),
            max_bytes in proptest::option::of(0u64..5000),
            max_age in proptest::option::of(0u64..1000),
            now in 0u64..2000,
        ) {
            let mut t = 0;
            // Segments are in log order: their newest records do not get older.
            let segs: Vec<_> = segs.into_iter().map(|(b, dt)| { t += dt; seg(b, t) }).collect();
            let policy = RetentionPolicy { max_bytes, max_age_ms: max_age };
            let (n, by_age) = plan(&segs, &policy, now);
            prop_assert!(by_age <= n);
            prop_assert!(n < segs.len().max(1), "never the active segment");
            let kept = &segs[n..];
            let deletable_kept = kept.len().saturating_sub(1);
            // Sufficient: what stays is within limits, unless only the active one stays.
            if deletable_kept > 0 {
                if let Some(age) = max_age {
                    prop_assert!(now.saturating_sub(kept[0].last_ms) <= age);
                }
                if let Some(max) = max_bytes {
                    prop_assert!(kept.iter().map(|s| s.bytes).sum::<u64>() <= max);
                }
            }
            // Minimal: keeping the last deleted segment would break a limit.
            if n > 0 {
                let last = segs[n - 1];
                let too_old = max_age.is_some_and(|a| now.saturating_sub(last.last_ms) > a);
                let too_big = max_bytes.is_some_and(|m| segs[n - 1..].iter().map(|s| s.bytes).sum::<u64>() > m);
                prop_assert!(too_old || too_big);
            }
        }
    }
}
