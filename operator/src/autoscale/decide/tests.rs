//! Unit tests of the decision function: sustained load over and under the thresholds, short
//! spikes, hysteresis under oscillating load, the cooldown, the bounds, counter resets and
//! missing pods.

use std::collections::BTreeMap;

use super::*;
use crate::autoscale::prom::BrokerSample;
use crate::autoscale::rates::{PodRates, PodScrape, Round, Tracker};
use crate::crd::AutoscalingSpec;

const STEP: i64 = 15;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn policy() -> Policy {
    Policy::from_spec(&AutoscalingSpec::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn obs(from: i64, to: i64, load: f64, complete: bool) -> Observation {
    Observation {
        from: at(from),
        to: at(to),
        total: PodRates {
            publish: load,
            ..PodRates::default()
        },
        pod_cpu: BTreeMap::new(),
        pods_rated: if complete { 1 } else { 0 },
        pods_expected: 1,
        resets: 0,
        missing: if complete {
            vec![]
        } else {
            vec!["b-0: timed out".into()]
        },
    }
}

/// Observations every 15 s from `start` to `end` (inclusive ends), load from `f(t)`.
fn series(start: i64, end: i64, f: impl Fn(i64) -> f64) -> Vec<Observation> {
    (start / STEP..end / STEP)
        .map(|i| obs(i * STEP, (i + 1) * STEP, f((i + 1) * STEP), true))
        .collect()
}

struct Case {
    window: Vec<Observation>,
    current: Tier,
    policy: Policy,
    tiers: TierTable,
    last_change: Option<Timestamp>,
    ready: bool,
    rolling_out: bool,
    paused: bool,
}

impl Case {
    fn new(current: Tier, window: Vec<Observation>) -> Self {
        Case {
            window,
            current,
            policy: policy(),
            tiers: TierTable::default(),
            last_change: None,
            ready: true,
            rolling_out: false,
            paused: false,
        }
    }

    fn at(&self, now: i64) -> Decision {
        let visible: Vec<Observation> = self
            .window
            .iter()
            .filter(|o| o.to <= at(now))
            .cloned()
            .collect();
        decide(&Input {
            window: &visible,
            current: self.current,
            policy: &self.policy,
            tiers: &self.tiers,
            last_change: self.last_change,
            ready: self.ready,
            rolling_out: self.rolling_out,
            paused: self.paused,
            now: at(now),
        })
    }
}

#[test]
fn sustained_load_above_the_threshold_scales_up_after_the_whole_window() {
    // small: capacity 10k, threshold 80% = 8k; 9.1k msg/s from t=0.
    let c = Case::new(Tier::Small, series(0, 600, |_| 9_100.0));
    // Before 3 minutes of data: not yet, and it says why.
    match c.at(120) {
        Decision::Hold(HoldReason::IncompleteData, why) => {
            assert!(why.contains("of the 3m window observed"), "{why}")
        }
        d => panic!("{d:?}"),
    }
    assert_eq!(
        c.at(180),
        Decision::ScaleUp {
            to: Tier::Medium,
            reason: "tier small→medium: publish 9.1k msg/s > 80% of 10k for 3m".into()
        }
    );
}

#[test]
fn sustained_load_below_the_threshold_scales_down_after_the_whole_window() {
    // medium: down when below 50% of small's 10k = 5k for 15 minutes.
    let c = Case::new(Tier::Medium, series(0, 1200, |_| 4_000.0));
    assert!(matches!(
        c.at(600),
        Decision::Hold(HoldReason::IncompleteData, _)
    ));
    assert_eq!(
        c.at(900),
        Decision::ScaleDown {
            to: Tier::Small,
            reason: "tier medium→small: publish 4k msg/s < 50% of 10k for 15m".into()
        }
    );
    // Large steps down to medium against medium's capacity.
    let c = Case::new(Tier::Large, series(0, 1200, |_| 40_000.0));
    assert_eq!(c.at(900).target(), Some(Tier::Medium));
}

#[test]
fn load_between_the_thresholds_stays() {
    let c = Case::new(Tier::Medium, series(0, 1200, |_| 30_000.0));
    match c.at(1200) {
        Decision::Stay(why) => assert_eq!(why, "publish 30k msg/s is 30% of 100k (medium)"),
        d => panic!("{d:?}"),
    }
    // Above the mark but not for the whole window yet: it says so.
    let c = Case::new(
        Tier::Small,
        series(0, 600, |t| if t > 500 { 9_000.0 } else { 1_000.0 }),
    );
    match c.at(600) {
        Decision::Stay(why) => assert_eq!(
            why,
            "publish 9k msg/s is 90% of 10k (small); above 80%, not yet for 3m"
        ),
        d => panic!("{d:?}"),
    }
    let c = Case::new(
        Tier::Medium,
        series(0, 600, |t| if t > 500 { 1_000.0 } else { 30_000.0 }),
    );
    match c.at(600) {
        Decision::Stay(why) => assert_eq!(
            why,
            "publish 1k msg/s is 1% of 100k (medium); below 50% of 10k (small), not yet for 15m"
        ),
        d => panic!("{d:?}"),
    }
}

#[test]
fn short_spikes_do_not_scale() {
    // 6k baseline with a 2-minute spike to 20k: above 8k, but not for 3 minutes.
    let c = Case::new(
        Tier::Small,
        series(0, 900, |t| {
            if (300..420).contains(&t) {
                20_000.0
            } else {
                6_000.0
            }
        }),
    );
    for now in (180..=900).step_by(15) {
        assert!(
            matches!(c.at(now), Decision::Stay(_)),
            "t={now}: {:?}",
            c.at(now)
        );
    }
    // A one-sample dip during a low period does not scale down either (it is the other way
    // round: one sample above the mark resets the scale-down window).
    let c = Case::new(
        Tier::Medium,
        series(0, 1800, |t| if t == 600 { 7_000.0 } else { 1_000.0 }),
    );
    assert!(matches!(c.at(1400), Decision::Stay(_)));
    assert_eq!(c.at(1500).target(), Some(Tier::Small));
}

/// Simulates the loop: decide every 15 s and apply moves, returning the changes.
fn simulate(start: Tier, secs: i64, load: impl Fn(i64) -> f64) -> Vec<(i64, Tier)> {
    let mut c = Case::new(start, series(0, secs, load));
    let mut changes = Vec::new();
    for now in (STEP..=secs).step_by(STEP as usize) {
        if let Some(to) = c.at(now).target() {
            c.current = to;
            c.last_change = Some(at(now));
            changes.push((now, to));
        }
    }
    changes
}

#[test]
fn oscillating_load_never_flaps() {
    // Oscillating between 6k and 9.5k every minute around small's 8k mark: never 3 minutes
    // above it, so it stays small.
    let wave = |t: i64| if (t / 60) % 2 == 0 { 9_500.0 } else { 6_000.0 };
    assert_eq!(simulate(Tier::Small, 3600, wave), vec![]);
    // Once up on medium, a load that wavers between 3k and 9k (around the scale-down mark of
    // 5k) never drops back: hysteresis between 8k up and 5k down.
    let wave = |t: i64| if (t / 120) % 2 == 0 { 9_000.0 } else { 3_000.0 };
    assert_eq!(simulate(Tier::Medium, 3 * 3600, wave), vec![]);
    // A load that rises, holds and falls moves exactly up once and down once.
    let ramp = |t: i64| {
        if (600..1800).contains(&t) {
            9_000.0
        } else {
            1_000.0
        }
    };
    let changes = simulate(Tier::Small, 4 * 3600, ramp);
    assert_eq!(changes.len(), 2, "{changes:?}");
    // The first high sample covers 585..600: three minutes of high load end at 765.
    assert_eq!(changes[0], (765, Tier::Medium));
    // Down once the 15 minutes after the last high sample (the one ending at 1785) are low.
    assert_eq!(changes[1], (1785 + 900, Tier::Small));
}

#[test]
fn the_cooldown_holds_a_due_change() {
    let mut c = Case::new(Tier::Small, series(0, 900, |_| 9_000.0));
    c.last_change = Some(at(100));
    match c.at(300) {
        Decision::Hold(HoldReason::Cooldown, why) => {
            assert!(why.contains("small→medium"), "{why}");
            assert!(why.contains("3m20s ago (cooldown 5m)"), "{why}");
        }
        d => panic!("{d:?}"),
    }
    assert_eq!(c.at(400).target(), Some(Tier::Medium));
}

#[test]
fn min_and_max_tiers_bound_the_moves() {
    let mut c = Case::new(Tier::Large, series(0, 900, |_| 1_000_000.0));
    match c.at(600) {
        Decision::Stay(why) => assert!(why.contains("large is the maxTier"), "{why}"),
        d => panic!("{d:?}"),
    }
    c.current = Tier::Medium;
    c.policy.max_tier = Tier::Medium;
    assert!(matches!(c.at(600), Decision::Stay(_)));
    let mut c = Case::new(Tier::Medium, series(0, 1800, |_| 10.0));
    c.policy.min_tier = Tier::Medium;
    match c.at(1800) {
        Decision::Stay(why) => assert!(why.contains("medium is the minTier"), "{why}"),
        d => panic!("{d:?}"),
    }
    let c = Case::new(Tier::Small, series(0, 1800, |_| 0.0));
    assert!(
        matches!(c.at(1800), Decision::Stay(_)),
        "small has nowhere to go down"
    );
}

#[test]
fn missing_pods_and_gaps_never_scale() {
    // One incomplete round (a pod did not answer) in the middle of a sustained high load.
    let mut window = series(0, 600, |_| 9_000.0);
    window[8] = obs(120, 135, 0.0, false);
    let c = Case::new(Tier::Small, window);
    match c.at(180) {
        Decision::Hold(HoldReason::IncompleteData, why) => {
            assert!(why.contains("0/1 pods rated"), "{why}")
        }
        d => panic!("{d:?}"),
    }
    // Once it has left the 3-minute window: up.
    assert!(matches!(
        c.at(300),
        Decision::Hold(HoldReason::IncompleteData, _)
    ));
    assert_eq!(c.at(315).target(), Some(Tier::Medium));
    // A gap (rounds missing from 60 s to 120 s).
    let window: Vec<Observation> = series(0, 600, |_| 9_000.0)
        .into_iter()
        .filter(|o| !(o.to > at(60) && o.to <= at(120)))
        .collect();
    let c = Case::new(Tier::Small, window);
    assert!(matches!(
        c.at(180),
        Decision::Hold(HoldReason::IncompleteData, _)
    ));
    // Stale data: nothing since 100 s ago.
    let c = Case::new(Tier::Small, series(0, 300, |_| 9_000.0));
    match c.at(400) {
        Decision::Hold(HoldReason::IncompleteData, why) => {
            assert!(why.contains("no observation"), "{why}")
        }
        d => panic!("{d:?}"),
    }
    // Nothing at all (the operator just started).
    assert!(matches!(
        Case::new(Tier::Small, vec![]).at(0),
        Decision::Hold(HoldReason::IncompleteData, _)
    ));
    // But one complete low observation is enough to know there is nothing to do.
    let mut window = series(0, 600, |_| 2_000.0);
    window[3] = obs(45, 60, 0.0, false);
    assert!(matches!(
        Case::new(Tier::Small, window).at(300),
        Decision::Stay(_)
    ));
}

#[test]
fn counter_resets_neither_scale_nor_block() {
    // Two pods at 4.55k msg/s each (9.1k total); pod b-1 restarts at t=90 (counters from 0)
    // and pod b-0 is replaced at t=150 (new UID): rates stay right and the cluster scales up.
    let mut tracker = Tracker::default();
    let mut window = Vec::new();
    let (mut c0, mut c1) = (1_000_000.0, 5_000_000.0);
    let (mut uid0, mut t_restart1) = ("a".to_string(), None);
    for i in 0..=20 {
        let t = i * STEP;
        let rate = 4_550.0 * STEP as f64;
        if i > 0 {
            c0 += rate;
            c1 += rate;
        }
        if t == 90 {
            c1 = 4_550.0 * STEP as f64; // restarted at the start of the interval
            t_restart1 = Some(t);
        }
        if t == 150 {
            uid0 = "b".into();
            c0 = 4_550.0 * STEP as f64;
        }
        let sample = |v: f64| BrokerSample {
            published_messages: v,
            ..BrokerSample::default()
        };
        let o = tracker.observe(Round {
            at: at(t),
            expected: 2,
            scraped: vec![
                PodScrape {
                    pod: "b-0".into(),
                    uid: uid0.clone(),
                    at: at(t),
                    sample: sample(c0),
                },
                PodScrape {
                    pod: "b-1".into(),
                    uid: "c".into(),
                    at: at(t),
                    sample: sample(c1),
                },
            ],
            failed: vec![],
        });
        if i > 0 {
            assert!((o.load() - 9_100.0).abs() < 1e-6, "t={t}: {}", o.load());
            assert_eq!(o.resets, usize::from(t == 90 || t == 150));
        }
        window.push(o);
    }
    assert_eq!(t_restart1, Some(90));
    let c = Case::new(Tier::Small, window);
    assert_eq!(
        c.at(195),
        Decision::ScaleUp {
            to: Tier::Medium,
            reason: "tier small→medium: publish 9.1k msg/s > 80% of 10k for 3m".into()
        }
    );
}

#[test]
fn not_ready_rolling_out_and_paused_hold() {
    let mut c = Case::new(Tier::Small, series(0, 600, |_| 9_000.0));
    c.rolling_out = true;
    assert!(matches!(
        c.at(600),
        Decision::Hold(HoldReason::RollingOut, _)
    ));
    c.rolling_out = false;
    c.ready = false;
    assert!(matches!(c.at(600), Decision::Hold(HoldReason::NotReady, _)));
    c.ready = true;
    c.paused = true;
    assert!(matches!(c.at(600), Decision::Hold(HoldReason::Paused, _)));
    c.paused = false;
    assert_eq!(c.at(600).target(), Some(Tier::Medium));
}

#[test]
fn capacities_come_from_the_tier_table_with_overrides() {
    let tiers = TierTable::from_yaml(
        "small:\n  capacityMsgsPerSec: 100\nmedium:\n  capacityMsgsPerSec: 1000\n",
        "t",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut c = Case::new(Tier::Small, series(0, 600, |_| 90.0));
    c.tiers = tiers.clone();
    assert_eq!(
        c.at(180).reason(),
        "tier small→medium: publish 90 msg/s > 80% of 100 for 3m"
    );
    let mut c = Case::new(Tier::Medium, series(0, 1200, |_| 20.0));
    c.tiers = tiers;
    assert_eq!(
        c.at(900).reason(),
        "tier medium→small: publish 20 msg/s < 50% of 100 for 15m"
    );
}

#[test]
fn labels_and_numbers() {
    assert_eq!(human(9_100.0), "9.1k");
    assert_eq!(human(10_000.0), "10k");
    assert_eq!(human(500.0), "500");
    assert_eq!(human(1_250_000.0), "1.2M");
    assert_eq!(human(123_456.0), "123k");
    let d = Decision::Hold(HoldReason::Cooldown, "x".into());
    assert_eq!((d.recommendation(), d.outcome()), ("Hold", "hold_cooldown"));
    for d in [
        Decision::Stay(String::new()),
        Decision::ScaleUp {
            to: Tier::Medium,
            reason: String::new(),
        },
        Decision::ScaleDown {
            to: Tier::Small,
            reason: String::new(),
        },
        d,
    ] {
        assert!(OUTCOMES.contains(&d.outcome()));
    }
    assert_eq!(HoldReason::IncompleteData.as_str(), "incomplete_data");
}
