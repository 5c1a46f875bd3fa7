//! Durable logs across owner changes: copying what a topic's new owner lacks from the other
//! members' logs of the topic, before it numbers anything (see `docs/architecture.md`,
//! "Durable topics across owner changes").
//!
//! - [`read_page`]: one page of a log for another member (`LogRead` → `LogChunk`): whole
//!   records, in the storage's own record encoding, so one format is decoded and CRC-checked
//!   by one decoder on disk and on the wire.
//! - [`decode_page`]: a page back into records (bytes from the network: bounded, checked).
//! - [`step`]: whether a copied record extends the owner's log, is already in it, or does not
//!   line up (pure).
//! - [`catch_up`]: the owner's side: ask every other member (current and previous) for what
//!   follows its own log, take the member whose log reaches furthest first, append each record
//!   with its original position and time.
//! - [`LogPeers`]: how the topic task reaches the other members, implemented by the cluster
//!   (`cluster::log_peers`), so the topic task never imports the cluster.
//!
//! Stream ids grow with their start time and an owner draws a new one after every owner
//! change, so the member that owned the topic last holds every record the others hold
//! (it copied them before numbering); taking its log first and appending only records past
//! the owner's own end keeps the log ordered without merging.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use starling_proto::{LogChunk, LogRead, Member, Position};
use starling_storage::record::{self, key};
use starling_storage::{LogView, Malformed, Record};

use super::commit::Waiter;
use super::log::DurableLog;

/// Most record bytes asked for per page (a page also stays under the peer's frame limit).
pub const PAGE_BYTES: u32 = 1024 * 1024;

/// How often a member that still owns the topic in its own view is asked again.
pub const SETTLE_POLL: Duration = Duration::from_millis(100);
/// Longest a new owner waits for the other members to see the change.
pub const SETTLE_LIMIT: Duration = Duration::from_secs(15);

/// Why a member's log could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// The member could not be reached (no link, or the link failed).
    #[error("unreachable: {0}")]
    Unreachable(String),
    /// The member answered with an error.
    #[error("{0}")]
    Refused(String),
}

/// A future returned by [`LogPeers`].
pub type PeerFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, PeerError>> + Send + 'a>>;

/// How a topic's owner reaches the other members' logs.
pub trait LogPeers: Send + Sync {
    /// The members other than this broker that may hold a log of a topic: the current ones
    /// and, while the hand-off window lasts, the previous ones.
    fn members(&self) -> Vec<Member>;

    /// Reads one page of a log at `member`.
    fn read<'a>(&'a self, member: &'a Member, read: LogRead) -> PeerFuture<'a, LogChunk>;

    /// The member whose log of `topic` this broker must have read before it numbers the
    /// topic's publishes (`pubsub::topic::hand_off`): the topic's owner before the last
    /// membership change, or in this broker's absence, while the hand-off window is open.
    fn source(&self, topic: &str) -> Option<String>;
}

/// No other members (a broker outside a cluster).
pub struct NoPeers;

impl LogPeers for NoPeers {
    fn members(&self) -> Vec<Member> {
        Vec::new()
    }

    fn read<'a>(&'a self, _: &'a Member, _: LogRead) -> PeerFuture<'a, LogChunk> {
        Box::pin(async { Err(PeerError::Unreachable("no cluster".to_string())) })
    }

    fn source(&self, _: &str) -> Option<String> {
        None
    }
}

/// One page of a log, as sent to another member.
#[derive(Debug, Default)]
pub struct Page {
    /// Whole records, encoded, concatenated.
    pub records: Vec<u8>,
    /// Records in the page.
    pub count: u64,
    /// Records remain after the page.
    pub more: bool,
}

