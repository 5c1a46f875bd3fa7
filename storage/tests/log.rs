//! The durable log end to end on real files: appends and reads across segments, reopen and
//! crash recovery (torn writes at every offset, flipped bits, missing and corrupt indexes),
//! retention under a reader, fsync policies, and a model-based property test.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use proptest::prelude::*;
use starling_storage::{
    Error, FsyncPolicy, Log, LogConfig, Position, Record, RetentionPolicy, segment,
};
use tempfile::TempDir;

fn at(stream: u64, seq: u64) -> Position {
    Position { stream, seq }
}

fn cfg(segment_bytes: u64, index_interval_bytes: u64) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes,
        max_record_bytes: 64 * 1024,
        fsync: FsyncPolicy::Never,
        retention: RetentionPolicy::default(),
    }
}

/// A payload that says which batch it is.
fn payload(stream: u64, seq: u64, len: usize) -> Vec<u8> {
    let mut p = format!("{stream}:{seq}:").into_bytes();
    p.resize(len.max(p.len()), (seq % 251) as u8);
    p
}

/// Appends `n` batches of `events` events each in `stream`, from the log's next position
/// (or seq 0), stamped 1000, 1001, ...; returns their positions.
fn fill(log: &mut Log, stream: u64, n: u64, events: u32, len: usize) -> Vec<Position> {
    let mut out = Vec::new();
    for _ in 0..n {
        let p = match log.next_position() {
            Some(next) if next.stream == stream => next,
            _ => at(stream, 0),
        };
        let a = log
            .append_at(p, events, 1000 + p.seq, &payload(stream, p.seq, len))
            .unwrap();
        assert_eq!(a.position, p);
        out.push(p);
    }
    out
}

fn read_all(reader: impl Iterator<Item = Result<Record, Error>>) -> Vec<Record> {
    reader.map(|r| r.unwrap()).collect()
}

fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

#[test]
fn appends_read_back_in_order_across_segments() {
    let dir = TempDir::new().unwrap();
    let (mut log, report) = Log::open(dir.path(), cfg(1024, 256)).unwrap();
    assert_eq!(report.segments, 0);
    assert_eq!(log.next_position(), None);
    let mut positions = fill(&mut log, 5, 40, 3, 100);
    positions.extend(fill(&mut log, 9, 10, 1, 50));
    assert!(files(dir.path(), "log").len() > 3, "rolled at 1 KiB");
    assert_eq!(log.next_position(), Some(at(9, 10)));

    let all = read_all(log.read_from(at(1, 0)));
    let got: Vec<_> = all.iter().map(|r| r.position).collect();
    assert_eq!(got, positions);
    for r in &all {
        assert_eq!(
            &r.payload[..],
            &payload(r.position.stream, r.position.seq, r.payload.len())[..]
        );
    }

    // From inside a batch: that batch first.
    let from = read_all(log.read_from(at(5, 31)));
    assert_eq!(from[0].position, at(5, 30));
    assert_eq!(from.len(), 40 - 10 + 10);
    // From one past a batch: the next one.
    assert_eq!(read_all(log.read_from(at(5, 30)))[0].position, at(5, 30));
    assert_eq!(read_all(log.read_from(at(5, 33)))[0].position, at(5, 33));
    // A stream not in the log, between the two: every batch of the later stream.
    let later = read_all(log.read_from(at(7, 1234)));
    assert_eq!(later.len(), 10);
    assert_eq!(later[0].position, at(9, 0));
    // Past the end: nothing.
    assert!(read_all(log.read_from(at(9, 10))).is_empty());

    let stats = log.stats();
    assert_eq!(stats.records_appended, 50);
    assert_eq!(stats.records_retained, 50);
    assert_eq!(stats.bytes_retained, stats.bytes_appended);
    assert_eq!(stats.segments as usize, files(dir.path(), "log").len());
    assert!(stats.records_replayed >= 50);
}

