//! The cluster's NetworkPolicy (named like the cluster): ingress to the broker pods only from
//! what it names.
//!
//! - QUIC (UDP 7400) from `spec.network.allowedClients` (default: every pod of the cluster's
//!   own namespace) and from the brokers themselves (peer links).
//! - HTTP (TCP 9400: `/metrics`, `/healthz`, `/readyz`, `/config`) from the operator's pods
//!   (the autoscaler scrapes them) and from the monitoring namespaces
//!   (`spec.network.monitoringNamespaceSelector`, default the namespace `monitoring`).
//!
//! Egress is not restricted. Whether the policy is enforced depends on the CNI.

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::child_meta;
use crate::validate::ValidatedCluster;

/// The label every namespace carries with its own name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// The operator pods' `app.kubernetes.io/name` (the chart's name).
pub const OPERATOR_APP_NAME: &str = "starling-operator";
/// The monitoring namespace allowed by default.
pub const DEFAULT_MONITORING_NAMESPACE: &str = "monitoring";

fn labels(pairs: &[(&str, &str)]) -> LabelSelector {
    LabelSelector {
        match_labels: Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..LabelSelector::default()
    }
}

/// A peer selecting every pod of the namespace `ns`.
pub fn namespace_peer(ns: &str) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(labels(&[(NAMESPACE_NAME_LABEL, ns)])),
        ..NetworkPolicyPeer::default()
    }
}

fn port(protocol: &str, port: u16) -> NetworkPolicyPort {
    NetworkPolicyPort {
        protocol: Some(protocol.to_string()),
        port: Some(IntOrString::Int(port.into())),
        ..NetworkPolicyPort::default()
    }
}

/// The operator's pods: in its namespace when known, else in any namespace.
pub fn operator_peer(operator_namespace: Option<&str>) -> NetworkPolicyPeer {
    NetworkPolicyPeer {
        namespace_selector: Some(match operator_namespace {
            Some(ns) => labels(&[(NAMESPACE_NAME_LABEL, ns)]),
            None => LabelSelector::default(),
        }),
        pod_selector: Some(labels(&[("app.kubernetes.io/name", OPERATOR_APP_NAME)])),
        ..NetworkPolicyPeer::default()
    }
}

