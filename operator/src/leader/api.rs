//! The Lease calls the elector makes, behind a trait ([`LeaseApi`]) so tests can drive the
//! elector with a fake (and a hung) API; [`KubeLeases`] is the real one.

use std::future::Future;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::{Api, PostParams};

/// The lease calls the elector makes. Implemented by [`KubeLeases`], and by a fake in tests.
pub trait LeaseApi: Send + Sync {
    /// Reads the lease; `None` when it does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, kube::Error>> + Send;
    /// Creates the lease (409 when it exists).
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// Replaces the lease, with its `resourceVersion` (409 when it changed since).
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
}

/// [`LeaseApi`] on the API server.
#[derive(Clone)]
pub struct KubeLeases {
    api: Api<Lease>,
    name: String,
}

impl KubeLeases {
    /// The lease `name` in `namespace`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        KubeLeases {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
        }
    }
}

impl LeaseApi for KubeLeases {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await
    }
}
