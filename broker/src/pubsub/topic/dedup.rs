//! One topic's publish de-duplication, as its task uses it: which messages of a request are
//! repeats of a message id the topic saw within its window (`starling_pubsub::dedup`, keyed
//! by the `Starling-Msg-Id` header), and when a repeat may be answered.
//!
//! Every local message the task puts into its batcher gets an event number (`pushed`, in
//! order), and the task counts the events of the batches it has taken out of the batcher to
//! fan out (`sealed`). The window keeps each id's original event number, so a repeat's
//! original is done exactly when its number is below `sealed`: then the repeat is answered
//! at once; otherwise its ack waits here and rides on the batch holding the original, which
//! completes it the way it completes the original's (acked, refused, or held for the log
//! with `persisted`). Never earlier than the original's.
//!
//! The windows of all topics are charged, at [`entry_cost`] per id, to the broker-wide
//! `dedup_max_total_bytes` in the engine's counters; a request whose new ids do not fit is
//! refused whole ([`Refused`]). A batch whose acks were refused has its ids forgotten, so a
//! retry of a refused publish is a new message.
//!
//! **A replicated topic** ([`Mode::Replicated`]) acks a batch only once its Raft entry
//! committed, and its leader can change, so its window follows the committed log:
//!
//! - every replica remembers the ids of each committed entry it delivers ([`TopicDedup::committed`]),
//!   so the next leader knows what its predecessor committed (the task takes ids at a new
//!   leader only once it delivered an entry of the leader's own term, which comes after every
//!   entry of the terms before);
//! - an id proposed here is held as its event until its proposal's outcome comes back
//!   ([`TopicDedup::settled`]): committed, it is known for good; failed, it is forgotten, so
//!   the retry is a new message (an entry that failed here but committed under the next
//!   leader comes back through the committed log);
//! - a repeat of an id whose original is still being committed is refused whole with
//!   `Unavailable` ([`Refusal::InFlight`]) rather than dropped: its ack cannot ride on an
//!   entry that may yet fail while the repeat's own batch commits. The publisher's retry
//!   after the original's outcome is answered at once (or stored, if the original failed).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use starling_proto::{IndexedHeaders, msg_id};
use tokio::time::Instant;

use crate::pubsub::ack::AckToken;
use crate::pubsub::counters::Counters;
use crate::pubsub::dedup::{Limits, Window, entry_cost};

/// A request refused because its new ids do not fit in `dedup_max_total_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the de-duplication windows of this broker's topics hold {budget} bytes, the most it allows (dedup_max_total_bytes); retry once older message ids have expired"
)]
pub struct Refused {
    /// The budget in force.
    pub budget: u64,
}

/// Why a request's messages were not planned: it is refused whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Its new ids do not fit in `dedup_max_total_bytes` (`LimitExceeded`).
    #[error(transparent)]
    Budget(#[from] Refused),
    /// A replicated topic: one of its messages repeats an id whose original is still being
    /// committed (`Unavailable`: publish again).
    #[error(
        "message id `{id}` repeats a publish this replicated topic is still committing; publish again once it is acked"
    )]
    InFlight {
        /// The id.
        id: String,
    },
}

/// Where a topic's acks come from, which decides when an original is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The topic's own batches: a batch is done once it is taken out of the batcher and fanned
    /// out (its acks completed or held for the log there).
    Local,
    /// A replicated topic: a batch is done once its Raft entry committed (see the module doc).
    Replicated,
}

/// What the window keeps for an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// The original is local event `n` (its batch's outcome is known once `n` is sealed, or,
    /// on a replicated topic, once its proposal settled).
    Event(u64),
    /// The original is committed (a replicated topic's committed entry).
    Done,
}

/// What to do with a request's messages.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// For each message: whether it is a repeat (dropped). Empty when none is.
    pub repeat: Vec<bool>,
    /// The largest event number of a repeat's original (what the request's ack must wait
    /// for, besides its own new messages).
    pub wait_for: Option<u64>,
}

impl Plan {
    /// Whether message `i` is a repeat.
    pub fn is_repeat(&self, i: usize) -> bool {
        self.repeat.get(i).copied().unwrap_or(false)
    }
}

/// One topic's window, its event numbering and the repeats' acks waiting for their originals.
pub struct TopicDedup {
    window: Window<Slot>,
    mode: Mode,
    /// Local events put into the batcher so far.
    pushed: u64,
    /// Events of the batches taken out of the batcher.
    sealed: u64,
    /// Repeats' acks, each with the event number it waits for.
    waiting: Vec<(u64, AckToken)>,
    budget: u64,
    counters: Arc<Counters>,
}

