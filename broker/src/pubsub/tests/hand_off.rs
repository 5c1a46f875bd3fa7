//! A single-copy durable topic whose new owner cannot read the former owner's log
//! (`topic::hand_off`): the former owner holds acknowledged records this log lacks. While it
//! cannot be read, the new owner takes no publish (`Unavailable`) instead of numbering on
//! without them; once it can, the owner copies them first and numbers its publishes after
//! them, so a subscriber resuming from the start reads everything, in order, once. Once the
//! former owner is no longer asked (the hand-off window closed), or for a member that is not
//! the former owner, nothing is waited for.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use bytes::Bytes;
use starling_config::SlowSubscriberPolicy::Block;
use starling_proto::{ErrorCode, LogChunk, LogRead, Member, StartAt};
use tokio::sync::{Semaphore, mpsc};

use super::*;
use crate::durable::transfer::{LogPeers, PeerError, PeerFuture};
use crate::pubsub::ack::{AckItem, AckToken};
use crate::pubsub::topic::hand_off::FIRST_RETRY;

const TOPIC: &str = "ledger.t";
/// The former owner's stream (older than any the new owner draws).
const OLD_STREAM: u64 = 1 << 40;

/// Another member: its log of [`TOPIC`] (three events in two records), readable or not, the
/// topic's former owner or not.
struct FormerOwner {
    readable: AtomicBool,
    /// Among the members asked (the current list, or the previous one while the hand-off
    /// window lasts).
    listed: AtomicBool,
    /// The topic's former owner (the member the new owner must read).
    is_source: bool,
    reads: AtomicUsize,
    records: Bytes,
    next: Position,
}

impl FormerOwner {
    fn new(is_source: bool) -> FormerOwner {
        let mut records = Vec::new();
        for (seq, numbers) in [(0u64, vec![100u64, 101]), (2, vec![102])] {
            let position = Position {
                stream: OLD_STREAM,
                seq,
            };
            let payloads: Vec<Bytes> = numbers.iter().map(|n| payload(*n, 8)).collect();
            let mut frame = BytesMut::new();
            starling_proto::encode_event_batch(position.stream, seq, &payloads, &mut frame);
            starling_storage::record::encode(
                position,
                payloads.len() as u32,
                starling_storage::now_ms(),
                &frame,
                &mut records,
            );
        }
        FormerOwner {
            readable: AtomicBool::new(false),
            listed: AtomicBool::new(true),
            is_source,
            reads: AtomicUsize::new(0),
            records: Bytes::from(records),
            next: Position {
                stream: OLD_STREAM,
                seq: 3,
            },
        }
    }
}

impl LogPeers for FormerOwner {
    fn members(&self) -> Vec<Member> {
        if !self.listed.load(Ordering::SeqCst) {
            return Vec::new();
        }
        vec![Member {
            id: "former".into(),
            addr: "former:7400".into(),
        }]
    }

    fn source(&self, _: &str) -> Option<String> {
        (self.is_source && self.listed.load(Ordering::SeqCst)).then(|| "former".to_string())
    }

    fn read<'a>(&'a self, _: &'a Member, read: LogRead) -> PeerFuture<'a, LogChunk> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let readable = self.readable.load(Ordering::SeqCst);
        Box::pin(async move {
            if !readable {
                return Err(PeerError::Unreachable("no answer".to_string()));
            }
            // The whole log every time: records the owner holds already are skipped.
            Ok(LogChunk {
                request_id: read.request_id,
                next: Some(self.next),
                more: false,
                owner: false,
                records: self.records.clone(),
            })
        })
    }
}

/// Publishes message `n` as request `request_id`, acked (or refused) on `acks`.
async fn publish_acked(e: &Engine, request_id: u64, n: u64, acks: &mpsc::UnboundedSender<AckItem>) {
    let permits = Arc::new(Semaphore::new(1));
    let permit = permits.acquire_owned().await.expect("permit");
    e.topics.reserve(TOPIC).expect("under max_topics");
    let msg = TopicMsg {
        payloads: vec![payload(n, 8)],
        headers: Vec::new(),
        ack: Some(AckToken::new(request_id, 1, acks.clone(), permit)),
        origin: None,
        hold: None,
    };
    e.topics.publish(TOPIC, msg).await;
}

/// The answers so far: `Ok(request)` for an ack, `Err((request, code))` for a refusal.
fn answers(rx: &mut mpsc::UnboundedReceiver<AckItem>) -> Vec<Result<u64, (u64, ErrorCode)>> {
    let mut out = Vec::new();
    while let Ok((frame, _)) = rx.try_recv() {
        match frame {
            Frame::PublishAck(a) => out.push(Ok(a.request_id)),
            Frame::Error(e) => out.push(Err((e.request_id, e.code))),
            other => panic!("expected an ack or a refusal, got {other:?}"),
        }
    }
    out
}

