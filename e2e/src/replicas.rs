//! A broker's replicated topics as its `GET /replicas` reports them (the replicas open on the
//! broker, their leader and whether each is in sync: `broker/src/durable/replicated/sync.rs`),
//! read from the node on the pod's IP, and the Raft leader of a topic found through it.

use std::net::SocketAddr;
use std::time::Duration;

use serde::Deserialize;

use crate::kube_env::{PodState, TestNamespace};
use crate::{E2eError, http, wait};

/// One replica open on a broker.
#[derive(Debug, Clone, Deserialize)]
pub struct Replica {
    /// The topic.
    pub topic: String,
    /// The broker's replica id.
    pub replica: u64,
    /// The leader as this replica knows it.
    pub leader: Option<u64>,
    /// Whether this replica leads the topic.
    pub is_leader: bool,
    /// The Raft term.
    pub term: u64,
    /// The last applied index.
    pub applied: Option<u64>,
    /// The newest commit index a leader's append carried to this replica.
    pub leader_commit: Option<u64>,
    /// Where it stands (`in_sync`, `blank`, `no_leader`, `catching_up`, `stopped`).
    pub sync: SyncState,
}

/// [`Replica::sync`].
#[derive(Debug, Clone, Deserialize)]
pub struct SyncState {
    /// The state's name.
    pub state: String,
}

impl Replica {
    /// Whether the replica reports itself in sync with its leader (or leads).
    pub fn in_sync(&self) -> bool {
        self.sync.state == "in_sync"
    }
}

/// The replicas open on `pod`.
pub async fn of(pod: &PodState) -> Result<Vec<Replica>, E2eError> {
    let ip = pod
        .ip
        .ok_or_else(|| E2eError::Env(format!("pod {} has no IP", pod.name)))?;
    let (status, body) = http::get(SocketAddr::new(ip, 9400), "/replicas").await?;
    if status != 200 {
        return Err(E2eError::Http(format!(
            "{}/replicas answered {status}",
            pod.name
        )));
    }
    serde_json::from_str(&body)
        .map_err(|e| E2eError::Http(format!("{}/replicas: {e}: {body}", pod.name)))
}

/// `pod`'s replica of `topic`, if one is open there.
pub async fn of_topic(pod: &PodState, topic: &str) -> Option<Replica> {
    of(pod).await.ok()?.into_iter().find(|r| r.topic == topic)
}

/// The name of the pod of `cluster` whose replica leads `topic`, once exactly one pod says
/// it leads and every other pod holding a replica names the same leader.
pub async fn leader_pod(
    ns: &TestNamespace,
    cluster: &str,
    topic: &str,
    timeout: Duration,
) -> Result<String, E2eError> {
    wait::until(&format!("one leader of {topic}"), timeout, || async {
        let pods = ns.broker_pods(cluster).await.ok()?;
        let mut views = Vec::new();
        for p in &pods {
            if let Some(r) = of_topic(p, topic).await {
                views.push((p.name.clone(), r));
            }
        }
        let leaders: Vec<&(String, Replica)> = views.iter().filter(|(_, r)| r.is_leader).collect();
        let [(name, lead)] = leaders.as_slice() else {
            return None;
        };
        views
            .iter()
            .all(|(_, r)| r.leader == Some(lead.replica))
            .then(|| name.clone())
    })
    .await
}
