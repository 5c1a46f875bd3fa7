//! Validation tests: defaults, overrides, forced knobs and every refusal reason.

use starling_config::{ConfigOverrides, Profile, Tier};

use super::*;
use crate::crd::{AutoscalingSpec, CpuMemory as CpuMemorySpec, ResourceOverrides, TlsSpec};
use crate::validate::fixtures::{IMAGE, broker_cluster, try_spec};

fn refused(spec: BrokerClusterSpec) -> SpecError {
    match try_spec(spec) {
        Ok(v) => panic!("expected a refusal, got {v:?}"),
        Err(e) => e,
    }
}

#[test]
fn defaults_come_from_the_tier_and_the_operator() {
    let v = try_spec(BrokerClusterSpec::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.tier, Tier::Small);
    assert_eq!(v.profile, Profile::Balanced);
    assert_eq!(v.replicas, 1);
    assert_eq!(v.image, IMAGE);
    assert_eq!(
        v.resources.requests.cpu,
        Tier::Small.sizing().resources.cpu_request
    );
    assert_eq!(v.config.tier, Some(Tier::Small));
    assert_eq!(v.config_yaml, v.config.to_yaml());
    assert_eq!(v.names.statefulset, "events");
}

#[test]
fn overrides_replace_tier_values() {
    let v = try_spec(BrokerClusterSpec {
        tier: Tier::Large,
        replicas: Some(2),
        image: Some("custom:1".into()),
        resources: Some(ResourceOverrides {
            requests: Some(CpuMemorySpec {
                cpu: Some("8".into()),
                memory: None,
            }),
            limits: None,
        }),
        config: Some(ConfigOverrides {
            pub_queue_depth: Some(3333),
            ..ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.replicas, 2);
    assert_eq!(v.image, "custom:1");
    assert_eq!(v.resources.requests.cpu, "8");
    assert_eq!(
        v.resources.requests.memory,
        Tier::Large.sizing().resources.memory_request
    );
    assert_eq!(v.config.pub_queue_depth, 3333);
    assert_eq!(
        v.config.subscriber_writer_lanes,
        Tier::Large.sizing().subscriber_writer_lanes
    );
}

#[test]
fn operator_owned_knobs_are_refused() {
    let e = refused(BrokerClusterSpec {
        config: Some(ConfigOverrides {
            quic_listen: Some("0.0.0.0:1".parse().unwrap_or_else(|e| panic!("{e}"))),
            tls_cert_file: Some(Some("/x".into())),
            ..ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(e.reason(), Reason::ManagedKnobSet);
    assert!(
        e.message()
            .contains("config.quic_listen, config.tls_cert_file"),
        "{e}"
    );
}

#[test]
fn invalid_config_names_the_knob() {
    let e = refused(BrokerClusterSpec {
        config: Some(ConfigOverrides {
            subscriber_writer_lanes: Some(9),
            ..ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(e.reason(), Reason::InvalidConfig);
    assert!(e.message().contains("subscriber_writer_lanes"), "{e}");
}

#[test]
fn resources_must_parse_and_requests_stay_under_limits() {
    let e = refused(BrokerClusterSpec {
        resources: Some(ResourceOverrides {
            requests: Some(CpuMemorySpec {
                cpu: Some("3".into()),
                memory: Some("lots".into()),
            }),
            limits: None,
        }),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(e.reason(), Reason::InvalidResources);
    assert!(
        e.message()
            .contains("resources.requests.cpu (3) must not exceed resources.limits.cpu (2)"),
        "{e}"
    );
    assert!(e.message().contains("`lots` is not a quantity"), "{e}");
    let ok = try_spec(BrokerClusterSpec {
        resources: Some(ResourceOverrides {
            requests: Some(CpuMemorySpec {
                cpu: Some("2000m".into()),
                memory: None,
            }),
            limits: None,
        }),
        ..BrokerClusterSpec::default()
    });
    assert!(ok.is_ok(), "2000m equals the limit of 2");
}

/// `cpu: 2` and `memory: 1073741824` written as JSON integers: the same resources as the
/// strings, compared with the limits and used for the memory fit like them.
#[test]
fn integer_quantities_work_like_strings() {
    let spec = |resources: serde_json::Value| -> BrokerClusterSpec {
        serde_json::from_value(serde_json::json!({ "resources": resources }))
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let ints = try_spec(spec(serde_json::json!({
        "requests": { "cpu": 1, "memory": 536_870_912 },
        "limits": { "cpu": 2, "memory": 1_073_741_824 }
    })))
    .unwrap_or_else(|e| panic!("{e}"));
    let strings = try_spec(spec(serde_json::json!({
        "requests": { "cpu": "1", "memory": "536870912" },
        "limits": { "cpu": "2", "memory": "1073741824" }
    })))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ints.resources, strings.resources);
    assert_eq!(ints.resources.limits.cpu, "2");
    assert_eq!(ints.resources.limits.memory, "1073741824");
    assert_eq!(
        ints.config, strings.config,
        "the memory limit sized the budgets"
    );
    assert_eq!(ints.config.cache_max_bytes, 128 << 20, "1/8 of 1Gi");
    let e = refused(spec(serde_json::json!({
        "requests": { "cpu": 3 }, "limits": { "cpu": "2" }
    })));
    assert!(
        e.message()
            .contains("resources.requests.cpu (3) must not exceed resources.limits.cpu (2)"),
        "{e}"
    );
    let e = refused(spec(serde_json::json!({ "requests": { "cpu": 0 } })));
    assert!(e.message().contains("must be positive"), "{e}");
    let sized: BrokerClusterSpec =
        serde_json::from_value(serde_json::json!({ "storage": { "size": 10_737_418_240u64 } }))
            .unwrap_or_else(|e| panic!("{e}"));
    let v = try_spec(sized).unwrap_or_else(|e| panic!("{e}"));
    assert!(v.storage.is_some());
}

#[test]
fn several_problems_are_reported_together() {
    let e = refused(BrokerClusterSpec {
        replicas: Some(0),
        image: Some(" ".into()),
        autoscaling: Some(AutoscalingSpec {
            enabled: true,
            min_tier: Tier::Large,
            max_tier: Tier::Small,
            ..AutoscalingSpec::default()
        }),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(e.reason(), Reason::InvalidSpec);
    let m = e.message();
    assert!(m.contains("replicas must be at least 1"), "{m}");
    assert!(m.contains("image must not be empty"), "{m}");
    assert!(m.contains("autoscaling.minTier (large)"), "{m}");
    assert!(
        m.contains("replicas cannot be set while autoscaling.enabled"),
        "{m}"
    );
    assert_eq!(e.problems.len(), 4);
}

#[test]
fn names_that_cannot_name_services_are_refused() {
    for (name, ok) in [
        ("events", true),
        ("a", true),
        ("e-1", true),
        ("1events", false),
        ("ev.ents", false),
        ("events-", false),
        ("Events", false),
        ("", false),
    ] {
        assert_eq!(valid_cluster_name(name), ok, "{name}");
    }
    assert!(valid_cluster_name(&"a".repeat(MAX_NAME_LEN)));
    assert!(!valid_cluster_name(&"a".repeat(MAX_NAME_LEN + 1)));
    let mut bc = broker_cluster(BrokerClusterSpec::default());
    bc.metadata.name = Some("bad.name".into());
    let id = ObjectIdentity::of(&bc).unwrap_or_else(|e| panic!("{e}"));
    let e = validate(&bc, id, &crate::validate::fixtures::defaults()).err();
    assert_eq!(e.map(|e| e.reason()), Some(Reason::InvalidName));
}

#[test]
fn identity_requires_namespace_and_uid() {
    let mut bc = broker_cluster(BrokerClusterSpec::default());
    bc.metadata.uid = None;
    assert!(matches!(
        ObjectIdentity::of(&bc),
        Err(Error::MissingObjectField("metadata.uid"))
    ));
    let mut bc = broker_cluster(BrokerClusterSpec::default());
    bc.metadata.namespace = None;
    assert!(ObjectIdentity::of(&bc).is_err());
}

#[test]
fn tls_paths_are_forced_with_a_secret() {
    let v = try_spec(BrokerClusterSpec {
        tls: Some(TlsSpec {
            secret_name: "my-cert".into(),
        }),
        ..BrokerClusterSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.tls_secret, "my-cert");
    assert!(!v.tls_generated);
    assert!(v.config.tls_cert_file.is_some() && v.config.tls_key_file.is_some());
    assert_eq!(
        v.config.quic_listen.port(),
        starling_config::DEFAULT_QUIC_PORT
    );
}

#[test]
fn effective_tier_follows_the_autoscaler_within_bounds_and_only_while_enabled() {
    let mut spec = BrokerClusterSpec {
        tier: Tier::Medium,
        autoscaling: Some(AutoscalingSpec {
            enabled: true,
            min_tier: Tier::Small,
            max_tier: Tier::Medium,
            ..AutoscalingSpec::default()
        }),
        ..BrokerClusterSpec::default()
    };
    let chosen = |t| BrokerClusterStatus {
        effective_tier: Some(t),
        ..BrokerClusterStatus::default()
    };
    assert_eq!(
        effective_tier(&spec, Some(&chosen(Tier::Small))),
        Tier::Small
    );
    assert_eq!(
        effective_tier(&spec, Some(&chosen(Tier::Large))),
        Tier::Medium,
        "clamped to maxTier"
    );
    assert_eq!(
        effective_tier(&spec, None),
        Tier::Medium,
        "spec.tier before a choice"
    );
    spec.tier = Tier::Large;
    assert_eq!(
        effective_tier(&spec, None),
        Tier::Medium,
        "spec.tier clamped too"
    );
    // Turning autoscaling off returns to spec.tier whatever the status says.
    if let Some(a) = spec.autoscaling.as_mut() {
        a.enabled = false;
    }
    assert_eq!(
        effective_tier(&spec, Some(&chosen(Tier::Small))),
        Tier::Large
    );
    spec.autoscaling = None;
    assert_eq!(
        effective_tier(&spec, Some(&chosen(Tier::Small))),
        Tier::Large
    );
}

#[test]
fn a_bad_autoscaling_policy_is_refused_with_the_field() {
    let e = refused(BrokerClusterSpec {
        autoscaling: Some(AutoscalingSpec {
            enabled: true,
            scale_up_window: "soon".into(),
            ..AutoscalingSpec::default()
        }),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(e.reason(), Reason::InvalidSpec);
    assert!(
        e.message().contains("autoscaling.scaleUpWindow `soon`"),
        "{}",
        e.message()
    );
}

#[test]
fn admin_tier_overrides_size_the_cluster_and_spec_still_wins() {
    let tiers = starling_config::TierTable::from_yaml(
        "small:\n  replicas: 2\n  cpuRequest: 100m\n  cpuLimit: 500m\n  memoryRequest: 64Mi\n  memoryLimit: 256Mi\n",
        "test",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let defaults = OperatorDefaults {
        tiers,
        ..crate::validate::fixtures::defaults()
    };
    let bc = broker_cluster(BrokerClusterSpec::default());
    let id = ObjectIdentity::of(&bc).unwrap_or_else(|e| panic!("{e}"));
    let v = validate(&bc, id.clone(), &defaults).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.replicas, 2);
    assert_eq!(
        (
            v.resources.requests.cpu.as_str(),
            v.resources.limits.memory.as_str()
        ),
        ("100m", "256Mi")
    );
    let bc = broker_cluster(BrokerClusterSpec {
        replicas: Some(1),
        ..BrokerClusterSpec::default()
    });
    let v = validate(&bc, id, &defaults).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.replicas, 1, "spec.replicas beats the tier table");
}

#[test]
fn without_spec_tls_the_generated_secret_is_mounted_at_the_same_paths() {
    let v = try_spec(BrokerClusterSpec::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.tls_secret, "events-tls");
    assert!(v.tls_generated);
    assert_eq!(
        v.config.tls_cert_file.as_deref(),
        Some(std::path::Path::new("/etc/starling/tls/tls.crt"))
    );
    assert_eq!(
        v.config.tls_key_file.as_deref(),
        Some(std::path::Path::new("/etc/starling/tls/tls.key"))
    );
    assert_eq!(v.cluster_domain, "cluster.local");
}

#[test]
fn the_members_configmap_knob_is_forced() {
    let v = try_spec(BrokerClusterSpec::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        v.config.cluster_members_configmap.as_deref(),
        Some("events-members")
    );
    assert_eq!(v.config.cluster_members_file, None);
    assert!(
        v.config_yaml
            .contains("cluster_members_configmap: events-members"),
        "{}",
        v.config_yaml
    );
}

#[test]
fn cluster_membership_knobs_are_refused_in_spec_config() {
    for knob in ["cluster_members_configmap", "cluster_members_file"] {
        let config: starling_config::ConfigOverrides =
            serde_json::from_value(serde_json::json!({ knob: "x" }))
                .unwrap_or_else(|e| panic!("{knob}: {e}"));
        let err = try_spec(BrokerClusterSpec {
            config: Some(config),
            ..BrokerClusterSpec::default()
        })
        .err()
        .unwrap_or_else(|| panic!("{knob} must be refused"));
        assert_eq!(err.reason(), Reason::ManagedKnobSet);
        assert!(
            err.message().contains(&format!("config.{knob}")),
            "{}",
            err.message()
        );
    }
}

#[test]
fn a_huge_replica_count_is_refused_before_anything_is_rendered() {
    let e = refused(BrokerClusterSpec {
        replicas: Some(i32::MAX),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(e.reason(), Reason::InvalidSpec);
    assert!(
        e.message()
            .contains("replicas must be at most 100, got 2147483647"),
        "{}",
        e.message()
    );
}

#[test]
fn a_spec_whose_worst_case_passes_its_memory_limit_is_refused_naming_knobs_and_numbers() {
    let err = try_spec(BrokerClusterSpec {
        tier: Tier::Small,
        config: Some(ConfigOverrides {
            cache_max_bytes: Some(8 << 30),
            ..ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    })
    .err()
    .map(|e| e.message())
    .unwrap_or_default();
    assert!(err.contains("memory limit is 4.0 GiB"), "{err}");
    assert!(err.contains("cache 8.0 GiB (cache_max_bytes)"), "{err}");
}

#[test]
fn budgets_follow_the_effective_memory_limit_unless_the_spec_sets_them() {
    let v = try_spec(BrokerClusterSpec {
        tier: Tier::Small,
        resources: Some(ResourceOverrides {
            requests: Some(CpuMemorySpec {
                cpu: None,
                memory: Some("512Mi".into()),
            }),
            limits: Some(CpuMemorySpec {
                cpu: None,
                memory: Some("1Gi".into()),
            }),
        }),
        config: Some(ConfigOverrides {
            replay_max_total_bytes: Some(32 << 20),
            ..ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.config.cache_max_bytes, 128 << 20, "1/8 of 1Gi");
    assert_eq!(v.config.connection_buffer_budget_bytes, 192 << 20);
    assert_eq!(v.config.max_topics, 2048);
    assert_eq!(
        v.config.replay_max_total_bytes,
        32 << 20,
        "the spec's own value"
    );
    let fits = starling_config::memory::check_fit(&v.config, 0, 1 << 30);
    assert!(fits.is_ok(), "{fits:?}");
}

#[test]
fn durable_topics_need_storage_and_get_its_volume() {
    let durable = || ConfigOverrides {
        durable_topics: Some(vec!["orders.>".into()]),
        ..ConfigOverrides::default()
    };
    let err = try_spec(BrokerClusterSpec {
        config: Some(durable()),
        ..BrokerClusterSpec::default()
    })
    .err()
    .map(|e| e.message())
    .unwrap_or_default();
    assert!(
        err.contains("config.durable_topics needs spec.storage"),
        "{err}"
    );
    let v = try_spec(BrokerClusterSpec {
        config: Some(durable()),
        storage: Some(crate::crd::StorageSpec {
            size: "1Gi".into(),
            ..crate::crd::StorageSpec::default()
        }),
        ..BrokerClusterSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        v.config.storage_dir.as_deref(),
        Some(std::path::Path::new("/var/lib/starling"))
    );
    // The topics document of the BrokerTopics, mounted with the volumes.
    assert_eq!(
        v.config.topics_file.as_deref(),
        Some(std::path::Path::new("/etc/starling/topics/topics.json"))
    );
    let plain = try_spec(BrokerClusterSpec::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(plain.config.storage_dir, None);
    assert_eq!(plain.config.topics_file, None);
}

/// A StatefulSet as the API server stores one the operator rendered with storage of `size`
/// and `class` (no claim template when `size` is `None`).
fn sts_with_claim(size: Option<&str>, class: Option<&str>) -> StatefulSet {
    use k8s_openapi::api::apps::v1::StatefulSetSpec;
    use k8s_openapi::api::core::v1::{
        PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    let claim = |size: &str| PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(crate::names::DATA_VOLUME.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            storage_class_name: class.map(str::to_string),
            resources: Some(VolumeResourceRequirements {
                requests: Some(std::collections::BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(size.to_string()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    };
    StatefulSet {
        spec: Some(StatefulSetSpec {
            volume_claim_templates: size.map(|s| vec![claim(s)]),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

fn with_storage(size: &str, class: Option<&str>) -> BrokerClusterSpec {
    BrokerClusterSpec {
        storage: Some(StorageSpec {
            size: size.into(),
            storage_class_name: class.map(str::to_string),
            ..StorageSpec::default()
        }),
        ..BrokerClusterSpec::default()
    }
}

/// [`validate_observed`] of `spec` against `observed`.
fn observed(
    spec: BrokerClusterSpec,
    sts: Option<&StatefulSet>,
) -> Result<ValidatedCluster, SpecError> {
    let bc = broker_cluster(spec);
    let id = ObjectIdentity::of(&bc).unwrap_or_else(|e| panic!("{e}"));
    validate_observed(&bc, id, &fixtures::defaults(), sts)
}

#[test]
fn storage_is_checked_against_the_existing_statefulsets_claim_template() {
    use crate::crd::rules::{
        STORAGE_ADDED_MESSAGE, STORAGE_CLASS_MESSAGE, STORAGE_REMOVED_MESSAGE, STORAGE_SIZE_MESSAGE,
    };
    let ten = sts_with_claim(Some("10Gi"), Some("fast"));
    let none = sts_with_claim(None, None);
    // Nothing to compare with yet, or nothing changed (the stored quantity may be spelled
    // differently), or a retention policy change: accepted.
    for (spec, sts) in [
        (with_storage("20Gi", None), None),
        (with_storage("10Gi", Some("fast")), Some(&ten)),
        (with_storage("10240Mi", Some("fast")), Some(&ten)),
        (BrokerClusterSpec::default(), Some(&none)),
    ] {
        assert!(observed(spec.clone(), sts).is_ok(), "{spec:?}");
    }
    let mut policy = with_storage("10Gi", Some("fast"));
    if let Some(s) = policy.storage.as_mut() {
        s.persistent_volume_claim_retention_policy.when_deleted =
            crate::crd::ClaimRetention::Delete;
    }
    assert!(observed(policy, Some(&ten)).is_ok());
    for (spec, sts, expected) in [
        (BrokerClusterSpec::default(), &ten, STORAGE_REMOVED_MESSAGE),
        (with_storage("10Gi", None), &none, STORAGE_ADDED_MESSAGE),
        (
            with_storage("20Gi", Some("fast")),
            &ten,
            STORAGE_SIZE_MESSAGE,
        ),
        (
            with_storage("10Gi", Some("slow")),
            &ten,
            STORAGE_CLASS_MESSAGE,
        ),
        (with_storage("10Gi", None), &ten, STORAGE_CLASS_MESSAGE),
    ] {
        let e = observed(spec.clone(), Some(sts)).err();
        assert_eq!(
            e.as_ref().map(SpecError::reason),
            Some(Reason::StorageImmutable)
        );
        let message = e.map(|e| e.message()).unwrap_or_default();
        assert!(message.contains(expected), "{spec:?}: {message}");
    }
    let resized = observed(with_storage("20Gi", Some("fast")), Some(&ten))
        .err()
        .map(|e| e.message())
        .unwrap_or_default();
    assert!(
        resized.contains("the StatefulSet's claims request 10Gi, spec.storage.size is 20Gi"),
        "{resized}"
    );
}

#[test]
fn a_storage_problem_comes_after_the_specs_own() {
    let spec = BrokerClusterSpec {
        replicas: Some(0),
        ..BrokerClusterSpec::default()
    };
    let ten = sts_with_claim(Some("10Gi"), None);
    let e = observed(spec, Some(&ten))
        .err()
        .unwrap_or_else(|| panic!("refused"));
    assert_eq!(e.reason(), Reason::InvalidSpec);
    assert_eq!(
        e.problems.last().map(|p| p.reason),
        Some(Reason::StorageImmutable)
    );
}

#[test]
fn spec_durability_is_rendered_into_the_broker_config_and_config_map() {
    use crate::crd::{DurabilitySpec, RetentionSpec, StorageSpec};
    use starling_config::StorageFsync;
    let storage = || {
        Some(StorageSpec {
            size: "10Gi".into(),
            ..StorageSpec::default()
        })
    };
    let durability = || {
        Some(DurabilitySpec {
            topics: Some(vec!["orders.*".into()]),
            fsync: Some(StorageFsync::Interval),
            fsync_interval_ms: Some(250),
            retention: Some(RetentionSpec {
                max_bytes: Some("5Gi".into()),
                max_age: Some("168h".into()),
            }),
        })
    };
    let v = try_spec(BrokerClusterSpec {
        storage: storage(),
        durability: durability(),
        ..BrokerClusterSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.config.durable_topics, vec!["orders.*".to_string()]);
    assert_eq!(v.config.storage_fsync, StorageFsync::Interval);
    assert_eq!(v.config.storage_fsync_interval_ms, 250);
    assert_eq!(v.config.storage_retention_max_bytes, 5 << 30);
    assert_eq!(v.config.storage_retention_max_age_ms, 168 * 3_600_000);
    // What the brokers read: the broker.yaml the config ConfigMap holds.
    let text = &v.config_yaml;
    for line in [
        "storage_fsync: interval",
        "storage_fsync_interval_ms: 250",
        "storage_retention_max_bytes: 5368709120",
        "storage_retention_max_age_ms: 604800000",
        "storage_dir: /var/lib/starling",
    ] {
        assert!(text.contains(line), "{line} missing from:\n{text}");
    }
    assert!(text.contains("orders.*"), "{text}");

    // The same knob in config too: refused, naming both fields.
    let err = refused(BrokerClusterSpec {
        storage: storage(),
        durability: durability(),
        config: Some(ConfigOverrides {
            durable_topics: Some(vec!["audit.>".into()]),
            ..ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(err.reason(), Reason::InvalidConfig);
    assert!(
        err.message()
            .contains("durability.topics and config.durable_topics"),
        "{}",
        err.message()
    );
    // Without storage: refused.
    let err = refused(BrokerClusterSpec {
        durability: durability(),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(err.reason(), Reason::InvalidConfig);
    assert!(
        err.message().contains("durability needs storage"),
        "{}",
        err.message()
    );
}
