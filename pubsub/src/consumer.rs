//! A durable consumer's state machine (docs/consumers.md): which messages of a durable topic's
//! log it has read, which of those are pending (not yet delivered, in flight to a member, or
//! waiting out a nak's delay or a backoff), which were resolved above the ack floor (acked,
//! termed or dead-lettered out of order), which member gets the next delivery, when a delivery
//! times out, and when a message has had `max_deliver` deliveries and goes to the dead-letter
//! topic. Time is passed in (Unix or any monotonic milliseconds); nothing here does I/O, so the
//! broker's consumer task drives it and tests run it on a made-up clock.
//!
//! - **Window.** The consumer reads the log in order ([`ConsumerState::offer`]). It holds at most
//!   `max_ack_pending` messages from its ack floor on: the pending ones plus those resolved out of
//!   order above the floor. At the window's end the broker stops reading until the floor moves
//!   (flow control), so the state, and the payloads the broker keeps for pending messages, stay
//!   within a budget whatever the members do.
//! - **Ack floor.** Every message before [`ConsumerState::floor`] is resolved; the floor is the
//!   oldest pending message, or the read cursor when none is pending. It is what a restart
//!   resumes from, together with the resolved positions above it ([`Snapshot`]).
//! - **Delivery.** [`ConsumerState::poll`] delivers the oldest ready message to the next member
//!   round-robin; each delivery counts. A delivery not acked within `ack_wait` (extended by
//!   `in_progress`), nak'd, or held by a member that left, is ready again: at once for a member
//!   that left, after the nak's delay, else after the backoff schedule's entry for that
//!   delivery (the last entry repeats; none: at once). A ready message that already had
//!   `max_deliver` deliveries is dead-lettered instead ([`Action::DeadLetter`]).
//! - **Acks.** `ack` and `term` are taken from any member while the message is pending and was
//!   delivered (a late ack from a member whose delivery timed out still counts, once);
//!   `nak` and `in_progress` only from the member holding the delivery. A message is resolved
//!   once: a second ack is [`AckOutcome::Unknown`].

use std::collections::{BTreeMap, BTreeSet};

use starling_proto::Position;

/// A position as an ordered key: the log's order (streams grow, then sequence numbers).
type Key = (u64, u64);

fn key(p: Position) -> Key {
    (p.stream, p.seq)
}

fn pos(k: Key) -> Position {
    Position {
        stream: k.0,
        seq: k.1,
    }
}

/// A member of a consumer (one subscription stream), numbered by the broker.
pub type MemberId = u64;

/// How a consumer delivers and redelivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// How long a delivery may stay unacked before it is redelivered, ms (≥ 1).
    pub ack_wait_ms: u64,
    /// Most deliveries of one message; 0: no limit.
    pub max_deliver: u32,
    /// Delays before redelivering after the 1st, 2nd, ... failed delivery, ms; the last entry
    /// repeats; empty: at once.
    pub backoff_ms: Vec<u64>,
    /// Most messages held from the ack floor on (pending, or resolved above the floor); ≥ 1.
    pub max_ack_pending: u32,
}

impl Policy {
    fn backoff(&self, deliveries: u32) -> u64 {
        let i = (deliveries.max(1) - 1) as usize;
        self.backoff_ms
            .get(i)
            .or(self.backoff_ms.last())
            .copied()
            .unwrap_or(0)
    }

    fn exhausted(&self, deliveries: u32) -> bool {
        self.max_deliver != 0 && deliveries >= self.max_deliver
    }
}

/// What a member says of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOp {
    /// Processed: never deliver it again.
    Ack,
    /// Not processed: redeliver, after `delay_ms` if given (else after the backoff).
    Nak {
        /// How long to wait before redelivering, ms.
        delay_ms: Option<u64>,
    },
    /// Still being worked on: the delivery's deadline is `ack_wait` from now again.
    InProgress,
    /// Never deliver it again, unprocessed.
    Term,
}

