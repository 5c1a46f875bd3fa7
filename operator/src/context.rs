//! The reconciler's shared state: the API client, the event recorder, the metrics, the
//! operator-wide defaults, the leadership fence, the children's watch caches ([`crate::live`])
//! the HTTP client that reads the brokers' volumes and replicas, and the per-cluster failure counts behind
//! the retry backoff. Handed to every reconcile; the autoscaler has its own, narrower handle
//! ([`crate::autoscale::runner::AutoscaleContext`]).

use std::collections::HashMap;
use std::sync::Mutex;

use kube::runtime::events::Recorder;
use kube::{Client, ResourceExt};

use crate::apply::topics::TopicWrites;
use crate::autoscale::fetch::Fetcher;
use crate::crd::BrokerCluster;
use crate::fence::Fence;
use crate::live::LiveChildren;
use crate::metrics::Metrics;
use crate::validate::OperatorDefaults;

/// Shared state of every reconcile.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Event recorder.
    pub recorder: Recorder,
    /// Metrics.
    pub metrics: Metrics,
    /// Operator-wide defaults.
    pub defaults: OperatorDefaults,
    /// Turns lost when this replica stops leading: reconciles end and write nothing more.
    pub fence: Fence,
    /// The children's watch caches, filled by the controllers (empty: every child is read
    /// or applied).
    pub live: LiveChildren,
    /// Reads the brokers' `GET /storage` for the `DiskFull` condition and their
    /// `GET /replicas` for a replicated cluster's held roll (`None`: not read, the condition
    /// stays `Unknown` and a held roll waits; the tests without broker pods).
    pub brokers: Option<Fetcher>,
    failures: Mutex<HashMap<(String, String), u32>>,
    /// The operator's own BrokerTopic status writes, which trigger no cluster reconcile.
    pub topic_writes: TopicWrites,
}

impl Context {
    /// Creates a context.
    pub fn new(
        client: Client,
        recorder: Recorder,
        metrics: Metrics,
        defaults: OperatorDefaults,
    ) -> Self {
        Context {
            client,
            recorder,
            metrics,
            defaults,
            fence: Fence::never(),
            live: LiveChildren::default(),
            brokers: None,
            failures: Mutex::new(HashMap::new()),
            topic_writes: TopicWrites::default(),
        }
    }

    /// The same context, reading the brokers' volumes and replicas with `fetcher`.
    pub fn with_brokers(mut self, fetcher: Fetcher) -> Self {
        self.brokers = Some(fetcher);
        self
    }

    /// The same context, fenced by leadership (see [`crate::fence`]).
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = fence;
        self
    }

    fn key(bc: &BrokerCluster) -> (String, String) {
        (bc.namespace().unwrap_or_default(), bc.name_any())
    }

    /// Counts one more failed reconcile of `bc`; returns the count.
    pub fn record_failure(&self, bc: &BrokerCluster) -> u32 {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(Self::key(bc)).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    /// Forgets the failures of `bc` after a successful reconcile.
    pub fn reset_failures(&self, bc: &BrokerCluster) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&Self::key(bc));
    }
}