impl TopicDedup {
    /// An empty window with `limits` for a topic whose acks come as `mode` says, charged to
    /// `counters` within `budget` bytes.
    pub fn new(limits: Limits, mode: Mode, budget: u64, counters: Arc<Counters>) -> TopicDedup {
        TopicDedup {
            window: Window::new(limits),
            mode,
            pushed: 0,
            sealed: 0,
            waiting: Vec::new(),
            budget,
            counters,
        }
    }

    /// Plans a request of `n` messages with `headers` (by index) at `now`: which are repeats,
    /// and records the new ids (charged to the budget). The caller then pushes exactly the
    /// messages that are not repeats, in order, calling [`TopicDedup::pushed`] for each.
    pub fn plan(
        &mut self,
        n: usize,
        headers: &[IndexedHeaders],
        now: Instant,
    ) -> Result<Plan, Refusal> {
        let ids: Vec<(usize, &str)> = headers
            .iter()
            .filter_map(|h| Some((usize::try_from(h.index).ok()?, msg_id(&h.headers)?)))
            .filter(|(i, _)| *i < n)
            .collect();
        if ids.is_empty() {
            return Ok(Plan::default());
        }
        self.expire(now);
        if !self.window.limits().remembers() {
            return Ok(Plan::default());
        }
        let mut repeat = vec![false; n];
        let mut wait_for: Option<u64> = None;
        // The new ids of this request, with the event number each will get.
        let mut fresh: HashMap<&str, u64> = HashMap::new();
        let mut cost = 0u64;
        let mut ids = ids.into_iter().peekable();
        let mut next = self.pushed;
        for (i, slot) in repeat.iter_mut().enumerate() {
            let id = ids.next_if(|(at, _)| *at == i).map(|(_, id)| id);
            let original = match id {
                None => None,
                Some(id) => match self.window.get(id) {
                    Some(Slot::Event(_)) if self.mode == Mode::Replicated => {
                        return Err(Refusal::InFlight { id: id.to_string() });
                    }
                    Some(slot) => Some(*slot),
                    None => fresh.get(id).map(|event| Slot::Event(*event)),
                },
            };
            match (id, original) {
                (_, Some(Slot::Event(event))) => {
                    *slot = true;
                    wait_for = Some(wait_for.map_or(event, |w| w.max(event)));
                }
                (_, Some(Slot::Done)) => *slot = true,
                (Some(id), None) => {
                    fresh.insert(id, next);
                    cost += entry_cost(id.len()) as u64;
                    next += 1;
                }
                (None, None) => next += 1,
            }
        }
        if cost > 0 && !self.counters.charge_dedup(cost, self.budget) {
            self.counters.dedup_refused.fetch_add(1, Ordering::Relaxed);
            return Err(Refusal::Budget(Refused {
                budget: self.budget,
            }));
        }
        let mut freed = 0;
        for (id, event) in fresh {
            freed += self.window.insert(id, Slot::Event(event), now);
        }
        self.counters.dedup_freed(freed as u64);
        let dropped = repeat.iter().filter(|r| **r).count() as u64;
        self.counters
            .duplicates
            .fetch_add(dropped, Ordering::Relaxed);
        Ok(Plan { repeat, wait_for })
    }

    /// Remembers the ids a durable topic's log (or a replicated topic's committed log) holds
    /// from within the window, oldest first, each with its record's age at `now` (after a
    /// restart or an owner change): their messages are in the log, so a repeat is answered at
    /// once. Each id is charged to the budget like a new one; past it the rest are not
    /// remembered. Returns how many were.
    pub fn restore(&mut self, ids: Vec<(String, std::time::Duration)>, now: Instant) -> usize {
        let limits = self.window.limits();
        // Only with nothing in the batcher: the restored ids take event numbers that are
        // all sealed at once (a replicated topic's are committed: no event number).
        let local = self.mode == Mode::Local;
        if !limits.remembers() || (local && self.pushed != self.sealed) {
            return 0;
        }
        let mut restored = 0;
        for (id, age) in ids {
            if age >= limits.window || self.window.get(&id).is_some() {
                continue;
            }
            if !self
                .counters
                .charge_dedup(entry_cost(id.len()) as u64, self.budget)
            {
                self.counters.dedup_refused.fetch_add(1, Ordering::Relaxed);
                break;
            }
            let seen = now.checked_sub(age).unwrap_or(now);
            let slot = if local {
                Slot::Event(self.pushed)
            } else {
                Slot::Done
            };
            let freed = self.window.insert(&id, slot, seen);
            self.counters.dedup_freed(freed as u64);
            if local {
                self.pushed += 1;
            }
            restored += 1;
        }
        // Their events are done: sealed with them.
        if local {
            self.sealed = self.pushed;
        }
        restored
    }