#[test]
fn read_from_time_starts_at_the_first_record_at_or_after_it() {
    let dir = TempDir::new().unwrap();
    let (mut log, _) = Log::open(dir.path(), cfg(600, 128)).unwrap();
    for i in 0..30u64 {
        log.append_at(at(1, i), 1, 5000 + 10 * i, &[i as u8; 60])
            .unwrap();
    }
    // An older timestamp is raised to the last one.
    let a = log.append_at(at(1, 30), 1, 10, b"late clock").unwrap();
    assert_eq!(a.timestamp_ms, 5290);
    assert_eq!(read_all(log.read_from_time(0)).len(), 31);
    let r = read_all(log.read_from_time(5125));
    assert_eq!(r[0].position, at(1, 13));
    assert_eq!(r[0].timestamp_ms, 5130);
    assert_eq!(r.len(), 18);
    assert_eq!(read_all(log.read_from_time(5130))[0].position, at(1, 13));
    assert_eq!(read_all(log.read_from_time(5290)).len(), 2);
    assert!(read_all(log.read_from_time(9999)).is_empty());
}

#[test]
fn a_time_translates_to_the_position_of_the_first_record_at_or_after_it() {
    let dir = TempDir::new().unwrap();
    let (mut log, _) = Log::open(dir.path(), cfg(600, 128)).unwrap();
    assert_eq!(log.position_at_time(0).unwrap(), None, "empty log");
    // Batches of 3 events: seq 0, 3, 6, ... stamped 5000, 5010, 5020, ...; two share 5100,
    // and a later stream starts at 5200.
    for i in 0..10u64 {
        log.append_at(at(1, 3 * i), 3, 5000 + 10 * i, &[i as u8; 60])
            .unwrap();
    }
    log.append_at(at(1, 30), 3, 5100, b"same ms").unwrap();
    log.append_at(at(1, 33), 3, 5100, b"same ms too").unwrap();
    log.append_at(at(2, 0), 3, 5200, b"new stream").unwrap();
    assert!(files(dir.path(), "log").len() > 1, "several segments");
    let before = log.stats().records_replayed;
    // Before the first record: the first record.
    assert_eq!(log.position_at_time(0).unwrap(), Some(at(1, 0)));
    assert_eq!(log.position_at_time(4999).unwrap(), Some(at(1, 0)));
    // Exactly on a record's time: that record.
    assert_eq!(log.position_at_time(5000).unwrap(), Some(at(1, 0)));
    assert_eq!(log.position_at_time(5040).unwrap(), Some(at(1, 12)));
    // Between two records: the later one.
    assert_eq!(log.position_at_time(5041).unwrap(), Some(at(1, 15)));
    // Two records in the same millisecond: the first of them.
    assert_eq!(log.position_at_time(5100).unwrap(), Some(at(1, 30)));
    assert_eq!(log.position_at_time(5101).unwrap(), Some(at(2, 0)));
    // The last record, and after it: nothing.
    assert_eq!(log.position_at_time(5200).unwrap(), Some(at(2, 0)));
    assert_eq!(log.position_at_time(5201).unwrap(), None);
    assert_eq!(log.position_at_time(u64::MAX).unwrap(), None);
    assert_eq!(
        log.stats().records_replayed,
        before,
        "a lookup is no replay"
    );
    // Reading from the position returns what reading from the time does.
    for t in [0, 5000, 5035, 5100, 5150, 5200] {
        let p = log.position_at_time(t).unwrap().unwrap();
        let by_time: Vec<_> = read_all(log.read_from_time(t))
            .into_iter()
            .map(|r| r.position)
            .collect();
        let by_pos: Vec<_> = read_all(log.read_from(p))
            .into_iter()
            .map(|r| r.position)
            .collect();
        assert_eq!(by_pos, by_time, "from {t}");
    }
    // After retention removed the oldest segments, an old time starts at what is left.
    let mut config = cfg(600, 128);
    config.retention.max_bytes = Some(600);
    drop(log);
    let (mut log, _) = Log::open(dir.path(), config).unwrap();
    log.enforce_retention(6000).unwrap();
    let first = log.view().first_position().unwrap();
    assert_ne!(first, at(1, 0));
    assert_eq!(log.position_at_time(0).unwrap(), Some(first));
}

