//! The broker pod template: container, probes, drain timing, hardened security context,
//! volumes and scheduling.
//!
//! Scheduling: the brokers spread over nodes when possible (a topology spread on
//! `kubernetes.io/hostname`, `ScheduleAnyway`). When durable topics can be replicated
//! ([`ValidatedCluster::spreads_replicas`]: `durable_replicas` above 1 with a durable topic,
//! or `spec.storage`, without which no BrokerTopic applies), a lost node or zone must not take
//! several replicas of a topic, so the pods also prefer nodes without another broker of the
//! cluster (a preferred pod anti-affinity on `kubernetes.io/hostname`) and spread over zones
//! (`topology.kubernetes.io/zone`, `ScheduleAnyway`): preferences, never requirements, so a
//! one-node cluster still schedules every broker, and the `ReplicationDegraded` condition says
//! when brokers share a node. The BrokerTopics themselves are not read here: the template
//! must not change with them (a change would roll every broker). The spec's own `podTemplate.affinity.podAntiAffinity` or
//! `podTemplate.topologySpreadConstraints` replace the operator's.
//!
//! The pod mounts its ServiceAccount token: brokers read their member list (the
//! `<cluster>-members` ConfigMap) through the Kubernetes API. Every pod mounts the same TLS
//! secret (the user's or the generated one) at [`TLS_DIR`], and the cluster's peer certificate
//! Secret (`<cluster>-peer`: `tls.crt`, `tls.key`, `ca.crt`) at [`PEER_DIR`]. Secret volumes are
//! updated in place by the kubelet, and the brokers re-read those files, so a renewal needs no
//! restart. With `spec.storage`, the topics document ConfigMap `<cluster>-topics` is mounted
//! as a directory at [`TOPICS_DIR`] (always, empty when no BrokerTopic names the cluster), so
//! the kubelet's updates reach the brokers, which re-read it: its content is not part of the
//! template and a BrokerTopic change restarts no broker.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, Capabilities, ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource,
    EnvVar, EnvVarSource, HTTPGetAction, KeyToPath, Lifecycle, LifecycleHandler,
    ObjectFieldSelector, PodAffinityTerm, PodAntiAffinity, PodSecurityContext, PodSpec,
    PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile, SecretVolumeSource,
    SecurityContext, SleepAction, TopologySpreadConstraint, Volume, VolumeMount,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::names::{
    CONFIG_DIR, CONFIG_HASH_ANNOTATION, DATA_DIR, HTTP_PORT_NAME, PEER_DIR, QUIC_PORT_NAME,
    TLS_DIR, TOPICS_DIR,
};
use crate::validate::{ValidatedCluster, config_path};

/// The broker image's non-root user and group.
pub const BROKER_UID: i64 = 65532;
/// Seconds the pod waits in `preStop` before SIGTERM, so Service endpoints stop sending new
/// connections before the broker starts draining.
pub const PRESTOP_SLEEP_SECONDS: i64 = 5;
/// Margin after the drain before the kubelet kills the broker.
pub const TERMINATION_MARGIN_SECONDS: i64 = 10;
/// Name of the broker container.
pub const CONTAINER_NAME: &str = "broker";
pub use crate::names::DATA_VOLUME;
/// Name of the topics document volume (the ConfigMap `<cluster>-topics`).
pub const TOPICS_VOLUME: &str = "topics";
/// The node label the brokers spread over, and the replicated brokers' anti-affinity key.
pub const HOSTNAME_KEY: &str = "kubernetes.io/hostname";
/// The zone label the brokers of a replicated cluster spread over.
pub const ZONE_KEY: &str = "topology.kubernetes.io/zone";

/// `terminationGracePeriodSeconds`: the preStop pause, the broker's whole drain
/// (`drain_timeout_ms`, rounded up) and a margin.
pub fn termination_grace_seconds(v: &ValidatedCluster) -> i64 {
    let drain = v.config.drain_timeout_ms.div_ceil(1000);
    PRESTOP_SLEEP_SECONDS
        + i64::try_from(drain).unwrap_or(i64::MAX / 2)
        + TERMINATION_MARGIN_SECONDS
}

