//! Property test of the durable consumer's state machine (`starling_pubsub::consumer`): random
//! schedules of reads, deliveries, acks, naks, in-progress, terms, member joins and deaths,
//! clock advances and restarts (snapshot, then a new state reading the log again from its
//! floor), against a reference record of every message's fate. Invariants: no message is acked
//! twice; every message read is acked, termed, dead-lettered, or still pending (or unread
//! again since a restart); nothing before the ack floor is unresolved; no delivery past
//! `max_deliver`; deliveries go only to members that are joined.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use starling_proto::Position;
use starling_pubsub::consumer::{AckOp, AckOutcome, Action, ConsumerState, Offered, Policy};

#[derive(Debug, Clone)]
enum Op {
    /// Append one message to the log and let the consumer read what it can.
    Publish,
    Join(u64),
    Leave(u64),
    Advance(u64),
    /// A member answers the `idx`-th message it holds (mod how many).
    Answer(u64, usize, u8, u64),
    /// Answer a random (perhaps resolved) message from any member.
    Stray(u64, u64, u8),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => Just(Op::Publish),
        1 => (0u64..3).prop_map(Op::Join),
        1 => (0u64..3).prop_map(Op::Leave),
        3 => (0u64..150).prop_map(Op::Advance),
        5 => (0u64..3, 0usize..8, 0u8..4, 0u64..40).prop_map(|(m, i, k, d)| Op::Answer(m, i, k, d)),
        1 => (0u64..3, 0u64..40, 0u8..4).prop_map(|(m, s, k)| Op::Stray(m, s, k)),
        1 => Just(Op::Restart),
    ]
}

fn ack_op(kind: u8, delay: u64) -> AckOp {
    match kind {
        0 => AckOp::Ack,
        1 => AckOp::Nak {
            delay_ms: delay.is_multiple_of(2).then_some(delay),
        },
        2 => AckOp::InProgress,
        _ => AckOp::Term,
    }
}

/// The log is one stream of 7 then, after every restart, a new stream (as the broker numbers
/// in a new stream after opening its log).
struct World {
    log: Vec<Position>,
    stream: u64,
    next_seq: u64,
    policy: Policy,
    state: ConsumerState,
    now: u64,
    members: BTreeSet<u64>,
    /// Who holds which message (from the Deliver actions), by the model.
    held: BTreeMap<(u64, u64), u64>,
    acked: BTreeSet<(u64, u64)>,
    termed: BTreeSet<(u64, u64)>,
    dead: BTreeSet<(u64, u64)>,
    deliveries: BTreeMap<(u64, u64), u32>,
}

fn k(p: Position) -> (u64, u64) {
    (p.stream, p.seq)
}

impl World {
    fn new(policy: Policy) -> World {
        let start = Position { stream: 7, seq: 0 };
        World {
            log: Vec::new(),
            stream: 7,
            next_seq: 0,
            state: ConsumerState::new(policy.clone(), start),
            policy,
            now: 0,
            members: BTreeSet::new(),
            held: BTreeMap::new(),
            acked: BTreeSet::new(),
            termed: BTreeSet::new(),
            dead: BTreeSet::new(),
            deliveries: BTreeMap::new(),
        }
    }

    /// Reads the log from the consumer's cursor while its window has room, as the broker does.
    fn read(&mut self) {
        let cursor = k(self.state.cursor());
        for p in self.log.iter().copied().filter(|p| k(*p) >= cursor) {
            match self.state.offer(p, self.now) {
                Ok(Offered::Pending) | Ok(Offered::Resolved) => {}
                Err(_) => break,
            }
        }
    }

    fn poll(&mut self) {
        for a in self.state.poll(self.now) {
            match a {
                Action::Deliver {
                    position,
                    member,
                    delivery,
                } => {
                    assert!(self.members.contains(&member), "delivery to a non-member");
                    assert!(
                        self.policy.max_deliver == 0 || delivery <= self.policy.max_deliver,
                        "delivery {delivery} past max_deliver"
                    );
                    let d = self.deliveries.entry(k(position)).or_insert(0);
                    assert_eq!(*d + 1, delivery, "deliveries counted one by one");
                    *d = delivery;
                    self.held.insert(k(position), member);
                }
                Action::DeadLetter {
                    position,
                    deliveries,
                } => {
                    assert!(self.policy.max_deliver > 0);
                    assert_eq!(deliveries, self.policy.max_deliver);
                    assert!(self.dead.insert(k(position)), "dead-lettered twice");
                    self.held.remove(&k(position));
                }
            }
        }
        self.read();
    }