/// Renders the policy. `operator_namespace` is where the operator runs (`POD_NAMESPACE`).
pub fn build(v: &ValidatedCluster, operator_namespace: Option<&str>) -> NetworkPolicy {
    let brokers = NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_labels: Some(v.names.selector_labels()),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    };
    let mut quic_from = v
        .network
        .allowed_clients
        .clone()
        .unwrap_or_else(|| vec![namespace_peer(&v.id.namespace)]);
    quic_from.push(brokers);
    let monitoring = NetworkPolicyPeer {
        namespace_selector: Some(
            v.network
                .monitoring_namespace_selector
                .clone()
                .unwrap_or_else(|| labels(&[(NAMESPACE_NAME_LABEL, DEFAULT_MONITORING_NAMESPACE)])),
        ),
        ..NetworkPolicyPeer::default()
    };
    NetworkPolicy {
        metadata: child_meta(v, &v.names.network_policy),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(v.names.selector_labels()),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".to_string()]),
            ingress: Some(vec![
                NetworkPolicyIngressRule {
                    from: Some(quic_from),
                    ports: Some(vec![port("UDP", starling_config::DEFAULT_QUIC_PORT)]),
                },
                NetworkPolicyIngressRule {
                    from: Some(vec![operator_peer(operator_namespace), monitoring]),
                    ports: Some(vec![port("TCP", starling_config::DEFAULT_HTTP_PORT)]),
                },
            ]),
            ..NetworkPolicySpec::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::{BrokerClusterSpec, NetworkSpec};
    use crate::validate::fixtures::{cluster, spec_cluster};
    use serde_json::{Value, json};
    use starling_config::{Profile, Tier};

    /// The sources of the rule on `port`, as JSON.
    fn sources(np: &NetworkPolicy, port: i32, protocol: &str) -> Vec<Value> {
        np.spec
            .iter()
            .flat_map(|s| s.ingress.iter().flatten())
            .filter(|r| {
                r.ports.iter().flatten().any(|p| {
                    p.port == Some(IntOrString::Int(port))
                        && p.protocol.as_deref() == Some(protocol)
                })
            })
            .flat_map(|r| r.from.iter().flatten())
            .map(|p| serde_json::to_value(p).unwrap_or_default())
            .collect()
    }

    #[test]
    fn by_default_quic_from_the_namespace_and_the_peers_http_from_operator_and_monitoring() {
        let v = cluster(Profile::Balanced, Tier::Small, |_| {});
        let np = build(&v, Some("starling-system"));
        assert_eq!(np.metadata.name.as_deref(), Some("events"));
        assert_eq!(np.metadata.owner_references.as_ref().map(Vec::len), Some(1));
        let spec = np.spec.clone().unwrap_or_default();
        assert_eq!(spec.policy_types, Some(vec!["Ingress".to_string()]));
        assert_eq!(
            spec.pod_selector.and_then(|s| s.match_labels),
            Some(v.names.selector_labels())
        );
        let brokers = json!({"podSelector": {"matchLabels": {
            "app.kubernetes.io/instance": "events", "app.kubernetes.io/name": "starling-broker"}}});
        assert_eq!(
            sources(&np, 7400, "UDP"),
            vec![
                json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "messaging"}}}),
                brokers
            ]
        );
        assert_eq!(
            sources(&np, 9400, "TCP"),
            vec![
                json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "starling-system"}},
                       "podSelector": {"matchLabels": {"app.kubernetes.io/name": "starling-operator"}}}),
                json!({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}),
            ]
        );
        // Every rule names its ports and its sources: an empty `from` would admit everyone.
        for rule in np.spec.iter().flat_map(|s| s.ingress.iter().flatten()) {
            assert!(rule.ports.as_ref().is_some_and(|p| !p.is_empty()));
            assert!(rule.from.as_ref().is_some_and(|f| !f.is_empty()));
        }
    }

    #[test]
    fn allowed_clients_and_the_monitoring_selector_replace_the_defaults() {
        let apps = NetworkPolicyPeer {
            namespace_selector: Some(labels(&[("team", "apps")])),
            pod_selector: Some(labels(&[("role", "client")])),
            ..NetworkPolicyPeer::default()
        };
        let v = spec_cluster(BrokerClusterSpec {
            network: Some(NetworkSpec {
                allowed_clients: Some(vec![apps.clone()]),
                monitoring_namespace_selector: Some(labels(&[("observability", "true")])),
            }),
            ..BrokerClusterSpec::default()
        });
        let np = build(&v, None);
        let quic = sources(&np, 7400, "UDP");
        assert_eq!(quic.len(), 2);
        assert_eq!(quic[0], serde_json::to_value(&apps).unwrap_or_default());
        let http = sources(&np, 9400, "TCP");
        assert_eq!(
            http[0],
            json!({"namespaceSelector": {}, "podSelector": {"matchLabels": {"app.kubernetes.io/name": "starling-operator"}}}),
            "an operator running outside the cluster's pods: any namespace"
        );
        assert_eq!(
            http[1],
            json!({"namespaceSelector": {"matchLabels": {"observability": "true"}}})
        );
        // No clients at all: only the peers.
        let closed = spec_cluster(BrokerClusterSpec {
            network: Some(NetworkSpec {
                allowed_clients: Some(Vec::new()),
                monitoring_namespace_selector: None,
            }),
            ..BrokerClusterSpec::default()
        });
        assert_eq!(sources(&build(&closed, None), 7400, "UDP").len(), 1);
    }
}