#[test]
fn positions_continue_across_reopen_and_order_is_enforced() {
    let dir = TempDir::new().unwrap();
    {
        let (mut log, _) = Log::open(dir.path(), cfg(4096, 512)).unwrap();
        fill(&mut log, 3, 20, 2, 80);
        assert!(matches!(
            log.append(at(3, 7), 1, b"x"),
            Err(Error::OutOfOrder { next, got }) if next == at(3, 40) && got == at(3, 7)
        ));
        assert!(matches!(
            log.append(at(3, 41), 1, b"x"),
            Err(Error::OutOfOrder { .. })
        ));
        assert!(matches!(
            log.append(at(2, 0), 1, b"x"),
            Err(Error::OutOfOrder { .. })
        ));
        assert!(matches!(
            log.append(at(0, 0), 1, b"x"),
            Err(Error::InvalidBatch(_))
        ));
        assert!(matches!(
            log.append(at(3, 40), 0, b"x"),
            Err(Error::InvalidBatch(_))
        ));
        assert!(matches!(
            log.append(at(3, 40), 1, &vec![0; 64 * 1024 + 1]),
            Err(Error::RecordTooLarge { .. })
        ));
    }
    let (mut log, report) = Log::open(dir.path(), cfg(4096, 512)).unwrap();
    assert_eq!(report.records, 20);
    assert_eq!(report.truncated_bytes, 0);
    assert_eq!(report.next, Some(at(3, 40)));
    assert_eq!(log.next_position(), Some(at(3, 40)));
    assert_eq!(log.append(at(3, 40), 1, b"next").unwrap().next, at(3, 41));
    // A later stream starts anywhere.
    assert_eq!(
        log.append(at(4, 100), 2, b"new stream").unwrap().next,
        at(4, 102)
    );
    assert_eq!(read_all(log.read_from(at(1, 0))).len(), 22);
}

/// The bytes of a log directory (segments and indexes), to replay damage on a fresh copy.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

fn restore(snap: &[(String, Vec<u8>)]) -> TempDir {
    let dir = TempDir::new().unwrap();
    for (name, bytes) in snap {
        fs::write(dir.path().join(name), bytes).unwrap();
    }
    dir
}

/// Cuts the last segment at every byte offset of its last record: earlier records survive,
/// the torn one is truncated and counted, and the log takes an append at its position (a
/// writer that numbers its own positions starts a new stream instead, see
/// `RecoveryReport::next`).
#[test]
fn a_torn_write_at_every_offset_of_the_last_record_is_truncated() {
    for interval in [1u64, 100_000] {
        let dir = TempDir::new().unwrap();
        let (mut log, _) = Log::open(dir.path(), cfg(2048, interval)).unwrap();
        let positions = fill(&mut log, 11, 30, 2, 90);
        drop(log);
        let snap = snapshot(dir.path());
        let last_seg = files(dir.path(), "log").pop().unwrap();
        let last_name = last_seg.file_name().unwrap().to_str().unwrap().to_string();
        let seg_bytes = fs::read(&last_seg).unwrap();
        let scan = segment::scan(&seg_bytes, 1 << 20);
        let (last_off, last_h) = *scan.records.last().unwrap();
        let earlier_in_seg = scan.records.len() - 1;
        assert_eq!(last_h.position, *positions.last().unwrap());

        for cut in last_off..seg_bytes.len() as u64 {
            let copy = restore(&snap);
            let path = copy.path().join(&last_name);
            fs::write(&path, &seg_bytes[..cut as usize]).unwrap();
            let (mut log, report) = Log::open(copy.path(), cfg(2048, interval)).unwrap();
            assert_eq!(report.truncated_bytes, cut - last_off, "cut at {cut}");
            assert_eq!(report.truncated_segments, u64::from(cut > last_off));
            assert_eq!(report.records, 29);
            assert_eq!(report.next, Some(last_h.position));
            if earlier_in_seg == 0 {
                assert_eq!(report.empty_segments_removed, 1);
            }
            assert_eq!(fs::metadata(&path).map(|m| m.len()).unwrap_or(0), last_off);
            let got: Vec<_> = read_all(log.read_from(at(1, 0)))
                .iter()
                .map(|r| r.position)
                .collect();
            assert_eq!(got, positions[..29]);
            let a = log.append(last_h.position, 2, b"again").unwrap();
            assert_eq!(a.next, at(11, 60));
            assert_eq!(log.stats().recovery_truncated_bytes, cut - last_off);
        }
    }
}

