//! The members ConfigMap `<cluster>-members`: the `members` key lists the brokers that are
//! cluster members, one `<pod-name> <pod-dns-name>:<quic-port>` line each (see
//! [`crate::members::members_text`]). The brokers poll it through the Kubernetes API. It is not
//! part of the config hash, so membership changes never restart brokers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::child_meta;
use crate::members::members_text;
use crate::names::MEMBERS_KEY;
use crate::validate::ValidatedCluster;

/// Renders the members ConfigMap listing ordinals `0..members`.
pub fn build(v: &ValidatedCluster, members: i32) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(v, &v.names.members_config_map),
        data: Some(BTreeMap::from([(
            MEMBERS_KEY.to_string(),
            members_text(&v.names, &v.id.namespace, &v.cluster_domain, members),
        )])),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn lists_the_members_and_is_owned() {
        let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
        let cm = build(&v, 2);
        assert_eq!(cm.metadata.name.as_deref(), Some("events-members"));
        assert_eq!(cm.metadata.labels, Some(v.names.labels()));
        let owners = cm.metadata.owner_references.unwrap_or_default();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].controller, Some(true));
        let text = cm
            .data
            .and_then(|d| d.get(MEMBERS_KEY).cloned())
            .unwrap_or_default();
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            vec![
                "events-0 events-0.events-headless.messaging.svc.cluster.local:7400",
                "events-1 events-1.events-headless.messaging.svc.cluster.local:7400",
            ]
        );
    }
}
