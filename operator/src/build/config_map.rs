//! The ConfigMap holding `broker.yaml`, the exact text `BrokerConfig::to_yaml()` renders.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;

use super::child_meta;
use crate::names::CONFIG_FILE;
use crate::validate::ValidatedCluster;

/// Renders the ConfigMap.
pub fn build(v: &ValidatedCluster) -> ConfigMap {
    ConfigMap {
        metadata: child_meta(v, &v.names.config_map),
        data: Some(BTreeMap::from([(
            CONFIG_FILE.to_string(),
            v.config_yaml.clone(),
        )])),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::{ConfigFile, Profile, Tier};

    #[test]
    fn holds_the_shared_crate_rendering_for_every_combination() {
        for p in Profile::ALL {
            for t in Tier::ALL {
                let v = cluster(*p, *t, |_| {});
                let cm = build(&v);
                let text = cm
                    .data
                    .as_ref()
                    .and_then(|d| d.get(CONFIG_FILE))
                    .cloned()
                    .unwrap_or_default();
                assert_eq!(text, v.config.to_yaml());
                let parsed = ConfigFile::from_yaml(&text, "cm").unwrap_or_default();
                assert_eq!(parsed.profile, Some(*p));
                assert_eq!(parsed.tier, Some(*t));
                assert_eq!(cm.metadata.name.as_deref(), Some("events-config"));
            }
        }
    }
}
