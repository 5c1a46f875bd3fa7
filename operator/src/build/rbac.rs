//! The brokers' RBAC: a Role `<cluster>-broker`, bound to the brokers' ServiceAccount, allowing
//! `get`, `list` and `watch` on the one ConfigMap `<cluster>-members`, `get` on the one Secret
//! `<cluster>-users`, and `list` on EndpointSlices. Nothing else: the brokers read their member
//! list and their users document, and look up a peer's pod IP.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

use super::child_meta;
use crate::validate::ValidatedCluster;

/// Renders the Role: three rules.
///
/// - `get`, `list`, `watch` on the members ConfigMap only: the brokers poll their member list.
/// - `get` on the users Secret only: the brokers re-read the users document
///   (`auth_users_secret`).
/// - `list` on EndpointSlices (`discovery.k8s.io`): a broker reads a peer's current address
///   there, because after a pod restarts its DNS name can keep answering with the old address
///   for up to 30 s (CoreDNS caching). RBAC cannot restrict `list` by `resourceNames`, so this
///   covers every EndpointSlice of the namespace (addresses only: no pod specs, no
///   environment). No `get` and no `watch`, and nothing on pods.
pub fn role(v: &ValidatedCluster) -> Role {
    Role {
        metadata: child_meta(v, &v.names.role),
        rules: Some(vec![
            PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["configmaps".to_string()]),
                resource_names: Some(vec![v.names.members_config_map.clone()]),
                verbs: ["get", "list", "watch"].map(String::from).to_vec(),
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: Some(vec![String::new()]),
                resources: Some(vec!["secrets".to_string()]),
                resource_names: Some(vec![v.names.users_secret.clone()]),
                verbs: vec!["get".to_string()],
                ..PolicyRule::default()
            },
            PolicyRule {
                api_groups: Some(vec!["discovery.k8s.io".to_string()]),
                resources: Some(vec!["endpointslices".to_string()]),
                verbs: vec!["list".to_string()],
                ..PolicyRule::default()
            },
        ]),
    }
}

/// Renders the RoleBinding of [`role`] to the brokers' ServiceAccount.
pub fn role_binding(v: &ValidatedCluster) -> RoleBinding {
    RoleBinding {
        metadata: child_meta(v, &v.names.role_binding),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_string(),
            kind: "Role".to_string(),
            name: v.names.role.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_string(),
            name: v.names.service_account.clone(),
            namespace: Some(v.id.namespace.clone()),
            ..Subject::default()
        }]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn the_role_reads_the_members_configmap_the_users_secret_and_lists_endpointslices() {
        let v = cluster(Profile::Balanced, Tier::Small, |_| {});
        let r = role(&v);
        assert_eq!(r.metadata.name.as_deref(), Some("events-broker"));
        assert_eq!(
            r.rules,
            Some(vec![
                PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["configmaps".to_string()]),
                    resource_names: Some(vec!["events-members".to_string()]),
                    verbs: vec!["get".into(), "list".into(), "watch".into()],
                    non_resource_urls: None,
                },
                PolicyRule {
                    api_groups: Some(vec![String::new()]),
                    resources: Some(vec!["secrets".to_string()]),
                    resource_names: Some(vec!["events-users".to_string()]),
                    verbs: vec!["get".into()],
                    non_resource_urls: None,
                },
                PolicyRule {
                    api_groups: Some(vec!["discovery.k8s.io".to_string()]),
                    resources: Some(vec!["endpointslices".to_string()]),
                    resource_names: None,
                    verbs: vec!["list".into()],
                    non_resource_urls: None,
                },
            ])
        );
        assert_eq!(
            r.metadata.owner_references.map(|o| o.len()),
            Some(1),
            "owned by the cluster"
        );
    }

    #[test]
    fn the_binding_names_the_broker_service_account() {
        let v = cluster(Profile::Balanced, Tier::Small, |_| {});
        let b = role_binding(&v);
        assert_eq!(b.metadata.name.as_deref(), Some("events-broker"));
        assert_eq!(b.role_ref.kind, "Role");
        assert_eq!(b.role_ref.name, "events-broker");
        let subjects = b.subjects.unwrap_or_default();
        assert_eq!(subjects.len(), 1);
        assert_eq!(subjects[0].kind, "ServiceAccount");
        assert_eq!(subjects[0].name, "events-broker");
        assert_eq!(subjects[0].namespace.as_deref(), Some("messaging"));
    }
}
