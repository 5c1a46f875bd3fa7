//! Pod addresses from the Kubernetes API. A member's address is its pod's DNS name, and after
//! the pod restarts that name can go on answering with the old pod's address (or with nothing)
//! for as long as DNS caches hold it: 30 s with the usual CoreDNS settings. A peer that cannot
//! be reached by its name is looked up here, by pod name (the member id), and reached by the
//! pod's current IP instead.
//!
//! The address comes from the namespace's EndpointSlices (the headless Service publishes every
//! broker, ready or not), so a broker needs only `list` on `endpointslices`, not on pods.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;

/// Longest one lookup may take.
const LOOKUP_LIMIT: Duration = Duration::from_secs(2);

/// Why a pod lookup failed.
#[derive(Debug, thiserror::Error)]
pub enum LookupError {
    /// The API did not answer within `LOOKUP_LIMIT`.
    #[error("no answer within {LOOKUP_LIMIT:?}")]
    Timeout,
    /// The API refused or failed the request.
    #[error("{0}")]
    Api(#[from] kube::Error),
}

/// Looks up pod addresses in the EndpointSlices of the broker's own namespace (the Role the
/// operator renders allows `list` on `endpointslices`).
#[derive(Clone)]
pub struct PodIps {
    api: kube::Api<EndpointSlice>,
}

impl PodIps {
    /// Lookups in `namespace` through `client`.
    pub fn new(client: kube::Client, namespace: &str) -> PodIps {
        PodIps {
            api: kube::Api::namespaced(client, namespace),
        }
    }

    /// The current IP of pod `name`; `Ok(None)` when no EndpointSlice lists it (yet).
    pub async fn ip(&self, name: &str) -> Result<Option<IpAddr>, LookupError> {
        let slices = tokio::time::timeout(LOOKUP_LIMIT, self.api.list(&ListParams::default()))
            .await
            .map_err(|_| LookupError::Timeout)??;
        Ok(pod_ip_in(&slices.items, name))
    }
}

/// The address of pod `name` in `slices`: the first address of an endpoint whose target is
/// that pod and which is not terminating.
pub fn pod_ip_in(slices: &[EndpointSlice], name: &str) -> Option<IpAddr> {
    slices
        .iter()
        .flat_map(|s| s.endpoints.iter())
        .filter(|e| {
            e.target_ref.as_ref().is_some_and(|t| {
                t.kind.as_deref() == Some("Pod") && t.name.as_deref() == Some(name)
            })
        })
        .filter(|e| e.conditions.as_ref().and_then(|c| c.terminating) != Some(true))
        .find_map(|e| e.addresses.first()?.parse().ok())
}

/// `addr` (`host:port`) with its host replaced by `ip`: the port the member list names, at
/// the pod's current address.
pub fn at_ip(addr: &str, ip: IpAddr) -> Option<String> {
    let (_, port) = addr.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    Some(std::net::SocketAddr::new(ip, port).to_string())
}

/// The host part of `addr` (`host:port`), which stays the TLS server name when the member is
/// reached by IP.
pub fn host_of(addr: &str) -> Option<&str> {
    addr.rsplit_once(':').map(|(host, _)| host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};

    fn endpoint(pod: &str, ip: &str, terminating: bool) -> Endpoint {
        Endpoint {
            addresses: vec![ip.to_string()],
            conditions: Some(EndpointConditions {
                terminating: Some(terminating),
                ..EndpointConditions::default()
            }),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".to_string()),
                name: Some(pod.to_string()),
                ..ObjectReference::default()
            }),
            ..Endpoint::default()
        }
    }

    #[test]
    fn the_pod_ip_comes_from_a_live_endpoint_of_that_pod() {
        let slices = vec![EndpointSlice {
            address_type: "IPv4".to_string(),
            endpoints: vec![
                endpoint("b-0", "10.0.0.5", true),
                endpoint("b-1", "10.0.0.6", false),
                endpoint("b-0", "10.0.0.9", false),
            ],
            ..EndpointSlice::default()
        }];
        let ip = |s: &str| s.parse::<IpAddr>().ok();
        assert_eq!(
            pod_ip_in(&slices, "b-0"),
            ip("10.0.0.9"),
            "not the terminating one"
        );
        assert_eq!(pod_ip_in(&slices, "b-1"), ip("10.0.0.6"));
        assert_eq!(pod_ip_in(&slices, "b-2"), None);
    }

    #[test]
    fn the_member_port_is_kept_at_the_pod_ip() {
        let v4: IpAddr = "10.244.0.23".parse().unwrap_or(IpAddr::from([0, 0, 0, 0]));
        assert_eq!(
            at_ip("auto-1.auto-headless.ns.svc.cluster.local:7400", v4).as_deref(),
            Some("10.244.0.23:7400")
        );
        let v6: IpAddr = "fd00::17".parse().unwrap_or(IpAddr::from([0u16; 8]));
        assert_eq!(
            at_ip("b-0.b.ns.svc:7401", v6).as_deref(),
            Some("[fd00::17]:7401")
        );
        assert_eq!(at_ip("no-port", v4), None);
        assert_eq!(at_ip("host:notaport", v4), None);
        assert_eq!(
            host_of("auto-1.auto-headless.ns.svc.cluster.local:7400"),
            Some("auto-1.auto-headless.ns.svc.cluster.local")
        );
    }
}
