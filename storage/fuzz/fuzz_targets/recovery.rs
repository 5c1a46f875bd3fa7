//! Fuzz target: arbitrary bytes as a log directory's only segment (and, from the first byte,
//! an index interval). Opening the log must never panic; it must either refuse (an unknown
//! record version, leaving the file as it was) or keep exactly the records an in-memory scan
//! accepts, truncate the rest or quarantine the whole file (when valid records follow the
//! damage), read them back unchanged, and continue positions after the last one.
#![no_main]

use std::fs;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use starling_storage::{Error, FsyncPolicy, Log, LogConfig, Position, RetentionPolicy, segment};

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let d = std::env::temp_dir().join(format!("starling-storage-fuzz-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        d
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&interval, seg)) = data.split_first() else { return };
    let dir = dir();
    for e in fs::read_dir(dir).unwrap() {
        fs::remove_file(e.unwrap().path()).unwrap();
    }
    let scan = segment::scan(seg, u32::MAX);
    let base = scan.records.first().map_or(Position { stream: 1, seq: 0 }, |(_, h)| h.position);
    let path = dir.join(format!("{}.log", segment::stem(base)));
    fs::write(&path, seg).unwrap();
    let config = LogConfig {
        segment_bytes: 1 << 20,
        index_interval_bytes: u64::from(interval) + 1,
        max_record_bytes: u32::MAX,
        fsync: FsyncPolicy::Never,
        retention: RetentionPolicy::default(),
    };
    let (mut log, report) = match Log::open(dir, config) {
        Err(Error::UnknownVersion { .. }) => {
            assert_eq!(fs::read(&path).unwrap(), seg, "a refused open changes nothing");
            return;
        }
        other => other.unwrap(),
    };
    assert_eq!(report.records, scan.records.len() as u64);
    if report.quarantined.is_empty() {
        assert_eq!(report.truncated_bytes, seg.len() as u64 - scan.valid_len);
    } else {
        assert_eq!(report.truncated_bytes, 0);
        assert_eq!(fs::read(&report.quarantined[0]).unwrap(), seg, "set aside whole");
    }
    let got: Vec<_> = log.read_from(Position { stream: 1, seq: 0 }).map(|r| r.unwrap()).collect();
    assert_eq!(got.len(), scan.records.len());
    for (r, (offset, h)) in got.iter().zip(&scan.records) {
        assert_eq!((r.position, r.events, r.timestamp_ms), (h.position, h.events, h.timestamp_ms));
        let start = *offset as usize + 40;
        assert_eq!(&r.payload[..], &seg[start..start + h.payload_len as usize]);
    }
    let next = scan.records.last().map(|(_, h)| h.end());
    assert_eq!(log.next_position(), next);
    if let Some(n) = next {
        log.append(n, 1, b"after").unwrap();
    }
    // Reopening finds the same, plus the append, with nothing to repair.
    drop(log);
    let (_, again) = Log::open(dir, config).unwrap();
    assert_eq!(again.truncated_bytes, 0);
    assert_eq!(again.records, scan.records.len() as u64 + u64::from(next.is_some()));
});
