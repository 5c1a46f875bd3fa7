//! The condition types and reasons of `status.conditions`: the vocabulary every step that
//! reports on a BrokerCluster shares (validation's `Degraded` reasons, the computed status, the
//! events, the docs). Part of the resource's status types, so the steps import it from here and
//! never from each other.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::BrokerClusterStatus;

/// The condition types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConditionType {
    /// Every broker is ready with the current config.
    Ready,
    /// Brokers are being created, replaced or scaled.
    Progressing,
    /// Something needs a human: the spec was refused or the children could not be applied.
    Degraded,
    /// Client authentication is off (`spec.auth.mode: none`).
    AuthenticationDisabled,
    /// The durable topics' replicas cannot be kept apart (too few brokers, brokers sharing a
    /// node).
    ReplicationDegraded,
    /// A broker's storage volume is full: its durable logs refuse appends for space.
    DiskFull,
    /// The users table the brokers admit clients by is the one the operator writes.
    UsersTableHealthy,
}

impl ConditionType {
    /// Every type, in the order they are written.
    pub const ALL: [ConditionType; 7] = [
        ConditionType::Ready,
        ConditionType::Progressing,
        ConditionType::Degraded,
        ConditionType::AuthenticationDisabled,
        ConditionType::ReplicationDegraded,
        ConditionType::DiskFull,
        ConditionType::UsersTableHealthy,
    ];

    /// The condition's `type`.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionType::Ready => "Ready",
            ConditionType::Progressing => "Progressing",
            ConditionType::Degraded => "Degraded",
            ConditionType::AuthenticationDisabled => "AuthenticationDisabled",
            ConditionType::ReplicationDegraded => "ReplicationDegraded",
            ConditionType::DiskFull => "DiskFull",
            ConditionType::UsersTableHealthy => "UsersTableHealthy",
        }
    }

    /// What the condition means.
    pub fn doc(self) -> &'static str {
        match self {
            ConditionType::Ready => {
                "True when every desired broker is ready, has been for the hand-off grace (minReadySeconds), and runs the current config hash."
            }
            ConditionType::Progressing => {
                "True while brokers are being created, replaced with a new config or image, or scaled."
            }
            ConditionType::Degraded => {
                "True when the spec was refused or the cluster's objects could not be applied; the reason says which."
            }
            ConditionType::AuthenticationDisabled => {
                "True when spec.auth.mode is none: anyone who reaches the QUIC port may publish, subscribe and use the cache (development only)."
            }
            ConditionType::ReplicationDegraded => {
                "True when durable topics are replicated (durable_replicas above 1, or an accepted BrokerTopic with replicas above 1) and the cluster cannot keep their replicas apart: fewer brokers than the most copies a topic keeps, or brokers of the cluster on one node. Read from the member count and the nodes of the pods the StatefulSet controls (their spec.nodeName)."
            }
            ConditionType::DiskFull => {
                "True when a broker's storage volume is full: one of its durable logs refuses appends for space (its acked publishes are refused until space returns; retention runs at once), or no byte is left. Read from each broker pod's GET /storage at every reconcile, at least every 30 s while topics are durable."
            }
            ConditionType::UsersTableHealthy => {
                "True when the users Secret <name>-users exists, is within its budget and parses with the brokers' own rules, and every broker that answered holds the table it last read from it. False when the Secret is missing, too large or does not parse, or when a broker's last read failed (it keeps its last good table, so revocations stop reaching it) or it never read one (it admits no user and is not ready). Read from the Secret and each broker pod's GET /users at every reconcile, at least every 60 s while authentication is on."
            }
        }
    }
}

