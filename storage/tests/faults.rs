//! The log on the fault-injecting file layer (`starling_storage::fault::FaultFs`): a failed
//! fsync poisons every handle (in an append, at a roll, in a view's sync), a full disk
//! refuses appends without stopping the log and retention frees it, a corrupt sealed segment
//! is quarantined rather than cut, an unknown record version refuses the open, the directory
//! is fsynced when segments come and go, and a power cut keeps every durable record.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use std::path::PathBuf;
use std::time::Duration;

use starling_storage::fault::FaultFs;
use starling_storage::{
    Error, FailedOp, Fs, FsyncPolicy, Log, LogConfig, Position, RetentionPolicy, segment,
};

fn at(stream: u64, seq: u64) -> Position {
    Position { stream, seq }
}

fn dir() -> PathBuf {
    PathBuf::from("/log")
}

fn cfg(segment_bytes: u64, fsync: FsyncPolicy) -> LogConfig {
    LogConfig {
        segment_bytes,
        index_interval_bytes: 256,
        max_record_bytes: 64 * 1024,
        fsync,
        retention: RetentionPolicy::default(),
    }
}

fn interval() -> FsyncPolicy {
    FsyncPolicy::Interval(Duration::from_secs(3600))
}

fn open(fs: &FaultFs, config: LogConfig) -> (Log<FaultFs>, starling_storage::RecoveryReport) {
    Log::open_in(fs.clone(), dir(), config).unwrap()
}

/// Appends `n` one-event records of 56 payload bytes (100 bytes each on disk) continuing the
/// log's stream (or `stream` from 0); returns their positions.
fn fill(log: &mut Log<FaultFs>, stream: u64, n: u64) -> Vec<Position> {
    (0..n)
        .map(|_| {
            let p = match log.next_position() {
                Some(next) if next.stream == stream => next,
                _ => at(stream, 0),
            };
            log.append_at(p, 1, 1000 + p.seq, &[p.seq as u8; 56])
                .unwrap();
            p
        })
        .collect()
}

fn positions(log: &Log<FaultFs>) -> Vec<Position> {
    log.read_from(at(1, 0))
        .map(|r| r.unwrap().position)
        .collect()
}

fn segments(fs: &FaultFs) -> Vec<PathBuf> {
    fs.files()
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect()
}

#[test]
fn an_fsync_failing_at_a_roll_poisons_every_handle() {
    let fs = FaultFs::new();
    let (mut log, _) = open(&fs, cfg(450, interval()));
    let view = log.view();
    // Four records a segment: the roll at the fifth fsynced the first segment.
    fill(&mut log, 1, 8);
    assert_eq!(view.durable_next(), Some(at(1, 4)));
    fs.fail_fsyncs(1);
    // The ninth record rolls: the second segment's fsync fails in the writer.
    let e = log.append_at(at(1, 8), 1, 2000, &[8; 56]).unwrap_err();
    assert!(
        matches!(&e, Error::Failed(f) if f.op == FailedOp::Fsync),
        "{e}"
    );
    // The group commit's next fsync would succeed (the error is reported once), but the
    // view refuses: no durability is reported for the dropped pages, from any handle.
    let e = view.sync().unwrap_err();
    assert!(matches!(e, Error::Failed(_)), "{e}");
    assert_eq!(view.durable_next(), Some(at(1, 4)));
    assert_eq!(view.failure().unwrap().op, FailedOp::Fsync);
    assert!(log.failure().is_some());
    assert!(matches!(
        log.append_at(at(1, 8), 1, 2000, &[8; 56]),
        Err(Error::Failed(_))
    ));
    // Reopening after a crash recovers what was durable, and the log works again.
    drop(log);
    fs.crash(None);
    let (mut log, report) = open(&fs, cfg(450, interval()));
    assert_eq!(report.next, Some(at(1, 4)));
    assert!(log.failure().is_none());
    fill(&mut log, 2, 1);
    log.sync().unwrap();
}

#[test]
fn an_fsync_failing_in_a_view_poisons_the_writer() {
    let fs = FaultFs::new();
    let (mut log, _) = open(&fs, cfg(1 << 20, interval()));
    let view = log.view();
    let other = log.view();
    fill(&mut log, 1, 3);
    fs.fail_fsyncs(1);
    assert!(view.sync().is_err());
    // The next fsync of the file succeeds at the OS level; the log still refuses.
    assert!(matches!(other.sync(), Err(Error::Failed(_))));
    assert!(matches!(
        log.append_at(at(1, 3), 1, 2000, b"x"),
        Err(Error::Failed(_))
    ));
    assert_eq!(
        other.durable_next(),
        None,
        "nothing was ever reported durable"
    );
}

