//! Cluster integration tests: several real brokers in one process on loopback, with server and
//! peer certificates from one test CA and a members file, with real QUIC between them and to
//! the clients.
//!
//! One test binary with a module per area keeps link time down on small machines.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod consumers;
mod durable_handoff;
mod durable_owner;
mod failure;
mod late;
mod meet;
mod patterns;
mod policy_moves;
mod queue_groups;
mod relay_live;
mod relay_resume;
mod replica_link;
mod replica_moves;
mod replicated;
mod replicated_retention;
mod replicated_sigkill;
mod rotation;
mod scale;
mod topic_policies;

// The cluster harness, shared with the CLI's cluster test.
use starling_testkit::cluster as harness;

/// Receives from every subscription until `want` events arrived in all (failing after
/// `harness::SOON`), then half a second more, so a duplicate would show; returns what `f`
/// made of each subscription's events.
async fn collect_each<T>(
    subs: &mut [starling_client::Subscription],
    want: usize,
    f: impl Fn(&starling_client::Event) -> T,
) -> Vec<Vec<T>> {
    use std::time::{Duration, Instant};
    let mut got: Vec<Vec<T>> = subs.iter().map(|_| Vec::new()).collect();
    let deadline = Instant::now() + harness::SOON;
    let mut settle: Option<Instant> = None;
    loop {
        let total: usize = got.iter().map(Vec::len).sum();
        if total >= want && settle.is_none() {
            settle = Some(Instant::now() + Duration::from_millis(500));
        }
        if settle.is_some_and(|s| Instant::now() >= s) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{total} of {want} events arrived"
        );
        for (i, s) in subs.iter_mut().enumerate() {
            if let Ok(Some(Ok(event))) =
                tokio::time::timeout(Duration::from_millis(20), s.next_event()).await
            {
                got[i].push(f(&event));
            }
        }
    }
}