macro_rules! reasons {
    ($($variant:ident => $cond:ident, $status:literal, $doc:literal;)+) => {
        /// Every condition reason the operator writes.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Reason { $(#[doc = $doc] $variant,)+ }

        impl Reason {
            /// Every reason, grouped by condition.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant),+];
            /// The reason as written in the condition.
            pub fn as_str(self) -> &'static str { match self { $(Reason::$variant => stringify!($variant)),+ } }
            /// The condition this reason belongs to.
            pub fn condition(self) -> ConditionType { match self { $(Reason::$variant => ConditionType::$cond),+ } }
            /// The condition status that goes with this reason.
            pub fn status(self) -> &'static str { match self { $(Reason::$variant => $status),+ } }
            /// What the reason means.
            pub fn doc(self) -> &'static str { match self { $(Reason::$variant => $doc),+ } }
        }
    };
}

reasons! {
    AllReplicasReady => Ready, "True", "Every desired broker is ready with the current config hash.";
    ReplicasNotReady => Ready, "False", "Brokers run the current config but some are not ready yet.";
    RolloutInProgress => Ready, "False", "Some brokers still run an older config or image.";
    NotCreated => Ready, "False", "The StatefulSet does not exist yet.";
    SpecRejected => Ready, "False", "The spec was refused (see Degraded); running brokers keep their last applied config.";
    Stable => Progressing, "False", "Nothing is changing.";
    Creating => Progressing, "True", "The StatefulSet is being created or has not reported status yet.";
    RollingOut => Progressing, "True", "Brokers are being replaced with a new config, image or pod template. In a replicated cluster the operator holds the roll and lets one broker restart at a time; the message then says which pod it waits for.";
    RollWaitingForReplicas => Progressing, "True", "A replicated cluster's roll is held by the operator (the StatefulSet's RollingUpdate partition) because a broker reports a replica that is not in sync (catching up, without a leader, or stopped), or its GET /replicas could not be read: restarting the next broker could take a topic below quorum. The message names the pod and the topic. The roll moves on by itself once every replica is in sync.";
    Scaling => Progressing, "True", "The broker count is changing; running brokers are not restarted.";
    ScaleDownWaitingForReplicas => Progressing, "True", "A scale-down lowered the member list, and the StatefulSet keeps the leaving brokers running because one of them still holds replicas of replicated topics (their leaders are moving them to the remaining members), or its GET /replicas could not be read (not Ready, missing, no answer): stopping it could take a topic below quorum. The message names the pod and how many topics. The StatefulSet shrinks by itself once every leaving broker reports none.";
    ScaleDownStalled => Progressing, "False", "As ScaleDownWaitingForReplicas, for longer than 10 minutes since the member change (as a Deployment's ProgressDeadlineExceeded): the operator keeps waiting, since stopping the broker could take a topic below quorum. Look at the named broker's replicas (GET /replicas) and logs; docs/operations.md says what to do.";
    Paused => Progressing, "False", "spec.paused is true: the operator does not change the cluster's objects.";
    AsExpected => Degraded, "False", "The spec is valid and every object was applied.";
    ManagedKnobSet => Degraded, "True", "spec.config sets a knob the operator owns (quic_listen, http_listen, tls_cert_file, tls_key_file, cluster_members_file, cluster_members_configmap, auth_mode, auth_users_file, auth_users_secret, auth_client_ca_file, cluster_peer_cert_file, cluster_peer_key_file, cluster_peer_uri).";
    InvalidConfig => Degraded, "True", "The broker config resolved from profile, tier and spec.config was refused by the shared validation; the message names the knob.";
    InvalidResources => Degraded, "True", "A CPU, memory or storage quantity does not parse, or a request exceeds its limit.";
    InvalidName => Degraded, "True", "The BrokerCluster name cannot be used for the Services and StatefulSet derived from it.";
    InvalidSpec => Degraded, "True", "Another spec field is out of range (replicas, autoscaling bounds, image).";
    StorageImmutable => Degraded, "True", "spec.storage differs from the existing StatefulSet's volume claim template (added, removed, resized or another StorageClass), which Kubernetes cannot change; the CRD's rules refuse this, so it shows only where they were bypassed.";
    ApplyFailed => Degraded, "True", "The API server refused or failed to apply a child object; the operator retries with backoff.";
    UntrustedCa => Degraded, "True", "The Secret <name>-ca exists but was not created by the operator for this cluster (no controller owner reference to it, or no label starling.dev/cluster-ca=<name>), and spec.ca does not name it: it is refused, never used; the brokers keep their current certificates.";
    UsersDocumentFull => Degraded, "True", "The users document would pass its size budget (960 KiB, under the API server's 1 MiB per Secret): the newest valid BrokerUsers that did not fit are left out (named in the message) and cannot connect; every other user, and every revocation, is still applied.";
    AuthRequired => AuthenticationDisabled, "False", "spec.auth.mode is required: every client authenticates as a BrokerUser and every operation is checked.";
    AuthModeNone => AuthenticationDisabled, "True", "spec.auth.mode is none: clients are not authenticated and nothing is checked.";
    NotReplicated => ReplicationDegraded, "False", "durable_replicas is 1 and no accepted BrokerTopic asks for more, or no topic is durable: each durable topic has one copy, on its owner's volume.";
    ReplicasApart => ReplicationDegraded, "False", "There are at least as many brokers as the most copies a durable topic keeps (durable_replicas, a BrokerTopic's replicas), and every scheduled broker pod is on a node of its own.";
    TooFewBrokers => ReplicationDegraded, "True", "The member list has fewer brokers than the most copies a durable topic keeps (durable_replicas, or an accepted BrokerTopic's replicas, e.g. during a scale-down): such a topic does not open, and every publish to it is refused (Unavailable) until there are enough.";
    BrokersShareNode => ReplicationDegraded, "True", "Two or more broker pods run on one node (named in the message): a topic with replicas on them loses those copies together when the node is lost with its volumes. The pods only prefer distinct nodes and zones, so a cluster with too few nodes still schedules.";
    PlacementUnknown => ReplicationDegraded, "Unknown", "The broker pods could not be listed (the message says why), or have not been read yet.";
    NoDurableTopics => DiskFull, "False", "No topic is durable: the brokers keep nothing on a volume.";
    VolumesHaveSpace => DiskFull, "False", "Every broker that answered has space on its volume (the message names the one with the least free, and any broker not read).";
    VolumeFull => DiskFull, "True", "A broker's volume is full (named in the message, with its free and total bytes): its durable logs refuse appends for space until space returns, which they notice by themselves.";
    VolumesUnknown => DiskFull, "Unknown", "No broker answered GET /storage yet, or the broker pods could not be listed (the message says why).";
    UsersTableNotUsed => UsersTableHealthy, "True", "spec.auth.mode is none: the brokers read no users table.";
    UsersTableCurrent => UsersTableHealthy, "True", "The users Secret is valid and every broker that answered GET /users read it at its last attempt (the message names any broker not read).";
    UsersSecretInvalid => UsersTableHealthy, "False", "The users Secret <name>-users is missing, has no users.yaml key, is past the document's budget (960 KiB), or does not parse with the brokers' rules (the message says which, and names any broker reporting a stale table). The operator rewrites it at each reconcile; a Secret that stays so points at another writer or an admission webhook.";
    UsersTableStale => UsersTableHealthy, "False", "A broker's last read of the users Secret failed (missing, unreadable or invalid; named in the message with its error): it keeps its last good table, so users removed or tokens replaced since are not cut off there. A broker that never read one admits no user and is not ready.";
    UsersTableUnknown => UsersTableHealthy, "Unknown", "No broker answered GET /users yet, or the broker pods or the users Secret could not be read (the message says why).";
}

/// The condition of a type in a status, if present.
pub fn find(status: Option<&BrokerClusterStatus>, t: ConditionType) -> Option<&Condition> {
    status?.conditions.iter().find(|c| c.type_ == t.as_str())
}
