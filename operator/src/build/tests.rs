//! Renderer tests: every tier × profile combination pinned (replicas, resources, config values
//! in the ConfigMap, hash), plus the StatefulSet's pod template: security context, probes, drain
//! timing, mounts, scheduling and storage.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Container, NodeAffinity, PodAntiAffinity, PodSpec, Toleration,
    TopologySpreadConstraint,
};
use starling_config::{ConfigFile, ConfigOverrides, Profile, Tier, compose};

use super::pod::{PRESTOP_SLEEP_SECONDS, TERMINATION_MARGIN_SECONDS};
use super::*;
use crate::crd::{
    BrokerClusterSpec, ClaimRetention, ClaimRetentionPolicy, PodTemplateOverrides, StorageSpec,
    TlsSpec,
};
use crate::names::{CONFIG_FILE, CONFIG_HASH_ANNOTATION};
use crate::validate::config_hash;
use crate::validate::fixtures::{IMAGE, cluster, spec_cluster};

fn pod_spec(sts: &StatefulSet) -> PodSpec {
    sts.spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .unwrap_or_default()
}

fn broker(sts: &StatefulSet) -> Container {
    pod_spec(sts)
        .containers
        .into_iter()
        .next()
        .unwrap_or_default()
}

fn template_hash(sts: &StatefulSet) -> Option<String> {
    sts.spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION).cloned())
}

fn quantity(c: &Container, which: &str, resource: &str) -> String {
    let r = c.resources.clone().unwrap_or_default();
    let map = if which == "requests" {
        r.requests
    } else {
        r.limits
    };
    map.and_then(|m| m.get(resource).map(|q| q.0.clone()))
        .unwrap_or_default()
}

/// (profile, tier) → replicas, CPU request, memory limit, and the ConfigMap's
/// event_batch_max_events, subscriber_writer_lanes, pub_queue_depth, ack level (committed?).
type Pin = (
    Profile,
    Tier,
    i32,
    &'static str,
    &'static str,
    u32,
    u32,
    u32,
    bool,
);
const PINS: [Pin; 9] = [
    (
        Profile::Balanced,
        Tier::Small,
        1,
        "2",
        "4Gi",
        32,
        2,
        512,
        false,
    ),
    (
        Profile::Balanced,
        Tier::Medium,
        3,
        "4",
        "8Gi",
        64,
        4,
        1024,
        false,
    ),
    (
        Profile::Balanced,
        Tier::Large,
        5,
        "16",
        "32Gi",
        64,
        8,
        2048,
        false,
    ),
    (
        Profile::Latency,
        Tier::Small,
        1,
        "2",
        "4Gi",
        8,
        2,
        512,
        true,
    ),
    (
        Profile::Latency,
        Tier::Medium,
        3,
        "4",
        "8Gi",
        8,
        4,
        1024,
        true,
    ),
    (
        Profile::Latency,
        Tier::Large,
        5,
        "16",
        "32Gi",
        8,
        8,
        2048,
        true,
    ),
    (
        Profile::Throughput,
        Tier::Small,
        1,
        "2",
        "4Gi",
        32,
        2,
        512,
        false,
    ),
    (
        Profile::Throughput,
        Tier::Medium,
        3,
        "4",
        "8Gi",
        64,
        4,
        1024,
        false,
    ),
    (
        Profile::Throughput,
        Tier::Large,
        5,
        "16",
        "32Gi",
        128,
        8,
        2048,
        false,
    ),
];

