//! Catch-ups: a plain client resuming at a broker that relays its topic (another member owns
//! it) from a position this broker's retained tail does not reach back to (an older stream
//! of the owner, or events the tail has let go) needs events only the owner holds, and they
//! must come before the tail's newer ones. The topic's task holds such a subscriber back from
//! its fan-out (`pubsub::topic`, `Control::CatchUp`), and a catch-up made for it alone
//! subscribes at the owner from its position and hands each run of events to the topic,
//! which queues it to that subscriber only. Once the retained tail reaches back to where the
//! subscriber stands, the topic queues it the tail from there and adds it to its subscribers,
//! and the catch-up ends: every event once, in the owner's order, whether an upstream
//! subscription already relayed the topic past the position or not (a batch the subscriber
//! partly has is sent whole; the client drops the repeats). A position the tail reaches back
//! to is served from the tail at once, as before.
//!
//! With retention off (`replay_window_ms: 0`) the tail never reaches back, and the catch-up
//! stays that subscriber's own subscription at the owner. It resubscribes from where it
//! stands when its link breaks or the owner changes; when this broker becomes the owner, or
//! drains, it gives up and the subscriber joins from where it stands with what the topic
//! holds here (as a resuming subscriber does at an owner).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use starling_placement::Kind;
use starling_proto::{Position, StartAt};
use tokio::sync::oneshot;

use super::Route;
use super::upstream::{RETRY_PAUSE, Run, Upstreams, gather};
use crate::pubsub::subscriber::Subscriber;
use crate::pubsub::topic::CaughtUp;

/// How often a catch-up waiting for the owner's next event checks that its subscriber is
/// still there.
const CHECK_EVERY: Duration = Duration::from_secs(1);

impl Upstreams {
    /// Starts the catch-up of `sub` when its topic holds it back: `behind` then gives the
    /// position to start from at the owner (it is dropped when the subscriber joined at
    /// once).
    pub fn catch_up(self: &Arc<Self>, sub: Arc<Subscriber>, behind: oneshot::Receiver<Position>) {
        let upstreams = Arc::downgrade(self);
        tokio::spawn(async move {
            if let Ok(from) = behind.await {
                run(upstreams, sub, from).await;
            }
        });
    }
}

/// Feeds `sub` from the owner, from `at` on, until its topic lets it join (or it ends).
async fn run(upstreams: Weak<Upstreams>, sub: Arc<Subscriber>, mut at: Position) {
    let topic = sub.topic.to_string();
    loop {
        let Some(strong) = upstreams.upgrade() else {
            return;
        };
        let topics = Arc::clone(&strong.topics);
        let owner = match strong.cluster.route(Kind::Topic, topic.as_bytes()) {
            Route::Peer(owner) if !sub.is_closed() && !strong.stopped.load(Ordering::SeqCst) => {
                owner
            }
            // Ended, draining, or owned here now: join with what the topic holds.
            _ => {
                drop(strong);
                topics.catch_up(&topic, sub.id, at, Vec::new()).await;
                return;
            }
        };
        let client = match strong.peers.client(&owner).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(%topic, id = sub.id, error = %e, "catch-up: owner unavailable");
                drop(strong);
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        let mut up = match client.subscribe_at(&topic, StartAt::Position(at)).await {
            Ok(s) => s,
            Err(e) => {
                if e.is_link_failure() {
                    strong.peers.failed(&owner, &e).await;
                }
                tracing::debug!(%topic, id = sub.id, error = %e, "catch-up: subscribe refused");
                drop(strong);
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        strong
            .metrics
            .cluster_forwarded
            .with_label_values(&["subscribe"])
            .inc();
        drop(strong);
        tracing::debug!(%topic, id = sub.id, owner = %owner.id, ?at, "catch-up from the owner");
        let mut next = None;
        loop {
            let item = match next.take() {
                Some(item) => item,
                None => match tokio::time::timeout(CHECK_EVERY, up.next_event()).await {
                    Ok(item) => item,
                    Err(_) if sub.is_closed() => {
                        topics.catch_up(&topic, sub.id, at, Vec::new()).await;
                        return;
                    }
                    Err(_) => continue,
                },
            };
            let Some(Ok(first)) = item else {
                break;
            };
            let Run {
                origin,
                payloads,
                end,
                lookahead,
                ..
            } = gather(first, &mut up);
            match topics.catch_up(&topic, sub.id, origin, payloads).await {
                CaughtUp::Behind => at = end,
                CaughtUp::Joined | CaughtUp::Gone => return,
            }
            next = lookahead;
        }
        tracing::debug!(%topic, id = sub.id, "catch-up subscription ended; resubscribing");
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}
