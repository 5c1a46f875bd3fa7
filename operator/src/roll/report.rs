//! What a broker's `GET /replicas` says, as the roll and the BrokerTopic status read it: each
//! replica of a replicated topic open on the broker, where it stands
//! (`broker/src/durable/replicated/sync.rs`, `TopicSync`), whether it leads, its indexes and
//! the topic policy that applies. Fields nobody here reads are ignored; the ones a broker of
//! an older build does not send default to unset; a state this build does not know is refused
//! (the roll then waits, as for a broker it cannot read). Pure.

use serde::Deserialize;

/// Where a replica stands, as the broker judges it (`sync.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum SyncState {
    /// The leader, or a follower applying what the leader commits within the lag bound.
    InSync,
    /// No Raft state and no leader's append yet: it holds nothing a restart elsewhere needs.
    Blank,
    /// Holds state, but no leader has reached it since it opened.
    NoLeader,
    /// Behind the leader's commit index.
    CatchingUp {
        /// Its applied index.
        #[serde(default)]
        applied: Option<u64>,
        /// The newest commit index a leader's append carried to it.
        target: u64,
    },
    /// Its Raft stopped on a storage error.
    Stopped,
}

impl SyncState {
    /// Whether this replica can be counted on while another broker restarts: in sync, or blank
    /// (the same rule as the broker's readiness: a blank replica holds nothing to catch up, and
    /// a topic that cannot be created yet must not hold every roll).
    pub fn counts(self) -> bool {
        matches!(self, SyncState::InSync | SyncState::Blank)
    }
}

impl SyncState {
    /// The state's name, without its indexes: what the status and the events say, so they
    /// change when the blocker changes, not at every index the replica applies.
    pub fn name(self) -> &'static str {
        match self {
            SyncState::InSync => "in sync",
            SyncState::Blank => "blank",
            SyncState::NoLeader => "without a leader",
            SyncState::CatchingUp { .. } => "catching up",
            SyncState::Stopped => "stopped",
        }
    }
}

/// One replica open on a broker.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ReplicaReport {
    /// The topic.
    pub topic: String,
    /// Where it stands.
    pub sync: SyncState,
    /// Whether this replica leads the topic.
    #[serde(default)]
    pub is_leader: bool,
    /// Its last applied log index.
    #[serde(default)]
    pub applied: Option<u64>,
    /// The newest commit index a leader's append carried to it.
    #[serde(default)]
    pub leader_commit: Option<u64>,
    /// The topic policy (a BrokerTopic's name) that applies to the topic; unset when none
    /// does, or from a broker that does not report it.
    #[serde(default)]
    pub policy: Option<String>,
    /// The replica count the topics document in force on the broker (or its
    /// `durable_replicas`) gives the topic, when the broker reports it.
    #[serde(default)]
    pub configured_replicas: Option<u32>,
    /// The voters of the topic's Raft membership as this replica knows them, when the broker
    /// reports it: the replica count the topic has now.
    #[serde(default)]
    pub current_replicas: Option<u32>,
}

impl ReplicaReport {
    /// A report of `topic` in state `sync`, nothing else known.
    pub fn new(topic: impl Into<String>, sync: SyncState) -> ReplicaReport {
        ReplicaReport {
            topic: topic.into(),
            sync,
            is_leader: false,
            applied: None,
            leader_commit: None,
            policy: None,
            configured_replicas: None,
            current_replicas: None,
        }
    }
}

/// Largest `/replicas` body read (a broker holds at most `max_topics` replicas).
pub const MAX_BODY: usize = 4 * 1024 * 1024;
/// Longest wait for one broker's `/replicas`.
pub const TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Reads a `/replicas` body.
pub fn parse(body: &[u8]) -> Result<Vec<ReplicaReport>, String> {
    serde_json::from_slice(body).map_err(|e| format!("not a /replicas answer: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_broker_answer_parses_and_unknown_states_are_refused() {
        let body = br#"[
            {"topic":"a","replica":1,"leader":1,"is_leader":true,"term":3,"voters":[0,1,2],
             "applied":9,"leader_commit":9,"sync":{"state":"in_sync"}},
            {"topic":"b","replica":1,"leader":2,"is_leader":false,"term":3,"voters":[0,1,2],
             "applied":4,"leader_commit":9,"sync":{"state":"catching_up","applied":4,"target":9}},
            {"topic":"c","replica":1,"leader":null,"is_leader":false,"term":0,"voters":[],
             "applied":null,"leader_commit":null,"sync":{"state":"blank"}}
        ]"#;
        let got = parse(body).unwrap_or_default();
        let states: Vec<(&str, SyncState)> =
            got.iter().map(|r| (r.topic.as_str(), r.sync)).collect();
        assert_eq!(
            states,
            vec![
                ("a", SyncState::InSync),
                (
                    "b",
                    SyncState::CatchingUp {
                        applied: Some(4),
                        target: 9
                    }
                ),
                ("c", SyncState::Blank),
            ]
        );
        assert!(got[0].is_leader && !got[1].is_leader);
        assert_eq!((got[1].applied, got[1].leader_commit), (Some(4), Some(9)));
        // Today's broker reports no policy; one that does is read.
        assert_eq!(got[0].policy, None);
        let with_policy = parse(
            br#"[{"topic":"a","sync":{"state":"in_sync"},"policy":"orders",
                  "configured_replicas":3,"current_replicas":1}]"#,
        )
        .unwrap_or_default();
        assert_eq!(with_policy[0].policy.as_deref(), Some("orders"));
        let counts = (
            with_policy[0].configured_replicas,
            with_policy[0].current_replicas,
        );
        assert_eq!(counts, (Some(3), Some(1)));
        assert_eq!(parse(b"[]"), Ok(vec![]));
        assert!(parse(br#"[{"topic":"a","sync":{"state":"confused"}}]"#).is_err());
        assert!(parse(b"ready").is_err());
    }

    #[test]
    fn only_in_sync_and_blank_replicas_count() {
        assert!(SyncState::InSync.counts());
        assert!(SyncState::Blank.counts());
        assert!(!SyncState::NoLeader.counts());
        assert!(!SyncState::Stopped.counts());
        assert!(
            !SyncState::CatchingUp {
                applied: None,
                target: 1
            }
            .counts()
        );
        assert_eq!(
            SyncState::CatchingUp {
                applied: None,
                target: 7
            }
            .name(),
            "catching up"
        );
        assert_eq!(SyncState::NoLeader.name(), "without a leader");
    }
}
