//! Scraping the brokers directly: which pods to scrape ([`targets`]) and one `GET /metrics`
//! per pod, read into a [`PodScrape`] (the source used without `--prometheus-url`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;

use super::fetch::{FetchError, Fetcher};
use super::prom;
use super::rates::PodScrape;
use crate::names::HTTP_PORT_NAME;
pub use crate::pods::{Owner, owned_by};

/// Longest wait for one broker's `/metrics`.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest `/metrics` body read.
const MAX_BODY: usize = 8 * 1024 * 1024;

/// Why one broker could not be scraped.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    /// Connect, send, receive, the deadline or the size cap.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// Not a 200.
    #[error("answered HTTP {0}")]
    Status(u16),
    /// Not a readable exposition.
    #[error(transparent)]
    Parse(#[from] prom::ParseError),
}

/// `GET /metrics` of the broker at `addr` (plain HTTP on the pod network).
pub async fn fetch_metrics(
    fetcher: &Fetcher,
    addr: SocketAddr,
    timeout: Duration,
) -> Result<String, ScrapeError> {
    let answer = fetcher
        .get(
            &format!("http://{addr}/metrics"),
            "text/plain",
            None,
            timeout,
            MAX_BODY,
        )
        .await?;
    if answer.status != 200 {
        return Err(ScrapeError::Status(answer.status));
    }
    Ok(String::from_utf8_lossy(&answer.body).into_owned())
}

/// A broker pod to scrape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Pod name.
    pub pod: String,
    /// Pod UID.
    pub uid: String,
    /// `podIP:http-port`, when the pod has an IP.
    pub addr: Option<SocketAddr>,
}

/// The pods to scrape: every pod of the StatefulSet ([`owned_by`]) not being deleted, at its
/// IP and the container port named `http` (the broker default when absent). Pure.
pub fn targets(pods: &[Pod], owner: &Owner<'_>) -> Vec<Target> {
    let mut out: Vec<Target> = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && owned_by(p, owner))
        .map(|p| {
            let port = p
                .spec
                .as_ref()
                .into_iter()
                .flat_map(|s| s.containers.iter())
                .flat_map(|c| c.ports.iter().flatten())
                .find(|port| port.name.as_deref() == Some(HTTP_PORT_NAME))
                .and_then(|port| u16::try_from(port.container_port).ok())
                .unwrap_or(starling_config::DEFAULT_HTTP_PORT);
            let ip: Option<IpAddr> = p
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.as_deref())
                .and_then(|ip| ip.parse().ok());
            Target {
                pod: p.name_any(),
                uid: p.uid().unwrap_or_default(),
                addr: ip.map(|ip| SocketAddr::new(ip, port)),
            }
        })
        .collect();
    out.sort_by(|a, b| a.pod.cmp(&b.pod));
    out
}

