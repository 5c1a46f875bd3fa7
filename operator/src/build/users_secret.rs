//! The users Secret `<cluster>-users`: the users document (`users.yaml`, see
//! [`crate::access`]) the brokers re-read through the Kubernetes API, owned by the cluster.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use super::child_meta;
use crate::names::USERS_KEY;
use crate::validate::ValidatedCluster;

/// The Secret holding `users.yaml`.
pub fn build(v: &ValidatedCluster, document_yaml: &str) -> Secret {
    Secret {
        metadata: child_meta(v, &v.names.users_secret),
        type_: Some("Opaque".to_string()),
        data: Some(BTreeMap::from([(
            USERS_KEY.to_string(),
            ByteString(document_yaml.as_bytes().to_vec()),
        )])),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn holds_the_document_under_users_yaml_and_is_owned_by_the_cluster() {
        let v = cluster(Profile::Balanced, Tier::Small, |_| {});
        let doc =
            crate::access::document_yaml(&crate::access::users_document(&[])).unwrap_or_default();
        let s = build(&v, &doc);
        assert_eq!(s.metadata.name.as_deref(), Some("events-users"));
        assert_eq!(
            s.metadata
                .owner_references
                .as_ref()
                .map(|o| o[0].uid.as_str()),
            Some("0000-uid")
        );
        let text = s
            .data
            .unwrap_or_default()
            .get("users.yaml")
            .map(|b| String::from_utf8_lossy(&b.0).into_owned())
            .unwrap_or_default();
        let users = starling_access::Users::parse(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(users.is_empty());
    }
}
