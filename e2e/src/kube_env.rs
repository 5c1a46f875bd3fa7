//! The cluster under test: a kube client, the images and operator namespace the suite expects,
//! and a per-test namespace with BrokerCluster helpers.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, Pod, Service};
use kube::api::{DeleteParams, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use starling_client::{ClientConfig, Trust};
use starling_config::{BrokerConfig, ConfigFile, Sources};
use starling_operator::crd::{BrokerCluster, BrokerClusterSpec};

use crate::credentials::UserCredentials;
use crate::{E2eError, READY_TIMEOUT, http, wait};

/// The cluster and what the suite expects to find in it.
#[derive(Clone)]
pub struct Env {
    /// Client for the cluster named by `KUBECONFIG`.
    pub client: Client,
    /// The broker image the operator was installed with (`STARLING_E2E_BROKER_IMAGE`).
    pub broker_image: String,
    /// Namespace of the operator release (`STARLING_E2E_OPERATOR_NAMESPACE`, default
    /// `starling-system`).
    pub operator_namespace: String,
}

impl Env {
    /// Connects to the cluster in `KUBECONFIG`.
    pub async fn new() -> Result<Env, E2eError> {
        if std::env::var_os("KUBECONFIG").is_none() {
            return Err(E2eError::Env(
                "KUBECONFIG is not set: run the suite with `make e2e`, which starts a local cluster and installs the operator".into(),
            ));
        }
        let broker_image = std::env::var("STARLING_E2E_BROKER_IMAGE").map_err(|_| {
            E2eError::Env("STARLING_E2E_BROKER_IMAGE is not set (see e2e/run.sh)".into())
        })?;
        let operator_namespace = std::env::var("STARLING_E2E_OPERATOR_NAMESPACE")
            .unwrap_or_else(|_| "starling-system".into());
        let client = Client::try_default().await?;
        Ok(Env {
            client,
            broker_image,
            operator_namespace,
        })
    }

    /// Creates a fresh namespace `e2e-<prefix>-<random>`.
    pub async fn namespace(&self, prefix: &str) -> Result<TestNamespace, E2eError> {
        let name = format!("e2e-{prefix}-{:04x}", rand::random::<u16>());
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        Ok(TestNamespace {
            env: self.clone(),
            name,
            created: std::time::Instant::now(),
        })
    }
}

/// A namespace owned by one test.
pub struct TestNamespace {
    /// The environment.
    pub env: Env,
    /// Namespace name.
    pub name: String,
    /// When it was created: its test's time is reported when it is dropped.
    created: std::time::Instant,
}

impl Drop for TestNamespace {
    /// Appends `<test> <namespace> <seconds>` to the file `STARLING_E2E_TIMINGS` names (e2e/run.sh
    /// sets it and prints the slowest tests at the end), so the suite's time can be attributed
    /// test by test. libtest names each test's thread after the test.
    fn drop(&mut self) {
        let Some(path) = std::env::var_os("STARLING_E2E_TIMINGS") else {
            return;
        };
        let test = std::thread::current()
            .name()
            .unwrap_or("unnamed")
            .to_string();
        let line = format!(
            "{test} {} {:.1}\n",
            self.name,
            self.created.elapsed().as_secs_f64()
        );
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
        if let Err(e) = written {
            eprintln!("e2e timings: {e}");
        }
    }
}

/// A broker pod's identity at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    /// Pod name.
    pub name: String,
    /// Pod UID: changes when the pod is replaced.
    pub uid: String,
    /// Sum of container restart counts.
    pub restarts: i32,
    /// Whether the pod is Ready.
    pub ready: bool,
    /// The `starling.dev/config-hash` annotation.
    pub config_hash: String,
    /// Pod IP, once assigned.
    pub ip: Option<IpAddr>,
    /// Image of the broker container.
    pub image: String,
}

impl TestNamespace {
    /// Typed API for BrokerClusters here.
    pub fn clusters(&self) -> Api<BrokerCluster> {
        Api::namespaced(self.env.client.clone(), &self.name)
    }

