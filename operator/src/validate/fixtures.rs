//! Test fixtures: a BrokerCluster named `events` in namespace `messaging`, validated.

use kube::api::ObjectMeta;
use starling_config::{Profile, Tier};

use crate::crd::{BrokerCluster, BrokerClusterSpec};
use crate::validate::{ObjectIdentity, OperatorDefaults, SpecError, ValidatedCluster, validate};

/// The default image used in tests.
pub const IMAGE: &str = "starling-broker:test";

/// A BrokerCluster as the API server would return it.
pub fn broker_cluster(spec: BrokerClusterSpec) -> BrokerCluster {
    BrokerCluster {
        metadata: ObjectMeta {
            name: Some("events".to_string()),
            namespace: Some("messaging".to_string()),
            uid: Some("0000-uid".to_string()),
            generation: Some(3),
            ..ObjectMeta::default()
        },
        spec,
        status: None,
    }
}

/// Operator defaults used in tests.
pub fn defaults() -> OperatorDefaults {
    OperatorDefaults {
        broker_image: IMAGE.to_string(),
        tiers: starling_config::TierTable::default(),
        cluster_domain: crate::names::DEFAULT_CLUSTER_DOMAIN.to_string(),
        handoff_grace: crate::members::DEFAULT_HANDOFF_GRACE,
        operator_namespace: Some("starling-system".to_string()),
    }
}

/// Validates a spec.
pub fn try_spec(spec: BrokerClusterSpec) -> Result<ValidatedCluster, SpecError> {
    let bc = broker_cluster(spec);
    let id = ObjectIdentity::of(&bc).unwrap_or_else(|e| panic!("fixture identity: {e}"));
    validate(&bc, id, &defaults())
}

/// A validated cluster of a profile and tier; `tweak` adjusts the spec first.
pub fn spec_cluster(spec: BrokerClusterSpec) -> ValidatedCluster {
    try_spec(spec).unwrap_or_else(|e| panic!("fixture spec invalid: {e}"))
}

/// A validated cluster of a profile and tier; `tweak` then adjusts the validated value.
pub fn cluster(
    profile: Profile,
    tier: Tier,
    tweak: impl FnOnce(&mut ValidatedCluster),
) -> ValidatedCluster {
    let mut v = spec_cluster(BrokerClusterSpec {
        tier,
        profile,
        ..BrokerClusterSpec::default()
    });
    tweak(&mut v);
    v
}