/// Reads the records of `view` from `from` on (`None`: the whole log), whole records up to
/// about `max_bytes` (at least one); blocking file I/O.
pub fn read_page(
    view: &LogView,
    from: Option<Position>,
    max_bytes: usize,
) -> Result<Page, starling_storage::Error> {
    let start = from.unwrap_or(Position { stream: 0, seq: 0 });
    let mut page = Page::default();
    for rec in view.copy_from(start) {
        let rec = rec?;
        if page.count > 0 && page.records.len() + rec.payload.len() > max_bytes {
            page.more = true;
            break;
        }
        record::encode(
            rec.position,
            rec.events,
            rec.timestamp_ms,
            &rec.payload,
            &mut page.records,
        );
        page.count += 1;
    }
    Ok(page)
}

/// Decodes a page of records received from another member; refuses a torn, oversized or
/// corrupt record (CRC) rather than taking part of it.
pub fn decode_page(mut bytes: &[u8], max_payload: u32) -> Result<Vec<Record>, Malformed> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let (header, payload) = record::decode(bytes, max_payload)?;
        let len = usize::try_from(header.record_len()).map_err(|_| Malformed::Incomplete)?;
        out.push(Record {
            position: header.position,
            events: header.events,
            timestamp_ms: header.timestamp_ms,
            payload: Bytes::copy_from_slice(payload),
        });
        bytes = bytes.get(len..).ok_or(Malformed::Incomplete)?;
    }
    Ok(out)
}

/// What to do with a copied record, given the owner's log end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// It extends the log: append it.
    Take,
    /// The log already holds it.
    Skip,
    /// It neither follows the log's end nor starts a later stream (a gap, or a record that
    /// straddles the end): the rest of that member's log is not taken.
    Misaligned,
}

/// Where a record at `position` of `events` events stands against a log ending at `next`.
pub fn step(next: Option<Position>, position: Position, events: u32) -> Step {
    let Some(next) = next else {
        return Step::Take;
    };
    let end = Position {
        stream: position.stream,
        seq: position.seq.saturating_add(u64::from(events)),
    };
    if key(end) <= key(next) {
        Step::Skip
    } else if position == next || position.stream > next.stream {
        Step::Take
    } else {
        Step::Misaligned
    }
}

/// What a catch-up copied.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CaughtUp {
    /// Records appended.
    pub records: u64,
    /// Members whose logs were read to their end.
    pub read: Vec<String>,
    /// Members whose logs could not be read (unreachable or refusing): this log may lack
    /// their records.
    pub unread: Vec<String>,
}

/// Why copying from one member stopped.
#[derive(Debug)]
enum CopyStop {
    /// A page could not be read.
    Read(PeerError),
    /// What it sent does not fit this log (a bad page, a record that does not follow):
    /// trying again would meet the same.
    Unusable(String),
    /// Appending a copied record to this log failed (a full or failing volume).
    Local(String),
}

impl std::fmt::Display for CopyStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CopyStop::Read(e) => write!(f, "{e}"),
            CopyStop::Unusable(why) => f.write_str(why),
            CopyStop::Local(why) => write!(f, "appending here: {why}"),
        }
    }
}

