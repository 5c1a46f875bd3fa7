//! Names, labels, annotations and paths shared by every rendered object.
//!
//! One BrokerCluster named `events` owns: StatefulSet `events`, client Service `events`,
//! headless Service `events-headless`, ConfigMaps `events-config` and `events-members`,
//! ServiceAccount, Role and RoleBinding `events-broker`, (without `spec.tls`) the generated
//! Secret `events-tls`, (with more than one replica) PodDisruptionBudget `events`, the cluster
//! CA Secret `events-ca`, the peer certificate Secret `events-peer`, the users document Secret
//! `events-users`, the topics document ConfigMap `events-topics` (with `spec.storage`) and the
//! NetworkPolicy `events`.

use std::collections::BTreeMap;

/// Server-side apply field manager, also the `app.kubernetes.io/managed-by` label value.
pub const FIELD_MANAGER: &str = "starling-operator";
/// The field manager of the autoscaler's status writes (`effectiveTier`, `autoscaling`).
pub const AUTOSCALER_FIELD_MANAGER: &str = "starling-operator-autoscaler";
/// The field manager of BrokerTopic status writes.
pub const TOPIC_FIELD_MANAGER: &str = "starling-operator-topics";
/// Annotation on every applied child: the hash of what was applied (see
/// [`crate::apply::current`]).
pub const APPLIED_HASH_ANNOTATION: &str = "starling.dev/applied-hash";
/// Pod template annotation whose change rolls the brokers.
pub const CONFIG_HASH_ANNOTATION: &str = "starling.dev/config-hash";
/// StatefulSet annotation of a replicated cluster: the hash of the pod template it was last
/// applied with, from which the operator's held roll sees a template change ([`crate::roll`]).
pub const TEMPLATE_HASH_ANNOTATION: &str = "starling.dev/template-hash";
/// Label holding the owning BrokerCluster's name.
pub const CLUSTER_LABEL: &str = "starling.dev/cluster";
/// `app.kubernetes.io/name` of every broker object.
pub const APP_NAME: &str = "starling-broker";
/// Label selecting the objects this operator manages (used to scope the child watches).
pub const MANAGED_BY_SELECTOR: &str = "app.kubernetes.io/managed-by=starling-operator";

/// Directory of the broker config inside the pod.
pub const CONFIG_DIR: &str = "/etc/starling";
/// File name of the broker config inside [`CONFIG_DIR`] and key in the ConfigMap.
pub const CONFIG_FILE: &str = "broker.yaml";
/// Directory of the TLS secret inside the pod.
pub const TLS_DIR: &str = "/etc/starling/tls";
/// Directory of the peer certificate Secret (`tls.crt`, `tls.key`, `ca.crt`) inside the pod.
pub const PEER_DIR: &str = "/etc/starling/peer";
/// Key of the users document in the users Secret.
pub const USERS_KEY: &str = "users.yaml";
/// Directory of the topics document ConfigMap inside the pod (a directory mount, so the
/// kubelet's updates of the ConfigMap reach the brokers, which re-read the file).
pub const TOPICS_DIR: &str = "/etc/starling/topics";
/// Key of the topics document in the topics ConfigMap, and its file name in [`TOPICS_DIR`].
pub const TOPICS_KEY: &str = "topics.json";
/// Label on a BrokerUser's credentials Secret naming the BrokerUser.
pub const USER_LABEL: &str = "starling.dev/user";
/// Mount point of the optional data volume.
pub const DATA_DIR: &str = "/var/lib/starling";
/// Name of the data volume claim template (broker N's claim is `data-<statefulset>-N`).
pub const DATA_VOLUME: &str = "data";
/// Key of the member list in the members ConfigMap.
pub const MEMBERS_KEY: &str = "members";
/// Cluster DNS domain used when the operator is not told otherwise (`--cluster-domain`).
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";
/// Name of the QUIC port (UDP) on containers and Services.
pub const QUIC_PORT_NAME: &str = "quic";
/// Name of the HTTP port (TCP) on containers and Services.
pub const HTTP_PORT_NAME: &str = "http";