/// A flipped bit in the last record of the last segment is a torn tail: truncated. One with
/// valid records after it may be fsynced data gone bad: the segment is quarantined (renamed
/// aside whole) and only its valid prefix is kept under its name; nothing is cut.
#[test]
fn a_flipped_bit_truncates_a_tail_and_quarantines_a_segment_with_records_after_it() {
    let dir = TempDir::new().unwrap();
    let (mut log, _) = Log::open(dir.path(), cfg(1 << 20, 100_000)).unwrap();
    let positions = fill(&mut log, 2, 10, 1, 64);
    drop(log);
    let snap = snapshot(dir.path());
    let seg = files(dir.path(), "log").pop().unwrap();
    let name = seg.file_name().unwrap().to_str().unwrap().to_string();
    let bytes = fs::read(&seg).unwrap();
    let scan = segment::scan(&bytes, 1 << 20);
    let rec_len = 44 + 64;

    // The CRC of the last record, then a payload byte of the 7th.
    for (victim, flip_at) in [
        (9usize, scan.records[9].0 + rec_len - 2),
        (6, scan.records[6].0 + 50),
    ] {
        let copy = restore(&snap);
        let mut damaged = bytes.clone();
        damaged[flip_at as usize] ^= 0x10;
        fs::write(copy.path().join(&name), &damaged).unwrap();
        let (log, report) = Log::open(copy.path(), cfg(1 << 20, 100_000)).unwrap();
        assert_eq!(report.records, victim as u64);
        if victim == 9 {
            assert_eq!(report.truncated_bytes, rec_len);
            assert!(report.quarantined.is_empty());
        } else {
            assert_eq!(report.truncated_bytes, 0);
            assert_eq!(report.quarantined.len(), 1);
            assert_eq!(fs::read(&report.quarantined[0]).unwrap(), damaged);
            assert_eq!(
                fs::read(copy.path().join(&name)).unwrap(),
                bytes[..scan.records[victim].0 as usize]
            );
        }
        let got: Vec<_> = read_all(log.read_from(at(1, 0)))
            .iter()
            .map(|r| r.position)
            .collect();
        assert_eq!(got, positions[..victim]);
        assert_eq!(log.next_position(), Some(positions[victim]));
    }
}

/// Corruption recovery did not scan (before the last checkpoint) is met by a reader as an
/// error, never as garbage.
#[test]
fn a_reader_meeting_corruption_before_the_last_checkpoint_gets_an_error() {
    let dir = TempDir::new().unwrap();
    let (mut log, _) = Log::open(dir.path(), cfg(1 << 20, 1)).unwrap();
    fill(&mut log, 2, 10, 1, 64);
    drop(log);
    let seg = files(dir.path(), "log").pop().unwrap();
    let mut bytes = fs::read(&seg).unwrap();
    bytes[3 * 108 + 60] ^= 1;
    fs::write(&seg, &bytes).unwrap();
    let (log, report) = Log::open(dir.path(), cfg(1 << 20, 1)).unwrap();
    assert_eq!(
        report.records, 10,
        "only the tail after the last checkpoint is scanned"
    );
    let mut r = log.read_from(at(1, 0));
    for _ in 0..3 {
        r.next().unwrap().unwrap();
    }
    assert!(matches!(
        r.next(),
        Some(Err(Error::Corrupt { offset: 324, .. }))
    ));
    assert!(r.next().is_none());
}

