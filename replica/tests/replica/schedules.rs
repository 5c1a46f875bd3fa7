//! Randomised fault schedules on a simulated three-replica topic, each from a seed, with the
//! checker of `common`: publishes interleaved with partitions and heals, one-way link
//! cuts, frame loss and delay, leader power cuts (only fsynced bytes survive) and restarts,
//! a power cut of every replica at once, a replica restarted with an empty volume, and
//! membership 3 → 5 → 3. At the end the
//! network heals, a last publish commits, and every live replica must hold every
//! acknowledged publish exactly once, in order, at its acknowledged index, and no index may
//! ever have been seen holding two different records.
//!
//! `REPLICA_SEEDS` (a count) and `REPLICA_SEED_BASE` choose the seeds (default: 8 seeds
//! from 1, which `cargo test` runs); `scripts/replica-soak.sh N` runs many more.

use std::time::Duration;

use crate::common::{Checker, Cluster, node, test_config};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const STEPS: usize = 60;

/// What a run did, for the report.
#[derive(Debug, Default)]
struct Tally {
    acked: usize,
    failed: usize,
    crashes: usize,
    wipes: usize,
    partitions: usize,
    membership: usize,
    outages: usize,
}

async fn run(seed: u64) -> Tally {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut c = Cluster::start(seed, &[1, 2, 3], test_config()).await;
    c.await_leader(Duration::from_secs(10)).await.unwrap();
    if std::env::var("REPLICA_TRACE").is_ok() {
        for id in c.live() {
            eprintln!("seed {seed}: start {:?}", c.topic(id).status());
        }
    }
    let mut checker = Checker::default();
    let mut tally = Tally::default();
    let mut n = 0u64;
    // At most one replica is down or cut off at a time, so a quorum can always form.
    let mut down: Option<u64> = None;
    let mut grown = false;
    for _ in 0..STEPS {
        let roll = rng.random_range(0..100);
        // A replica re-joining with an empty volume counts as down until it caught up.
        if down.is_none() && c.live().iter().any(|&id| c.topic(id).is_catching_up()) {
            down = Some(0);
        }
        if std::env::var("REPLICA_TRACE").is_ok() {
            eprintln!(
                "seed {seed}: roll {roll} down {down:?} live {:?} leader {:?}",
                c.live(),
                c.leader()
            );
        }
        match roll {
            0..55 => {
                let messages: Vec<Vec<u8>> = (0..rng.random_range(1..4))
                    .map(|k| format!("s{seed}-m{n}-{k}").into_bytes())
                    .collect();
                n += 1;
                match c.publish(messages.clone(), Duration::from_secs(3)).await {
                    Ok(index) => {
                        checker.ack(index, messages);
                        tally.acked += 1;
                    }
                    Err(_) => tally.failed += 1,
                }
            }
            55..62 if down.is_none() => {
                let ids = c.live();
                let victim = ids[rng.random_range(0..ids.len())];
                c.net.isolate(victim, &c.ids());
                down = Some(victim);
                tally.partitions += 1;
            }
            62..66 if down.is_none() => {
                let ids = c.live();
                let a = ids[rng.random_range(0..ids.len())];
                let b = ids[rng.random_range(0..ids.len())];
                if a != b {
                    c.net.cut_one_way(a, b);
                    down = Some(a);
                    tally.partitions += 1;
                }
            }
            66..72 => {
                c.net
                    .set_drop_probability(if rng.random_bool(0.5) { 0.05 } else { 0.0 });
                let hi = rng.random_range(0..30);
                c.net.set_delay(Duration::ZERO, Duration::from_millis(hi));
            }
            72..80 if down.is_none() => {
                if let Some(leader) = c.leader() {
                    c.crash(leader, true).await;
                    down = Some(leader);
                    tally.crashes += 1;
                }
            }
            80..84 if down.is_none() => {
                let ids = c.live();
                let victim = ids[rng.random_range(0..ids.len())];
                c.wipe(victim).await;
                down = Some(victim);
                tally.wipes += 1;
            }
            84..88 if down.is_none() && !grown => {
                if let Some(leader) = c.leader() {
                    for id in [4, 5] {
                        c.boot_new(id).await;
                        let added = tokio::time::timeout(
                            Duration::from_secs(10),
                            c.topic(leader).add_replica(id, node(id)),
                        )
                        .await;
                        if !matches!(added, Ok(Ok(()))) {
                            break;
                        }
                    }
                    grown = true;
                    tally.membership += 1;
                }
            }
            88..92 if down.is_none() && grown => {
                if let Some(leader) = c.leader() {
                    let mut all = true;
                    for id in [4, 5] {
                        if !c.ids().contains(&id) {
                            continue;
                        }
                        if leader == id {
                            all = false;
                            continue;
                        }
                        let removed = tokio::time::timeout(
                            Duration::from_secs(10),
                            c.topic(leader).remove_replica(id),
                        )
                        .await;
                        if matches!(removed, Ok(Ok(()))) {
                            c.retire(id).await;
                        } else {
                            all = false;
                        }
                    }
                    grown = !all;
                    tally.membership += 1;
                }
            }
            92..95 if down.is_none() => {
                // Power cut of every replica at once (a site outage), then all restart.
                let ids = c.live();
                for &id in &ids {
                    c.crash(id, true).await;
                }
                for &id in &ids {
                    c.boot(id).await;
                }
                tally.outages += 1;
            }
            _ => {
                // Heal and restart whatever is down.
                c.net.heal();
                if let Some(id) = down.take()
                    && !c.live().contains(&id)
                    && c.ids().contains(&id)
                {
                    c.boot(id).await;
                }
            }
        }
        if down == Some(0) {
            down = None;
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..400))).await;
        // Everything replicas hold is checked as the run goes, not only at the end.
        for id in c.live() {
            checker.observe(id, &c.topic(id));
        }
    }
    // Heal, restart, and let every live replica catch up to a last publish.
    c.net.heal();
    c.net.set_drop_probability(0.0);
    c.net.set_delay(Duration::ZERO, Duration::ZERO);
    if let Some(id) = down.take()
        && !c.live().contains(&id)
        && c.ids().contains(&id)
    {
        c.boot(id).await;
    }
    if c.await_leader(Duration::from_secs(20)).await.is_none() {
        for id in c.live() {
            let t = c.topic(id);
            eprintln!(
                "seed {seed}: {:?} catching up {}",
                t.status(),
                t.is_catching_up()
            );
        }
        panic!("seed {seed}: no leader after healing");
    }
    let mut last = None;
    for attempt in 0..20 {
        let m = vec![format!("s{seed}-final-{attempt}").into_bytes()];
        if let Ok(index) = c.publish(m.clone(), Duration::from_secs(5)).await {
            checker.ack(index, m);
            last = Some(index);
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let last = last.expect("no publish commits after healing");
    for id in c.live() {
        let t = c.topic(id);
        t.wait_applied(last, Duration::from_secs(30)).await.unwrap();
        checker.check_complete(id, &t);
    }
    tally.acked = checker.acked.len();
    tally
}

fn seeds() -> (u64, u64) {
    let count = std::env::var("REPLICA_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let base = std::env::var("REPLICA_SEED_BASE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    (base, count)
}

#[test]
fn random_schedules_lose_no_acknowledged_publish() {
    let (base, count) = seeds();
    for seed in base..base + count {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .unwrap();
        let tally = rt.block_on(run(seed));
        eprintln!("seed {seed}: {tally:?}");
        assert!(tally.acked > 0, "seed {seed}: nothing acknowledged");
    }
}