/// What became of an [`AckOp`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckOutcome {
    /// The message is acked (resolved).
    Acked,
    /// The message is termed (resolved).
    Termed,
    /// It will be redelivered.
    Nakked,
    /// Its deadline moved.
    Extended,
    /// Not pending (resolved already, never read, or not delivered yet): ignored.
    Unknown,
    /// `nak` or `in_progress` from a member that does not hold the delivery: ignored.
    NotHolder,
}

/// What the broker must do next, from [`ConsumerState::poll`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Send the message at `position` to `member`; `delivery` counts from 1.
    Deliver {
        /// The message.
        position: Position,
        /// To whom.
        member: MemberId,
        /// Which delivery this is (1 for the first).
        delivery: u32,
    },
    /// The message had `max_deliver` deliveries: publish it to the dead-letter topic (if the
    /// consumer has one). It is resolved already.
    DeadLetter {
        /// The message.
        position: Position,
        /// Its deliveries.
        deliveries: u32,
    },
}

/// Why [`ConsumerState::offer`] did not take a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum OfferError {
    /// The window (`max_ack_pending` from the floor) is full: offer it again once the floor
    /// moved.
    #[error("the consumer's window of max_ack_pending messages is full")]
    Full,
    /// The position is before the read cursor (read already).
    #[error("position before the consumer's read cursor")]
    Behind,
}

/// What [`ConsumerState::offer`] did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// It is pending: keep its payload until it is resolved.
    Pending,
    /// It was resolved before a restart ([`Snapshot::resolved`]): skip it.
    Resolved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Ready for delivery from `at_ms` on.
    Ready { at_ms: u64 },
    /// Delivered to `member`, redelivered after `deadline_ms` unless acked.
    InFlight { member: MemberId, deadline_ms: u64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    deliveries: u32,
    slot: Slot,
}

/// What a consumer keeps across a restart: its floor, the positions resolved above it, and
/// the deliveries of its pending messages (so `max_deliver` holds across restarts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// Every message before it is resolved.
    pub floor: Position,
    /// Messages at or after the floor that are resolved, in order.
    pub resolved: Vec<Position>,
    /// Pending messages delivered at least once, with their deliveries, in order.
    pub deliveries: Vec<(Position, u32)>,
}

/// Counts since the consumer started here (exported by the broker).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerCounts {
    /// Deliveries after the first of a message.
    pub redeliveries: u64,
    /// Messages past `max_deliver`.
    pub dead_lettered: u64,
    /// Messages acked.
    pub acked: u64,
    /// Messages termed.
    pub termed: u64,
}

/// One consumer's state (see the module doc).
#[derive(Debug, Clone)]
pub struct ConsumerState {
    policy: Policy,
    /// The next position to read from the log.
    cursor: Key,
    pending: BTreeMap<Key, Entry>,
    /// Resolved, above the floor (every key is greater than the first pending key).
    resolved: BTreeSet<Key>,
    /// From a snapshot, until read again: resolved positions and earlier deliveries.
    restored_resolved: BTreeSet<Key>,
    restored_deliveries: BTreeMap<Key, u32>,
    members: Vec<MemberId>,
    next_member: usize,
    counts: ConsumerCounts,
}

impl ConsumerState {
    /// A new consumer that reads from `start` on.
    pub fn new(policy: Policy, start: Position) -> ConsumerState {
        ConsumerState::restore(
            policy,
            Snapshot {
                floor: start,
                resolved: Vec::new(),
                deliveries: Vec::new(),
            },
        )
    }

