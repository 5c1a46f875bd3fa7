//! The cluster's topics document and its BrokerTopics' status: lists the namespace's
//! BrokerTopics naming the cluster ([`gather`]), judges them ([`crate::validate::topics`]),
//! applies the ConfigMap `<cluster>-topics` ([`apply_document`]; skipped when the API server
//! already holds it as rendered) and writes each BrokerTopic's status whose content changed
//! ([`write_statuses`]), by server-side apply under [`TOPIC_FIELD_MANAGER`].
//!
//! Run on every reconcile of the cluster; the controller maps every BrokerTopic change and
//! deletion to its cluster's reconcile, except the operator's own status writes
//! ([`TopicWrites`]: the resource version each write returned), so a status that changes at
//! every read of the brokers (a lag) does not feed a reconcile loop.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use starling_config::topics::TopicsDocument;

use super::apply_cached;
use crate::build::topics_config_map;
use crate::crd::GROUP;
use crate::crd::topic::{BrokerTopic, BrokerTopicStatus, TopicReplicaStatus, topic_reasons};
use crate::error::{Error, Result};
use crate::live::LiveChildren;
use crate::names::TOPIC_FIELD_MANAGER;
use crate::roll::BrokerReplicas;
use crate::status::topics::{by_policy, status_of};
use crate::validate::ValidatedCluster;
use crate::validate::topics::{ClusterFacts, Judged, TopicEntry, judge};

/// The resource version of the operator's last status write to each BrokerTopic (by
/// namespace and name): a watch event carrying it is the operator's own write. One entry per
/// BrokerTopic written, replaced by the next event of that object.
#[derive(Debug, Clone, Default)]
pub struct TopicWrites(Arc<Mutex<HashMap<(String, String), String>>>);

impl TopicWrites {
    /// Records the version a status write to `ns/name` returned (`None`: forget it).
    pub(crate) fn record(&self, ns: &str, name: &str, version: Option<String>) {
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match version {
            Some(v) => map.insert((ns.to_string(), name.to_string()), v),
            None => map.remove(&(ns.to_string(), name.to_string())),
        };
    }

    /// Whether `topic`, as a watch event shows it, is the operator's own last status write;
    /// any other version forgets the recorded one.
    pub fn is_own_write(&self, topic: &BrokerTopic) -> bool {
        let key = (topic.namespace().unwrap_or_default(), topic.name_any());
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let own = map
            .get(&key)
            .is_some_and(|v| topic.metadata.resource_version.as_ref() == Some(v));
        if !own {
            map.remove(&key);
        }
        own
    }
}

/// A cluster's BrokerTopics (not being deleted) and the verdicts on them.
#[derive(Debug, Clone, PartialEq)]
pub struct Gathered {
    /// The BrokerTopics naming the cluster.
    pub topics: Vec<BrokerTopic>,
    /// The document of the accepted ones and every verdict.
    pub judged: Judged,
}

/// What the verdicts read of a validated cluster.
pub fn facts(v: &ValidatedCluster) -> ClusterFacts {
    ClusterFacts {
        storage: v.storage.is_some(),
        max_frame_bytes: v.config.max_frame_bytes,
        brokers: u32::try_from(v.replicas).unwrap_or(0),
        durable_replicas: v.config.durable_replicas,
    }
}

/// Lists the namespace's BrokerTopics naming `v` and judges them.
pub async fn gather(client: &Client, v: &ValidatedCluster) -> Result<Gathered> {
    let ns = &v.id.namespace;
    let api: Api<BrokerTopic> = Api::namespaced(client.clone(), ns);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube("list", "BrokerTopic", ns, e))?;
    let topics: Vec<BrokerTopic> = list
        .items
        .into_iter()
        .filter(|t| t.spec.cluster_ref == v.id.name && t.metadata.deletion_timestamp.is_none())
        .collect();
    let names: Vec<String> = topics.iter().map(ResourceExt::name_any).collect();
    let entries: Vec<TopicEntry<'_>> = topics
        .iter()
        .zip(&names)
        .map(|(t, name)| TopicEntry {
            name,
            created: t
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|c| c.0.as_second()),
            spec: &t.spec,
        })
        .collect();
    let judged = judge(&entries, &facts(v));
    Ok(Gathered { topics, judged })
}

/// Applies the ConfigMap holding `document` (a cluster without storage has none: its pods
/// mount nothing and the brokers read no topics file).
pub async fn apply_document(
    client: &Client,
    live: &LiveChildren,
    v: &ValidatedCluster,
    document: &TopicsDocument,
) -> Result<()> {
    if v.storage.is_none() {
        return Ok(());
    }
    let cm: ConfigMap = topics_config_map::build(v, document);
    apply_cached(client, live, &cm).await.map(|_| ())
}

/// Writes the status of every gathered BrokerTopic whose status changed. `reports`: the
/// brokers' `GET /replicas` answers of this reconcile (`None`: not read, the listed topics
/// stay as they were); `paused`: the document was not applied, so accepted topics report
/// `ClusterPaused`.
pub async fn write_statuses(
    client: &Client,
    writes: &TopicWrites,
    gathered: &Gathered,
    reports: Option<&[BrokerReplicas]>,
    paused: bool,
) -> Result<()> {
    let by_name: BTreeMap<&str, &crate::validate::topics::Verdict> = gathered
        .judged
        .verdicts
        .iter()
        .map(|v| (v.name.as_str(), v))
        .collect();
    let grouped = reports.map(|r| by_policy(r, &gathered.judged.document));
    let none: Vec<TopicReplicaStatus> = Vec::new();
    let now = Time(Timestamp::now());
    for topic in &gathered.topics {
        let name = topic.name_any();
        let Some(verdict) = by_name.get(name.as_str()) else {
            continue;
        };
        let (reason, message) = if paused && verdict.accepted() {
            (
                topic_reasons::CLUSTER_PAUSED,
                "the cluster is paused: the topics document is not updated".to_string(),
            )
        } else {
            (verdict.reason, verdict.message.clone())
        };
        let listed = grouped
            .as_ref()
            .map(|g| g.get(&name).map_or(none.as_slice(), Vec::as_slice));
        let status = status_of(topic, reason, &message, listed, now.clone());
        write_status(client, writes, topic, &status).await?;
    }
    Ok(())
}

/// Writes `status` to `topic` unless it already holds it.
pub async fn write_status(
    client: &Client,
    writes: &TopicWrites,
    topic: &BrokerTopic,
    status: &BrokerTopicStatus,
) -> Result<()> {
    if topic.status.as_ref() == Some(status) {
        return Ok(());
    }
    let ns = topic
        .namespace()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    let name = topic.name_any();
    let api: Api<BrokerTopic> = Api::namespaced(client.clone(), &ns);
    let body = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "BrokerTopic",
        "status": status,
    });
    let stored = api
        .patch_status(
            &name,
            &PatchParams::apply(TOPIC_FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map_err(|e| Error::kube("apply status", "BrokerTopic", &name, e))?;
    writes.record(&ns, &name, stored.metadata.resource_version);
    Ok(())
}