#[test]
fn a_missing_or_corrupt_index_is_rebuilt_identically() {
    let dir = TempDir::new().unwrap();
    let (mut log, _) = Log::open(dir.path(), cfg(3000, 300)).unwrap();
    let positions = fill(&mut log, 8, 60, 4, 70);
    drop(log);
    let snap = snapshot(dir.path());
    let indexes: Vec<_> = snap
        .iter()
        .filter(|(n, _)| n.ends_with(".idx"))
        .cloned()
        .collect();
    assert!(indexes.len() >= 3);

    type Damage = fn(&Path);
    let damages: [(&str, Damage); 4] = [
        ("missing", |p| fs::remove_file(p).unwrap()),
        ("empty", |p| fs::write(p, b"").unwrap()),
        ("flipped entry", |p| {
            let mut b = fs::read(p).unwrap();
            b[8 + 44 + 20] ^= 4;
            fs::write(p, b).unwrap();
        }),
        ("garbage past the end", |p| {
            let mut b = fs::read(p).unwrap();
            b.extend_from_slice(&[0xAB; 30]);
            fs::write(p, b).unwrap();
        }),
    ];
    for (what, damage) in damages {
        let copy = restore(&snap);
        for (name, _) in &indexes {
            damage(&copy.path().join(name));
        }
        let (log, report) = Log::open(copy.path(), cfg(3000, 300)).unwrap();
        assert_eq!(report.indexes_rebuilt, indexes.len() as u64, "{what}");
        assert_eq!(report.records, 60);
        assert_eq!(report.truncated_bytes, 0);
        for (name, bytes) in &indexes {
            assert_eq!(
                &fs::read(copy.path().join(name)).unwrap(),
                bytes,
                "{what}: {name}"
            );
        }
        let from = read_all(log.read_from(positions[33]));
        assert_eq!(from[0].position, positions[33]);
        assert_eq!(from.len(), 27);
    }
    // An intact index is not rewritten, and only the tail after its last checkpoint is scanned.
    let copy = restore(&snap);
    let (_, report) = Log::open(copy.path(), cfg(3000, 300)).unwrap();
    assert_eq!(report.indexes_rebuilt, 0);
    assert!(
        report.records_scanned < 60 / 2,
        "scanned {}",
        report.records_scanned
    );
}

#[test]
fn stray_files_and_empty_segments_are_cleaned_up() {
    let dir = TempDir::new().unwrap();
    let (mut log, _) = Log::open(dir.path(), cfg(1 << 20, 512)).unwrap();
    fill(&mut log, 4, 3, 1, 10);
    drop(log);
    let empty = dir.path().join(format!("{}.log", segment::stem(at(5, 0))));
    fs::write(&empty, b"").unwrap();
    let orphan = dir.path().join(format!("{}.idx", segment::stem(at(6, 0))));
    fs::write(&orphan, b"STIX").unwrap();
    fs::write(dir.path().join("notes.txt"), b"not ours").unwrap();
    let (mut log, report) = Log::open(dir.path(), cfg(1 << 20, 512)).unwrap();
    assert_eq!(report.empty_segments_removed, 1);
    assert_eq!(report.segments, 1);
    assert!(!empty.exists() && !orphan.exists());
    assert!(dir.path().join("notes.txt").exists());
    log.append(at(5, 0), 1, b"fine").unwrap();
}

