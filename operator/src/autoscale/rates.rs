//! Rates from counters: each broker pod's counters are differenced against its previous scrape
//! and divided by the time between the two, then summed over the pods into one
//! [`Observation`] per scrape round. Pure: scrape times are inputs.
//!
//! Counter resets: when a counter goes down (the broker process restarted in its pod) or the
//! pod's UID changed (the pod was replaced), the counters restarted from zero, so the delta is
//! the new value itself, as Prometheus' `rate()` does. A pod seen for the first time has no
//! previous scrape: it only sets a baseline, and the round is incomplete (not every expected pod
//! was rated), so it cannot trigger a scale.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use super::prom::BrokerSample;

/// One successful scrape of one broker pod.
#[derive(Debug, Clone, PartialEq)]
pub struct PodScrape {
    /// Pod name.
    pub pod: String,
    /// Pod UID (changes when the pod is replaced).
    pub uid: String,
    /// When it was scraped.
    pub at: Timestamp,
    /// The counters read.
    pub sample: BrokerSample,
}

/// One scrape round over a cluster's broker pods.
#[derive(Debug, Clone, PartialEq)]
pub struct Round {
    /// When the round ran.
    pub at: Timestamp,
    /// Pods expected to answer.
    pub expected: usize,
    /// Pods that answered.
    pub scraped: Vec<PodScrape>,
    /// Pods that did not, with why.
    pub failed: Vec<(String, String)>,
}

/// Rates of one pod over one interval (per second; CPU in cores).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PodRates {
    /// Published msg/s.
    pub publish: f64,
    /// Delivered events/s.
    pub delivered: f64,
    /// Published bytes/s.
    pub published_bytes: f64,
    /// Delivered bytes/s.
    pub delivered_bytes: f64,
    /// CPU cores used.
    pub cpu_cores: f64,
}

/// The aggregate of one round: the cluster's rates over `from..to`.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    /// Start of the interval (the previous round).
    pub from: Timestamp,
    /// End of the interval (this round).
    pub to: Timestamp,
    /// Sum over the rated pods.
    pub total: PodRates,
    /// CPU cores per rated pod.
    pub pod_cpu: BTreeMap<String, f64>,
    /// Pods that were rated.
    pub pods_rated: usize,
    /// Pods expected.
    pub pods_expected: usize,
    /// Counter resets seen in this round (restarted or replaced pods).
    pub resets: usize,
    /// Why pods are missing, when some are.
    pub missing: Vec<String>,
}

impl Observation {
    /// Whether every expected pod was rated: only complete observations may move a tier.
    pub fn complete(&self) -> bool {
        self.pods_expected > 0 && self.pods_rated >= self.pods_expected
    }

    /// The publish rate: the load compared with tier capacities.
    pub fn load(&self) -> f64 {
        self.total.publish
    }
}

/// Seconds from `a` to `b` (negative when `b` is earlier).
pub fn secs_between(a: Timestamp, b: Timestamp) -> f64 {
    b.duration_since(a).as_secs_f64()
}

/// Rates of `now` against `prev`, or `None` when no time passed. Resets count from zero.
pub fn pod_rates(prev: &PodScrape, now: &PodScrape) -> Option<(PodRates, bool)> {
    let dt = secs_between(prev.at, now.at);
    if dt <= 0.0 {
        return None;
    }
    let before = prev.sample.counters();
    let after = now.sample.counters();
    let reset = prev.uid != now.uid || before.iter().zip(after).any(|(b, a)| a < *b);
    let delta = |i: usize| {
        if reset {
            after[i]
        } else {
            after[i] - before[i]
        }
    };
    Some((
        PodRates {
            publish: delta(0) / dt,
            delivered: delta(1) / dt,
            published_bytes: delta(2) / dt,
            delivered_bytes: delta(3) / dt,
            cpu_cores: delta(4) / dt,
        },
        reset,
    ))
}

/// Each pod's last scrape, and when the last round ran.
#[derive(Debug, Clone, Default)]
pub struct Tracker {
    last: BTreeMap<String, PodScrape>,
    last_round: Option<Timestamp>,
}

