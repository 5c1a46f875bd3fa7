//! Whether a single-copy durable topic's new owner has copied everything the other members'
//! logs hold ([`HandOff`], pure): the state its topic task keeps between catch-ups
//! (`durable::transfer::catch_up`).
//!
//! The member to read is the topic's **source** (`durable::transfer::LogPeers::source`): its
//! owner before the last membership change (or in this broker's absence), while the hand-off
//! window is open; and a member claiming its log is read too. Records past this log's end can
//! only be there: the member that owned the topic last holds everything the others hold. A
//! catch-up that could not read the source (unreachable or refusing) cannot tell whether it
//! holds `persisted`-acked records this log lacks; numbering on would hide them from every
//! subscriber, and lose them with that member's volume. So until the source has been read
//! since the membership last changed, the topic takes no publish (`Unavailable`, the publisher
//! retries) and the task tries again, after [`FIRST_RETRY`], doubling up to [`MAX_RETRY`], and
//! whenever a claim or a membership change runs a catch-up anyway.
//!
//! Not waited for: another member that cannot be read (best effort, as before: it holds
//! nothing the source lacks); a source no longer asked once the hand-off window
//! (`cluster_handoff_window_ms`) closes, so a leaving broker that crashed has that long to
//! come back; and a log that was read but does not fit this one (a bad page, a record that
//! does not follow), which asking again would meet the same.

use std::time::Duration;

use tokio::time::Instant;

/// The wait before the first retry of a catch-up that left a member unread.
pub const FIRST_RETRY: Duration = Duration::from_millis(500);
/// The longest wait between retries.
pub const MAX_RETRY: Duration = Duration::from_secs(8);

/// See the module doc.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HandOff {
    /// The last catch-up read the members it must (or none has run: a topic that is not a
    /// new owner's).
    #[default]
    Complete,
    /// The last catch-up left `unread` members it must read unread (the source, a claimant);
    /// the next try is at `retry_at`, and the one after it `wait` later.
    Incomplete {
        /// Members the last catch-up must have read and could not.
        unread: usize,
        /// When the task tries again.
        retry_at: Instant,
        /// The wait after the next try, should it fail too.
        wait: Duration,
    },
}

impl HandOff {
    /// The state after a catch-up at `now` that could not read `unread` members.
    pub fn after(self, unread: usize, now: Instant) -> HandOff {
        if unread == 0 {
            return HandOff::Complete;
        }
        let wait = match self {
            HandOff::Complete => FIRST_RETRY,
            HandOff::Incomplete { wait, .. } => wait,
        };
        HandOff::Incomplete {
            unread,
            retry_at: now + wait,
            wait: (wait * 2).min(MAX_RETRY),
        }
    }

    /// When the task should try the catch-up again (`None`: it need not).
    pub fn retry_at(self) -> Option<Instant> {
        match self {
            HandOff::Complete => None,
            HandOff::Incomplete { retry_at, .. } => Some(retry_at),
        }
    }

    /// Why publishes are refused now (`None`: they are not).
    pub fn refusal(self, topic: &str) -> Option<String> {
        match self {
            HandOff::Complete => None,
            HandOff::Incomplete { unread, .. } => Some(format!(
                "`{topic}` moved here and its former owner's log ({unread} member(s)) could not \
                 be read yet, so it may lack acknowledged records; publish again"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_catch_up_that_read_every_member_completes_the_hand_off() {
        let now = Instant::now();
        let failed = HandOff::Complete.after(1, now);
        assert_eq!(failed.after(0, now), HandOff::Complete);
        assert_eq!(HandOff::Complete.after(0, now), HandOff::Complete);
        assert_eq!(HandOff::Complete.refusal("t"), None);
        assert_eq!(HandOff::Complete.retry_at(), None);
    }

    #[test]
    fn retries_back_off_to_a_ceiling_and_publishes_are_refused_meanwhile() {
        let now = Instant::now();
        let mut h = HandOff::Complete.after(2, now);
        assert_eq!(h.retry_at(), Some(now + FIRST_RETRY));
        let refusal = h.refusal("orders").unwrap_or_default();
        assert!(
            refusal.contains("`orders`") && refusal.contains("2 member(s)"),
            "{refusal}"
        );
        let mut waits = Vec::new();
        for _ in 0..8 {
            let Some(at) = h.retry_at() else {
                panic!("still incomplete")
            };
            waits.push(at - now);
            h = h.after(1, now);
        }
        assert_eq!(
            waits[..4],
            [
                FIRST_RETRY,
                FIRST_RETRY * 2,
                FIRST_RETRY * 4,
                FIRST_RETRY * 8
            ]
        );
        assert!(waits.iter().all(|w| *w <= MAX_RETRY));
        assert_eq!(waits.last(), Some(&MAX_RETRY));
    }
}
