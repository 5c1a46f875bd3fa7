//! The watch caches of the BrokerClusters' children: what the API server currently holds of
//! each child, as far as the apply step needs to know it (see [`crate::apply::current`]).
//!
//! The controller watches every child kind (metadata only, `app.kubernetes.io/managed-by`
//! selected) to trigger a reconcile of the owner on any change. Those watches also feed one
//! reflector store per kind and watch scope ([`ChildStores`]), so a reconcile can tell, without
//! a request, whether a child exists and whether it still carries what was last applied.
//! Before an object enters a store it is cut down by [`slim`] to what that decision and the
//! owner trigger read (name, namespace, owner references, the applied-hash annotation, and who
//! else manages the object), which keeps a thousand children to a few hundred kilobytes.
//!
//! [`LiveChildren`] holds the stores of every scope and answers [`Live`]: `Unknown` when no
//! scope watches the namespace (a context without controllers, as in the tests), else
//! `Absent` or `Present`.

use std::fmt::Debug;
use std::sync::RwLock;

use futures::Stream;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, ObjectMeta};
use kube::api::{Api, PartialObjectMeta};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;

use crate::crd::BrokerCluster;
use crate::names::{APPLIED_HASH_ANNOTATION, FIELD_MANAGER};

/// One store per child kind, for one watch scope (made by [`own_children`]).
#[derive(Clone)]
pub struct ChildStores {
    config_maps: Store<PartialObjectMeta<ConfigMap>>,
    service_accounts: Store<PartialObjectMeta<ServiceAccount>>,
    roles: Store<PartialObjectMeta<Role>>,
    role_bindings: Store<PartialObjectMeta<RoleBinding>>,
    services: Store<PartialObjectMeta<Service>>,
    network_policies: Store<PartialObjectMeta<NetworkPolicy>>,
    pdbs: Store<PartialObjectMeta<PodDisruptionBudget>>,
    statefulsets: Store<PartialObjectMeta<StatefulSet>>,
}

/// A child kind with a store in [`ChildStores`].
pub trait Cached:
    Resource<Scope = NamespaceResourceScope, DynamicType = ()>
    + Clone
    + Debug
    + DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// This kind's store.
    fn store(stores: &ChildStores) -> &Store<PartialObjectMeta<Self>>;
}

macro_rules! cached {
    ($kind:ty, $field:ident) => {
        impl Cached for $kind {
            fn store(stores: &ChildStores) -> &Store<PartialObjectMeta<Self>> {
                &stores.$field
            }
        }
    };
}
cached!(ConfigMap, config_maps);
cached!(ServiceAccount, service_accounts);
cached!(Role, roles);
cached!(RoleBinding, role_bindings);
cached!(Service, services);
cached!(NetworkPolicy, network_policies);
cached!(PodDisruptionBudget, pdbs);
cached!(StatefulSet, statefulsets);

/// What the caches know of one child.
#[derive(Debug, Clone, PartialEq)]
pub enum Live {
    /// No watch covers its namespace: the caller must ask the API server.
    Unknown,
    /// Not in the cache: it does not exist (or its creation has not been seen yet).
    Absent,
    /// Its (slimmed) metadata.
    Present(Box<ObjectMeta>),
}

/// The children's stores of every watch scope.
#[derive(Default)]
pub struct LiveChildren {
    scopes: RwLock<Vec<(Option<String>, ChildStores)>>,
}

impl LiveChildren {
    /// Sets the stores of one scope (`None`: every namespace), replacing earlier ones.
    pub fn set(&self, scope: Option<String>, stores: ChildStores) {
        let mut scopes = self.scopes.write().unwrap_or_else(|p| p.into_inner());
        scopes.retain(|(s, _)| *s != scope);
        scopes.push((scope, stores));
    }

    /// What the caches know of the `K` named `name` in `namespace`.
    pub fn get<K: Cached>(&self, namespace: &str, name: &str) -> Live {
        let scopes = self.scopes.read().unwrap_or_else(|p| p.into_inner());
        let mut covered = false;
        let key = ObjectRef::<PartialObjectMeta<K>>::new(name).within(namespace);
        for (scope, stores) in scopes.iter() {
            if scope.as_deref().is_some_and(|s| s != namespace) {
                continue;
            }
            covered = true;
            if let Some(obj) = K::store(stores).get(&key) {
                return Live::Present(Box::new(obj.metadata.clone()));
            }
        }
        if covered { Live::Absent } else { Live::Unknown }
    }
}