    /// A consumer as a [`Snapshot`] left it: it reads again from the floor, skipping what was
    /// resolved, and counts earlier deliveries.
    pub fn restore(policy: Policy, snapshot: Snapshot) -> ConsumerState {
        let floor = key(snapshot.floor);
        ConsumerState {
            policy,
            cursor: floor,
            pending: BTreeMap::new(),
            resolved: BTreeSet::new(),
            restored_resolved: snapshot
                .resolved
                .into_iter()
                .map(key)
                .filter(|k| *k >= floor)
                .collect(),
            restored_deliveries: snapshot
                .deliveries
                .into_iter()
                .map(|(p, n)| (key(p), n))
                .filter(|(k, _)| *k >= floor)
                .collect(),
            members: Vec::new(),
            next_member: 0,
            counts: ConsumerCounts::default(),
        }
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Every message before the floor is resolved.
    pub fn floor(&self) -> Position {
        pos(self.pending.keys().next().copied().unwrap_or(self.cursor))
    }

    /// The next position to read from the log.
    pub fn cursor(&self) -> Position {
        pos(self.cursor)
    }

    /// Whether the window has room for one more message.
    pub fn has_room(&self) -> bool {
        self.pending.len() + self.resolved.len() < self.policy.max_ack_pending as usize
    }

    /// Messages pending (read, not resolved).
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Messages in flight to a member.
    pub fn in_flight(&self) -> usize {
        self.pending
            .values()
            .filter(|e| matches!(e.slot, Slot::InFlight { .. }))
            .count()
    }

    /// Whether `position` is pending.
    pub fn is_pending(&self, position: Position) -> bool {
        self.pending.contains_key(&key(position))
    }

    /// The counts so far.
    pub fn counts(&self) -> ConsumerCounts {
        self.counts
    }

    /// The members, in join order.
    pub fn members(&self) -> &[MemberId] {
        &self.members
    }

    /// The message at `position` was read from the log (positions are offered in log order).
    pub fn offer(&mut self, position: Position, now_ms: u64) -> Result<Offered, OfferError> {
        let k = key(position);
        if k < self.cursor {
            return Err(OfferError::Behind);
        }
        if self.restored_resolved.remove(&k) {
            self.cursor = (k.0, k.1.saturating_add(1));
            self.resolve(k);
            return Ok(Offered::Resolved);
        }
        if !self.has_room() {
            return Err(OfferError::Full);
        }
        self.cursor = (k.0, k.1.saturating_add(1));
        let deliveries = self.restored_deliveries.remove(&k).unwrap_or(0);
        self.pending.insert(
            k,
            Entry {
                deliveries,
                slot: Slot::Ready { at_ms: now_ms },
            },
        );
        Ok(Offered::Pending)
    }

    /// A member joined; ignored when it is one already.
    pub fn join(&mut self, member: MemberId) {
        if !self.members.contains(&member) {
            self.members.push(member);
        }
    }

    /// A member left (its stream ended): what it held is ready again at once.
    pub fn leave(&mut self, member: MemberId, now_ms: u64) {
        self.members.retain(|m| *m != member);
        for e in self.pending.values_mut() {
            if matches!(e.slot, Slot::InFlight { member: m, .. } if m == member) {
                e.slot = Slot::Ready { at_ms: now_ms };
            }
        }
    }

    /// Applies a member's ack, nak, in-progress or term.
    pub fn ack(
        &mut self,
        member: MemberId,
        position: Position,
        op: AckOp,
        now_ms: u64,
    ) -> AckOutcome {
        let k = key(position);
        let Some(entry) = self.pending.get_mut(&k) else {
            return AckOutcome::Unknown;
        };
        if entry.deliveries == 0 {
            return AckOutcome::Unknown;
        }
        let holds = matches!(entry.slot, Slot::InFlight { member: m, .. } if m == member);
        match op {
            AckOp::Ack | AckOp::Term => {
                self.pending.remove(&k);
                self.resolve(k);
                if op == AckOp::Ack {
                    self.counts.acked += 1;
                    AckOutcome::Acked
                } else {
                    self.counts.termed += 1;
                    AckOutcome::Termed
                }
            }
            AckOp::Nak { .. } | AckOp::InProgress if !holds => AckOutcome::NotHolder,
            AckOp::Nak { delay_ms } => {
                let wait = delay_ms.unwrap_or_else(|| self.policy.backoff(entry.deliveries));
                entry.slot = Slot::Ready {
                    at_ms: now_ms.saturating_add(wait),
                };
                AckOutcome::Nakked
            }
            AckOp::InProgress => {
                entry.slot = Slot::InFlight {
                    member,
                    deadline_ms: now_ms.saturating_add(self.policy.ack_wait_ms),
                };
                AckOutcome::Extended
            }
        }
    }

    /// Everything due at `now_ms`: deliveries that timed out become ready (after their
    /// backoff), then ready messages are delivered, oldest first, round-robin over the members,
    /// or dead-lettered past `max_deliver`.
    pub fn poll(&mut self, now_ms: u64) -> Vec<Action> {
        for e in self.pending.values_mut() {
            if let Slot::InFlight { deadline_ms, .. } = e.slot
                && deadline_ms <= now_ms
            {
                let wait = self.policy.backoff(e.deliveries);
                e.slot = Slot::Ready {
                    at_ms: now_ms.saturating_add(wait),
                };
            }
        }
        let due: Vec<Key> = self
            .pending
            .iter()
            .filter(|(_, e)| matches!(e.slot, Slot::Ready { at_ms } if at_ms <= now_ms))
            .map(|(k, _)| *k)
            .collect();
        let mut actions = Vec::new();
        for k in due {
            let Some(entry) = self.pending.get(&k).copied() else {
                continue;
            };
            if self.policy.exhausted(entry.deliveries) {
                self.pending.remove(&k);
                self.resolve(k);
                self.counts.dead_lettered += 1;
                actions.push(Action::DeadLetter {
                    position: pos(k),
                    deliveries: entry.deliveries,
                });
                continue;
            }
            let Some(member) = self.pick() else {
                continue;
            };
            let delivery = entry.deliveries.saturating_add(1);
            if delivery > 1 {
                self.counts.redeliveries += 1;
            }
            self.pending.insert(
                k,
                Entry {
                    deliveries: delivery,
                    slot: Slot::InFlight {
                        member,
                        deadline_ms: now_ms.saturating_add(self.policy.ack_wait_ms),
                    },
                },
            );
            actions.push(Action::Deliver {
                position: pos(k),
                member,
                delivery,
            });
        }
        actions
    }

    /// When [`ConsumerState::poll`] next has something to do after `now_ms` (a deadline, or a
    /// delayed message becoming ready while there is a member), if ever.
    pub fn next_wake(&self, now_ms: u64) -> Option<u64> {
        let members = !self.members.is_empty();
        self.pending
            .values()
            .filter_map(|e| match e.slot {
                Slot::InFlight { deadline_ms, .. } => Some(deadline_ms),
                Slot::Ready { at_ms } if members || self.policy.exhausted(e.deliveries) => {
                    Some(at_ms)
                }
                Slot::Ready { .. } => None,
            })
            .map(|t| t.max(now_ms))
            .min()
    }

    /// What a restart needs.
    pub fn snapshot(&self) -> Snapshot {
        let floor = self.pending.keys().next().copied().unwrap_or(self.cursor);
        Snapshot {
            floor: pos(floor),
            resolved: self
                .resolved
                .iter()
                .chain(self.restored_resolved.iter())
                .copied()
                .filter(|k| *k >= floor)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .map(pos)
                .collect(),
            deliveries: self
                .pending
                .iter()
                .filter(|(_, e)| e.deliveries > 0)
                .map(|(k, e)| (*k, e.deliveries))
                .chain(self.restored_deliveries.iter().map(|(k, n)| (*k, *n)))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .map(|(k, n)| (pos(k), n))
                .collect(),
        }
    }

    fn pick(&mut self) -> Option<MemberId> {
        if self.members.is_empty() {
            return None;
        }
        let i = self.next_member % self.members.len();
        self.next_member = i + 1;
        self.members.get(i).copied()
    }

    fn resolve(&mut self, k: Key) {
        self.resolved.insert(k);
        self.settle();
    }

    /// Drops the resolved positions the floor passed.
    fn settle(&mut self) {
        let floor = self.pending.keys().next().copied().unwrap_or(self.cursor);
        self.resolved = self.resolved.split_off(&floor);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(seq: u64) -> Position {
        Position { stream: 7, seq }
    }

    fn policy() -> Policy {
        Policy {
            ack_wait_ms: 100,
            max_deliver: 3,
            backoff_ms: vec![10, 50],
            max_ack_pending: 4,
        }
    }

    fn delivered(actions: &[Action]) -> Vec<(u64, MemberId, u32)> {
        actions
            .iter()
            .filter_map(|a| match a {
                Action::Deliver {
                    position,
                    member,
                    delivery,
                } => Some((position.seq, *member, *delivery)),
                Action::DeadLetter { .. } => None,
            })
            .collect()
    }

    #[test]
    fn members_share_messages_round_robin_and_acks_move_the_floor() {
        let mut c = ConsumerState::new(policy(), p(0));
        c.join(1);
        c.join(2);
        for s in 0..3 {
            assert_eq!(c.offer(p(s), 0), Ok(Offered::Pending));
        }
        assert_eq!(delivered(&c.poll(0)), vec![(0, 1, 1), (1, 2, 1), (2, 1, 1)]);
        assert_eq!(c.ack(2, p(1), AckOp::Ack, 1), AckOutcome::Acked);
        assert_eq!(c.floor(), p(0), "message 0 still pending");
        assert_eq!(c.snapshot().resolved, vec![p(1)]);
        assert_eq!(c.ack(1, p(0), AckOp::Ack, 1), AckOutcome::Acked);
        assert_eq!(c.floor(), p(2));
        assert_eq!(c.snapshot().resolved, Vec::<Position>::new());
        assert_eq!(c.ack(1, p(0), AckOp::Ack, 2), AckOutcome::Unknown, "once");
        assert_eq!(c.ack(1, p(2), AckOp::Term, 2), AckOutcome::Termed);
        assert_eq!(c.floor(), p(3));
        assert_eq!(c.counts().acked, 2);
    }

    #[test]
    fn the_window_stops_reading_until_the_floor_moves() {
        let mut c = ConsumerState::new(policy(), p(0));
        for s in 0..4 {
            c.offer(p(s), 0).unwrap();
        }
        assert_eq!(c.offer(p(4), 0), Err(OfferError::Full));
        assert_eq!(c.offer(p(2), 0), Err(OfferError::Behind));
        c.join(1);
        c.poll(0);
        // Acked above the floor: still in the window.
        c.ack(1, p(3), AckOp::Ack, 0);
        assert_eq!(c.offer(p(4), 0), Err(OfferError::Full));
        c.ack(1, p(0), AckOp::Ack, 0);
        assert_eq!(c.offer(p(4), 0), Ok(Offered::Pending));
    }

    #[test]
    fn a_timed_out_delivery_goes_to_another_member_after_its_backoff() {
        let mut c = ConsumerState::new(policy(), p(0));
        c.join(1);
        c.join(2);
        c.offer(p(0), 0).unwrap();
        assert_eq!(delivered(&c.poll(0)), vec![(0, 1, 1)]);
        assert_eq!(c.next_wake(0), Some(100));
        assert!(c.poll(99).is_empty());
        // Deadline at 100, then the first backoff (10 ms).
        assert!(c.poll(100).is_empty());
        assert_eq!(c.next_wake(100), Some(110));
        assert_eq!(delivered(&c.poll(110)), vec![(0, 2, 2)]);
        assert_eq!(c.counts().redeliveries, 1);
        // The first member's late ack still counts, once.
        assert_eq!(c.ack(1, p(0), AckOp::Ack, 111), AckOutcome::Acked);
        assert_eq!(c.ack(2, p(0), AckOp::Ack, 112), AckOutcome::Unknown);
    }

    #[test]
    fn in_progress_extends_and_only_the_holder_may_nak() {
        let mut c = ConsumerState::new(policy(), p(0));
        c.join(1);
        c.join(2);
        c.offer(p(0), 0).unwrap();
        c.poll(0);
        assert_eq!(c.ack(2, p(0), AckOp::InProgress, 50), AckOutcome::NotHolder);
        assert_eq!(c.ack(1, p(0), AckOp::InProgress, 90), AckOutcome::Extended);
        assert!(c.poll(150).is_empty());
        assert_eq!(c.next_wake(150), Some(190));
        assert_eq!(
            c.ack(2, p(0), AckOp::Nak { delay_ms: None }, 150),
            AckOutcome::NotHolder
        );
        assert_eq!(
            c.ack(1, p(0), AckOp::Nak { delay_ms: Some(5) }, 150),
            AckOutcome::Nakked
        );
        assert_eq!(delivered(&c.poll(155)), vec![(0, 2, 2)]);
    }

    #[test]
    fn a_member_that_leaves_has_its_deliveries_redelivered_at_once() {
        let mut c = ConsumerState::new(policy(), p(0));
        c.join(1);
        c.offer(p(0), 0).unwrap();
        c.offer(p(1), 0).unwrap();
        assert_eq!(delivered(&c.poll(0)), vec![(0, 1, 1), (1, 1, 1)]);
        c.leave(1, 5);
        assert!(c.poll(5).is_empty(), "no member left");
        assert_eq!(c.next_wake(5), None);
        c.join(2);
        assert_eq!(delivered(&c.poll(6)), vec![(0, 2, 2), (1, 2, 2)]);
    }

    #[test]
    fn past_max_deliver_a_message_is_dead_lettered() {
        let mut c = ConsumerState::new(policy(), p(0));
        c.join(1);
        c.offer(p(0), 0).unwrap();
        let mut now = 0;
        for n in 1..=3 {
            assert_eq!(delivered(&c.poll(now)), vec![(0, 1, n)]);
            c.ack(1, p(0), AckOp::Nak { delay_ms: Some(0) }, now);
            now += 1;
        }
        assert_eq!(
            c.poll(now),
            vec![Action::DeadLetter {
                position: p(0),
                deliveries: 3
            }]
        );
        assert_eq!(c.floor(), p(1));
        assert_eq!(c.counts().dead_lettered, 1);
        assert_eq!(c.ack(1, p(0), AckOp::Ack, now), AckOutcome::Unknown);
    }

    #[test]
    fn backoff_follows_the_schedule_and_repeats_its_last_entry() {
        let pol = policy();
        assert_eq!(pol.backoff(1), 10);
        assert_eq!(pol.backoff(2), 50);
        assert_eq!(pol.backoff(9), 50);
        let none = Policy {
            backoff_ms: vec![],
            ..policy()
        };
        assert_eq!(none.backoff(3), 0);
    }

    #[test]
    fn a_snapshot_resumes_at_the_floor_skipping_what_was_resolved() {
        let mut c = ConsumerState::new(policy(), p(0));
        c.join(1);
        for s in 0..3 {
            c.offer(p(s), 0).unwrap();
        }
        c.poll(0);
        c.ack(1, p(1), AckOp::Ack, 0);
        let snap = c.snapshot();
        assert_eq!(snap.floor, p(0));
        assert_eq!(snap.resolved, vec![p(1)]);
        assert_eq!(snap.deliveries, vec![(p(0), 1), (p(2), 1)]);
        let mut r = ConsumerState::restore(policy(), snap.clone());
        assert_eq!(r.snapshot(), snap, "unchanged until read again");
        assert_eq!(r.offer(p(0), 1), Ok(Offered::Pending));
        assert_eq!(r.offer(p(1), 1), Ok(Offered::Resolved));
        assert_eq!(r.offer(p(2), 1), Ok(Offered::Pending));
        r.join(9);
        assert_eq!(delivered(&r.poll(1)), vec![(0, 9, 2), (2, 9, 2)]);
    }
}