/// The pod template.
pub fn template(v: &ValidatedCluster) -> PodTemplateSpec {
    let mut annotations: BTreeMap<String, String> = v.pod.annotations.clone().unwrap_or_default();
    annotations.insert(CONFIG_HASH_ANNOTATION.to_string(), v.config_hash.clone());
    PodTemplateSpec {
        metadata: Some(ObjectMeta {
            labels: Some(v.names.labels()),
            annotations: Some(annotations),
            ..ObjectMeta::default()
        }),
        spec: Some(PodSpec {
            service_account_name: Some(v.names.service_account.clone()),
            automount_service_account_token: Some(true),
            enable_service_links: Some(false),
            termination_grace_period_seconds: Some(termination_grace_seconds(v)),
            security_context: Some(pod_security_context()),
            containers: vec![container(v)],
            volumes: Some(volumes(v)),
            node_selector: v.pod.node_selector.clone(),
            tolerations: v.pod.tolerations.clone(),
            affinity: affinity(v),
            priority_class_name: v.pod.priority_class_name.clone(),
            topology_spread_constraints: Some(
                v.pod
                    .topology_spread_constraints
                    .clone()
                    .unwrap_or_else(|| default_spread(v)),
            ),
            ..PodSpec::default()
        }),
    }
}

/// The cluster's broker pods, for the spread and the anti-affinity.
fn brokers(v: &ValidatedCluster) -> LabelSelector {
    LabelSelector {
        match_labels: Some(v.names.selector_labels()),
        ..LabelSelector::default()
    }
}

/// A spread of at most one broker of difference over `key`, never blocking scheduling.
fn spread(v: &ValidatedCluster, key: &str) -> TopologySpreadConstraint {
    TopologySpreadConstraint {
        max_skew: 1,
        topology_key: key.to_string(),
        when_unsatisfiable: "ScheduleAnyway".to_string(),
        label_selector: Some(brokers(v)),
        ..TopologySpreadConstraint::default()
    }
}

/// Brokers spread across nodes when possible, and across zones too when durable topics can
/// be replicated.
fn default_spread(v: &ValidatedCluster) -> Vec<TopologySpreadConstraint> {
    let mut out = vec![spread(v, HOSTNAME_KEY)];
    if v.spreads_replicas() {
        out.push(spread(v, ZONE_KEY));
    }
    out
}

/// The spec's affinity; when durable topics can be replicated and the spec sets no pod
/// anti-affinity, with a preferred one that keeps two brokers of the cluster off one node.
fn affinity(v: &ValidatedCluster) -> Option<Affinity> {
    let mut out = v.pod.affinity.clone();
    if v.spreads_replicas() {
        let a = out.get_or_insert_with(Affinity::default);
        if a.pod_anti_affinity.is_none() {
            a.pod_anti_affinity = Some(PodAntiAffinity {
                preferred_during_scheduling_ignored_during_execution: Some(vec![
                    WeightedPodAffinityTerm {
                        weight: 100,
                        pod_affinity_term: PodAffinityTerm {
                            label_selector: Some(brokers(v)),
                            topology_key: HOSTNAME_KEY.to_string(),
                            ..PodAffinityTerm::default()
                        },
                    },
                ]),
                ..PodAntiAffinity::default()
            });
        }
    }
    out
}

/// runAsNonRoot as the image's user, fsGroup so mounted secrets are readable, RuntimeDefault
/// seccomp.
pub fn pod_security_context() -> PodSecurityContext {
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(BROKER_UID),
        run_as_group: Some(BROKER_UID),
        fs_group: Some(BROKER_UID),
        seccomp_profile: Some(runtime_default()),
        ..PodSecurityContext::default()
    }
}

/// No privilege escalation, read-only root filesystem, every capability dropped.
pub fn container_security_context() -> SecurityContext {
    SecurityContext {
        run_as_non_root: Some(true),
        allow_privilege_escalation: Some(false),
        read_only_root_filesystem: Some(true),
        privileged: Some(false),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".to_string()]),
            ..Capabilities::default()
        }),
        seccomp_profile: Some(runtime_default()),
        ..SecurityContext::default()
    }
}

fn runtime_default() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".to_string(),
        ..SeccompProfile::default()
    }
}

