//! What the autoscaler writes after a round: the `status.autoscaling` block and its status
//! fields (see [`status_patch`]). Pure.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use starling_config::Tier;

use super::decide::Decision;
use super::rates::Observation;
use crate::apply::status_body;
use crate::crd::{AutoscalerFields, AutoscalingStatus, BrokerClusterStatus};

fn round_i64(v: f64) -> i64 {
    if v.is_finite() {
        // Rates are far below i64::MAX; `as` saturates anyway.
        v.round() as i64
    } else {
        0
    }
}

/// The status block for one round's observation and decision. The last change time and
/// reason are carried over from `previous` unless this decision is a change.
pub fn status_block(
    obs: &Observation,
    decision: &Decision,
    capacity: u64,
    previous: Option<&AutoscalingStatus>,
    now: Timestamp,
) -> AutoscalingStatus {
    let cap = i64::try_from(capacity).unwrap_or(i64::MAX);
    let publish = round_i64(obs.total.publish);
    let changed = decision.target().is_some();
    AutoscalingStatus {
        publish_msgs_per_sec: publish,
        delivered_msgs_per_sec: round_i64(obs.total.delivered),
        published_bytes_per_sec: round_i64(obs.total.published_bytes),
        delivered_bytes_per_sec: round_i64(obs.total.delivered_bytes),
        pod_cpu_millicores: obs
            .pod_cpu
            .iter()
            .map(|(pod, cores)| (pod.clone(), round_i64(cores * 1000.0)))
            .collect(),
        capacity_msgs_per_sec: cap,
        utilization_percent: if cap > 0 {
            round_i64(obs.total.publish * 100.0 / capacity as f64)
        } else {
            0
        },
        recommendation: decision.recommendation().to_string(),
        reason: decision.reason().to_string(),
        pods_scraped: i32::try_from(obs.pods_rated).unwrap_or(i32::MAX),
        pods_expected: i32::try_from(obs.pods_expected).unwrap_or(i32::MAX),
        last_scrape_time: Some(Time(now)),
        last_change_time: if changed {
            Some(Time(now))
        } else {
            previous.and_then(|p| p.last_change_time.clone())
        },
        last_change_reason: if changed {
            Some(decision.reason().to_string())
        } else {
            previous.and_then(|p| p.last_change_reason.clone())
        },
    }
}

/// The autoscaler's status fields: `autoscaling` always, `effectiveTier` when given (the
/// runner passes the new tier on a change, else the one it already owns, since a server-side
/// apply that leaves a field out removes it). Nothing of the reconciler's status is named.
pub fn status_patch(block: &AutoscalingStatus, new_tier: Option<Tier>) -> Value {
    let fields = AutoscalerFields {
        effective_tier: new_tier,
        autoscaling: Some(block.clone()),
    };
    json!({ "status": fields })
}

/// Whether the status still carries the autoscaler's fields.
pub fn holds_autoscaler_fields(status: Option<&BrokerClusterStatus>) -> bool {
    status.is_some_and(|s| s.effective_tier.is_some() || s.autoscaling.is_some())
}

/// The autoscaler's apply body: `autoscaling` and `effectiveTier` (the new tier on a change,
/// else the one stored), both sent on every write so its field manager keeps owning them.
pub fn autoscaler_status_body(
    block: &AutoscalingStatus,
    new_tier: Option<Tier>,
    stored: Option<&BrokerClusterStatus>,
) -> Value {
    let tier = new_tier.or(stored.and_then(|s| s.effective_tier));
    let patch = status_patch(block, tier);
    status_body(patch["status"].clone())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::autoscale::rates::PodRates;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn observation() -> Observation {
        Observation {
            from: at(0),
            to: at(15),
            total: PodRates {
                publish: 9_100.4,
                delivered: 18_200.0,
                published_bytes: 1_000_000.0,
                delivered_bytes: 2_000_000.0,
                cpu_cores: 0.75,
            },
            pod_cpu: BTreeMap::from([("b-0".to_string(), 0.5), ("b-1".to_string(), 0.25)]),
            pods_rated: 2,
            pods_expected: 2,
            resets: 0,
            missing: vec![],
        }
    }

    #[test]
    fn a_change_sets_the_tier_time_and_reason() {
        let d = Decision::ScaleUp {
            to: Tier::Medium,
            reason: "tier small→medium: publish 9.1k msg/s > 80% of 10k for 3m".into(),
        };
        let s = status_block(&observation(), &d, 10_000, None, at(15));
        assert_eq!(s.publish_msgs_per_sec, 9_100);
        assert_eq!(s.utilization_percent, 91);
        assert_eq!(s.pod_cpu_millicores.get("b-0"), Some(&500));
        assert_eq!((s.pods_scraped, s.pods_expected), (2, 2));
        assert_eq!(s.recommendation, "ScaleUp");
        assert_eq!(s.last_change_time, Some(Time(at(15))));
        let patch = status_patch(&s, d.target());
        assert_eq!(patch["status"]["effectiveTier"], "medium");
        assert_eq!(patch["status"]["autoscaling"]["capacityMsgsPerSec"], 10_000);
        assert_eq!(patch["status"].as_object().map(|o| o.len()), Some(2));
    }

    #[test]
    fn no_change_keeps_the_last_change_and_leaves_the_tier_alone() {
        let prev = AutoscalingStatus {
            last_change_time: Some(Time(at(1))),
            last_change_reason: Some("earlier".into()),
            ..AutoscalingStatus::default()
        };
        let d = Decision::Stay("fine".into());
        let s = status_block(&observation(), &d, 0, Some(&prev), at(30));
        assert_eq!(s.last_change_time, Some(Time(at(1))));
        assert_eq!(s.last_change_reason.as_deref(), Some("earlier"));
        assert_eq!(s.utilization_percent, 0, "no capacity, no division");
        let patch = status_patch(&s, None);
        assert!(patch["status"].get("effectiveTier").is_none());
        assert_eq!(patch["status"]["autoscaling"]["recommendation"], "Stay");
    }
}