#[test]
fn a_reader_on_a_segment_deleted_by_retention_ends_with_truncated() {
    let dir = TempDir::new().unwrap();
    let mut config = cfg(1000, 200);
    config.retention = RetentionPolicy {
        max_bytes: Some(2500),
        max_age_ms: None,
    };
    let (mut log, _) = Log::open(dir.path(), config).unwrap();
    fill(&mut log, 1, 40, 1, 156); // 200-byte records, 5 per segment, 8 segments
    assert_eq!(log.stats().segments, 8);

    let mut on_first = log.read_from(at(1, 0));
    assert_eq!(on_first.next().unwrap().unwrap().position, at(1, 0));
    let mut not_started = log.read_from(at(1, 1));
    let mut on_last = log.read_from(at(1, 38));

    let report = log.enforce_retention(starling_storage::now_ms()).unwrap();
    assert_eq!(report.segments, 6, "2 segments of 1000 bytes fit in 2500");
    assert_eq!(report.bytes, 6000);
    assert_eq!(report.records, 30);
    assert_eq!(report.by_age, 0);
    assert!(
        matches!(on_first.next(), Some(Err(Error::Truncated { segment })) if segment == at(1, 0))
    );
    assert!(on_first.next().is_none());
    assert!(matches!(
        not_started.next(),
        Some(Err(Error::Truncated { .. }))
    ));
    assert_eq!(read_all(&mut on_last).len(), 2);
    // A new reader from a deleted position starts at the oldest record left.
    assert_eq!(read_all(log.read_from(at(1, 0)))[0].position, at(1, 30));
    assert_eq!(files(dir.path(), "log").len(), 2);
    assert_eq!(files(dir.path(), "idx").len(), 2);
    let stats = log.stats();
    assert_eq!(
        (
            stats.segments_deleted,
            stats.bytes_deleted,
            stats.records_deleted
        ),
        (6, 6000, 30)
    );
    assert_eq!(stats.bytes_retained, 2000);
    // The active segment is never deleted, even over the limit.
    config.retention.max_bytes = Some(0);
    drop(log);
    let (mut log, _) = Log::open(dir.path(), config).unwrap();
    assert_eq!(
        log.enforce_retention(starling_storage::now_ms())
            .unwrap()
            .segments,
        1
    );
    assert_eq!(log.stats().segments, 1);
    assert_eq!(log.next_position(), Some(at(1, 40)));
}

#[test]
fn retention_by_age_deletes_old_segments_only() {
    let dir = TempDir::new().unwrap();
    let mut config = cfg(1000, 200);
    config.retention.max_age_ms = Some(1000);
    let (mut log, _) = Log::open(dir.path(), config).unwrap();
    for i in 0..20u64 {
        log.append_at(at(1, i), 1, 10_000 + i * 100, &[0; 156])
            .unwrap();
    }
    // Segments end at 10_400, 10_900, 11_400, 11_900.
    let report = log.enforce_retention(11_950).unwrap();
    assert_eq!((report.segments, report.by_age), (2, 2));
    assert_eq!(read_all(log.read_from_time(0))[0].position, at(1, 10));
    assert_eq!(log.enforce_retention(11_950).unwrap().segments, 0);
}

#[test]
fn a_reader_follows_appends_as_they_happen() {
    let dir = TempDir::new().unwrap();
    let (mut log, _) = Log::open(dir.path(), cfg(700, 100)).unwrap();
    let view = log.view();
    let mut reader = view.read_from(at(1, 0));
    assert!(reader.next().is_none(), "empty log");
    fill(&mut log, 1, 3, 1, 100);
    assert_eq!(read_all(&mut reader).len(), 3);
    assert!(reader.next().is_none());
    fill(&mut log, 1, 10, 1, 100);
    assert_eq!(
        read_all(&mut reader).len(),
        10,
        "crossing segments as they roll"
    );

    // A writer thread and a reader thread.
    let total = 400u64;
    let writer = std::thread::spawn(move || {
        fill(&mut log, 2, total, 1, 64);
        log
    });
    let mut reader = view.read_from(at(2, 0));
    let mut seen = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while (seen.len() as u64) < total && std::time::Instant::now() < deadline {
        match reader.next() {
            Some(r) => seen.push(r.unwrap().position),
            None => std::thread::yield_now(),
        }
    }
    writer.join().unwrap();
    let want: Vec<_> = (0..total).map(|s| at(2, s)).collect();
    assert_eq!(seen, want);
}