fn http_probe(path: &str, period: i32, failures: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String(HTTP_PORT_NAME.to_string()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        timeout_seconds: Some(2),
        failure_threshold: Some(failures),
        ..Probe::default()
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.to_string(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.to_string(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn quantities(cpu: &str, memory: &str) -> BTreeMap<String, Quantity> {
    BTreeMap::from([
        ("cpu".to_string(), Quantity(cpu.to_string())),
        ("memory".to_string(), Quantity(memory.to_string())),
    ])
}

/// The broker container.
pub fn container(v: &ValidatedCluster) -> Container {
    let r = &v.resources;
    let mut mounts = vec![
        VolumeMount {
            name: "config".to_string(),
            mount_path: CONFIG_DIR.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        },
        VolumeMount {
            name: "tmp".to_string(),
            mount_path: "/tmp".to_string(),
            ..VolumeMount::default()
        },
    ];
    mounts.push(VolumeMount {
        name: "tls".to_string(),
        mount_path: TLS_DIR.to_string(),
        read_only: Some(true),
        ..VolumeMount::default()
    });
    mounts.push(VolumeMount {
        name: "peer".to_string(),
        mount_path: PEER_DIR.to_string(),
        read_only: Some(true),
        ..VolumeMount::default()
    });
    if v.storage.is_some() {
        mounts.push(VolumeMount {
            name: DATA_VOLUME.to_string(),
            mount_path: DATA_DIR.to_string(),
            ..VolumeMount::default()
        });
        mounts.push(VolumeMount {
            name: TOPICS_VOLUME.to_string(),
            mount_path: TOPICS_DIR.to_string(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    Container {
        name: CONTAINER_NAME.to_string(),
        image: Some(v.image.clone()),
        args: Some(vec!["--config".to_string(), config_path()]),
        ports: Some(vec![
            ContainerPort {
                name: Some(QUIC_PORT_NAME.to_string()),
                container_port: starling_config::DEFAULT_QUIC_PORT.into(),
                protocol: Some("UDP".to_string()),
                ..ContainerPort::default()
            },
            ContainerPort {
                name: Some(HTTP_PORT_NAME.to_string()),
                container_port: starling_config::DEFAULT_HTTP_PORT.into(),
                protocol: Some("TCP".to_string()),
                ..ContainerPort::default()
            },
        ]),
        env: Some(vec![
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
        ]),
        resources: Some(ResourceRequirements {
            requests: Some(quantities(&r.requests.cpu, &r.requests.memory)),
            limits: Some(quantities(&r.limits.cpu, &r.limits.memory)),
            ..ResourceRequirements::default()
        }),
        startup_probe: Some(http_probe("/healthz", 2, 30)),
        liveness_probe: Some(http_probe("/healthz", 10, 3)),
        readiness_probe: Some(http_probe("/readyz", 5, 2)),
        lifecycle: Some(Lifecycle {
            pre_stop: Some(LifecycleHandler {
                sleep: Some(SleepAction {
                    seconds: PRESTOP_SLEEP_SECONDS,
                }),
                ..LifecycleHandler::default()
            }),
            ..Lifecycle::default()
        }),
        security_context: Some(container_security_context()),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

fn volumes(v: &ValidatedCluster) -> Vec<Volume> {
    let mut out = vec![
        Volume {
            name: "config".to_string(),
            config_map: Some(ConfigMapVolumeSource {
                name: v.names.config_map.clone(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "tmp".to_string(),
            empty_dir: Some(EmptyDirVolumeSource::default()),
            ..Volume::default()
        },
    ];
    out.push(secret_volume("tls", &v.tls_secret, &["tls.crt", "tls.key"]));
    out.push(secret_volume(
        "peer",
        &v.names.peer_secret,
        &["tls.crt", "tls.key", "ca.crt"],
    ));
    if v.storage.is_some() {
        out.push(Volume {
            name: TOPICS_VOLUME.to_string(),
            config_map: Some(ConfigMapVolumeSource {
                name: v.names.topics_config_map.clone(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    out
}

/// A Secret volume of the listed keys, readable by the broker's group only.
fn secret_volume(name: &str, secret: &str, keys: &[&str]) -> Volume {
    Volume {
        name: name.to_string(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret.to_string()),
            default_mode: Some(0o440),
            items: Some(
                keys.iter()
                    .map(|k| KeyToPath {
                        key: k.to_string(),
                        path: k.to_string(),
                        ..KeyToPath::default()
                    })
                    .collect(),
            ),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    }
}