/// Cuts an object's metadata down to what the apply decision and the owner trigger read:
/// name, namespace, uid, resource version, owner references, the applied-hash annotation, and
/// the managed-fields entries of other managers than the operator's on the object itself
/// (not its `status`), without their field sets. Pure.
pub fn slim(meta: &mut ObjectMeta) {
    let hash = meta
        .annotations
        .take()
        .and_then(|mut a| a.remove(APPLIED_HASH_ANNOTATION));
    meta.annotations = hash.map(|h| [(APPLIED_HASH_ANNOTATION.to_string(), h)].into());
    meta.labels = None;
    meta.managed_fields = meta.managed_fields.take().map(|entries| {
        entries
            .into_iter()
            .filter(is_foreign)
            .map(|e| ManagedFieldsEntry {
                manager: e.manager,
                operation: e.operation,
                subresource: e.subresource,
                ..ManagedFieldsEntry::default()
            })
            .collect()
    });
}

/// Whether a managed-fields entry is another writer's, on the object itself: a manager other
/// than the operator's, on no subresource or one other than `status` (a `scale` write does
/// change the spec).
pub fn is_foreign(entry: &ManagedFieldsEntry) -> bool {
    entry.manager.as_deref() != Some(FIELD_MANAGER)
        && entry.subresource.as_deref() != Some("status")
}

/// The watch of one child kind in one scope: metadata only, slimmed ([`slim`]) and reflected
/// into the returned store; the stream yields every touched object (to trigger its owner).
pub fn watch<K: Cached>(
    client: &Client,
    ns: Option<&str>,
    config: watcher::Config,
) -> (
    Store<PartialObjectMeta<K>>,
    impl Stream<Item = Result<PartialObjectMeta<K>, watcher::Error>> + Send + 'static,
) {
    let (reader, writer) = reflector::store();
    let api: Api<PartialObjectMeta<K>> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|obj: &mut PartialObjectMeta<K>| slim(&mut obj.metadata))
        .reflect(writer)
        .touched_objects();
    (reader, stream)
}

/// Makes `controller` own every child kind in the scope `ns` (`None`: every namespace),
/// through [`watch`]es selected by `config`, and returns the stores they fill.
pub fn own_children(
    controller: Controller<BrokerCluster>,
    client: &Client,
    ns: Option<&str>,
    config: &watcher::Config,
) -> (Controller<BrokerCluster>, ChildStores) {
    let (config_maps, s1) = watch::<ConfigMap>(client, ns, config.clone());
    let (service_accounts, s2) = watch::<ServiceAccount>(client, ns, config.clone());
    let (roles, s3) = watch::<Role>(client, ns, config.clone());
    let (role_bindings, s4) = watch::<RoleBinding>(client, ns, config.clone());
    let (services, s5) = watch::<Service>(client, ns, config.clone());
    let (network_policies, s6) = watch::<NetworkPolicy>(client, ns, config.clone());
    let (pdbs, s7) = watch::<PodDisruptionBudget>(client, ns, config.clone());
    let (statefulsets, s8) = watch::<StatefulSet>(client, ns, config.clone());
    let controller = controller
        .owns_stream(s1)
        .owns_stream(s2)
        .owns_stream(s3)
        .owns_stream(s4)
        .owns_stream(s5)
        .owns_stream(s6)
        .owns_stream(s7)
        .owns_stream(s8);
    let stores = ChildStores {
        config_maps,
        service_accounts,
        roles,
        role_bindings,
        services,
        network_policies,
        pdbs,
        statefulsets,
    };
    (controller, stores)
}

/// Test helper: stores holding `objects` (full objects as JSON, dispatched by `kind`,
/// slimmed as the watches slim them).
#[cfg(test)]
pub(crate) fn stores_of(objects: &[serde_json::Value]) -> ChildStores {
    use kube::core::PartialObjectMetaExt;
    fn put<K: Cached>(
        w: &mut reflector::store::Writer<PartialObjectMeta<K>>,
        obj: &serde_json::Value,
    ) {
        let mut meta: ObjectMeta =
            serde_json::from_value(obj["metadata"].clone()).unwrap_or_default();
        slim(&mut meta);
        w.apply_watcher_event(&watcher::Event::Apply(meta.into_response_partial::<K>()));
    }
    let (config_maps, mut w1) = reflector::store();
    let (service_accounts, mut w2) = reflector::store();
    let (roles, mut w3) = reflector::store();
    let (role_bindings, mut w4) = reflector::store();
    let (services, mut w5) = reflector::store();
    let (network_policies, mut w6) = reflector::store();
    let (pdbs, mut w7) = reflector::store();
    let (statefulsets, mut w8) = reflector::store();
    for obj in objects {
        match obj["kind"].as_str().unwrap_or_default() {
            "ConfigMap" => put(&mut w1, obj),
            "ServiceAccount" => put(&mut w2, obj),
            "Role" => put(&mut w3, obj),
            "RoleBinding" => put(&mut w4, obj),
            "Service" => put(&mut w5, obj),
            "NetworkPolicy" => put(&mut w6, obj),
            "PodDisruptionBudget" => put(&mut w7, obj),
            "StatefulSet" => put(&mut w8, obj),
            _ => {}
        }
    }
    ChildStores {
        config_maps,
        service_accounts,
        roles,
        role_bindings,
        services,
        network_policies,
        pdbs,
        statefulsets,
    }
}
