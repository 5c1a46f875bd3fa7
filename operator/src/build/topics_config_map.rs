//! The ConfigMap `<cluster>-topics`: the topics document (`topics.json`, see
//! `starling_config::topics`) of the cluster's accepted BrokerTopics, owned by the cluster.
//! The brokers mount it as a directory and re-read the file while they run, so its content is
//! no part of the pod template: adding or changing a BrokerTopic restarts no broker.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use starling_config::topics::TopicsDocument;

use super::child_meta;
use crate::names::TOPICS_KEY;
use crate::validate::ValidatedCluster;

/// The ConfigMap holding `document`.
pub fn build(v: &ValidatedCluster, document: &TopicsDocument) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(v, &v.names.topics_config_map),
        data: Some(BTreeMap::from([(
            TOPICS_KEY.to_string(),
            document.render(),
        )])),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::topics::TopicPolicy;
    use starling_config::{Profile, Tier};

    #[test]
    fn holds_the_rendered_document_and_is_owned_by_the_cluster() {
        let v = cluster(Profile::Balanced, Tier::Small, |_| {});
        let mut p = TopicPolicy::new("orders", "orders.*");
        p.replicas = Some(3);
        let doc = TopicsDocument::new(vec![p]);
        let cm = build(&v, &doc);
        assert_eq!(cm.metadata.name.as_deref(), Some("events-topics"));
        assert_eq!(
            cm.metadata
                .owner_references
                .as_ref()
                .map(|o| o[0].uid.as_str()),
            Some("0000-uid")
        );
        let text = cm
            .data
            .as_ref()
            .and_then(|d| d.get(TOPICS_KEY))
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            TopicsDocument::parse(&text, v.config.max_frame_bytes),
            Ok(doc)
        );
    }
}