/// Waits (in real time: replays read the log on blocking threads) until `wire` received at
/// least `n` events.
async fn wait_events(wire: &Wire, n: usize) -> Vec<u64> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got: Vec<u64> = wire.events().iter().map(|(_, p)| number(p)).collect();
        if got.len() >= n || std::time::Instant::now() > deadline {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A broker config making `ledger.>` durable under `dir`.
fn durable_config(dir: &std::path::Path) -> starling_config::BrokerConfig {
    let mut cfg = Profile::default().config();
    cfg.durable_topics = vec!["ledger.>".into()];
    cfg.storage_dir = Some(dir.to_path_buf());
    cfg
}

fn durable_engine(cfg: &starling_config::BrokerConfig, former: &Arc<FormerOwner>) -> Engine {
    Engine::with_logs(
        Setup::default(),
        cfg,
        Arc::clone(former) as Arc<dyn LogPeers>,
    )
}

#[tokio::test(start_paused = true)]
async fn a_new_owner_that_cannot_read_the_former_owner_takes_no_publish_until_it_can() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = durable_config(dir.path());
    let former = Arc::new(FormerOwner::new(true));
    let mut e = durable_engine(&cfg, &former);
    let (tx, mut rx) = mpsc::unbounded_channel();

    // The task starts as the owner; its catch-up cannot read the former owner.
    publish_acked(&e, 1, 0, &tx).await;
    e.flush(TOPIC).await;
    quiesce().await;
    assert!(
        former.reads.load(Ordering::SeqCst) >= 1,
        "the former owner was asked"
    );
    assert_eq!(
        answers(&mut rx),
        vec![Err((1, ErrorCode::Unavailable))],
        "refused, not numbered ahead of records the log lacks"
    );
    // Still unreadable at the first retry: still refused.
    tokio::time::sleep(FIRST_RETRY + Duration::from_millis(10)).await;
    quiesce().await;
    let reads_after_retry = former.reads.load(Ordering::SeqCst);
    assert!(reads_after_retry >= 2, "the catch-up was tried again");
    publish_acked(&e, 2, 1, &tx).await;
    e.flush(TOPIC).await;
    quiesce().await;
    assert_eq!(answers(&mut rx), vec![Err((2, ErrorCode::Unavailable))]);

    // Readable again: the next retry copies its records, and publishes follow them.
    former.readable.store(true, Ordering::SeqCst);
    tokio::time::sleep(FIRST_RETRY * 2 + Duration::from_millis(10)).await;
    quiesce().await;
    assert!(former.reads.load(Ordering::SeqCst) > reads_after_retry);
    publish_acked(&e, 3, 2, &tx).await;
    e.flush(TOPIC).await;
    quiesce().await;
    assert_eq!(answers(&mut rx), vec![Ok(3)]);

    let (_sub, wire, _) = e
        .subscribe(
            TOPIC,
            Block,
            64,
            StartAt::Position(Position { stream: 1, seq: 0 }),
            false,
        )
        .await;
    let got = wait_events(&wire, 4).await;
    assert_eq!(
        got,
        vec![100, 101, 102, 2],
        "the former owner's records, then the one publish taken, once each"
    );
    let positions: Vec<Position> = wire.events().iter().map(|(p, _)| *p).collect();
    assert!(
        positions[3].stream > OLD_STREAM,
        "numbered in a new stream: {positions:?}"
    );
}

/// A member that left and cannot be reached is waited for only while the hand-off window
/// lasts: once it is no longer among the members asked, the owner numbers on (its records,
/// if it held any, are not in this log: the single-copy limit, docs/durability.md).
#[tokio::test(start_paused = true)]
async fn a_member_that_stays_unreachable_is_waited_for_until_it_is_no_longer_asked() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = durable_config(dir.path());
    let former = Arc::new(FormerOwner::new(true));
    let e = durable_engine(&cfg, &former);
    let (tx, mut rx) = mpsc::unbounded_channel();
    publish_acked(&e, 1, 0, &tx).await;
    e.flush(TOPIC).await;
    quiesce().await;
    assert_eq!(answers(&mut rx), vec![Err((1, ErrorCode::Unavailable))]);
    // The hand-off window closes: the member is no longer asked.
    former.listed.store(false, Ordering::SeqCst);
    tokio::time::sleep(FIRST_RETRY + Duration::from_millis(10)).await;
    quiesce().await;
    publish_acked(&e, 2, 1, &tx).await;
    e.flush(TOPIC).await;
    quiesce().await;
    assert_eq!(answers(&mut rx), vec![Ok(2)]);
}

/// A member that cannot be read but is not the topic's former owner (nor a claimant) holds
/// nothing this log lacks: it is not waited for.
#[tokio::test(start_paused = true)]
async fn an_unreadable_member_that_is_not_the_former_owner_is_not_waited_for() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = durable_config(dir.path());
    let other = Arc::new(FormerOwner::new(false));
    let e = durable_engine(&cfg, &other);
    let (tx, mut rx) = mpsc::unbounded_channel();
    publish_acked(&e, 1, 0, &tx).await;
    e.flush(TOPIC).await;
    quiesce().await;
    assert!(
        other.reads.load(Ordering::SeqCst) >= 1,
        "the member was asked"
    );
    assert_eq!(answers(&mut rx), vec![Ok(1)]);
}