/// Scrapes one target: its sample, or `(pod, why)`.
pub async fn scrape(fetcher: &Fetcher, target: Target) -> Result<PodScrape, (String, String)> {
    let Some(addr) = target.addr else {
        return Err((target.pod, "no pod IP yet".into()));
    };
    let at = Timestamp::now();
    match fetch_metrics(fetcher, addr, SCRAPE_TIMEOUT).await {
        Ok(text) => match prom::parse(&text) {
            Ok(sample) => Ok(PodScrape {
                pod: target.pod,
                uid: target.uid,
                at,
                sample,
            }),
            Err(e) => Err((target.pod, e.to_string())),
        },
        Err(e) => Err((target.pod, format!("{addr}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use kube::api::ObjectMeta;

    const OWNER: Owner<'static> = Owner {
        name: "b",
        uid: "sts-uid",
        replicas: 4,
    };

    fn owner_ref(kind: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            api_version: "apps/v1".into(),
            kind: kind.into(),
            name: "b".into(),
            uid: uid.into(),
            controller: Some(true),
            ..OwnerReference::default()
        }
    }

    fn pod(name: &str, ip: Option<&str>, port: Option<i32>, deleting: bool) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                owner_references: Some(vec![owner_ref("StatefulSet", "sts-uid")]),
                deletion_timestamp: deleting.then_some(
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::UNIX_EPOCH),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "broker".into(),
                    ports: port.map(|p| {
                        vec![ContainerPort {
                            name: Some(HTTP_PORT_NAME.into()),
                            container_port: p,
                            ..ContainerPort::default()
                        }]
                    }),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
            status: Some(PodStatus {
                pod_ip: ip.map(Into::into),
                ..PodStatus::default()
            }),
        }
    }

    #[test]
    fn targets_use_the_pod_ip_and_the_http_port() {
        let t = targets(
            &[
                pod("b-1", Some("10.0.0.2"), Some(9500), false),
                pod("b-0", Some("10.0.0.1"), None, false),
                pod("b-2", None, Some(9400), false),
                pod("b-3", Some("10.0.0.4"), Some(9400), true),
            ],
            &OWNER,
        );
        let addrs: Vec<(String, Option<String>)> = t
            .iter()
            .map(|t| (t.pod.clone(), t.addr.map(|a| a.to_string())))
            .collect();
        assert_eq!(
            addrs,
            vec![
                ("b-0".into(), Some("10.0.0.1:9400".into())),
                ("b-1".into(), Some("10.0.0.2:9500".into())),
                ("b-2".into(), None),
            ]
        );
        assert_eq!(t[0].uid, "uid-b-0");
    }

    #[test]
    fn only_the_statefulsets_own_pods_are_scraped_whatever_their_labels() {
        let ours = pod("b-0", Some("10.0.0.1"), None, false);
        let mut unowned = pod("b-7", Some("10.0.0.66"), None, false);
        unowned.metadata.owner_references = None;
        let mut other_set = pod("b-8", Some("10.0.0.67"), None, false);
        other_set.metadata.owner_references = Some(vec![owner_ref("StatefulSet", "other")]);
        let mut not_a_set = pod("b-9", Some("10.0.0.68"), None, false);
        not_a_set.metadata.owner_references = Some(vec![owner_ref("ReplicaSet", "sts-uid")]);
        let mut not_controller = pod("b-10", Some("10.0.0.69"), None, false);
        not_controller.metadata.owner_references = Some(vec![OwnerReference {
            controller: None,
            ..owner_ref("StatefulSet", "sts-uid")
        }]);
        // A forged owner reference on a pod not named like the set's pods.
        let forged = pod("impostor", Some("10.0.0.70"), None, false);
        let forged_prefix = pod("b-x1", Some("10.0.0.71"), None, false);
        let bare_prefix = pod("b-", Some("10.0.0.72"), None, false);
        let past_replicas = pod("b-4", Some("10.0.0.73"), None, false);
        let t = targets(
            &[
                unowned,
                other_set,
                not_a_set,
                not_controller,
                forged,
                forged_prefix,
                bare_prefix,
                past_replicas,
                ours,
            ],
            &OWNER,
        );
        let names: Vec<&str> = t.iter().map(|t| t.pod.as_str()).collect();
        assert_eq!(names, vec!["b-0"]);
    }

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn fetches_over_http_and_refuses_errors() -> Result<(), Box<dyn std::error::Error>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let server = tokio::spawn(async move {
            for answer in [
                "HTTP/1.0 200 OK\r\ncontent-type: text/plain\r\n\r\nstarling_ready 1\n",
                "HTTP/1.0 503 Service Unavailable\r\n\r\ndraining\n",
            ] {
                if let Ok((mut s, _)) = listener.accept().await {
                    let mut buf = [0u8; 1024];
                    let _ = s.read(&mut buf).await;
                    let _ = s.write_all(answer.as_bytes()).await;
                }
            }
        });
        let fetcher = Fetcher::new(None)?;
        let body = fetch_metrics(&fetcher, addr, Duration::from_secs(5)).await?;
        assert_eq!(body, "starling_ready 1\n");
        let err = fetch_metrics(&fetcher, addr, Duration::from_secs(5))
            .await
            .err();
        assert!(matches!(err, Some(ScrapeError::Status(503))), "{err:?}");
        server.await?;
        Ok(())
    }
}