#[test]
fn under_always_a_failed_fsync_in_an_append_poisons() {
    let fs = FaultFs::new();
    let (mut log, _) = open(&fs, cfg(1 << 20, FsyncPolicy::Always));
    fill(&mut log, 1, 2);
    fs.fail_fsyncs(1);
    assert!(matches!(
        log.append_at(at(1, 2), 1, 2000, b"x"),
        Err(Error::Failed(_))
    ));
    assert!(matches!(
        log.append_at(at(1, 2), 1, 2000, b"x"),
        Err(Error::Failed(_))
    ));
    assert_eq!(log.view().durable_next(), Some(at(1, 2)));
}

#[test]
fn a_full_disk_refuses_appends_without_stopping_the_log_and_they_resume() {
    let fs = FaultFs::new();
    let (mut log, _) = open(&fs, cfg(1 << 20, interval()));
    let view = log.view();
    fill(&mut log, 1, 5);
    let used: u64 = fs
        .files()
        .iter()
        .map(|p| fs.contents(p).unwrap().len() as u64)
        .sum();
    fs.set_capacity(Some(used + 20));
    assert_eq!(view.available_bytes().unwrap(), 20);
    let e = log.append_at(at(1, 5), 1, 2000, &[5; 56]).unwrap_err();
    assert!(e.is_no_space(), "{e}");
    assert!(log.failure().is_none(), "a full disk does not poison");
    // The partial write was taken back: the durable state is whole records.
    assert_eq!(view.sync().unwrap().durable_next, Some(at(1, 5)));
    fs.set_capacity(None);
    log.append_at(at(1, 5), 1, 2000, &[5; 56]).unwrap();
    view.sync().unwrap();
    drop(log);
    fs.crash(None);
    let (log, report) = open(&fs, cfg(1 << 20, interval()));
    assert_eq!(report.truncated_bytes, 0);
    assert_eq!(positions(&log).len(), 6);
}

#[test]
fn retention_frees_a_full_disk_and_appends_resume() {
    let fs = FaultFs::new();
    let mut config = cfg(450, interval());
    config.retention.max_bytes = Some(450);
    let (mut log, _) = open(&fs, config);
    fill(&mut log, 1, 12); // three segments of four records
    let used: u64 = fs
        .files()
        .iter()
        .map(|p| fs.contents(p).unwrap().len() as u64)
        .sum();
    fs.set_capacity(Some(used));
    let e = log.append_at(at(1, 12), 1, 2000, &[1; 56]).unwrap_err();
    assert!(e.is_no_space(), "{e}");
    let r = log.enforce_retention(2000).unwrap();
    assert_eq!(r.segments, 2);
    log.append_at(at(1, 12), 1, 2000, &[1; 56]).unwrap();
    assert_eq!(positions(&log).first(), Some(&at(1, 8)));
}

#[test]
fn a_corrupt_record_in_a_sealed_segment_quarantines_it_and_cuts_nothing() {
    let fs = FaultFs::new();
    let (mut log, _) = open(&fs, cfg(450, interval()));
    let all = fill(&mut log, 1, 12);
    log.sync().unwrap();
    drop(log);
    let segs = segments(&fs);
    assert_eq!(segs.len(), 3);
    let sealed = fs.contents(&segs[1]).unwrap();
    // The last record's payload of the middle segment rots (after its index checkpoint at
    // 300 bytes: what recovery scans).
    fs.corrupt(&segs[1], 350, &[0xEE]).unwrap();
    let damaged = fs.contents(&segs[1]).unwrap();
    let (log, report) = open(&fs, cfg(450, interval()));
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(report.truncated_bytes, 0);
    let aside = &report.quarantined[0];
    assert!(aside.to_str().unwrap().ends_with(".log.quarantined"));
    assert_eq!(fs.contents(aside).unwrap(), damaged, "set aside whole");
    assert_eq!(
        fs.contents(&segs[1]).unwrap(),
        sealed[..300],
        "valid prefix kept"
    );
    // Records before the damage and every later segment are served.
    let mut want = all[..7].to_vec();
    want.extend_from_slice(&all[8..]);
    assert_eq!(positions(&log), want);
    assert_eq!(log.stats().recovery_quarantined, 1);
    assert_eq!(log.next_position(), Some(at(1, 12)));
    drop(log);
    // A second open finds nothing to repair.
    let (_, again) = open(&fs, cfg(450, interval()));
    assert!(again.quarantined.is_empty());
    assert_eq!(again.records, 11);
}

