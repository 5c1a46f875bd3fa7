//! BrokerTopics in a test namespace: create one (from YAML-shaped JSON, as a user would, so the
//! suite exercises the CRD's schema), and wait until the operator accepted it (`Ready`), or
//! until it reports a replicated topic of its policy in its status.

use std::time::Duration;

use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};

use crate::kube_env::TestNamespace;
use crate::{E2eError, wait};

/// How long the operator may take to make a BrokerTopic Ready.
pub const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The BrokerTopic resource, addressed dynamically.
pub fn broker_topic_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("starling.dev", "v1alpha1", "BrokerTopic"),
        "brokertopics",
    )
}

impl TestNamespace {
    /// Typed-enough API for BrokerTopics here.
    pub fn topics(&self) -> Api<DynamicObject> {
        Api::namespaced_with(
            self.env.client.clone(),
            &self.name,
            &broker_topic_resource(),
        )
    }

    /// Creates a BrokerTopic of `cluster` with the rest of its spec (the CRD's camelCase
    /// shape: `topic`, `replicas`, `retention`, `fsync`, `maxMessageBytes`).
    pub async fn create_topic(
        &self,
        name: &str,
        cluster: &str,
        spec: serde_json::Value,
    ) -> Result<DynamicObject, E2eError> {
        let mut spec = spec;
        spec["clusterRef"] = serde_json::json!(cluster);
        let obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "starling.dev/v1alpha1",
            "kind": "BrokerTopic",
            "metadata": { "name": name },
            "spec": spec,
        }))
        .map_err(|e| E2eError::Env(format!("BrokerTopic {name}: {e}")))?;
        Ok(self.topics().create(&PostParams::default(), &obj).await?)
    }

    /// Waits until the BrokerTopic has observed its latest generation and is Ready; returns it.
    pub async fn wait_topic_ready(&self, name: &str) -> Result<DynamicObject, E2eError> {
        let api = self.topics();
        wait::until(
            &format!("BrokerTopic {}/{name} Ready", self.name),
            TOPIC_READY_TIMEOUT,
            || {
                let api = api.clone();
                async move {
                    let topic = api.get(name).await.ok()?;
                    topic_is_ready(&topic).then_some(topic)
                }
            },
        )
        .await
    }

    /// Waits until the BrokerTopic's status lists `topic` with a leader and `in_sync` in-sync
    /// replicas; returns that entry of `status.topics`.
    pub async fn wait_topic_listed(
        &self,
        name: &str,
        topic: &str,
        in_sync: usize,
        timeout: Duration,
    ) -> Result<serde_json::Value, E2eError> {
        let api = self.topics();
        wait::until(
            &format!(
                "BrokerTopic {}/{name} lists {topic} with {in_sync} in sync",
                self.name
            ),
            timeout,
            || {
                let api = api.clone();
                async move {
                    let obj = api.get(name).await.ok()?;
                    let entry = obj
                        .data
                        .pointer("/status/topics")?
                        .as_array()?
                        .iter()
                        .find(|t| t["name"] == topic)?
                        .clone();
                    let synced = entry["inSync"].as_array().map_or(0, Vec::len);
                    (entry["leader"].is_string() && synced >= in_sync).then_some(entry)
                }
            },
        )
        .await
    }
}

/// Whether a BrokerTopic's status is for its current generation and `Ready` is true.
pub fn topic_is_ready(topic: &DynamicObject) -> bool {
    let Some(status) = topic.data.get("status") else {
        return false;
    };
    let observed = status.get("observedGeneration").and_then(|g| g.as_i64());
    let current = observed.is_none_or(|g| Some(g) == topic.metadata.generation);
    current
        && status
            .get("conditions")
            .and_then(|c| c.as_array())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "True")
            })
}

/// The `Ready` condition of a BrokerTopic, as `(status, reason, message)`.
pub fn topic_ready(topic: &DynamicObject) -> Option<(String, String, String)> {
    let cs = topic.data.pointer("/status/conditions")?.as_array()?;
    let c = cs.iter().find(|c| c["type"] == "Ready")?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}