/// Copies into `log` what the other members' logs of `topic` hold past its end: first the
/// member whose log reaches furthest, then the others (usually nothing left). `also` is a
/// member to ask besides [`LogPeers::members`] (one that claimed to hold a log).
///
/// A member that still owns the topic in its own view (it has not seen the membership change
/// yet) may still append to its log, so it is asked again every [`SETTLE_POLL`] until it
/// has seen the change, for at most [`SETTLE_LIMIT`], or until `still_owner` says this
/// broker no longer owns the topic itself; only then is anything copied. Once a member has
/// seen the change it refuses the topic's batches (see the topic task), so its log stops
/// where this copy reads it.
pub async fn catch_up<W: Waiter + std::fmt::Debug>(
    log: &mut DurableLog<W>,
    topic: &str,
    peers: &dyn LogPeers,
    also: Option<Member>,
    still_owner: &(dyn Fn() -> bool + Send + Sync),
) -> CaughtUp {
    let mut members = peers.members();
    if let Some(m) = also
        && !members.iter().any(|k| k.id == m.id)
    {
        members.push(m);
    }
    let mut done = CaughtUp::default();
    if members.is_empty() {
        return done;
    }
    // The first page of each member, which also tells where each member's log ends.
    let mut firsts = Vec::with_capacity(members.len());
    for member in members {
        match settled_first_page(log, topic, peers, &member, still_owner).await {
            Ok(chunk) => firsts.push((member, chunk)),
            Err(why) => {
                done.unread.push(member.id.clone());
                tracing::warn!(topic, member = %member.id, error = %why, "durable hand-off: cannot read a member's log");
            }
        }
    }
    firsts.sort_by_key(|(_, chunk)| std::cmp::Reverse(chunk.next.map(key)));
    for (member, chunk) in firsts {
        match copy_from(log, topic, peers, &member, chunk).await {
            Ok(n) => {
                done.records += n;
                done.read.push(member.id.clone());
            }
            Err(CopyStop::Read(why)) => {
                done.unread.push(member.id.clone());
                tracing::warn!(topic, member = %member.id, error = %why, "durable hand-off: copying a member's log stopped");
            }
            Err(why @ CopyStop::Local(_)) => {
                done.unread.push(member.id.clone());
                tracing::warn!(topic, member = %member.id, error = %why, "durable hand-off: copying a member's log stopped");
            }
            Err(why @ CopyStop::Unusable(_)) => {
                tracing::warn!(topic, member = %member.id, error = %why, "durable hand-off: copying a member's log stopped");
            }
        }
    }
    if done.records > 0 {
        tracing::info!(topic, records = done.records, next = ?log.next_position(), "durable hand-off: copied the records this owner lacked");
    }
    done
}

/// The first page of `member`'s log once it no longer owns the topic in its own view (or
/// after [`SETTLE_LIMIT`], or once this broker is no longer the owner).
async fn settled_first_page<W: Waiter + std::fmt::Debug>(
    log: &DurableLog<W>,
    topic: &str,
    peers: &dyn LogPeers,
    member: &Member,
    still_owner: &(dyn Fn() -> bool + Send + Sync),
) -> Result<LogChunk, PeerError> {
    let deadline = tokio::time::Instant::now() + SETTLE_LIMIT;
    loop {
        let chunk = first_page(log, topic, peers, member).await?;
        if !chunk.owner || !still_owner() {
            return Ok(chunk);
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(topic, member = %member.id, "durable hand-off: a member still owns the topic in its view; copying its log as it is");
            return Ok(chunk);
        }
        tokio::time::sleep(SETTLE_POLL).await;
    }
}

async fn first_page<W: Waiter + std::fmt::Debug>(
    log: &DurableLog<W>,
    topic: &str,
    peers: &dyn LogPeers,
    member: &Member,
) -> Result<LogChunk, PeerError> {
    let read = LogRead {
        request_id: 1,
        topic: topic.to_string(),
        from: log.next_position(),
        max_bytes: PAGE_BYTES,
    };
    peers.read(member, read).await
}