#[test]
fn fsync_policies_report_durability() {
    let dir = TempDir::new().unwrap();
    let mut config = cfg(1 << 20, 4096);
    config.fsync = FsyncPolicy::Always;
    let (mut log, _) = Log::open(dir.path().join("always"), config).unwrap();
    let a = log.append(at(1, 0), 1, b"x").unwrap();
    assert!(a.durable && a.fsync.is_some());
    assert_eq!(log.view().durable_next(), Some(at(1, 1)));
    assert!(log.stats().fsyncs >= 1);

    config.fsync = FsyncPolicy::Interval(Duration::from_millis(5));
    let (mut log, _) = Log::open(dir.path().join("interval"), config).unwrap();
    let view = log.view();
    let a = log.append(at(1, 0), 1, b"x").unwrap();
    assert!(!a.durable && a.fsync.is_none());
    assert_eq!(view.durable_next(), None);
    let s = log.sync().unwrap();
    assert_eq!(s.durable_next, Some(at(1, 1)));
    assert!(s.covers(at(1, 1)) && !s.covers(at(1, 2)) && !s.covers(at(2, 0)));
    assert!(s.took.is_some());
    assert_eq!(log.sync().unwrap().took, None, "nothing pending");

    let (tx, rx) = std::sync::mpsc::channel();
    let flusher =
        starling_storage::Flusher::spawn(view.clone(), Duration::from_millis(5), move |s| {
            let _ = tx.send(s.unwrap().durable_next);
        })
        .unwrap();
    log.append(at(1, 1), 1, b"y").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = rx.recv_timeout(Duration::from_secs(10)).unwrap();
        if got == Some(at(1, 2)) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the flusher never synced"
        );
    }
    flusher.stop();
    assert_eq!(view.durable_next(), Some(at(1, 2)));

    config.fsync = FsyncPolicy::Never;
    let (mut log, _) = Log::open(dir.path().join("never"), config).unwrap();
    let a = log.append(at(1, 0), 1, b"x").unwrap();
    assert!(a.durable && a.fsync.is_none());
    assert_eq!(log.stats().fsyncs, 0);
}

#[test]
fn a_record_over_a_lowered_max_is_refused_by_readers_not_truncated() {
    let dir = TempDir::new().unwrap();
    let (mut log, _) = Log::open(dir.path(), cfg(1 << 20, 512)).unwrap();
    log.append(at(1, 0), 1, &[1; 5000]).unwrap();
    drop(log);
    let mut small = cfg(1 << 20, 512);
    small.max_record_bytes = 1000;
    let (log, report) = Log::open(dir.path(), small).unwrap();
    assert_eq!((report.records, report.truncated_bytes), (1, 0));
    assert!(matches!(
        log.read_from(at(1, 0)).next(),
        Some(Err(Error::RecordTooLarge {
            len: 5000,
            max: 1000
        }))
    ));
}

#[test]
fn invalid_configs_are_refused() {
    let dir = TempDir::new().unwrap();
    for bad in [
        LogConfig {
            segment_bytes: 0,
            ..LogConfig::default()
        },
        LogConfig {
            index_interval_bytes: 0,
            ..LogConfig::default()
        },
        LogConfig {
            max_record_bytes: 0,
            ..LogConfig::default()
        },
        LogConfig {
            fsync: FsyncPolicy::Interval(Duration::ZERO),
            ..LogConfig::default()
        },
    ] {
        assert!(matches!(Log::open(dir.path(), bad), Err(Error::Config(_))));
    }
}

