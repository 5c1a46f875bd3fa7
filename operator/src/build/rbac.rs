//! The brokers' RBAC: a Role `<cluster>-broker` allowing `get`, `list` and `watch` on the one
//! ConfigMap `<cluster>-members`, bound to the brokers' ServiceAccount. Nothing else: the
//! brokers only read their member list.

use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};

use super::child_meta;
use crate::validate::ValidatedCluster;

/// Renders the Role.
pub fn role(v: &ValidatedCluster) -> Role {
    Role {
        metadata: child_meta(v, &v.names.role),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["configmaps".to_string()]),
            resource_names: Some(vec![v.names.members_config_map.clone()]),
            verbs: ["get", "list", "watch"].map(String::from).to_vec(),
            ..PolicyRule::default()
        }]),
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
    use crate::build::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn the_role_reads_only_the_members_configmap() {
        let v = cluster(Profile::Balanced, Tier::Small, |_| {});
        let r = role(&v);
        assert_eq!(r.metadata.name.as_deref(), Some("events-broker"));
        let rules = r.rules.unwrap_or_default();
        assert_eq!(rules.len(), 1);
        assert_eq!(rules[0].api_groups, Some(vec![String::new()]));
        assert_eq!(rules[0].resources, Some(vec!["configmaps".to_string()]));
        assert_eq!(
            rules[0].resource_names,
            Some(vec!["events-members".to_string()])
        );
        assert_eq!(rules[0].verbs, vec!["get", "list", "watch"]);
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
