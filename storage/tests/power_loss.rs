//! Power loss, as a property: random sequences of appends, syncs, failed fsyncs, a full disk
//! and crashes (anywhere: between operations, or inside one, through `FaultFs::freeze_after`;
//! the last unsynced write optionally torn at a 512-byte boundary), on the fault-injecting
//! file layer. After every crash the log is reopened and checked:
//!
//! - every record reported durable (an `Always` append that returned, or one a successful
//!   sync covered) is read back, with its position and bytes: recovery never deletes or
//!   hides a synced record (nothing is quarantined: a power cut only tears the unsynced tail);
//! - every record read back is one that was appended there, whole, in position order;
//! - the recovered end (`RecoveryReport::next`) is past every durable record, and numbering
//!   on as the broker does (a new stream above the recovered end and above every stream drawn
//!   before) never gives out a position twice.
//!
//! `PROPTEST_CASES` sets the number of cases (default 40, a few seconds).
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use proptest::prelude::*;
use starling_storage::fault::FaultFs;
use starling_storage::{Error, FsyncPolicy, Log, LogConfig, Position, RetentionPolicy};

#[derive(Debug, Clone)]
enum Op {
    /// Appends a record of `events` events and `len` payload bytes.
    Append { events: u32, len: usize },
    /// A view's sync (the group commit's).
    Sync,
    /// The next data fsync fails.
    FailFsync,
    /// The disk holds only this many more bytes (`None`: no limit).
    Space(Option<u64>),
    /// The machine dies after this many more changes to the files.
    Freeze(u64),
    /// Power cut, the last unsynced write torn at its `tear`-th sector boundary (if any).
    Crash { tear: Option<usize> },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => (1u32..4, 0usize..700).prop_map(|(events, len)| Op::Append { events, len }),
        4 => Just(Op::Sync),
        1 => Just(Op::FailFsync),
        1 => proptest::option::of(0u64..900).prop_map(Op::Space),
        1 => (0u64..8).prop_map(Op::Freeze),
        2 => proptest::option::of(0usize..4).prop_map(|tear| Op::Crash { tear }),
    ]
}

fn config(always: bool) -> LogConfig {
    LogConfig {
        segment_bytes: 1500,
        index_interval_bytes: 400,
        max_record_bytes: 4096,
        fsync: if always {
            FsyncPolicy::Always
        } else {
            FsyncPolicy::Interval(Duration::from_secs(3600))
        },
        retention: RetentionPolicy::default(),
    }
}

/// The payload of the record at `p`: says where it belongs.
fn payload(p: Position, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    let mut x = p.stream.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ p.seq;
    for _ in 0..len {
        x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        v.push((x >> 56) as u8);
    }
    v
}

fn key(p: Position) -> (u64, u64) {
    (p.stream, p.seq)
}

/// What the test knows.
struct Model {
    /// Every record an append returned for: position → (events, payload length).
    issued: BTreeMap<(u64, u64), (u32, usize)>,
    /// Records reported durable.
    durable: Vec<(Position, u32, usize)>,
    /// Appended, not yet reported durable (`Interval`).
    pending: Vec<(Position, u32, usize)>,
    /// The largest stream id drawn so far.
    stream: u64,
    /// Where the next append goes.
    next: Position,
}

impl Model {
    /// Numbers on after an open as the broker does: a new stream above the recovered end and
    /// above every stream drawn before (the broker's ids are clock-based).
    fn reopened(&mut self, recovered: Option<Position>) {
        self.stream = self.stream.max(recovered.map_or(0, |p| p.stream)) + 1;
        self.next = Position {
            stream: self.stream,
            seq: 0,
        };
        self.pending.clear();
    }
}