    /// A replicated topic: the message ids of a committed entry this replica delivered, seen
    /// at `now`. Each is known from now on (an id proposed here, whose outcome may not have
    /// come back yet, too); a new one is charged to the budget like a publish's, and past it
    /// is not remembered (counted as refused: a retry of it after a leader change here would
    /// be stored again). Returns how many new ids were remembered.
    pub fn committed<'a>(&mut self, ids: impl IntoIterator<Item = &'a str>, now: Instant) -> usize {
        if !self.window.limits().remembers() {
            return 0;
        }
        self.expire(now);
        let mut remembered = 0;
        for id in ids {
            if let Some(slot) = self.window.get_mut(id) {
                *slot = Slot::Done;
                continue;
            }
            if !self
                .counters
                .charge_dedup(entry_cost(id.len()) as u64, self.budget)
            {
                self.counters.dedup_refused.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            let freed = self.window.insert(id, Slot::Done, now);
            self.counters.dedup_freed(freed as u64);
            remembered += 1;
        }
        remembered
    }

    /// A replicated topic: the outcome of a proposal whose new messages carried `ids`. Those
    /// still held as their event are known from now on if it `committed`, else forgotten (a
    /// retry is then a new message; should the entry commit after all, under the next leader,
    /// its ids come back with it through [`TopicDedup::committed`]).
    pub fn settled(&mut self, ids: &[String], committed: bool) {
        for id in ids {
            match self.window.get_mut(id) {
                Some(slot @ Slot::Event(_)) if committed => *slot = Slot::Done,
                Some(Slot::Event(_)) => {
                    self.window.remove(id);
                }
                _ => {}
            }
        }
    }

    /// The window's limits.
    pub fn limits(&self) -> Limits {
        self.window.limits()
    }

    /// One local event was put into the batcher.
    pub fn pushed(&mut self) {
        self.pushed += 1;
    }

    /// Answers the ack of a request whose messages were all repeats, waiting for event
    /// `wait_for`: at once when that event's batch is done, else once it is (it rides on it).
    pub fn answer_repeat(&mut self, wait_for: Option<u64>, ack: AckToken) {
        match wait_for {
            Some(event) if event >= self.sealed => self.waiting.push((event, ack)),
            _ => ack.ack(),
        }
    }

    /// A batch of `events` events was taken out of the batcher: the acks of the repeats whose
    /// originals are in it, to complete with it.
    pub fn sealed(&mut self, events: usize) -> Vec<AckToken> {
        self.sealed += events as u64;
        if self.waiting.is_empty() {
            return Vec::new();
        }
        let end = self.sealed;
        let (done, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|(event, _)| *event < end);
        self.waiting = wait;
        done.into_iter().map(|(_, ack)| ack).collect()
    }

    /// The message ids among a batch's headers, to forget should its acks be refused (none
    /// when the window is empty).
    pub fn ids_of(&self, headers: &[IndexedHeaders]) -> Vec<String> {
        if self.window.is_empty() {
            return Vec::new();
        }
        headers
            .iter()
            .filter_map(|h| msg_id(&h.headers))
            .map(str::to_string)
            .collect()
    }

    /// Forgets `ids`: their batch was refused, so a retry is a new message.
    pub fn forget(&mut self, ids: &[String]) {
        for id in ids {
            self.window.remove(id);
        }
    }

    /// Forgets the ids older than the window.
    pub fn expire(&mut self, now: Instant) {
        let freed = self.window.expire(now);
        self.counters.dedup_freed(freed as u64);
    }

    /// When the oldest id expires, if any is held: the topic is not retired before.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.window.next_expiry()
    }
}