    /// Any namespaced API here.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.env.client.clone(), &self.name)
    }

    /// Creates a BrokerCluster.
    pub async fn create_cluster(
        &self,
        name: &str,
        spec: BrokerClusterSpec,
    ) -> Result<BrokerCluster, E2eError> {
        let bc = BrokerCluster::new(name, spec);
        Ok(self.clusters().create(&PostParams::default(), &bc).await?)
    }

    /// Merge-patches a BrokerCluster's spec.
    pub async fn patch_spec(
        &self,
        name: &str,
        spec: serde_json::Value,
    ) -> Result<BrokerCluster, E2eError> {
        let patch = serde_json::json!({ "spec": spec });
        Ok(self
            .clusters()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?)
    }

    /// Waits until the BrokerCluster has observed its latest generation and is Ready.
    pub async fn wait_ready(&self, name: &str) -> Result<BrokerCluster, E2eError> {
        let api = self.clusters();
        wait::until(
            &format!("BrokerCluster {}/{name} Ready", self.name),
            READY_TIMEOUT,
            || {
                let api = api.clone();
                async move {
                    let bc = api.get(name).await.ok()?;
                    let status = bc.status.as_ref()?;
                    let current = status.observed_generation == bc.metadata.generation;
                    let ready = status
                        .conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True");
                    (current && ready).then_some(bc)
                }
            },
        )
        .await
    }

    /// The broker pods of a BrokerCluster, sorted by name.
    pub async fn broker_pods(&self, cluster: &str) -> Result<Vec<PodState>, E2eError> {
        let selector =
            format!("app.kubernetes.io/name=starling-broker,app.kubernetes.io/instance={cluster}");
        let pods = self
            .api::<Pod>()
            .list(&ListParams::default().labels(&selector))
            .await?;
        let mut out: Vec<PodState> = pods.items.iter().map(pod_state).collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// The effective config a running broker reports at `GET /config`.
    pub async fn broker_config(&self, pod: &PodState) -> Result<BrokerConfig, E2eError> {
        let ip = pod
            .ip
            .ok_or_else(|| E2eError::Env(format!("pod {} has no IP", pod.name)))?;
        let (status, body) = http::get(SocketAddr::new(ip, 9400), "/config").await?;
        if status != 200 {
            return Err(E2eError::Http(format!(
                "{}/config answered {status}",
                pod.name
            )));
        }
        let file = ConfigFile::from_yaml(&body, &format!("{}/config", pod.name))
            .map_err(|e| E2eError::Env(e.to_string()))?;
        Sources {
            file: file.into(),
            ..Sources::default()
        }
        .resolve()
        .map_err(|e| E2eError::Env(e.to_string()))
    }

    /// The config text the operator wrote into the cluster's ConfigMap.
    pub async fn configmap_config(&self, cluster: &str) -> Result<BrokerConfig, E2eError> {
        let cm = self
            .api::<k8s_openapi::api::core::v1::ConfigMap>()
            .get(&format!("{cluster}-config"))
            .await?;
        let data: BTreeMap<String, String> = cm.data.unwrap_or_default();
        let text = data
            .get("broker.yaml")
            .ok_or_else(|| E2eError::Env("ConfigMap has no broker.yaml".into()))?;
        let file =
            ConfigFile::from_yaml(text, "ConfigMap").map_err(|e| E2eError::Env(e.to_string()))?;
        Sources {
            file: file.into(),
            ..Sources::default()
        }
        .resolve()
        .map_err(|e| E2eError::Env(e.to_string()))
    }

    /// `<ClusterIP>:7400` of the cluster's client Service, reachable from the node through
    /// kube-proxy.
    pub async fn service_addr(&self, cluster: &str) -> Result<String, E2eError> {
        let svc = self.api::<Service>().get(cluster).await?;
        let ip = svc
            .spec
            .and_then(|s| s.cluster_ip)
            .ok_or_else(|| E2eError::Env(format!("Service {cluster} has no ClusterIP")))?;
        Ok(format!("{ip}:7400"))
    }

    /// An SDK client connected to the cluster's client Service as the suite's full-access
    /// BrokerUser (`e2e-<cluster>`, a client certificate; see
    /// [`TestNamespace::full_access_user`]), verifying the brokers against the `ca.crt` of
    /// its credentials Secret.
    pub async fn client(&self, cluster: &str) -> Result<starling_client::Client, E2eError> {
        let user = self.full_access_user(cluster).await?;
        self.client_as(cluster, &user).await
    }

    /// An SDK client connected to the cluster's client Service as `user`. Retries for up to
    /// a minute: the Service may take a moment to route after the pods turn Ready, and a new
    /// user reaches the brokers on their next read of the users Secret.
    pub async fn client_as(
        &self,
        cluster: &str,
        user: &UserCredentials,
    ) -> Result<starling_client::Client, E2eError> {
        let cfg = user.config(self.service_addr(cluster).await?);
        connect_retrying(
            &format!("SDK connection to {cluster} as {}", user.user),
            cfg,
        )
        .await
    }

    /// The certificate of the TLS Secret the operator generated for a cluster without
    /// `spec.tls` (`<cluster>-tls`, key `tls.crt`), PEM.
    pub async fn generated_certificate(&self, cluster: &str) -> Result<Vec<u8>, E2eError> {
        let secret = self
            .api::<k8s_openapi::api::core::v1::Secret>()
            .get(&format!("{cluster}-tls"))
            .await?;
        secret
            .data
            .unwrap_or_default()
            .remove("tls.crt")
            .map(|b| b.0)
            .ok_or_else(|| E2eError::Env(format!("Secret {cluster}-tls has no tls.crt")))
    }

    /// An SDK client connected to the cluster's client Service that verifies the brokers
    /// against the cluster's generated certificate (`<cluster>-tls`), by the client Service's
    /// DNS name (`<cluster>.<namespace>.svc`), so it only connects when the broker it lands on
    /// presents the shared certificate. It authenticates as the suite's full-access user.
    pub async fn verified_client(
        &self,
        cluster: &str,
    ) -> Result<starling_client::Client, E2eError> {
        let pem = self.generated_certificate(cluster).await?;
        let user = self.full_access_user(cluster).await?;
        let cfg = ClientConfig::new(self.service_addr(cluster).await?, Trust::CaPem(pem))
            .with_server_name(format!("{cluster}.{}.svc", self.name))
            .with_credentials(user.credentials.clone());
        // A broker that has not read the new user yet (every `auth_reload_interval_ms`) refuses
        // it as Unauthorized: that is retried for up to a minute. Any other failure (the
        // certificate check above all) fails at once.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            match starling_client::Client::connect(cfg.clone()).await {
                Ok(c) => return Ok(c),
                Err(starling_client::ClientError::Unauthorized(_))
                    if tokio::time::Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => {
                    return Err(E2eError::Env(format!(
                        "verified connection to {cluster}: {e}"
                    )));
                }
            }
        }
    }

    /// Deletes the namespace (and with it everything the test made).
    pub async fn delete(self) {
        let api = Api::<Namespace>::all(self.env.client.clone());
        let _ = api.delete(&self.name, &DeleteParams::default()).await;
    }
}