#[test]
fn a_bad_first_record_of_a_sealed_segment_does_not_delete_it() {
    let fs = FaultFs::new();
    let (mut log, _) = open(&fs, cfg(450, interval()));
    fill(&mut log, 1, 12);
    log.sync().unwrap();
    drop(log);
    let segs = segments(&fs);
    let original = fs.contents(&segs[1]).unwrap();
    fs.corrupt(&segs[1], 0, b"XXXX").unwrap();
    // Without its index the whole segment is scanned.
    fs.remove_file(&segs[1].with_extension("idx")).unwrap();
    let (log, report) = open(&fs, cfg(450, interval()));
    assert_eq!(report.quarantined.len(), 1);
    assert_eq!(report.empty_segments_removed, 0);
    assert_eq!(
        fs.contents(&report.quarantined[0]).unwrap()[4..],
        original[4..]
    );
    assert_eq!(positions(&log).len(), 8);
}

/// A record of a newer format version (as a newer build would write) fails the open with a
/// typed error, and nothing in the directory changes.
#[test]
fn an_unknown_record_version_refuses_to_open_and_changes_nothing() {
    for (segment_index, offset) in [(1usize, 300u64), (2, 300)] {
        let fs = FaultFs::new();
        let (mut log, _) = open(&fs, cfg(450, interval()));
        fill(&mut log, 1, 12);
        log.sync().unwrap();
        drop(log);
        let segs = segments(&fs);
        // The version byte of a record (its CRC no longer matches either).
        fs.corrupt(&segs[segment_index], offset + 4, &[2]).unwrap();
        let before: Vec<_> = fs
            .files()
            .iter()
            .map(|p| (p.clone(), fs.contents(p)))
            .collect();
        match Log::open_in(fs.clone(), dir(), cfg(450, interval())) {
            Err(Error::UnknownVersion {
                path,
                offset: o,
                version: 2,
            }) => {
                assert_eq!(path, segs[segment_index]);
                assert_eq!(o, offset);
            }
            other => panic!("unexpected {:?}", other.map(|(_, r)| r)),
        }
        let after: Vec<_> = fs
            .files()
            .iter()
            .map(|p| (p.clone(), fs.contents(p)))
            .collect();
        assert_eq!(before, after);
    }
}

#[test]
fn segments_created_and_deleted_are_made_durable_in_the_directory() {
    let fs = FaultFs::new();
    let mut config = cfg(450, interval());
    config.retention.max_bytes = Some(450);
    let (mut log, _) = open(&fs, config);
    fill(&mut log, 1, 9); // rolls twice
    let dir_syncs = fs.stats().dir_syncs;
    assert_eq!(dir_syncs, 3, "one per segment created");
    let durable = log.sync().unwrap().durable_next;
    assert_eq!(durable, Some(at(1, 9)));
    // A crash keeps the third segment's entry: its records survive.
    drop(log);
    fs.crash(None);
    let (mut log, report) = open(&fs, config);
    assert_eq!(report.next, Some(at(1, 9)));
    assert_eq!(report.segments, 3);
    let before = fs.stats().dir_syncs;
    let r = log.enforce_retention(2000).unwrap();
    assert_eq!(r.segments, 2);
    assert_eq!(
        fs.stats().dir_syncs,
        before + 1,
        "deletions fsync the directory"
    );
    drop(log);
    fs.crash(None);
    assert_eq!(segments(&fs).len(), 1, "deleted segments stay deleted");
}

/// A power cut, with the last unsynced write torn at each of its sector boundaries: every
/// record reported durable survives, nothing durable is cut, and recovery says where the
/// durable log ends.
#[test]
fn a_power_cut_keeps_every_durable_record() {
    for tear in [None, Some(0), Some(1), Some(2), Some(3)] {
        let fs = FaultFs::new();
        let (mut log, _) = open(&fs, cfg(4096, interval()));
        let mut big = Vec::new();
        for i in 0..20u64 {
            log.append_at(at(3, i), 1, 1000 + i, &[i as u8; 300])
                .unwrap();
            if i == 11 {
                assert_eq!(log.sync().unwrap().durable_next, Some(at(3, 12)));
            }
        }
        big.extend(positions(&log));
        drop(log);
        fs.crash(tear);
        let (log, report) = open(&fs, cfg(4096, interval()));
        let got = positions(&log);
        assert!(got.len() >= 12, "{tear:?}: {} records", got.len());
        assert_eq!(got[..], big[..got.len()]);
        assert_eq!(report.next, got.last().map(|p| at(3, p.seq + 1)));
        for r in log.read_from(at(1, 0)) {
            let r = r.unwrap();
            assert_eq!(&r.payload[..], &[r.position.seq as u8; 300][..]);
        }
    }
}

#[test]
fn segment_names_still_parse_but_quarantined_ones_do_not() {
    let name = format!("{}.log", segment::stem(at(1, 4)));
    assert_eq!(segment::parse_name(&name), Some(at(1, 4)));
    assert_eq!(segment::parse_name(&format!("{name}.quarantined")), None);
}