#[test]
fn every_tier_and_profile_combination_is_pinned() {
    for (p, t, replicas, cpu, mem_limit, batch, lanes, queue, ack) in PINS {
        let v = cluster(p, t, |_| {});
        let c = render(&v);
        let sts = &c.statefulset;
        let tag = format!("{p}/{t}");
        assert_eq!(
            sts.spec.as_ref().and_then(|s| s.replicas),
            Some(replicas),
            "{tag}"
        );
        let b = broker(sts);
        assert_eq!(quantity(&b, "requests", "cpu"), cpu, "{tag}");
        assert_eq!(quantity(&b, "limits", "memory"), mem_limit, "{tag}");
        let sizing = t.sizing().resources;
        assert_eq!(quantity(&b, "limits", "cpu"), sizing.cpu_limit, "{tag}");
        assert_eq!(
            quantity(&b, "requests", "memory"),
            sizing.memory_request,
            "{tag}"
        );

        let text = c
            .config_map
            .data
            .as_ref()
            .and_then(|d| d.get(CONFIG_FILE))
            .cloned()
            .unwrap_or_default();
        let file = ConfigFile::from_yaml(&text, "cm").unwrap_or_else(|e| panic!("{tag}: {e}"));
        assert_eq!(file.event_batch_max_events, Some(batch), "{tag}");
        assert_eq!(file.subscriber_writer_lanes, Some(lanes), "{tag}");
        assert_eq!(file.pub_queue_depth, Some(queue), "{tag}");
        assert_eq!(
            file.ack_level,
            Some(starling_config::AckLevel::from_ack_on_commit(ack)),
            "{tag}"
        );
        assert_eq!(
            file.quic_listen.map(|a| a.to_string()).as_deref(),
            Some("0.0.0.0:7400")
        );
        assert_eq!(
            file.http_listen.map(|a| a.to_string()).as_deref(),
            Some("0.0.0.0:9400")
        );
        assert_eq!(
            file.tls_cert_file.flatten().as_deref(),
            Some(std::path::Path::new("/etc/starling/tls/tls.crt")),
            "{tag}: the generated secret without spec.tls"
        );
        assert_eq!(
            file.cluster_members_configmap.flatten().as_deref(),
            Some("events-members"),
            "{tag}"
        );
        // The ConfigMap is the shared crate's rendering, nothing else.
        assert_eq!(text, compose(p, Some(t), &forced()).to_yaml(), "{tag}");
        assert_eq!(template_hash(sts), Some(v.config_hash.clone()), "{tag}");
    }
}

fn forced() -> ConfigOverrides {
    let mut o = ConfigOverrides::default();
    crate::validate::force_operator_knobs(&mut o, &crate::names::Names::new("events"), "messaging");
    o
}

#[test]
fn hash_changes_with_profile_tier_overrides_and_tls_but_not_replicas() {
    let base = spec_cluster(BrokerClusterSpec::default());
    let hash = |spec: BrokerClusterSpec| spec_cluster(spec).config_hash;
    let different = [
        BrokerClusterSpec {
            profile: Profile::Latency,
            ..BrokerClusterSpec::default()
        },
        BrokerClusterSpec {
            tier: Tier::Medium,
            replicas: Some(1),
            ..BrokerClusterSpec::default()
        },
        BrokerClusterSpec {
            config: Some(ConfigOverrides {
                pub_queue_depth: Some(4000),
                ..ConfigOverrides::default()
            }),
            ..BrokerClusterSpec::default()
        },
        BrokerClusterSpec {
            tls: Some(TlsSpec {
                secret_name: "user-tls".into(),
            }),
            ..BrokerClusterSpec::default()
        },
    ];
    for spec in different {
        assert_ne!(hash(spec.clone()), base.config_hash, "{spec:?}");
    }
    for replicas in [1, 2, 7] {
        let scaled = spec_cluster(BrokerClusterSpec {
            replicas: Some(replicas),
            ..BrokerClusterSpec::default()
        });
        assert_eq!(scaled.config_hash, base.config_hash, "replicas {replicas}");
        assert_eq!(
            template_hash(&render(&scaled).statefulset),
            Some(base.config_hash.clone())
        );
    }
    // Neither the StatefulSet size nor the member count of a scale step changes the template.
    for (statefulset_replicas, members) in [(5, 3), (3, 5), (1, 1)] {
        let c = render_sized(
            &base,
            Sizes {
                statefulset_replicas,
                members,
                partition: None,
            },
        );
        assert_eq!(
            template_hash(&c.statefulset),
            Some(base.config_hash.clone())
        );
        assert_eq!(
            c.statefulset.spec.as_ref().map(|s| &s.template),
            render(&base).statefulset.spec.as_ref().map(|s| &s.template),
        );
    }
    let tls_a = hash(BrokerClusterSpec {
        tls: Some(TlsSpec {
            secret_name: "a".into(),
        }),
        ..BrokerClusterSpec::default()
    });
    let tls_b = hash(BrokerClusterSpec {
        tls: Some(TlsSpec {
            secret_name: "b".into(),
        }),
        ..BrokerClusterSpec::default()
    });
    assert_ne!(tls_a, tls_b, "renaming the TLS secret rolls the brokers");
    assert_eq!(config_hash("x", None), config_hash("x", Some("")));
    assert_eq!(base.config_hash.len(), 32);
}

