//! Prometheus metrics of the operator process, served on `/metrics`.
//!
//! - `starling_operator_reconcile_total{result}`: reconciles by outcome (`ok`, `error`).
//! - `starling_operator_reconcile_duration_seconds`: reconcile duration histogram.
//! - `starling_operator_reconcile_errors_total{reason}`: failed reconciles by error label.
//! - `starling_operator_spec_rejected_total{reason}`: reconciles that found a refused spec.
//! - `starling_operator_managed_clusters`: BrokerClusters currently watched.
//! - `starling_operator_leader`: 1 while this replica holds the leader lease.
//! - `starling_operator_autoscale_decisions_total{outcome}`: autoscaler decisions by outcome
//!   (`stay`, `scale_up`, `scale_down`, `hold_*`; see [`crate::autoscale::decide::OUTCOMES`]).
//! - `starling_operator_api_requests_total{verb}`: requests sent to the Kubernetes API, by verb
//!   (see [`crate::api_requests::VERBS`]; `status_write` is a PATCH or PUT of a `/status`).

use std::time::Instant;

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

/// The operator's metrics and their registry.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    reconciles: IntCounterVec,
    duration: Histogram,
    errors: IntCounterVec,
    rejected: IntCounterVec,
    autoscale: IntCounterVec,
    api_requests: IntCounterVec,
    /// BrokerClusters currently in the watch caches.
    pub managed_clusters: IntGauge,
    /// 1 while this replica leads.
    pub leader: IntGauge,
}

/// Metric names, for docs and tests.
pub const METRIC_NAMES: &[&str] = &[
    "starling_operator_reconcile_total",
    "starling_operator_reconcile_duration_seconds",
    "starling_operator_reconcile_errors_total",
    "starling_operator_spec_rejected_total",
    "starling_operator_managed_clusters",
    "starling_operator_leader",
    "starling_operator_autoscale_decisions_total",
    "starling_operator_api_requests_total",
];

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Result<Self, prometheus::Error> {
        let registry = Registry::new();
        let reconciles = IntCounterVec::new(
            Opts::new("starling_operator_reconcile_total", "Reconciles by result."),
            &["result"],
        )?;
        let duration = Histogram::with_opts(
            HistogramOpts::new(
                "starling_operator_reconcile_duration_seconds",
                "Duration of one reconcile.",
            )
            .buckets(vec![
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "starling_operator_reconcile_errors_total",
                "Failed reconciles by error reason.",
            ),
            &["reason"],
        )?;
        let rejected = IntCounterVec::new(
            Opts::new(
                "starling_operator_spec_rejected_total",
                "Reconciles that found a refused spec, by Degraded reason.",
            ),
            &["reason"],
        )?;
        let managed_clusters = IntGauge::new(
            "starling_operator_managed_clusters",
            "BrokerClusters currently watched.",
        )?;
        let leader = IntGauge::new(
            "starling_operator_leader",
            "1 while this replica holds the leader lease.",
        )?;
        registry.register(Box::new(reconciles.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        registry.register(Box::new(rejected.clone()))?;
        registry.register(Box::new(managed_clusters.clone()))?;
        let autoscale = IntCounterVec::new(
            Opts::new(
                "starling_operator_autoscale_decisions_total",
                "Tier autoscaler decisions by outcome.",
            ),
            &["outcome"],
        )?;
        for outcome in crate::autoscale::decide::OUTCOMES {
            autoscale.with_label_values(&[outcome]);
        }
        let api_requests = IntCounterVec::new(
            Opts::new(
                "starling_operator_api_requests_total",
                "Requests sent to the Kubernetes API server, by verb.",
            ),
            &["verb"],
        )?;
        for verb in crate::api_requests::VERBS {
            api_requests.with_label_values(&[verb]);
        }
        registry.register(Box::new(leader.clone()))?;
        registry.register(Box::new(autoscale.clone()))?;
        registry.register(Box::new(api_requests.clone()))?;
        Ok(Metrics {
            registry,
            reconciles,
            duration,
            errors,
            rejected,
            autoscale,
            api_requests,
            managed_clusters,
            leader,
        })
    }

    /// Starts timing a reconcile.
    pub fn start(&self) -> ReconcileTimer {
        ReconcileTimer {
            metrics: self.clone(),
            started: Instant::now(),
        }
    }

    /// Counts a refused spec.
    pub fn spec_rejected(&self, reason: &str) {
        self.rejected.with_label_values(&[reason]).inc();
    }

    /// The autoscaler's decision counter, by outcome: its narrow handle on the metrics
    /// (see [`crate::autoscale::runner::AutoscaleContext`]).
    pub fn autoscale_decisions(&self) -> IntCounterVec {
        self.autoscale.clone()
    }

    /// The API request counter, by verb: the client's narrow handle on the metrics (see
    /// [`crate::api_requests::client`]).
    pub fn api_requests(&self) -> IntCounterVec {
        self.api_requests.clone()
    }

    /// Counts one autoscaler decision.
    pub fn autoscale_decision(&self, outcome: &str) {
        self.autoscale.with_label_values(&[outcome]).inc();
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        let families = self.registry.gather();
        if TextEncoder::new().encode(&families, &mut buf).is_err() {
            return String::new();
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

/// Measures one reconcile; call [`ReconcileTimer::finish`] with the outcome.
pub struct ReconcileTimer {
    metrics: Metrics,
    started: Instant,
}

impl ReconcileTimer {
    /// Records the duration and outcome; `error` is the error's metric label.
    pub fn finish(self, error: Option<&str>) {
        let m = &self.metrics;
        m.duration.observe(self.started.elapsed().as_secs_f64());
        match error {
            None => m.reconciles.with_label_values(&["ok"]).inc(),
            Some(reason) => {
                m.reconciles.with_label_values(&["error"]).inc();
                m.errors.with_label_values(&[reason]).inc();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_is_exposed() -> Result<(), prometheus::Error> {
        let m = Metrics::new()?;
        m.start().finish(None);
        m.start().finish(Some("conflict"));
        m.spec_rejected("InvalidConfig");
        m.managed_clusters.set(2);
        m.leader.set(1);
        m.autoscale_decision("scale_up");
        let text = m.render();
        for name in METRIC_NAMES {
            assert!(text.contains(name), "{name} missing from\n{text}");
        }
        assert!(text.contains("starling_operator_reconcile_errors_total{reason=\"conflict\"} 1"));
        assert!(text.contains("starling_operator_reconcile_total{result=\"ok\"} 1"));
        assert!(
            text.contains("starling_operator_autoscale_decisions_total{outcome=\"scale_up\"} 1")
        );
        assert!(
            text.contains(
                "starling_operator_autoscale_decisions_total{outcome=\"hold_cooldown\"} 0"
            )
        );
        m.api_requests().with_label_values(&["status_write"]).inc();
        assert!(text.contains("starling_operator_api_requests_total{verb=\"watch\"} 0"));
        assert!(
            m.render()
                .contains("starling_operator_api_requests_total{verb=\"status_write\"} 1")
        );
        Ok(())
    }
}