fn pod_state(p: &Pod) -> PodState {
    let status = p.status.clone().unwrap_or_default();
    let restarts = status
        .container_statuses
        .as_ref()
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0);
    let ready = status
        .conditions
        .as_ref()
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let image = p
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.clone())
        .unwrap_or_default();
    PodState {
        name: p.name_any(),
        uid: p.uid().unwrap_or_default(),
        restarts,
        ready,
        config_hash: p
            .annotations()
            .get("starling.dev/config-hash")
            .cloned()
            .unwrap_or_default(),
        ip: status.pod_ip.and_then(|ip| ip.parse().ok()),
        image,
    }
}

/// Connects with `cfg`, retrying for up to a minute (a Service that does not route yet, a user
/// the brokers have not read yet). The last error is in the timeout's description.
pub async fn connect_retrying(
    what: &str,
    cfg: ClientConfig,
) -> Result<starling_client::Client, E2eError> {
    let last = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let result = wait::until(what, Duration::from_secs(60), || {
        let cfg = cfg.clone();
        let last = last.clone();
        async move {
            match starling_client::Client::connect(cfg).await {
                Ok(c) => Some(c),
                Err(e) => {
                    if let Ok(mut l) = last.lock() {
                        *l = e.to_string();
                    }
                    None
                }
            }
        }
    })
    .await;
    result.map_err(|e| {
        let last = last.lock().map(|l| l.clone()).unwrap_or_default();
        E2eError::Env(format!("{e} (last error: {last})"))
    })
}