#[test]
fn pod_is_hardened() {
    let sts = render(&cluster(Profile::Balanced, Tier::Small, |_| {})).statefulset;
    let pod = pod_spec(&sts);
    let psc = pod.security_context.clone().unwrap_or_default();
    assert_eq!(psc.run_as_non_root, Some(true));
    assert_eq!(psc.run_as_user, Some(65532));
    assert_eq!(psc.fs_group, Some(65532));
    assert_eq!(
        psc.seccomp_profile.map(|s| s.type_).as_deref(),
        Some("RuntimeDefault")
    );
    let csc = broker(&sts).security_context.unwrap_or_default();
    assert_eq!(csc.run_as_non_root, Some(true));
    assert_eq!(csc.read_only_root_filesystem, Some(true));
    assert_eq!(csc.allow_privilege_escalation, Some(false));
    assert_eq!(
        csc.capabilities.and_then(|c| c.drop),
        Some(vec!["ALL".to_string()])
    );
    assert_eq!(
        csc.seccomp_profile.map(|s| s.type_).as_deref(),
        Some("RuntimeDefault")
    );
    assert_eq!(
        pod.enable_service_links,
        Some(false),
        "service env vars would break the broker"
    );
    assert_eq!(
        pod.automount_service_account_token,
        Some(true),
        "brokers read their member list with the pod's token"
    );
    assert_eq!(pod.service_account_name.as_deref(), Some("events-broker"));
}