impl Drop for TopicDedup {
    fn drop(&mut self) {
        let freed = self.window.clear();
        self.counters.dedup_freed(freed as u64);
        // Never left unanswered: a waiting repeat's original went with its batch, which the
        // task fans out before it ends; anything still here is refused so its publisher
        // retries.
        for (_, ack) in self.waiting.drain(..) {
            ack.refuse(
                starling_proto::ErrorCode::Unavailable,
                "the topic closed before the original of this repeat was delivered; publish again",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::{Header, MSG_ID};
    use std::time::Duration;

    fn ids(list: &[(u32, &str)]) -> Vec<IndexedHeaders> {
        list.iter()
            .map(|(i, id)| IndexedHeaders {
                index: *i,
                headers: vec![Header::new(MSG_ID, *id)],
            })
            .collect()
    }

    fn window(mode: Mode, budget: u64) -> (TopicDedup, Arc<Counters>) {
        let counters = Arc::new(Counters::new(1));
        let limits = Limits {
            window: Duration::from_secs(10),
            max_ids: 100,
        };
        (
            TopicDedup::new(limits, mode, budget, Arc::clone(&counters)),
            counters,
        )
    }

    fn dedup(budget: u64) -> (TopicDedup, Arc<Counters>) {
        window(Mode::Local, budget)
    }

    fn replicated(budget: u64) -> (TopicDedup, Arc<Counters>) {
        window(Mode::Replicated, budget)
    }

    #[test]
    fn a_replicated_topic_answers_repeats_of_committed_ids_at_once() {
        let (mut d, counters) = replicated(1 << 20);
        let now = Instant::now();
        // Delivered from the committed log (another leader's, say): known, charged.
        assert_eq!(d.committed(["a", "b"], now), 2);
        assert_eq!(
            counters.dedup_bytes.load(Ordering::Relaxed),
            2 * entry_cost(1) as u64
        );
        let p = d
            .plan(3, &ids(&[(0, "a"), (1, "c"), (2, "b")]), now)
            .expect("fits");
        assert_eq!(p.repeat, vec![true, false, true]);
        assert_eq!(p.wait_for, None, "the originals are committed");
        // An id delivered twice is remembered once.
        assert_eq!(d.committed(["a"], now), 0);
    }

    #[test]
    fn a_replicated_topic_refuses_a_repeat_of_an_id_still_being_committed() {
        let (mut d, _) = replicated(1 << 20);
        let now = Instant::now();
        let p = d.plan(2, &ids(&[(0, "a"), (1, "a")]), now).expect("fits");
        // Within one request the repeat rides on its original's batch.
        assert_eq!(p.repeat, vec![false, true]);
        push_plan(&mut d, &p, 2);
        // A later request repeating it before its entry committed: refused whole.
        assert_eq!(
            d.plan(2, &ids(&[(0, "x"), (1, "a")]), now),
            Err(Refusal::InFlight { id: "a".into() })
        );
        assert_eq!(
            d.plan(1, &ids(&[(0, "x")]), now).map(|p| p.repeat),
            Ok(vec![false])
        );
        // Committed: a repeat is answered at once.
        d.settled(&["a".to_string()], true);
        let p = d.plan(1, &ids(&[(0, "a")]), now).expect("fits");
        assert_eq!((p.repeat, p.wait_for), (vec![true], None));
    }

    #[test]
    fn a_replicated_topic_forgets_the_ids_of_a_proposal_that_failed_unless_they_committed() {
        let (mut d, _) = replicated(1 << 20);
        let now = Instant::now();
        let p = d.plan(2, &ids(&[(0, "a"), (1, "b")]), now).expect("fits");
        push_plan(&mut d, &p, 2);
        // "b"'s entry came back through the committed log (the next leader committed it)
        // before this proposal's failure was reported: it stays known.
        d.committed(["b"], now);
        d.settled(&["a".to_string(), "b".to_string()], false);
        let p = d.plan(2, &ids(&[(0, "a"), (1, "b")]), now).expect("fits");
        assert_eq!(
            p.repeat,
            vec![false, true],
            "a is new again, b is committed"
        );
    }

    #[test]
    fn a_replicated_topic_restores_ids_as_committed() {
        let (mut d, _) = replicated(1 << 20);
        let now = Instant::now();
        // With a proposal still in flight: restored all the same (no event numbers).
        let p = d.plan(1, &ids(&[(0, "x")]), now).expect("fits");
        push_plan(&mut d, &p, 1);
        let restored = d.restore(
            vec![
                ("old".into(), Duration::from_secs(11)),
                ("a".into(), Duration::from_secs(1)),
            ],
            now,
        );
        assert_eq!(restored, 1);
        let p = d.plan(2, &ids(&[(0, "old"), (1, "a")]), now).expect("fits");
        assert_eq!((p.repeat, p.wait_for), (vec![false, true], None));
    }

    #[test]
    fn committed_ids_past_the_budget_are_not_remembered() {
        let (mut d, counters) = replicated(entry_cost(1) as u64);
        let now = Instant::now();
        assert_eq!(d.committed(["a", "b"], now), 1);
        assert_eq!(counters.dedup_refused.load(Ordering::Relaxed), 1);
        let p = d.plan(1, &ids(&[(0, "b")]), now);
        assert_eq!(
            p,
            Err(Refusal::Budget(Refused {
                budget: entry_cost(1) as u64
            }))
        );
        drop(d);
        assert_eq!(counters.dedup_bytes.load(Ordering::Relaxed), 0);
    }

    fn push_plan(d: &mut TopicDedup, plan: &Plan, n: usize) {
        for i in 0..n {
            if !plan.is_repeat(i) {
                d.pushed();
            }
        }
    }

    #[test]
    fn repeats_in_and_across_requests_wait_for_their_original() {
        let (mut d, counters) = dedup(1 << 20);
        let now = Instant::now();
        // Events 0 (a), 1 (no id), 2 (b); the second "a" is a repeat of event 0.
        let p = d
            .plan(4, &ids(&[(0, "a"), (2, "b"), (3, "a")]), now)
            .expect("fits");
        assert_eq!(p.repeat, vec![false, false, false, true]);
        assert_eq!(p.wait_for, Some(0));
        push_plan(&mut d, &p, 4);
        let p = d.plan(1, &ids(&[(0, "b")]), now).expect("fits");
        assert_eq!(p.repeat, vec![true]);
        assert_eq!(p.wait_for, Some(2));
        assert_eq!(counters.duplicates.load(Ordering::Relaxed), 2);
        assert_eq!(
            counters.dedup_bytes.load(Ordering::Relaxed),
            2 * entry_cost(1) as u64
        );
        // Without ids, nothing is planned.
        assert_eq!(d.plan(3, &[], now), Ok(Plan::default()));
    }

    #[test]
    fn restored_ids_are_repeats_answered_at_once_and_age_from_their_records() {
        let (mut d, counters) = dedup(3 * entry_cost(1) as u64);
        let now = Instant::now();
        let restored = d.restore(
            vec![
                ("old".into(), Duration::from_secs(11)),
                ("a".into(), Duration::from_secs(9)),
                ("b".into(), Duration::from_secs(1)),
                ("b".into(), Duration::from_secs(1)),
                ("c".into(), Duration::ZERO),
                ("d".into(), Duration::ZERO),
            ],
            now,
        );
        // Past the window, a second copy, and past the budget: not remembered.
        assert_eq!(restored, 3);
        assert_eq!(counters.dedup_refused.load(Ordering::Relaxed), 1);
        let p = d.plan(2, &ids(&[(0, "a"), (1, "b")]), now).expect("fits");
        assert_eq!(p.repeat, vec![true, true]);
        // Their events are sealed: a repeat is answered at once, not held.
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let permit = Arc::new(tokio::sync::Semaphore::new(1))
            .try_acquire_owned()
            .expect("permit");
        d.answer_repeat(p.wait_for, AckToken::new(1, 1, tx, permit));
        assert!(rx.try_recv().is_ok(), "answered at once");
        // "a" was seen 9 s before `now`: it expires 1 s after it, with the window.
        d.expire(now + Duration::from_millis(1500));
        let p = d.plan(1, &ids(&[(0, "a")]), now + Duration::from_millis(1500));
        assert_eq!(p.map(|p| p.repeat), Ok(vec![false]));
    }

    #[test]
    fn the_budget_refuses_a_request_whole_and_charges_nothing() {
        let (mut d, counters) = dedup(entry_cost(1) as u64);
        let now = Instant::now();
        assert!(d.plan(1, &ids(&[(0, "a")]), now).is_ok());
        let refused = d.plan(2, &ids(&[(0, "b"), (1, "a")]), now);
        assert_eq!(
            refused,
            Err(Refusal::Budget(Refused {
                budget: entry_cost(1) as u64
            }))
        );
        assert_eq!(counters.dedup_refused.load(Ordering::Relaxed), 1);
        // A repeat alone costs nothing and still fits.
        assert!(d.plan(1, &ids(&[(0, "a")]), now).is_ok());
        drop(d);
        assert_eq!(counters.dedup_bytes.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn forgotten_and_expired_ids_are_new_again() {
        let (mut d, counters) = dedup(1 << 20);
        let now = Instant::now();
        let p = d.plan(1, &ids(&[(0, "a")]), now).expect("fits");
        push_plan(&mut d, &p, 1);
        d.forget(&d.ids_of(&ids(&[(0, "a")])));
        let p = d.plan(1, &ids(&[(0, "a")]), now).expect("fits");
        assert_eq!(p.repeat, vec![false]);
        push_plan(&mut d, &p, 1);
        let later = now + Duration::from_secs(10);
        let p = d.plan(1, &ids(&[(0, "a")]), later).expect("fits");
        assert_eq!(p.repeat, vec![false], "expired");
        d.expire(later + Duration::from_secs(10));
        assert_eq!(counters.dedup_bytes.load(Ordering::Relaxed), 0);
    }
}