#[derive(Debug, Clone)]
enum Op {
    /// Append a batch: events, payload length.
    Append(u32, usize),
    /// Start a later stream.
    NewStream,
    /// Close and reopen.
    Reopen,
    /// Cut `n` bytes off the end of the last segment, then reopen.
    Tear(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1u32..5, 0usize..200).prop_map(|(e, n)| Op::Append(e, n)),
        1 => Just(Op::NewStream),
        1 => Just(Op::Reopen),
        1 => (1u16..300).prop_map(Op::Tear),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Whatever mix of appends, new streams, reopens and torn tails: the log reads back
    /// exactly the model's records, and positions continue from the last valid one.
    #[test]
    fn the_log_matches_a_model(ops in proptest::collection::vec(op(), 1..60),
                               seg in 300u64..2000, interval in 1u64..600) {
        let dir = TempDir::new().unwrap();
        let config = cfg(seg, interval);
        let (mut log, _) = Log::open(dir.path(), config).unwrap();
        let mut model: Vec<(Position, u32, u64, Vec<u8>)> = Vec::new();
        let mut stream = 1u64;
        for op in ops {
            match op {
                Op::Append(events, len) => {
                    let p = match log.next_position() {
                        Some(n) if n.stream == stream => n,
                        _ => at(stream, 0),
                    };
                    let body = payload(p.stream, p.seq, len);
                    let a = log.append_at(p, events, 1000 + model.len() as u64, &body).unwrap();
                    model.push((p, events, a.timestamp_ms, body));
                }
                Op::NewStream => stream += 1,
                Op::Reopen => {
                    drop(log);
                    let (l, report) = Log::open(dir.path(), config).unwrap();
                    prop_assert_eq!(report.records, model.len() as u64);
                    prop_assert_eq!(report.truncated_bytes, 0);
                    log = l;
                }
                Op::Tear(n) => {
                    drop(log);
                    if let Some(last) = files(dir.path(), "log").pop() {
                        let len = fs::metadata(&last).unwrap().len();
                        let cut = len.saturating_sub(u64::from(n));
                        let bytes = fs::read(&last).unwrap();
                        let kept = segment::scan(&bytes[..cut as usize], 1 << 20).records.len();
                        let whole = segment::scan(&bytes, 1 << 20).records.len();
                        model.truncate(model.len() - (whole - kept));
                        fs::OpenOptions::new().write(true).open(&last).unwrap().set_len(cut).unwrap();
                    }
                    let (l, report) = Log::open(dir.path(), config).unwrap();
                    prop_assert_eq!(report.records, model.len() as u64);
                    log = l;
                }
            }
            let next = model.last().map(|(p, e, _, _)| at(p.stream, p.seq + u64::from(*e)));
            prop_assert_eq!(log.next_position(), next);
        }
        let got = read_all(log.read_from(at(1, 0)));
        prop_assert_eq!(got.len(), model.len());
        for (r, (p, e, ts, body)) in got.iter().zip(&model) {
            prop_assert_eq!(r.position, *p);
            prop_assert_eq!(r.events, *e);
            prop_assert_eq!(r.timestamp_ms, *ts);
            prop_assert_eq!(&r.payload[..], &body[..]);
        }
        // Every record is found from its own position and from the time it was stamped.
        for (i, (p, _, ts, _)) in model.iter().enumerate() {
            let from = log.read_from(*p).next().unwrap().unwrap();
            prop_assert_eq!(from.position, *p);
            let from = log.read_from_time(*ts).next().unwrap().unwrap();
            prop_assert!(from.timestamp_ms == *ts && model[..=i].iter().any(|m| m.0 == from.position));
        }
    }
}

#[test]
fn the_writer_views_and_readers_can_move_to_other_threads() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send::<Log>();
    send::<starling_storage::Reader>();
    send_sync::<starling_storage::LogView>();
    send::<starling_storage::Flusher>();
}

#[test]
fn under_interval_a_roll_makes_the_sealed_segment_durable() {
    let dir = TempDir::new().unwrap();
    let mut config = cfg(450, 100);
    config.fsync = FsyncPolicy::Interval(Duration::from_secs(3600));
    let (mut log, _) = Log::open(dir.path(), config).unwrap();
    let view = log.view();
    fill(&mut log, 1, 4, 1, 56); // 100-byte records: 4 fit in 450 bytes
    assert_eq!(view.durable_next(), None);
    fill(&mut log, 1, 1, 1, 56); // rolls: the first segment is fsynced
    assert_eq!(view.durable_next(), Some(at(1, 4)));
    assert_eq!(log.sync().unwrap().durable_next, Some(at(1, 5)));
    assert_eq!(log.stats().fsyncs, 2);
}