/// Appends `chunk` and the pages after it; returns the records appended.
async fn copy_from<W: Waiter + std::fmt::Debug>(
    log: &mut DurableLog<W>,
    topic: &str,
    peers: &dyn LogPeers,
    member: &Member,
    mut chunk: LogChunk,
) -> Result<u64, CopyStop> {
    let mut copied = 0;
    loop {
        let records = decode_page(&chunk.records, log.max_record_bytes())
            .map_err(|e| CopyStop::Unusable(format!("bad page: {e}")))?;
        let Some(last) = records.last().map(Record::end) else {
            return Ok(copied);
        };
        for rec in records {
            match step(log.next_position(), rec.position, rec.events) {
                Step::Take => {
                    log.append_copied(&rec)
                        .map_err(|e| CopyStop::Local(e.to_string()))?;
                    copied += 1;
                }
                Step::Skip => {}
                Step::Misaligned => {
                    return Err(CopyStop::Unusable(format!(
                        "record at {:?} does not follow this log's end {:?}",
                        rec.position,
                        log.next_position()
                    )));
                }
            }
        }
        if !chunk.more {
            return Ok(copied);
        }
        let read = LogRead {
            request_id: 1,
            topic: topic.to_string(),
            from: Some(last),
            max_bytes: PAGE_BYTES,
        };
        chunk = peers.read(member, read).await.map_err(CopyStop::Read)?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(stream: u64, seq: u64) -> Position {
        Position { stream, seq }
    }

    #[test]
    fn steps_follow_the_log_end() {
        assert_eq!(step(None, at(5, 10), 3), Step::Take, "empty log");
        assert_eq!(step(Some(at(5, 10)), at(5, 10), 3), Step::Take);
        assert_eq!(step(Some(at(5, 10)), at(5, 7), 3), Step::Skip, "held");
        assert_eq!(
            step(Some(at(5, 10)), at(4, 70), 3),
            Step::Skip,
            "older stream"
        );
        assert_eq!(
            step(Some(at(5, 10)), at(6, 40), 3),
            Step::Take,
            "a later stream may start anywhere"
        );
        assert_eq!(step(Some(at(5, 10)), at(5, 12), 3), Step::Misaligned, "gap");
        assert_eq!(
            step(Some(at(5, 10)), at(5, 8), 3),
            Step::Misaligned,
            "straddles the end"
        );
    }

    #[test]
    fn pages_round_trip_and_refuse_damage() {
        let mut buf = Vec::new();
        record::encode(at(1, 0), 2, 10, b"ab", &mut buf);
        record::encode(at(1, 2), 1, 11, b"c", &mut buf);
        let recs = decode_page(&buf, 1024).unwrap();
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].position, at(1, 2));
        assert_eq!(&recs[1].payload[..], b"c");
        assert_eq!(recs[1].timestamp_ms, 11);
        // A torn page and a flipped bit are refused whole.
        assert!(decode_page(&buf[..buf.len() - 1], 1024).is_err());
        let mut flipped = buf.clone();
        let last = flipped.len() - 5;
        flipped[last] ^= 1;
        assert!(decode_page(&flipped, 1024).is_err());
        // A payload over the limit is refused before it is read.
        assert!(decode_page(&buf, 1).is_err());
        assert!(decode_page(&[], 1024).unwrap().is_empty());
    }

    proptest::proptest! {
        /// Bytes from the network never panic the decoder, and a page of whole records comes
        /// back as it was encoded, or not at all once cut anywhere.
        #[test]
        fn pages_from_the_network_decode_whole_or_not_at_all(
            garbage in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256),
            recs in proptest::collection::vec(
                (1..u64::MAX, 0..u64::MAX / 2, 1..1000u32, proptest::prelude::any::<u64>(),
                 proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)),
                1..6,
            ),
            cut in proptest::prelude::any::<proptest::sample::Index>(),
        ) {
            let _ = decode_page(&garbage, 1024);
            let mut buf = Vec::new();
            for (stream, seq, events, ts, payload) in &recs {
                record::encode(at(*stream, *seq), *events, *ts, payload, &mut buf);
            }
            let back = decode_page(&buf, 1024).unwrap();
            proptest::prop_assert_eq!(back.len(), recs.len());
            for (got, (stream, seq, events, ts, payload)) in back.iter().zip(&recs) {
                proptest::prop_assert_eq!(got.position, at(*stream, *seq));
                proptest::prop_assert_eq!(got.events, *events);
                proptest::prop_assert_eq!(got.timestamp_ms, *ts);
                proptest::prop_assert_eq!(&got.payload[..], &payload[..]);
            }
            let cut = cut.index(buf.len());
            if cut > 0 {
                // Cut inside the last record, or at a record boundary: never a partial record.
                if let Ok(part) = decode_page(&buf[..cut], 1024) {
                    proptest::prop_assert!(part.len() < recs.len());
                }
            }
        }
    }
}