    fn answer(&mut self, member: u64, position: Position, op: AckOp) {
        let outcome = self.state.ack(member, position, op, self.now);
        let key = k(position);
        match outcome {
            AckOutcome::Acked => {
                assert!(!self.termed.contains(&key) && !self.dead.contains(&key));
                assert!(self.acked.insert(key), "acked twice: {key:?}");
                self.held.remove(&key);
            }
            AckOutcome::Termed => {
                assert!(!self.acked.contains(&key) && !self.dead.contains(&key));
                assert!(self.termed.insert(key), "termed twice");
                self.held.remove(&key);
            }
            AckOutcome::Nakked | AckOutcome::Extended => {
                assert_eq!(self.held.get(&key), Some(&member), "only the holder");
            }
            AckOutcome::Unknown | AckOutcome::NotHolder => {}
        }
        self.read();
    }

    fn check(&self) {
        let floor = k(self.state.floor());
        let cursor = k(self.state.cursor());
        for p in &self.log {
            let key = k(*p);
            let fates = [&self.acked, &self.termed, &self.dead]
                .iter()
                .filter(|s| s.contains(&key))
                .count();
            assert!(fates <= 1, "{key:?} has two fates");
            let pending = self.state.is_pending(*p);
            if key < floor {
                assert_eq!(fates, 1, "{key:?} before the floor {floor:?} is unresolved");
                assert!(!pending);
            } else if key < cursor {
                assert_eq!(
                    fates + usize::from(pending),
                    1,
                    "{key:?}: pending or resolved"
                );
            }
            // At or after the cursor: unread (again), so redeliverable.
        }
        assert!(self.state.pending() <= self.policy.max_ack_pending as usize);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn every_message_is_resolved_once_or_still_pending(
        ops in proptest::collection::vec(op(), 1..160),
        max_deliver in 0u32..4,
        max_ack_pending in 1u32..6,
        backoff in proptest::collection::vec(0u64..60, 0..3),
    ) {
        let policy = Policy { ack_wait_ms: 50, max_deliver, backoff_ms: backoff, max_ack_pending };
        let mut w = World::new(policy);
        for op in ops {
            match op {
                Op::Publish => {
                    w.log.push(Position { stream: w.stream, seq: w.next_seq });
                    w.next_seq += 1;
                    w.read();
                }
                Op::Join(m) => {
                    w.members.insert(m);
                    w.state.join(m);
                }
                Op::Leave(m) => {
                    w.members.remove(&m);
                    w.state.leave(m, w.now);
                    w.held.retain(|_, h| *h != m);
                }
                Op::Advance(dt) => w.now += dt,
                Op::Answer(m, i, kind, delay) => {
                    let mine: Vec<(u64, u64)> =
                        w.held.iter().filter(|(_, h)| **h == m).map(|(k, _)| *k).collect();
                    if !mine.is_empty() {
                        let (stream, seq) = mine[i % mine.len()];
                        w.answer(m, Position { stream, seq }, ack_op(kind, delay));
                    }
                }
                Op::Stray(m, seq, kind) => {
                    w.answer(m, Position { stream: 7, seq }, ack_op(kind, 0));
                }
                Op::Restart => {
                    let snap = w.state.snapshot();
                    w.state = ConsumerState::restore(w.policy.clone(), snap);
                    for m in &w.members {
                        w.state.join(*m);
                    }
                    w.held.clear();
                    w.stream += 1;
                    w.next_seq = 0;
                    w.read();
                }
            }
            w.poll();
            w.check();
        }
        // Drain: one member acks everything it gets; every message ends resolved.
        w.members.insert(99);
        w.state.join(99);
        for _ in 0..10_000 {
            w.now += 1_000;
            w.poll();
            let mine: Vec<(u64, u64)> = w.held.keys().copied().collect();
            for (stream, seq) in mine {
                let holder = w.held[&(stream, seq)];
                w.answer(holder, Position { stream, seq }, AckOp::Ack);
            }
            w.check();
            if w.state.pending() == 0 && w.log.last().is_none_or(|l| k(w.state.cursor()) > k(*l)) {
                break;
            }
        }
        for p in &w.log {
            let key = k(*p);
            prop_assert!(w.acked.contains(&key) || w.termed.contains(&key) || w.dead.contains(&key),
                "{key:?} never resolved");
        }
    }
}
