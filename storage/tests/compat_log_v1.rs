//! On-disk compatibility with log record format version 1 (and index version 1), as released.
//!
//! `tests/fixtures/log-v1/` is a small log directory written once by this crate's release
//! that introduced the format (three streams, several segments with their `.idx` files) and
//! `expected.txt`, what was appended to it, one record a line:
//! `stream seq events timestamp_ms payload-hex`. It is never regenerated once released; this
//! test holds the disk rule of `docs/releases.md`: the current storage crate opens every
//! released format version without repairing anything and reads back exactly what was
//! written. `UPDATE_FIXTURES=1` writes the fixture (deterministic: the same bytes while the
//! format is unchanged). Never commit a rewrite of a released fixture: a new format version
//! gets a new fixture directory and test next to this one, and this one keeps passing for as
//! long as the policy keeps the version readable.
//!
//! ```sh
//! UPDATE_FIXTURES=1 cargo test -p starling-storage --test compat_log_v1 -- --ignored write_fixture
//! ```
//!
//! It also holds the downgrade half of the rule: a record of a format version this build does
//! not know fails the open ([`Error::UnknownVersion`]) rather than being cut as a torn tail.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test crate

use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use starling_storage::{Error, FsyncPolicy, Log, LogConfig, Position, Record, RetentionPolicy};
use tempfile::TempDir;

/// The configuration the fixture was written with (small segments, so it has several).
fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1024,
        index_interval_bytes: 256,
        max_record_bytes: 64 * 1024,
        fsync: FsyncPolicy::Never,
        retention: RetentionPolicy::default(),
    }
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/log-v1")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

fn line(r: &Record) -> String {
    format!(
        "{} {} {} {} {}",
        r.position.stream,
        r.position.seq,
        r.events,
        r.timestamp_ms,
        hex(&r.payload)
    )
}

/// The records the fixture holds: EventBatch frames (what a broker appends), in three
/// streams, events per batch 1..=4, payloads of varying length, timestamps non-decreasing.
fn records() -> Vec<Record> {
    let mut out = Vec::new();
    let mut ts = 1_764_000_000_000u64;
    for (stream, batches) in [(3u64, 12u64), (7, 9), (0x1_0000_0001, 6)] {
        let mut seq = 0u64;
        for b in 0..batches {
            let events: Vec<Bytes> = (0..=(b % 4))
                .map(|e| {
                    Bytes::from(format!(
                        "s{stream}-b{b}-e{e}-{}",
                        "x".repeat((b * 7 % 40) as usize)
                    ))
                })
                .collect();
            let mut payload = BytesMut::new();
            starling_proto::encode_event_batch(stream, seq, &events, &mut payload);
            let n = u32::try_from(events.len()).unwrap();
            out.push(Record {
                position: Position { stream, seq },
                events: n,
                timestamp_ms: ts,
                payload: payload.freeze(),
            });
            seq += u64::from(n);
            ts += 1 + b % 3;
        }
    }
    out
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        fs::copy(&path, to.join(path.file_name().unwrap())).unwrap();
    }
}

/// The fixture's log files (segments and indexes) with their bytes, sorted by name.
fn log_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log" || e == "idx"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
#[ignore = "writes the fixture; run with UPDATE_FIXTURES=1 only when a format version is introduced"]
fn write_fixture() {
    if std::env::var_os("UPDATE_FIXTURES").is_none() {
        return;
    }
    let dir = fixture_dir();
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    let (mut log, _) = Log::open(&dir, config()).unwrap();
    let records = records();
    let mut expected = String::new();
    for r in &records {
        log.append_at(r.position, r.events, r.timestamp_ms, &r.payload)
            .unwrap();
        expected.push_str(&line(r));
        expected.push('\n');
    }
    log.sync().unwrap();
    drop(log);
    fs::write(dir.join("expected.txt"), expected).unwrap();
}

#[test]
fn released_v1_log_opens_and_reads_back_identically() {
    let fixture = fixture_dir();
    let expected = fs::read_to_string(fixture.join("expected.txt")).unwrap();
    let before = log_files(&fixture);
    assert!(
        before.iter().filter(|(n, _)| n.ends_with(".log")).count() >= 3,
        "several segments"
    );

    // Open a copy: an open may write (index repair), and the fixture must stay as released.
    let tmp = TempDir::new().unwrap();
    copy_dir(&fixture, tmp.path());
    let (log, report) = Log::open(tmp.path(), config()).unwrap();
    assert_eq!(report.truncated_segments, 0, "{report:?}");
    assert_eq!(report.truncated_bytes, 0, "{report:?}");
    assert!(report.quarantined.is_empty(), "{report:?}");
    assert_eq!(
        report.indexes_rebuilt, 0,
        "a released index is read as is: {report:?}"
    );
    assert_eq!(report.empty_segments_removed, 0, "{report:?}");

    let got: Vec<String> = log
        .read_from(Position { stream: 0, seq: 0 })
        .map(|r| line(&r.unwrap()))
        .collect();
    let want: Vec<&str> = expected.lines().collect();
    assert_eq!(got, want);
    assert_eq!(report.records, want.len() as u64);

    // The last record's end is where appends continue.
    let last: Vec<&str> = want.last().unwrap().split(' ').collect();
    let (stream, seq, events): (u64, u64, u64) = (
        last[0].parse().unwrap(),
        last[1].parse().unwrap(),
        last[2].parse().unwrap(),
    );
    assert_eq!(
        log.next_position(),
        Some(Position {
            stream,
            seq: seq + events
        })
    );

    // Reads by time use the released index: from the 10th record's timestamp on.
    let tenth: Vec<&str> = want[9].split(' ').collect();
    let from_time: Vec<String> = log
        .read_from_time(tenth[3].parse().unwrap())
        .map(|r| line(&r.unwrap()))
        .collect();
    let first_at_time = want
        .iter()
        .position(|l| l.split(' ').nth(3) == Some(tenth[3]))
        .unwrap();
    assert_eq!(from_time, want[first_at_time..]);

    // Nothing in the released files was rewritten.
    drop(log);
    assert_eq!(log_files(tmp.path()), before);
    // And the records' payloads are the EventBatch frames the broker appends.
    for l in &want {
        let payload = unhex(l.split(' ').nth(4).unwrap());
        assert_eq!(payload[0], starling_proto::FRAMING_VERSION);
    }
}

#[test]
fn a_record_of_a_newer_format_version_fails_the_open() {
    let tmp = TempDir::new().unwrap();
    copy_dir(&fixture_dir(), tmp.path());
    // The last segment's first record, as a newer build would write it: version byte 2.
    let (name, mut bytes) = log_files(tmp.path())
        .into_iter()
        .rfind(|(n, _)| n.ends_with(".log"))
        .unwrap();
    assert_eq!(&bytes[0..4], b"STLG");
    assert_eq!(bytes[4], starling_storage::record::VERSION);
    bytes[4] = 2;
    fs::write(tmp.path().join(&name), &bytes).unwrap();
    match Log::open(tmp.path(), config()) {
        Err(Error::UnknownVersion {
            version: 2,
            offset: 0,
            ..
        }) => {}
        Err(e) => panic!("wrong refusal: {e}"),
        Ok(_) => panic!("a record of format version 2 was accepted"),
    }
    // The refused open cut nothing.
    assert_eq!(fs::read(tmp.path().join(&name)).unwrap(), bytes);
}
