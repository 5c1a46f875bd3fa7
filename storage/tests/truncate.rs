//! Truncating a log's tail and purging its head ([`Log::truncate_from`],
//! [`Log::remove_segments_before`]), as a replicated log store uses them: records cut are
//! gone after a reopen and after a power cut, appends continue at the cut, and a purge
//! deletes only whole segments wholly before the position.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;
use starling_storage::fault::FaultFs;
use starling_storage::{FsyncPolicy, Log, LogConfig, Position, RetentionPolicy};

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 300,
        index_interval_bytes: 100,
        max_record_bytes: 4096,
        fsync: FsyncPolicy::Interval(Duration::from_secs(3600)),
        retention: RetentionPolicy::default(),
    }
}

fn at(seq: u64) -> Position {
    Position { stream: 1, seq }
}

fn payload(seq: u64, generation: u8) -> Vec<u8> {
    let mut p = vec![generation; 20 + (seq % 7) as usize];
    p.extend_from_slice(&seq.to_le_bytes());
    p
}

/// The log's records as (seq, payload).
fn contents(log: &Log<FaultFs>) -> Vec<(u64, Vec<u8>)> {
    log.read_from(at(0))
        .map(|r| {
            let r = r.unwrap();
            (r.position.seq, r.payload.to_vec())
        })
        .collect()
}

fn dir() -> PathBuf {
    PathBuf::from("/log")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Appending `n`, cutting at `cut`, appending `more` of a new generation, with an
    /// optional power cut after the truncation (the truncation itself is durable), leaves
    /// exactly the prefix and the new records, also after a reopen.
    #[test]
    fn truncate_then_append(n in 1u64..40, cut in 0u64..45, more in 0u64..10, crash in any::<bool>()) {
        let fs = FaultFs::new();
        let (mut log, _) = Log::open_in(fs.clone(), dir(), config()).unwrap();
        for s in 0..n {
            log.append(at(s), 1, &payload(s, 1)).unwrap();
        }
        log.sync().unwrap();
        log.truncate_from(at(cut)).unwrap();
        let kept = cut.min(n);
        let next = log.next_position();
        if kept == 0 {
            prop_assert_eq!(next, None);
        } else {
            prop_assert_eq!(next, Some(at(kept)));
        }
        let mut want: Vec<(u64, Vec<u8>)> = (0..kept).map(|s| (s, payload(s, 1))).collect();
        prop_assert_eq!(contents(&log), want.clone());
        if crash {
            drop(log);
            fs.crash(None);
            let (reopened, _) = Log::open_in(fs.clone(), dir(), config()).unwrap();
            log = reopened;
            prop_assert_eq!(contents(&log), want.clone());
        }
        for s in kept..kept + more {
            log.append(at(s), 1, &payload(s, 2)).unwrap();
            want.push((s, payload(s, 2)));
        }
        log.sync().unwrap();
        prop_assert_eq!(contents(&log), want.clone());
        drop(log);
        fs.crash(None);
        let (log, report) = Log::open_in(fs.clone(), dir(), config()).unwrap();
        prop_assert!(report.quarantined.is_empty());
        prop_assert_eq!(contents(&log), want);
    }

    /// A purge removes whole segments only, and only those wholly before the position:
    /// every record from the position on is still there.
    #[test]
    fn purge_keeps_from_position(n in 1u64..60, upto in 0u64..70) {
        let fs = FaultFs::new();
        let (mut log, _) = Log::open_in(fs.clone(), dir(), config()).unwrap();
        for s in 0..n {
            log.append(at(s), 1, &payload(s, 1)).unwrap();
        }
        log.sync().unwrap();
        log.remove_segments_before(at(upto)).unwrap();
        let got = contents(&log);
        let first = got.first().map(|r| r.0).unwrap();
        prop_assert!(first <= upto.min(n - 1));
        let want: Vec<_> = (first..n).map(|s| (s, payload(s, 1))).collect();
        prop_assert_eq!(&got, &want);
        drop(log);
        fs.crash(None);
        let (log, _) = Log::open_in(fs.clone(), dir(), config()).unwrap();
        prop_assert_eq!(contents(&log), want);
    }
}
