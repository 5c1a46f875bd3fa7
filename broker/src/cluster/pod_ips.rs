//! Pod addresses from the Kubernetes API. A member's address is its pod's DNS name, and after
//! the pod restarts that name can go on answering with the old pod's address (or with nothing)
//! for as long as DNS caches hold it: 30 s with the usual CoreDNS settings. A peer that cannot
//! be reached by its name is looked up here, by pod name (the member id), and reached by the
//! pod's current IP instead.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
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

/// Looks up the pods of the broker's own namespace (the Role the operator renders allows
/// `list` on pods).
#[derive(Clone)]
pub struct PodIps {
    api: kube::Api<Pod>,
}

impl PodIps {
    /// Lookups in `namespace` through `client`.
    pub fn new(client: kube::Client, namespace: &str) -> PodIps {
        PodIps {
            api: kube::Api::namespaced(client, namespace),
        }
    }

    /// The current IP of pod `name`; `Ok(None)` when there is no such pod or it has no IP yet.
    pub async fn ip(&self, name: &str) -> Result<Option<IpAddr>, LookupError> {
        let params = ListParams::default().fields(&format!("metadata.name={name}"));
        let pods = tokio::time::timeout(LOOKUP_LIMIT, self.api.list(&params))
            .await
            .map_err(|_| LookupError::Timeout)??;
        Ok(pods
            .items
            .iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .find_map(|p| p.status.as_ref()?.pod_ip.as_deref()?.parse().ok()))
    }
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