impl Tracker {
    /// Rates a round against the previous scrapes and remembers it. Pods that failed keep
    /// their previous scrape (the next success is rated over the longer interval); pods absent
    /// from the round (deleted) are forgotten.
    pub fn observe(&mut self, round: Round) -> Observation {
        let from = self.last_round.unwrap_or(round.at);
        let mut total = PodRates::default();
        let mut pod_cpu = BTreeMap::new();
        let mut rated = 0;
        let mut resets = 0;
        let mut missing: Vec<String> = round
            .failed
            .iter()
            .map(|(pod, why)| format!("{pod}: {why}"))
            .collect();
        for scrape in &round.scraped {
            match self
                .last
                .get(&scrape.pod)
                .and_then(|prev| pod_rates(prev, scrape))
            {
                Some((r, reset)) => {
                    rated += 1;
                    resets += usize::from(reset);
                    total.publish += r.publish;
                    total.delivered += r.delivered;
                    total.published_bytes += r.published_bytes;
                    total.delivered_bytes += r.delivered_bytes;
                    total.cpu_cores += r.cpu_cores;
                    pod_cpu.insert(scrape.pod.clone(), r.cpu_cores);
                }
                None => missing.push(format!("{}: first scrape (baseline)", scrape.pod)),
            }
        }
        let present: Vec<&String> = round
            .scraped
            .iter()
            .map(|s| &s.pod)
            .chain(round.failed.iter().map(|(p, _)| p))
            .collect();
        self.last.retain(|pod, _| present.contains(&pod));
        for scrape in round.scraped {
            self.last.insert(scrape.pod.clone(), scrape);
        }
        self.last_round = Some(round.at);
        Observation {
            from,
            to: round.at,
            total,
            pod_cpu,
            pods_rated: rated,
            pods_expected: round.expected,
            resets,
            missing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn scrape(pod: &str, uid: &str, t: i64, published: f64, cpu: f64) -> PodScrape {
        PodScrape {
            pod: pod.into(),
            uid: uid.into(),
            at: at(t),
            sample: BrokerSample {
                published_messages: published,
                delivered_events: published * 2.0,
                published_bytes: published * 100.0,
                delivered_bytes: published * 200.0,
                cpu_seconds: cpu,
                ready: Some(true),
            },
        }
    }

    fn round(t: i64, expected: usize, scraped: Vec<PodScrape>) -> Round {
        Round {
            at: at(t),
            expected,
            scraped,
            failed: vec![],
        }
    }

    #[test]
    fn rates_are_deltas_over_time_summed_over_pods() {
        let mut t = Tracker::default();
        let first = t.observe(round(
            0,
            2,
            vec![
                scrape("b-0", "u0", 0, 1000.0, 1.0),
                scrape("b-1", "u1", 0, 0.0, 0.0),
            ],
        ));
        assert!(!first.complete(), "the first round is only a baseline");
        assert_eq!(first.missing.len(), 2);
        let o = t.observe(round(
            10,
            2,
            vec![
                scrape("b-0", "u0", 10, 11_000.0, 6.0),
                scrape("b-1", "u1", 10, 5_000.0, 2.0),
            ],
        ));
        assert!(o.complete());
        assert_eq!((o.from, o.to), (at(0), at(10)));
        assert_eq!(o.load(), 1500.0);
        assert_eq!(o.total.delivered, 3000.0);
        assert_eq!(o.total.published_bytes, 150_000.0);
        assert_eq!(o.pod_cpu.get("b-0"), Some(&0.5));
        assert_eq!(o.pod_cpu.get("b-1"), Some(&0.2));
        assert_eq!(o.resets, 0);
    }

    #[test]
    fn a_counter_going_down_is_a_restart_counted_from_zero() {
        let mut t = Tracker::default();
        t.observe(round(0, 1, vec![scrape("b-0", "u0", 0, 50_000.0, 100.0)]));
        let o = t.observe(round(10, 1, vec![scrape("b-0", "u0", 10, 2_000.0, 1.0)]));
        assert!(o.complete());
        assert_eq!(o.resets, 1);
        assert_eq!(o.load(), 200.0, "never negative: 2000 since the restart");
    }

    #[test]
    fn a_replaced_pod_is_a_reset_even_when_counters_grew() {
        let mut t = Tracker::default();
        t.observe(round(0, 1, vec![scrape("b-0", "u0", 0, 100.0, 1.0)]));
        let o = t.observe(round(10, 1, vec![scrape("b-0", "NEW", 10, 300.0, 2.0)]));
        assert_eq!((o.resets, o.load()), (1, 30.0));
    }

    #[test]
    fn missing_pods_make_the_observation_incomplete() {
        let mut t = Tracker::default();
        t.observe(round(
            0,
            2,
            vec![
                scrape("b-0", "u0", 0, 0.0, 0.0),
                scrape("b-1", "u1", 0, 0.0, 0.0),
            ],
        ));
        let mut r = round(10, 2, vec![scrape("b-0", "u0", 10, 100.0, 1.0)]);
        r.failed.push(("b-1".into(), "timed out".into()));
        let o = t.observe(r);
        assert!(!o.complete());
        assert_eq!(o.missing, vec!["b-1: timed out".to_string()]);
        // b-1 answers again: rated over the 20 s since its last scrape.
        let o = t.observe(round(
            20,
            2,
            vec![
                scrape("b-0", "u0", 20, 200.0, 2.0),
                scrape("b-1", "u1", 20, 400.0, 2.0),
            ],
        ));
        assert!(o.complete());
        assert_eq!(o.load(), 10.0 + 20.0);
        // Fewer pods than expected (a pod not created yet) is incomplete too.
        let o = t.observe(round(
            30,
            3,
            vec![
                scrape("b-0", "u0", 30, 300.0, 3.0),
                scrape("b-1", "u1", 30, 500.0, 3.0),
            ],
        ));
        assert!(!o.complete());
        // No pods at all is never complete.
        assert!(!Tracker::default().observe(round(0, 0, vec![])).complete());
    }

    #[test]
    fn deleted_pods_are_forgotten() {
        let mut t = Tracker::default();
        t.observe(round(0, 1, vec![scrape("b-0", "u0", 0, 0.0, 0.0)]));
        t.observe(round(10, 0, vec![]));
        let o = t.observe(round(20, 1, vec![scrape("b-0", "u0", 20, 100.0, 1.0)]));
        assert!(!o.complete(), "b-0 came back: a new baseline");
    }
}
