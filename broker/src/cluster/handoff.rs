//! Cache hand-off between members.
//!
//! - **Push.** After a membership change, and whenever a peer stores a key here that this
//!   broker does not own, every entry this broker holds but does not own is written to its
//!   owner (with its remaining TTL) and removed here. Entries whose owner cannot be reached
//!   stay and are retried every poll interval.
//! - **Drain.** On SIGTERM a member pushes its own entries to the member that owns them when it
//!   is gone (rendezvous over the other members), so a rolling restart or a scale-down does
//!   not empty its share of the cache; the push above brings them back when it returns.
//! - **Pull on miss** (in `server::cache`): for `cluster_handoff_window_ms` after a change or a
//!   start, a miss at the owner asks the member that held the key before.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use starling_placement::Kind;
use tokio::sync::{Notify, watch};

use super::{Member, MemberSet, Route, route_in};
use crate::cache::ExportedEntry;
use crate::server::Ctx;

/// What a push round achieved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pushed {
    /// Entries written to their owner and removed here.
    pub moved: usize,
    /// Entries left here because their owner could not be reached.
    pub left: usize,
}

/// Pushes every entry this broker holds but does not own in the current view.
pub async fn push_foreign(ctx: &Ctx) -> Pushed {
    let cluster = &ctx.cluster;
    let entries = ctx
        .cache
        .export_where(|k| cluster.route(Kind::CacheKey, k) != Route::Local);
    push(ctx, entries, |key| {
        match cluster.route(Kind::CacheKey, key) {
            Route::Peer(m) => Some(m),
            Route::Local => None,
        }
    })
    .await
}

/// On SIGTERM: pushes every entry to its owner among the OTHER members.
pub async fn drain_to_successors(ctx: &Ctx) -> Pushed {
    let view = ctx.cluster.view();
    let others: Vec<Member> = view
        .current
        .members()
        .iter()
        .filter(|m| m.id != ctx.cluster.self_id())
        .cloned()
        .collect();
    let Ok(rest) = MemberSet::new(others) else {
        return Pushed::default();
    };
    let entries = ctx.cache.export_where(|_| true);
    let me = ctx.cluster.self_id().to_string();
    push(ctx, entries, |key| {
        match route_in(&rest, &me, Kind::CacheKey, key) {
            Route::Peer(m) => Some(m),
            Route::Local => None,
        }
    })
    .await
}

async fn push(
    ctx: &Ctx,
    entries: Vec<ExportedEntry>,
    owner_of: impl Fn(&[u8]) -> Option<Member>,
) -> Pushed {
    let mut by_owner: HashMap<String, (Member, Vec<ExportedEntry>)> = HashMap::new();
    for e in entries {
        if let Some(owner) = owner_of(&e.key) {
            by_owner
                .entry(owner.id.clone())
                .or_insert_with(|| (owner, Vec::new()))
                .1
                .push(e);
        }
    }
    let mut result = Pushed::default();
    for (_, (owner, entries)) in by_owner {
        let client = match ctx.peers.client(&owner).await {
            Ok(c) => c,
            Err(_) => {
                result.left += entries.len();
                continue;
            }
        };
        let mut iter = entries.into_iter();
        for e in iter.by_ref() {
            match client
                .cache_put(e.key.clone(), e.value.clone(), e.ttl)
                .await
            {
                Ok(_replaced) => {
                    ctx.cache.remove_exported(&e);
                    result.moved += 1;
                }
                Err(err) => {
                    ctx.peers.failed(&owner, &err).await;
                    result.left += 1;
                    break;
                }
            }
        }
        result.left += iter.count();
    }
    if result.moved > 0 {
        ctx.metrics
            .cluster_handoff_keys
            .with_label_values(&["pushed"])
            .inc_by(result.moved as u64);
        tracing::info!(
            moved = result.moved,
            left = result.left,
            "cache entries handed off"
        );
    }
    result
}

/// Runs push rounds on membership changes, on `wake` (a peer stored a foreign key) and, while
/// entries are left, every `every`.
pub async fn run(
    ctx: Weak<Ctx>,
    wake: Arc<Notify>,
    mut changes: watch::Receiver<u64>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut pending = false;
    loop {
        tokio::select! {
            () = wake.notified() => {}
            r = changes.changed() => if r.is_err() { return },
            () = tokio::time::sleep(every), if pending => {}
            _ = stop.changed() => return,
        }
        let Some(ctx) = ctx.upgrade() else {
            return;
        };
        pending = push_foreign(&ctx).await.left > 0;
    }
}
