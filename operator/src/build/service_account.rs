//! The brokers' ServiceAccount. The account itself does not automount a token; the broker pod
//! template opts in (`automountServiceAccountToken: true` on the pod), because brokers read
//! their member list through the Kubernetes API (see [`super::rbac`]).

use k8s_openapi::api::core::v1::ServiceAccount;

use super::child_meta;
use crate::validate::ValidatedCluster;

/// Renders the ServiceAccount.
pub fn build(v: &ValidatedCluster) -> ServiceAccount {
    ServiceAccount {
        metadata: child_meta(v, &v.names.service_account),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn named_owned_and_tokenless() {
        let sa = build(&cluster(Profile::Balanced, Tier::Small, |_| {}));
        assert_eq!(sa.metadata.name.as_deref(), Some("events-broker"));
        assert_eq!(sa.automount_service_account_token, Some(false));
        let owners = sa.metadata.owner_references.unwrap_or_default();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].controller, Some(true));
    }
}