#[test]
fn statefulset_shape_probes_and_drain_timing() {
    let v = cluster(Profile::Throughput, Tier::Medium, |_| {});
    let sts = render(&v).statefulset;
    let spec = sts.spec.clone().unwrap_or_default();
    assert_eq!(spec.pod_management_policy.as_deref(), Some("Parallel"));
    assert_eq!(
        spec.min_ready_seconds,
        Some(15),
        "the hand-off grace paces rolling restarts"
    );
    assert_eq!(spec.service_name.as_deref(), Some("events-headless"));
    assert_eq!(spec.selector.match_labels, Some(v.names.selector_labels()));
    assert!(spec.volume_claim_templates.is_none());
    let b = broker(&sts);
    assert_eq!(b.image.as_deref(), Some(IMAGE));
    assert_eq!(
        b.args,
        Some(vec![
            "--config".to_string(),
            "/etc/starling/broker.yaml".to_string()
        ])
    );
    let ports: Vec<(i32, String)> = b
        .ports
        .unwrap_or_default()
        .into_iter()
        .map(|p| (p.container_port, p.protocol.unwrap_or_default()))
        .collect();
    assert_eq!(
        ports,
        vec![(7400, "UDP".to_string()), (9400, "TCP".to_string())]
    );
    let path = |p: Option<k8s_openapi::api::core::v1::Probe>| {
        p.and_then(|p| p.http_get)
            .and_then(|h| h.path)
            .unwrap_or_default()
    };
    assert_eq!(path(b.liveness_probe.clone()), "/healthz");
    assert_eq!(path(b.readiness_probe.clone()), "/readyz");
    let env: Vec<String> = b
        .env
        .unwrap_or_default()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(env, vec!["POD_NAME", "POD_NAMESPACE"]);
    assert!(env.iter().all(|n| !n.starts_with("STARLING_")));
    let pre_stop = b
        .lifecycle
        .and_then(|l| l.pre_stop)
        .and_then(|h| h.sleep)
        .map(|s| s.seconds);
    assert_eq!(pre_stop, Some(PRESTOP_SLEEP_SECONDS));
    let grace = pod_spec(&sts).termination_grace_period_seconds.unwrap_or(0);
    let drain_secs = i64::try_from(v.config.drain_timeout_ms.div_ceil(1000)).unwrap_or(0);
    assert_eq!(
        grace,
        PRESTOP_SLEEP_SECONDS + drain_secs + TERMINATION_MARGIN_SECONDS
    );
    assert!(
        grace > drain_secs + PRESTOP_SLEEP_SECONDS,
        "long enough for the whole drain"
    );

    let longer = spec_cluster(BrokerClusterSpec {
        config: Some(ConfigOverrides {
            drain_timeout_ms: Some(60_500),
            ..ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    });
    let grace = pod_spec(&render(&longer).statefulset).termination_grace_period_seconds;
    assert_eq!(
        grace,
        Some(PRESTOP_SLEEP_SECONDS + 61 + TERMINATION_MARGIN_SECONDS)
    );
}

#[test]
fn config_and_tls_are_mounted() {
    let plain = render(&cluster(Profile::Balanced, Tier::Small, |_| {})).statefulset;
    let mounts = |sts: &StatefulSet| -> Vec<(String, String)> {
        broker(sts)
            .volume_mounts
            .unwrap_or_default()
            .into_iter()
            .map(|m| (m.name, m.mount_path))
            .collect()
    };
    assert!(mounts(&plain).contains(&("config".into(), "/etc/starling".into())));
    // Without spec.tls, the generated secret is mounted exactly like a user's.
    assert!(mounts(&plain).contains(&("tls".into(), "/etc/starling/tls".into())));
    let generated = pod_spec(&plain)
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "tls")
        .and_then(|v| v.secret)
        .and_then(|s| s.secret_name);
    assert_eq!(generated.as_deref(), Some("events-tls"));
    let v = spec_cluster(BrokerClusterSpec {
        tls: Some(TlsSpec {
            secret_name: "user-tls".into(),
        }),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(
        v.config
            .tls_cert_file
            .as_deref()
            .map(|p| p.display().to_string())
            .as_deref(),
        Some("/etc/starling/tls/tls.crt")
    );
    assert_eq!(
        v.config
            .tls_key_file
            .as_deref()
            .map(|p| p.display().to_string())
            .as_deref(),
        Some("/etc/starling/tls/tls.key")
    );
    let sts = render(&v).statefulset;
    assert!(mounts(&sts).contains(&("tls".into(), "/etc/starling/tls".into())));
    let volumes = pod_spec(&sts).volumes.unwrap_or_default();
    let tls = volumes
        .iter()
        .find(|v| v.name == "tls")
        .and_then(|v| v.secret.clone());
    assert_eq!(
        tls.as_ref().and_then(|s| s.secret_name.as_deref()),
        Some("user-tls")
    );
    let config = volumes
        .iter()
        .find(|v| v.name == "config")
        .and_then(|v| v.config_map.clone());
    assert_eq!(config.map(|c| c.name).as_deref(), Some("events-config"));
}

#[test]
fn the_peer_secret_is_mounted_and_the_auth_knobs_point_at_it() {
    let v = cluster(Profile::Balanced, Tier::Small, |_| {});
    let sts = render(&v).statefulset;
    assert!(
        broker(&sts)
            .volume_mounts
            .unwrap_or_default()
            .iter()
            .any(|m| m.name == "peer"
                && m.mount_path == "/etc/starling/peer"
                && m.read_only == Some(true))
    );
    let peer = pod_spec(&sts)
        .volumes
        .unwrap_or_default()
        .into_iter()
        .find(|v| v.name == "peer")
        .and_then(|v| v.secret)
        .unwrap_or_default();
    assert_eq!(peer.secret_name.as_deref(), Some("events-peer"));
    let keys: Vec<String> = peer
        .items
        .unwrap_or_default()
        .into_iter()
        .map(|k| k.key)
        .collect();
    assert_eq!(keys, vec!["tls.crt", "tls.key", "ca.crt"]);
    let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
    assert_eq!(v.config.auth_mode, starling_config::AuthMode::Required);
    assert_eq!(v.config.auth_users_secret.as_deref(), Some("events-users"));
    assert_eq!(v.config.auth_users_file, None);
    assert_eq!(
        path(&v.config.auth_client_ca_file).as_deref(),
        Some("/etc/starling/peer/ca.crt")
    );
    assert_eq!(
        path(&v.config.cluster_peer_cert_file).as_deref(),
        Some("/etc/starling/peer/tls.crt")
    );
    assert_eq!(
        path(&v.config.cluster_peer_key_file).as_deref(),
        Some("/etc/starling/peer/tls.key")
    );
    let text = render(&v).config_map.data.unwrap_or_default();
    let yaml = text.get("broker.yaml").cloned().unwrap_or_default();
    assert!(yaml.contains("auth_mode: required"), "{yaml}");
    assert!(yaml.contains("auth_users_secret: events-users"), "{yaml}");

    let none = spec_cluster(BrokerClusterSpec {
        auth: Some(crate::crd::AuthSpec {
            mode: starling_config::AuthMode::None,
        }),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(none.config.auth_mode, starling_config::AuthMode::None);
    assert_ne!(
        none.config_hash, v.config_hash,
        "switching the mode rolls the brokers"
    );
}

#[test]
fn scheduling_overrides_and_default_spread() {
    let default = pod_spec(&render(&cluster(Profile::Balanced, Tier::Large, |_| {})).statefulset);
    let spread = default.topology_spread_constraints.unwrap_or_default();
    assert_eq!(spread.len(), 1);
    assert_eq!(spread[0].topology_key, "kubernetes.io/hostname");
    assert_eq!(spread[0].max_skew, 1);
    assert_eq!(spread[0].when_unsatisfiable, "ScheduleAnyway");

    let v = spec_cluster(BrokerClusterSpec {
        pod_template: Some(PodTemplateOverrides {
            node_selector: Some(BTreeMap::from([("pool".into(), "brokers".into())])),
            tolerations: Some(vec![Toleration {
                key: Some("dedicated".into()),
                operator: Some("Exists".into()),
                ..Toleration::default()
            }]),
            topology_spread_constraints: Some(Vec::<TopologySpreadConstraint>::new()),
            priority_class_name: Some("high".into()),
            annotations: Some(BTreeMap::from([
                ("team".into(), "messaging".into()),
                (CONFIG_HASH_ANNOTATION.into(), "user-value".into()),
            ])),
            ..PodTemplateOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    });
    let sts = render(&v).statefulset;
    let pod = pod_spec(&sts);
    assert_eq!(
        pod.node_selector
            .and_then(|n| n.get("pool").cloned())
            .as_deref(),
        Some("brokers")
    );
    assert_eq!(pod.tolerations.map(|t| t.len()), Some(1));
    assert_eq!(pod.priority_class_name.as_deref(), Some("high"));
    assert_eq!(
        pod.topology_spread_constraints,
        Some(vec![]),
        "an empty list disables spreading"
    );
    let annotations = sts
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .unwrap_or_default();
    assert_eq!(
        annotations.get("team").map(String::as_str),
        Some("messaging")
    );
    assert_eq!(
        annotations.get(CONFIG_HASH_ANNOTATION),
        Some(&v.config_hash),
        "the operator's hash wins over a user annotation"
    );
}

/// Three copies of every durable topic.
fn replicated(v: &mut ValidatedCluster) {
    v.config.durable_replicas = 3;
    v.config.durable_topics = vec!["orders.*".into()];
}

#[test]
fn replicated_durable_topics_prefer_distinct_nodes_and_zones() {
    let v = cluster(Profile::Balanced, Tier::Large, replicated);
    let pod = pod_spec(&render(&v).statefulset);
    let selector = Some(v.names.selector_labels());
    let spread: Vec<(String, String, i32)> = pod
        .topology_spread_constraints
        .unwrap_or_default()
        .into_iter()
        .inspect(|c| {
            assert_eq!(
                c.label_selector
                    .as_ref()
                    .and_then(|s| s.match_labels.clone()),
                selector
            );
        })
        .map(|c| (c.topology_key, c.when_unsatisfiable, c.max_skew))
        .collect();
    assert_eq!(
        spread,
        vec![
            (
                "kubernetes.io/hostname".to_string(),
                "ScheduleAnyway".to_string(),
                1
            ),
            (
                "topology.kubernetes.io/zone".to_string(),
                "ScheduleAnyway".to_string(),
                1
            ),
        ]
    );
    let anti = pod
        .affinity
        .and_then(|a| a.pod_anti_affinity)
        .unwrap_or_default();
    assert!(
        anti.required_during_scheduling_ignored_during_execution
            .is_none(),
        "a preference only: a one-node cluster still schedules every broker"
    );
    let preferred = anti
        .preferred_during_scheduling_ignored_during_execution
        .unwrap_or_default();
    assert_eq!(preferred.len(), 1);
    assert_eq!(preferred[0].weight, 100);
    assert_eq!(
        preferred[0].pod_affinity_term.topology_key,
        "kubernetes.io/hostname"
    );
    assert_eq!(
        preferred[0]
            .pod_affinity_term
            .label_selector
            .as_ref()
            .and_then(|s| s.match_labels.clone()),
        selector
    );

    // One copy, or no durable topic: the plain spread over nodes, no anti-affinity.
    let one_copy = |v: &mut ValidatedCluster| v.config.durable_topics = vec!["orders.*".into()];
    let nothing_durable = |v: &mut ValidatedCluster| v.config.durable_replicas = 3;
    for v in [
        cluster(Profile::Balanced, Tier::Large, one_copy),
        cluster(Profile::Balanced, Tier::Large, nothing_durable),
    ] {
        assert_eq!(v.replication(), None);
        let pod = pod_spec(&render(&v).statefulset);
        assert_eq!(pod.affinity, None);
        assert_eq!(pod.topology_spread_constraints.map(|s| s.len()), Some(1));
    }

    // One copy by the knobs but a volume: a BrokerTopic can make topics replicated, so the
    // pods keep apart as well (and no BrokerTopic ever changes the template).
    let mut stored = cluster(Profile::Balanced, Tier::Large, one_copy);
    stored.storage = Some(StorageSpec {
        size: "10Gi".into(),
        ..StorageSpec::default()
    });
    assert!(stored.replication().is_none() && stored.spreads_replicas());
    let pod = pod_spec(&render(&stored).statefulset);
    assert!(pod.affinity.and_then(|a| a.pod_anti_affinity).is_some());
    assert_eq!(pod.topology_spread_constraints.map(|s| s.len()), Some(2));

    // The spec's node affinity is kept beside the operator's anti-affinity; the spec's own
    // anti-affinity replaces it.
    let with_affinity = |affinity: Affinity| {
        let mut v = spec_cluster(BrokerClusterSpec {
            pod_template: Some(PodTemplateOverrides {
                affinity: Some(affinity),
                ..PodTemplateOverrides::default()
            }),
            ..BrokerClusterSpec::default()
        });
        replicated(&mut v);
        pod_spec(&render(&v).statefulset)
            .affinity
            .unwrap_or_default()
    };
    let kept = with_affinity(Affinity {
        node_affinity: Some(NodeAffinity::default()),
        ..Affinity::default()
    });
    assert_eq!(kept.node_affinity, Some(NodeAffinity::default()));
    assert!(kept.pod_anti_affinity.is_some());
    let own = with_affinity(Affinity {
        pod_anti_affinity: Some(PodAntiAffinity::default()),
        ..Affinity::default()
    });
    assert_eq!(own.pod_anti_affinity, Some(PodAntiAffinity::default()));
}

#[test]
fn storage_adds_a_claim_template_and_mount() {
    let v = spec_cluster(BrokerClusterSpec {
        storage: Some(StorageSpec {
            size: "10Gi".into(),
            storage_class_name: Some("fast".into()),
            ..StorageSpec::default()
        }),
        ..BrokerClusterSpec::default()
    });
    let sts = render(&v).statefulset;
    let claims = sts
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.clone())
        .unwrap_or_default();
    assert_eq!(claims.len(), 1);
    let claim = claims[0].spec.clone().unwrap_or_default();
    assert_eq!(claim.storage_class_name.as_deref(), Some("fast"));
    let size = claim
        .resources
        .and_then(|r| r.requests)
        .and_then(|r| r.get("storage").map(|q| q.0.clone()));
    assert_eq!(size.as_deref(), Some("10Gi"));
    let mounted = broker(&sts)
        .volume_mounts
        .unwrap_or_default()
        .iter()
        .any(|m| m.name == "data" && m.mount_path == "/var/lib/starling");
    assert!(mounted);
}

/// The StatefulSet's `persistentVolumeClaimRetentionPolicy` as (whenDeleted, whenScaled).
fn retention(sts: &StatefulSet) -> Option<(Option<String>, Option<String>)> {
    sts.spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.clone())
        .map(|p| (p.when_deleted, p.when_scaled))
}

#[test]
fn storage_sets_the_claim_retention_policy_explicitly() {
    let with = |policy| {
        let v = spec_cluster(BrokerClusterSpec {
            storage: Some(StorageSpec {
                size: "10Gi".into(),
                persistent_volume_claim_retention_policy: policy,
                ..StorageSpec::default()
            }),
            ..BrokerClusterSpec::default()
        });
        retention(&render(&v).statefulset)
    };
    let both = |d: &str, s: &str| Some((Some(d.to_string()), Some(s.to_string())));
    assert_eq!(
        with(ClaimRetentionPolicy::default()),
        both("Retain", "Retain"),
        "Retain/Retain by default, written out so it is visible"
    );
    assert_eq!(
        with(ClaimRetentionPolicy {
            when_deleted: ClaimRetention::Delete,
            when_scaled: ClaimRetention::Retain,
        }),
        both("Delete", "Retain")
    );
    assert_eq!(
        with(ClaimRetentionPolicy {
            when_deleted: ClaimRetention::Retain,
            when_scaled: ClaimRetention::Delete,
        }),
        both("Retain", "Delete")
    );
    let plain = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let sts = render(&plain).statefulset;
    assert_eq!(retention(&sts), None, "no storage, no claims, no policy");
    assert_eq!(sts.spec.and_then(|s| s.volume_claim_templates), None);
}

#[test]
fn the_retention_policy_comes_from_the_spec_as_the_api_server_defaults_it() {
    let spec: BrokerClusterSpec = serde_json::from_value(serde_json::json!({
        "storage": {"size": "1Gi", "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete"}}
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    let sts = render(&spec_cluster(spec)).statefulset;
    assert_eq!(
        retention(&sts),
        Some((Some("Retain".into()), Some("Delete".into())))
    );
}

#[test]
fn every_child_is_owned_labelled_and_namespaced() {
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let c = render(&v);
    let metas = [
        &c.config_map.metadata,
        &c.members_config_map.metadata,
        &c.service_account.metadata,
        &c.role.metadata,
        &c.role_binding.metadata,
        &c.headless_service.metadata,
        &c.client_service.metadata,
        &c.statefulset.metadata,
    ];
    let pdb_meta = c.pdb.as_ref().map(|p| &p.metadata);
    for m in metas.into_iter().chain(pdb_meta) {
        assert_eq!(m.namespace.as_deref(), Some("messaging"));
        assert_eq!(m.owner_references.as_ref().map(Vec::len), Some(1));
        let owner = &m
            .owner_references
            .as_ref()
            .map(|o| o[0].clone())
            .unwrap_or_default();
        assert_eq!(owner.kind, "BrokerCluster");
        assert_eq!(owner.uid, "0000-uid");
        assert_eq!(owner.controller, Some(true));
        assert_eq!(
            m.labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/managed-by"))
                .map(String::as_str),
            Some("starling-operator")
        );
    }
}

#[test]
fn the_pdb_is_unwanted_after_scaling_to_one() {
    let three = cluster(Profile::Balanced, Tier::Medium, |_| {});
    assert!(unwanted(&three, &render(&three)).is_empty());
    let one = spec_cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        replicas: Some(1),
        ..BrokerClusterSpec::default()
    });
    assert_eq!(
        unwanted(&one, &render(&one)),
        vec![Unwanted {
            kind: OptionalKind::PodDisruptionBudget,
            name: "events".into()
        }]
    );
}

#[test]
fn planned_sizes_reach_the_statefulset_members_and_pdb() {
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let c = render_sized(
        &v,
        Sizes {
            statefulset_replicas: 5,
            members: 3,
            partition: None,
        },
    );
    assert_eq!(
        c.statefulset.spec.as_ref().and_then(|s| s.replicas),
        Some(5)
    );
    let members = c
        .members_config_map
        .data
        .as_ref()
        .and_then(|d| d.get(crate::names::MEMBERS_KEY))
        .cloned()
        .unwrap_or_default();
    assert_eq!(members.lines().count(), 3);
    assert!(c.pdb.is_some());
    // Scaling down to one: the PDB goes only once the StatefulSet itself is down to one.
    let one = spec_cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        replicas: Some(1),
        ..BrokerClusterSpec::default()
    });
    let waiting = render_sized(
        &one,
        Sizes {
            statefulset_replicas: 3,
            members: 1,
            partition: None,
        },
    );
    assert!(waiting.pdb.is_some());
    assert!(unwanted(&one, &waiting).is_empty());
}

#[test]
fn a_replicated_statefulset_carries_the_held_partition_and_its_template_hash() {
    use crate::build::statefulset::template_hash as pod_template_hash;
    use crate::names::TEMPLATE_HASH_ANNOTATION;
    let v = cluster(Profile::Balanced, Tier::Medium, replicated);
    let held = render_sized(
        &v,
        Sizes {
            partition: Some(2),
            ..Sizes::steady(&v)
        },
    )
    .statefulset;
    let strategy = held
        .spec
        .as_ref()
        .and_then(|s| s.update_strategy.clone())
        .unwrap_or_default();
    assert_eq!(strategy.type_.as_deref(), Some("RollingUpdate"));
    assert_eq!(strategy.rolling_update.and_then(|r| r.partition), Some(2));
    let hash = held
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TEMPLATE_HASH_ANNOTATION))
        .cloned();
    let template = held.spec.map(|s| s.template).unwrap_or_default();
    assert_eq!(hash, Some(pod_template_hash(&template)));
    // The steady render of a replicated cluster: partition 0; the hash follows the template.
    let steady = render(&v).statefulset;
    assert_eq!(
        steady
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.partition),
        Some(0)
    );
    let other = cluster(Profile::Latency, Tier::Medium, replicated);
    assert_ne!(
        pod_template_hash(&render(&other).statefulset.spec.unwrap_or_default().template),
        pod_template_hash(&template)
    );
    // Unreplicated: no partition and no annotation, as before.
    let plain = render(&cluster(Profile::Balanced, Tier::Medium, |_| {})).statefulset;
    assert_eq!(plain.metadata.annotations, None);
    assert_eq!(
        plain
            .spec
            .and_then(|s| s.update_strategy)
            .and_then(|u| u.rolling_update),
        None
    );
}