/// The names of every object one BrokerCluster owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    /// The BrokerCluster's own name.
    pub cluster: String,
    /// StatefulSet, client Service and PodDisruptionBudget.
    pub statefulset: String,
    /// Headless Service giving each broker a stable DNS name.
    pub headless_service: String,
    /// ClusterIP Service clients connect to.
    pub client_service: String,
    /// ConfigMap holding `broker.yaml`.
    pub config_map: String,
    /// ServiceAccount of the broker pods.
    pub service_account: String,
    /// PodDisruptionBudget.
    pub pdb: String,
    /// ConfigMap holding the member list the brokers poll (not part of the config hash).
    pub members_config_map: String,
    /// Role letting the brokers read the members ConfigMap.
    pub role: String,
    /// RoleBinding of [`Names::role`] to [`Names::service_account`].
    pub role_binding: String,
    /// Secret the operator generates (once) when `spec.tls` is unset.
    pub generated_tls_secret: String,
    /// Secret holding the cluster CA (`ca.crt`, `ca.key`), created once.
    pub ca_secret: String,
    /// Secret holding the brokers' peer certificate (`tls.crt`, `tls.key`, `ca.crt`).
    pub peer_secret: String,
    /// Secret holding the users document (`users.yaml`) the brokers read.
    pub users_secret: String,
    /// NetworkPolicy of the broker pods.
    pub network_policy: String,
    /// ConfigMap holding the topics document (`topics.json`) of the cluster's BrokerTopics.
    pub topics_config_map: String,
}

impl Names {
    /// Names derived from a BrokerCluster name.
    pub fn new(cluster: &str) -> Self {
        Names {
            cluster: cluster.to_string(),
            statefulset: cluster.to_string(),
            headless_service: format!("{cluster}-headless"),
            client_service: cluster.to_string(),
            config_map: format!("{cluster}-config"),
            service_account: format!("{cluster}-broker"),
            pdb: cluster.to_string(),
            members_config_map: format!("{cluster}-members"),
            role: format!("{cluster}-broker"),
            role_binding: format!("{cluster}-broker"),
            generated_tls_secret: format!("{cluster}-tls"),
            ca_secret: format!("{cluster}-ca"),
            peer_secret: format!("{cluster}-peer"),
            users_secret: format!("{cluster}-users"),
            network_policy: cluster.to_string(),
            topics_config_map: format!("{cluster}-topics"),
        }
    }

    /// Labels that select the cluster's broker pods (immutable once the StatefulSet exists).
    pub fn selector_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("app.kubernetes.io/name".to_string(), APP_NAME.to_string()),
            (
                "app.kubernetes.io/instance".to_string(),
                self.cluster.clone(),
            ),
        ])
    }

    /// The selector as a string, for the `/scale` subresource.
    pub fn selector_string(&self) -> String {
        self.selector_labels()
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Labels on every owned object and on the broker pods.
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.selector_labels();
        labels.insert(
            "app.kubernetes.io/managed-by".to_string(),
            FIELD_MANAGER.to_string(),
        );
        labels.insert(
            "app.kubernetes.io/component".to_string(),
            "broker".to_string(),
        );
        labels.insert(
            "app.kubernetes.io/part-of".to_string(),
            "starling".to_string(),
        );
        labels.insert(CLUSTER_LABEL.to_string(), self.cluster.clone());
        labels
    }

    /// DNS name of the client Service.
    pub fn client_host(&self, namespace: &str) -> String {
        format!("{}.{namespace}.svc", self.client_service)
    }

    /// Name of the broker pod with `ordinal`.
    pub fn pod(&self, ordinal: i32) -> String {
        format!("{}-{ordinal}", self.statefulset)
    }

    /// Fully qualified DNS name of the broker pod with `ordinal`, through the headless Service.
    pub fn pod_host(&self, ordinal: i32, namespace: &str, cluster_domain: &str) -> String {
        format!(
            "{}.{}.{namespace}.svc.{cluster_domain}",
            self.pod(ordinal),
            self.headless_service
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_selector() {
        let n = Names::new("events");
        assert_eq!(n.headless_service, "events-headless");
        assert_eq!(n.config_map, "events-config");
        assert_eq!(
            n.selector_string(),
            "app.kubernetes.io/instance=events,app.kubernetes.io/name=starling-broker"
        );
        assert_eq!(n.client_host("msg"), "events.msg.svc");
        assert_eq!(n.members_config_map, "events-members");
        assert_eq!(n.topics_config_map, "events-topics");
        assert_eq!(
            (n.role.as_str(), n.role_binding.as_str()),
            ("events-broker", "events-broker")
        );
        assert_eq!(n.generated_tls_secret, "events-tls");
        assert_eq!(
            (
                n.ca_secret.as_str(),
                n.peer_secret.as_str(),
                n.users_secret.as_str()
            ),
            ("events-ca", "events-peer", "events-users")
        );
        assert_eq!(
            n.pod_host(2, "msg", "cluster.local"),
            "events-2.events-headless.msg.svc.cluster.local"
        );
        let labels = n.labels();
        assert!(MANAGED_BY_SELECTOR.starts_with("app.kubernetes.io/managed-by="));
        assert_eq!(
            labels
                .get("app.kubernetes.io/managed-by")
                .map(String::as_str),
            Some(FIELD_MANAGER)
        );
        for (k, v) in n.selector_labels() {
            assert_eq!(labels.get(&k), Some(&v));
        }
    }
}
