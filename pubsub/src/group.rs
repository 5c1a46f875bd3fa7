//! Queue groups of one topic: which member of a group each batch goes to.
//!
//! A group is named by its subject (the topic, or the pattern its members subscribed with)
//! and its name; a topic holds any number of them next to its plain subscribers. Each batch of
//! the topic goes to exactly one open member of each group, chosen by credit: the member whose
//! queue has the most free room ([`Subscriber::room`]), ties broken round-robin from the member
//! after the last one chosen. A slow member's queue stays fuller, so it is offered less (as
//! NSQ's `RDY` count does); a full member is passed over while another has room. When every
//! member is full, `block` waits until any member has room ([`Group::full`], which the topic's
//! task waits out); otherwise the choice falls round-robin on a full one, whose policy applies
//! to the batch (`drop_new` drops it, `drop_old` evicts that member's oldest batch).
//!
//! The group only chooses; the topic's task offers the batch and, if the chosen member turned
//! out to be closed, removes it and chooses again ([`Group::remove`]), so a batch never goes to
//! two members and is lost only when no member is left.

use std::sync::Arc;

use crate::subscriber::Subscriber;

/// One queue group of a topic.
pub struct Group {
    /// The subject its members subscribed with: the topic, or a wildcard pattern.
    pub subject: Arc<str>,
    /// The group's name.
    pub name: Arc<str>,
    /// Whether its members are wildcard subscribers (each batch after its topic's tag).
    pub wildcard: bool,
    members: Vec<Arc<Subscriber>>,
    /// Where the next tie-break starts.
    cursor: usize,
}

impl Group {
    /// An empty group.
    pub fn new(subject: Arc<str>, name: Arc<str>, wildcard: bool) -> Group {
        Group {
            subject,
            name,
            wildcard,
            members: Vec::new(),
            cursor: 0,
        }
    }

    /// Whether `sub` (a wildcard subscriber or not, as `wildcard` says) belongs to this group.
    pub fn holds(&self, sub: &Subscriber, wildcard: bool) -> bool {
        self.wildcard == wildcard
            && *self.subject == *sub.topic
            && sub.group.as_deref() == Some(&*self.name)
    }

    /// Adds a member; ignored when it is one already.
    pub fn add(&mut self, sub: Arc<Subscriber>) {
        if !self.members.iter().any(|m| m.id == sub.id) {
            self.members.push(sub);
        }
    }

    /// Removes member `id`; true when it was one.
    pub fn remove(&mut self, id: u64) -> bool {
        let before = self.members.len();
        self.members.retain(|m| m.id != id);
        self.members.len() != before
    }

    /// Removes the closed members.
    pub fn prune(&mut self) {
        self.members.retain(|m| !m.is_closed());
    }

    /// Its members.
    pub fn members(&self) -> &[Arc<Subscriber>] {
        &self.members
    }

    /// Whether every open member's queue is full (true with no open member).
    pub fn full(&self) -> bool {
        self.members.iter().all(|m| m.is_closed() || m.room() == 0)
    }