fn check_recovered(
    log: &Log<FaultFs>,
    report: &starling_storage::RecoveryReport,
    model: &Model,
) -> Result<(), TestCaseError> {
    prop_assert!(
        report.quarantined.is_empty(),
        "a power cut quarantined {:?}",
        report.quarantined
    );
    prop_assert!(log.failure().is_none());
    let mut read = BTreeMap::new();
    let mut last: Option<Position> = None;
    for r in log.read_from(Position { stream: 1, seq: 0 }) {
        let r = r.map_err(|e| TestCaseError::fail(format!("read: {e}")))?;
        prop_assert!(last.is_none_or(|l| key(r.position) > key(l)), "order");
        last = Some(r.position);
        let issued = model.issued.get(&key(r.position));
        prop_assert_eq!(
            issued.copied(),
            Some((r.events, r.payload.len())),
            "record at {:?} was never appended",
            r.position
        );
        prop_assert!(
            r.payload[..] == payload(r.position, r.payload.len())[..],
            "bytes"
        );
        read.insert(key(r.position), r.events);
    }
    for (p, events, _) in &model.durable {
        prop_assert_eq!(
            read.get(&key(*p)),
            Some(events),
            "durable record at {:?} lost",
            p
        );
        let end = Position {
            stream: p.stream,
            seq: p.seq + u64::from(*events),
        };
        prop_assert!(
            report.next.is_some_and(|n| key(n) >= key(end)),
            "recovered end {:?} before durable {:?}",
            report.next,
            end
        );
    }
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

fn run(ops: Vec<Op>, always: bool) -> Result<(), TestCaseError> {
    let fs = FaultFs::new();
    let dir = PathBuf::from("/data/topic");
    let cfg = config(always);
    let (mut log, report) = Log::open_in(fs.clone(), &dir, cfg).unwrap();
    let mut model = Model {
        issued: BTreeMap::new(),
        durable: Vec::new(),
        pending: Vec::new(),
        stream: 0,
        next: Position { stream: 1, seq: 0 },
    };
    model.reopened(report.next);
    let crash = |log: Log<FaultFs>, tear: Option<usize>, model: &mut Model| {
        drop(log);
        fs.crash(tear);
        fs.set_capacity(None);
        let (log, report) = Log::open_in(fs.clone(), &dir, cfg).unwrap();
        check_recovered(&log, &report, model)?;
        model.reopened(report.next);
        Ok::<_, TestCaseError>(log)
    };
    for op in ops.into_iter().chain([Op::Crash { tear: None }]) {
        match op {
            Op::Append { events, len } => {
                let p = model.next;
                let body = payload(p, len);
                match log.append_at(p, events, 1000, &body) {
                    Ok(a) => {
                        let end = key(a.next);
                        // Never a position given out before.
                        let overlap = model.issued.range(..end).next_back().is_some_and(
                            |(&(s, q), &(e, _))| s == p.stream && q + u64::from(e) > p.seq,
                        );
                        prop_assert!(!overlap, "position {:?} reused", p);
                        model.issued.insert(key(p), (events, len));
                        if a.durable {
                            model.durable.push((p, events, len));
                        } else {
                            model.pending.push((p, events, len));
                        }
                        model.next = a.next;
                    }
                    Err(Error::Failed(_)) => {}
                    Err(e) if e.is_no_space() => {}
                    Err(Error::Io { .. }) => {} // the machine is down
                    Err(e) => prop_assert!(false, "unexpected append error {e}"),
                }
            }
            Op::Sync => {
                if let Ok(s) = log.view().sync() {
                    let (done, rest): (Vec<_>, Vec<_>) =
                        model.pending.drain(..).partition(|(p, e, _)| {
                            s.covers(Position {
                                stream: p.stream,
                                seq: p.seq + u64::from(*e),
                            })
                        });
                    model.durable.extend(done);
                    model.pending = rest;
                }
            }
            Op::FailFsync => fs.fail_fsyncs(1),
            Op::Space(room) => {
                let used: u64 = fs
                    .files()
                    .iter()
                    .filter_map(|p| fs.contents(p))
                    .map(|c| c.len() as u64)
                    .sum();
                fs.set_capacity(room.map(|r| used + r));
            }
            Op::Freeze(n) => fs.freeze_after(n),
            Op::Crash { tear } => log = crash(log, tear, &mut model)?,
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Under `Interval` (how the broker runs the log: the group commit syncs).
    #[test]
    fn power_loss_keeps_every_synced_record_interval(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops, false)?;
    }

    /// Under `Always` (every append fsyncs before it returns).
    #[test]
    fn power_loss_keeps_every_synced_record_always(ops in proptest::collection::vec(op(), 1..80)) {
        run(ops, true)?;
    }
}
