//! The two Services: a headless one for stable per-broker DNS (both ports) and the client
//! ClusterIP Service, which exposes only QUIC over UDP. The HTTP port (`/metrics`, `/config`,
//! health) is reached on each pod's IP, by Prometheus (the chart's PodMonitor) and the
//! autoscaler, as the NetworkPolicy allows.

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::child_meta;
use crate::names::{HTTP_PORT_NAME, QUIC_PORT_NAME};
use crate::validate::ValidatedCluster;

/// The QUIC port as a Service port.
pub fn quic_port() -> ServicePort {
    ServicePort {
        name: Some(QUIC_PORT_NAME.to_string()),
        protocol: Some("UDP".to_string()),
        port: starling_config::DEFAULT_QUIC_PORT.into(),
        target_port: Some(IntOrString::String(QUIC_PORT_NAME.to_string())),
        ..ServicePort::default()
    }
}

/// The broker ports as Service ports.
pub fn ports() -> Vec<ServicePort> {
    vec![
        quic_port(),
        ServicePort {
            name: Some(HTTP_PORT_NAME.to_string()),
            protocol: Some("TCP".to_string()),
            port: starling_config::DEFAULT_HTTP_PORT.into(),
            target_port: Some(IntOrString::String(HTTP_PORT_NAME.to_string())),
            ..ServicePort::default()
        },
    ]
}

/// The headless Service the StatefulSet is governed by. Not-ready brokers are published too,
/// so peers can find each other while starting.
pub fn headless(v: &ValidatedCluster) -> Service {
    Service {
        metadata: child_meta(v, &v.names.headless_service),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            publish_not_ready_addresses: Some(true),
            selector: Some(v.names.selector_labels()),
            ports: Some(ports()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// The client Service.
pub fn client(v: &ValidatedCluster) -> Service {
    Service {
        metadata: child_meta(v, &v.names.client_service),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            selector: Some(v.names.selector_labels()),
            ports: Some(vec![quic_port()]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn the_headless_service_exposes_both_ports_and_the_client_service_only_quic() {
        let v = cluster(Profile::Latency, Tier::Medium, |_| {});
        let h = headless(&v);
        let c = client(&v);
        assert_eq!(h.metadata.name.as_deref(), Some("events-headless"));
        assert_eq!(c.metadata.name.as_deref(), Some("events"));
        let hs = h.spec.unwrap_or_default();
        assert_eq!(hs.cluster_ip.as_deref(), Some("None"));
        assert_eq!(hs.publish_not_ready_addresses, Some(true));
        let cs = c.spec.unwrap_or_default();
        let named = |ports: Option<Vec<ServicePort>>| -> Vec<(String, String, i32)> {
            ports
                .unwrap_or_default()
                .into_iter()
                .map(|p| {
                    (
                        p.name.unwrap_or_default(),
                        p.protocol.unwrap_or_default(),
                        p.port,
                    )
                })
                .collect()
        };
        assert_eq!(
            named(hs.ports.clone()),
            vec![
                ("quic".to_string(), "UDP".to_string(), 7400),
                ("http".to_string(), "TCP".to_string(), 9400)
            ]
        );
        assert_eq!(
            named(cs.ports.clone()),
            vec![("quic".to_string(), "UDP".to_string(), 7400)]
        );
        assert_eq!(cs.selector, Some(v.names.selector_labels()));
    }
}