    /// Whether it has no member left.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member the next batch goes to (see the module doc): the open member with the most
    /// free room, the first such one at or after the cursor; the cursor then moves past it.
    /// `None` when no open member is left.
    pub fn pick(&mut self) -> Option<Arc<Subscriber>> {
        let n = self.members.len();
        let mut best: Option<(usize, usize)> = None; // (index, room)
        for k in 0..n {
            let i = (self.cursor + k) % n;
            let m = &self.members[i];
            if m.is_closed() {
                continue;
            }
            let room = m.room();
            if best.is_none_or(|(_, r)| room > r) {
                best = Some((i, room));
            }
        }
        let (i, _) = best?;
        self.cursor = (i + 1) % n;
        Some(Arc::clone(&self.members[i]))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is the failure report

    use std::collections::HashMap;
    use std::sync::Arc;

    use bytes::Bytes;
    use starling_config::SlowSubscriberPolicy;
    use tokio::time::Instant;

    use super::Group;
    use crate::counters::Counters;
    use crate::queue_budget::QueueBudget;
    use crate::sink::{SinkClosed, SinkFuture, SubscriberSink, WriteNow};
    use crate::subscriber::{Frames, Identity, QueuePolicy, Queued, Subscriber};

    struct NoSink;

    impl SubscriberSink for NoSink {
        fn write_now(&mut self, _bufs: &mut [Bytes]) -> WriteNow {
            WriteNow::Done
        }
        fn write_all<'a>(
            &'a mut self,
            _bufs: &'a mut [Bytes],
        ) -> SinkFuture<'a, Result<(), SinkClosed>> {
            Box::pin(async { Ok(()) })
        }
        fn finish(self: Box<Self>) -> SinkFuture<'static, ()> {
            Box::pin(async {})
        }
    }

    fn member(id: u64, capacity: usize) -> Arc<Subscriber> {
        Arc::new(Subscriber::new(
            Identity {
                id,
                conn_id: id,
                lane: 0,
                topic: Arc::from("jobs"),
                headers: false,
                group: Some(Arc::from("workers")),
            },
            QueuePolicy {
                policy: SlowSubscriberPolicy::DropNew,
                capacity,
            },
            Box::new(NoSink),
            Arc::new(Counters::new(1)),
            Arc::new(QueueBudget::new(u64::MAX)),
        ))
    }

    fn batch() -> Queued {
        Queued {
            frame: Frames::One(Bytes::from_static(b"x")),
            events: 1,
            enqueued: Instant::now(),
        }
    }

    fn group(members: &[Arc<Subscriber>]) -> Group {
        let mut g = Group::new(Arc::from("jobs"), Arc::from("workers"), false);
        for m in members {
            g.add(Arc::clone(m));
        }
        g
    }

    #[tokio::test]
    async fn members_with_equal_room_take_turns() {
        let ms: Vec<_> = (1..=4).map(|id| member(id, 1000)).collect();
        let mut g = group(&ms);
        let mut got = HashMap::<u64, usize>::new();
        for _ in 0..400 {
            let m = g.pick().unwrap();
            m.offer(batch()).await;
            *got.entry(m.id).or_default() += 1;
            // Every member drains at once, so the rooms stay equal: a strict rotation.
            let _ = m.take(usize::MAX);
        }
        assert_eq!(got.values().copied().collect::<Vec<_>>(), vec![100; 4]);
    }

    #[tokio::test]
    async fn the_member_with_the_most_room_is_chosen_and_a_full_one_is_passed_over() {
        let ms: Vec<_> = (1..=3).map(|id| member(id, 4)).collect();
        let mut g = group(&ms);
        // Member 1 never drains; 2 and 3 drain after every batch.
        let mut got = HashMap::<u64, usize>::new();
        for _ in 0..100 {
            let m = g.pick().unwrap();
            m.offer(batch()).await;
            *got.entry(m.id).or_default() += 1;
            if m.id != 1 {
                let _ = m.take(usize::MAX);
            }
        }
        assert!(got[&1] <= 4, "a member that never drains got {}", got[&1]);
        assert_eq!(got[&2] + got[&3] + got[&1], 100);
        assert_eq!(ms[0].room(), 4 - got[&1]);
    }

    #[tokio::test]
    async fn closed_members_are_skipped_and_an_empty_group_picks_none() {
        let ms: Vec<_> = (1..=2).map(|id| member(id, 8)).collect();
        let mut g = group(&ms);
        ms[0].close();
        for _ in 0..5 {
            assert_eq!(g.pick().unwrap().id, 2);
        }
        ms[1].close();
        assert!(g.pick().is_none());
        g.prune();
        assert!(g.is_empty());
    }

    #[test]
    fn membership_is_by_subject_name_and_kind() {
        let m = member(1, 1);
        let g = group(&[]);
        assert!(g.holds(&m, false));
        assert!(!g.holds(&m, true));
        let other = Group::new(Arc::from("jobs"), Arc::from("others"), false);
        assert!(!other.holds(&m, false));
    }
}
