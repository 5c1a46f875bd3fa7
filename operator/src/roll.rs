//! Operator-held rolls of a replicated cluster (`durable_replicas` above 1): when the pod
//! template changes, the StatefulSet's `RollingUpdate` partition starts at the replica count
//! (the StatefulSet controller restarts no pod) and [`decide`] lowers it one broker at a time,
//! highest ordinal first as the controller itself goes, only when
//!
//! - (a) every pod at or above the partition runs the StatefulSet's `updateRevision` (its
//!   `controller-revision-hash` label), is not terminating, and has been Ready for
//!   `minReadySeconds` (the hand-off grace); and
//! - (b) every other broker pod exists, is Ready, answers `GET /replicas`, and reports each of
//!   its replicas in sync (or blank): so when the next broker stops, every topic still has all
//!   its other replicas caught up, a majority of its voters. The broker about to restart is
//!   the one exception: its replicas are the ones the restart takes away, so a broker that is
//!   itself unready or behind (a crash-looping old pod, say) does not hold the roll that
//!   replaces it.
//!
//! A broker whose `/replicas` cannot be read holds the roll: the operator waits, it never
//! guesses. When every pod runs the update revision the partition returns to 0, so the
//! StatefulSet is as a plain `RollingUpdate` one. An unreplicated cluster gets no partition at
//! all ([`Step::Unreplicated`]): the StatefulSet controller rolls it as before.
//!
//! The template change is seen from the StatefulSet's `starling.dev/template-hash` annotation
//! (the hash of the rendered pod template, [`crate::build::statefulset::template_hash`]): a
//! rendered template whose hash the live StatefulSet does not carry is applied together with the
//! partition at the replica count, in the same apply, so no pod restarts before the operator
//! lets it. The partition is a field of the operator's own server-side apply, set from this
//! decision at every reconcile: the apply stays idempotent and the StatefulSet controller, which
//! never writes the spec, is not fought. The programme decides from the brokers' JSON answers,
//! never from their metrics. Pure: [`observe`] reads the pods and the answers.

pub mod observe;
pub mod report;

use std::fmt;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use crate::crd::conditions::Reason;
use report::{ReplicaReport, SyncState};

/// How soon a reconcile looks again while a roll is held: replica sync changes trigger no watch.
pub const ROLL_POLL: Duration = Duration::from_secs(5);

/// The pod label holding the StatefulSet revision a pod was created from.
pub const REVISION_LABEL: &str = "controller-revision-hash";

/// The live StatefulSet as the roll reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSet {
    /// Its name: its pods are `<name>-<ordinal>`.
    pub name: String,
    /// Its `starling.dev/template-hash` annotation.
    pub template_hash: Option<String>,
    /// `spec.updateStrategy.rollingUpdate.partition` (0 when unset).
    pub partition: i32,
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// `status.updateRevision`.
    pub update_revision: Option<String>,
}

/// A broker pod as the roll reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    /// Its name.
    pub name: String,
    /// Its ordinal.
    pub ordinal: i32,
    /// Its `controller-revision-hash` label.
    pub revision: Option<String>,
    /// Since when it has been Ready (`None`: not Ready).
    pub ready_since: Option<Timestamp>,
    /// It has a deletion timestamp.
    pub terminating: bool,
}

/// One broker's `GET /replicas` answer, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerReplicas {
    /// The pod's name.
    pub pod: String,
    /// Its replicas, or why they could not be read.
    pub answer: Result<Vec<ReplicaReport>, String>,
}

/// Everything the decision reads.
#[derive(Debug, Clone)]
pub struct RollInput<'a> {
    /// The durable topics are replicated (`durable_replicas` above 1).
    pub replicated: bool,
    /// The StatefulSet's `spec.replicas` as this reconcile renders it.
    pub replicas: i32,
    /// The hash of the pod template this reconcile renders.
    pub template_hash: &'a str,
    /// The StatefulSet as read at the start of the reconcile (`None`: not created yet).
    pub live: Option<&'a LiveSet>,
    /// The broker pods, or why they could not be listed.
    pub pods: Result<&'a [PodView], &'a str>,
    /// The brokers' `/replicas` answers.
    pub reports: &'a [BrokerReplicas],
    /// `minReadySeconds`: how long a restarted broker stays Ready before the next one.
    pub min_ready: Duration,
    /// The current time.
    pub now: Timestamp,
}

/// What this reconcile does to the roll.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Not a replicated cluster: no partition, the StatefulSet controller rolls as before.
    Unreplicated,
    /// Nothing to roll (or no StatefulSet yet): partition 0.
    Steady,
    /// The pod template changes in this apply: the partition holds every pod.
    Start,
    /// Every check passed: the partition is lowered so the controller restarts `pod`.
    Restart {
        /// The broker the StatefulSet controller restarts next.
        pod: String,
    },
    /// Every pod runs the update revision: the partition returns to 0.
    Finished,
    /// The partition stays where it is.
    Wait(Wait),
}

/// Why a held roll does not move on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// The StatefulSet controller has not observed the latest spec (no update revision yet).
    Controller,
    /// The broker pods could not be listed.
    PodsUnknown(String),
    /// A pod of the set does not exist.
    Missing {
        /// The pod.
        pod: String,
    },
    /// A pod is being deleted.
    Terminating {
        /// The pod.
        pod: String,
    },
    /// A pod at or above the partition still runs the old revision: the StatefulSet controller
    /// is replacing it.
    NotRestarted {
        /// The pod.
        pod: String,
    },
    /// A pod is not Ready.
    NotReady {
        /// The pod.
        pod: String,
    },
    /// A restarted pod has been Ready for less than `minReadySeconds`.
    Settling {
        /// The pod.
        pod: String,
        /// How much of the grace is left.
        left: Duration,
    },
    /// A broker's `/replicas` could not be read.
    Unreachable {
        /// The pod.
        pod: String,
        /// Why.
        why: String,
    },
    /// A replica on another broker is not in sync.
    Replica {
        /// The pod holding it.
        pod: String,
        /// Its topic.
        topic: String,
        /// Where it stands.
        state: SyncState,
    },
}

impl Wait {
    /// The `Progressing` reason a held roll shows: [`Reason::RollWaitingForReplicas`] when
    /// the brokers' replicas (or a broker's answer) hold it, [`Reason::RollingOut`] when a pod
    /// does.
    pub fn reason(&self) -> Reason {
        match self {
            Wait::Unreachable { .. } | Wait::Replica { .. } => Reason::RollWaitingForReplicas,
            _ => Reason::RollingOut,
        }
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Wait::Controller => {
                f.write_str("waiting for the StatefulSet controller to observe the pod template")
            }
            Wait::PodsUnknown(why) => write!(f, "the broker pods could not be listed: {why}"),
            Wait::Missing { pod } => write!(f, "waiting for pod {pod} to exist"),
            Wait::Terminating { pod } => write!(f, "waiting for pod {pod}, which is terminating"),
            Wait::NotRestarted { pod } => {
                write!(f, "waiting for the StatefulSet controller to restart {pod}")
            }
            Wait::NotReady { pod } => write!(f, "waiting for {pod} to be Ready"),
            // Without the time left: the status would change at every look.
            Wait::Settling { pod, .. } => write!(
                f,
                "waiting for {pod} to stay Ready for the hand-off grace (minReadySeconds)"
            ),
            Wait::Unreachable { pod, why } => write!(
                f,
                "cannot read GET /replicas of {pod} ({why}); no other broker restarts until it answers"
            ),
            Wait::Replica { pod, topic, state } => write!(
                f,
                "the replica of topic {topic} on {pod} is {}; restarting another broker could take the topic below quorum",
                state.name()
            ),
        }
    }
}

/// The decision: the partition to apply and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Roll {
    /// `spec.updateStrategy.rollingUpdate.partition` to render (`None`: not set at all).
    pub partition: Option<i32>,
    /// The live partition before this decision (0 when unset or no StatefulSet).
    pub from: i32,
    /// Pods of the set running the update revision.
    pub updated: usize,
    /// The StatefulSet's replica count the decision was made for.
    pub replicas: i32,
    /// What happens.
    pub step: Step,
}

impl Roll {
    /// Whether the operator holds the roll after this decision (a partition above 0, or a wait):
    /// the reconcile comes back within [`ROLL_POLL`].
    pub fn held(&self) -> bool {
        self.partition.is_some_and(|p| p > 0) || matches!(self.step, Step::Wait(_))
    }

    /// The wait, if the roll is held by one.
    pub fn wait(&self) -> Option<&Wait> {
        match &self.step {
            Step::Wait(w) => Some(w),
            _ => None,
        }
    }

    /// The `Progressing` reason and message while the roll is held by a wait.
    pub fn progress(&self) -> Option<(Reason, String)> {
        let wait = self.wait()?;
        if matches!(wait, Wait::Controller) {
            return None;
        }
        Some((
            wait.reason(),
            format!(
                "{}/{} brokers updated, roll held by the operator at partition {}: {wait}",
                self.updated,
                self.replicas,
                self.partition.unwrap_or(self.from)
            ),
        ))
    }
}

/// The next partition of the StatefulSet, or why it stays (see the module doc).
pub fn decide(input: &RollInput<'_>) -> Roll {
    let n = input.replicas.max(0);
    let from = input.live.map_or(0, |l| l.partition.max(0));
    let roll = |partition: Option<i32>, updated: usize, step: Step| Roll {
        partition,
        from,
        updated,
        replicas: n,
        step,
    };
    if !input.replicated {
        return roll(None, 0, Step::Unreplicated);
    }
    let Some(live) = input.live else {
        return roll(Some(0), 0, Step::Steady);
    };
    if live.template_hash.as_deref() != Some(input.template_hash) {
        return roll(Some(n), 0, Step::Start);
    }
    let current = from.min(n);
    let hold = |updated: usize, wait: Wait| roll(Some(current), updated, Step::Wait(wait));
    let update = match &live.update_revision {
        Some(u) if live.observed_generation >= live.generation => u.as_str(),
        _ => return hold(0, Wait::Controller),
    };
    let pods = match input.pods {
        Ok(pods) => pods,
        Err(why) => return hold(0, Wait::PodsUnknown(why.to_string())),
    };
    let pod_at = |ordinal: i32| pods.iter().find(|p| p.ordinal == ordinal);
    let is_updated = |p: &PodView| p.revision.as_deref() == Some(update);
    let updated = (0..n)
        .filter(|o| pod_at(*o).is_some_and(is_updated))
        .count();
    // The highest pod below the partition still on the old revision: the next to restart.
    let Some(next) = (0..current)
        .rev()
        .find(|o| !pod_at(*o).is_some_and(is_updated))
    else {
        // Every pod below the partition is updated; any above it is the controller's to do
        // (and checked below before anything else moves).
        if (current..n).all(|o| pod_at(o).is_some_and(is_updated)) {
            let step = if from > 0 {
                Step::Finished
            } else {
                Step::Steady
            };
            return roll(Some(0), updated, step);
        }
        return match check_restarted(input, pods, update, current, n) {
            Some(wait) => hold(updated, wait),
            None => roll(Some(0), updated, Step::Finished),
        };
    };
    if let Some(wait) = check_restarted(input, pods, update, current, n) {
        return hold(updated, wait);
    }
    let name = pod_at(next).map_or_else(|| format!("{}-{next}", live.name), |p| p.name.clone());
    for ordinal in (0..current).filter(|o| *o != next) {
        let pod_name = || format!("{}-{ordinal}", live.name);
        let Some(pod) = pod_at(ordinal) else {
            return hold(updated, Wait::Missing { pod: pod_name() });
        };
        if let Some(wait) = not_serving(pod) {
            return hold(updated, wait);
        }
    }
    for ordinal in (0..n).filter(|o| *o != next) {
        let Some(pod) = pod_at(ordinal) else {
            continue;
        };
        if let Some(wait) = replicas_hold(&pod.name, input.reports) {
            return hold(updated, wait);
        }
    }
    roll(Some(next), updated, Step::Restart { pod: name })
}

/// (a): every pod at or above the partition runs `update`, is not terminating and has been
/// Ready for `minReadySeconds`; the first that is not, lowest ordinal first (the one restarted
/// last).
fn check_restarted(
    input: &RollInput<'_>,
    pods: &[PodView],
    update: &str,
    from: i32,
    n: i32,
) -> Option<Wait> {
    for ordinal in from..n {
        let Some(pod) = pods.iter().find(|p| p.ordinal == ordinal) else {
            let name = input
                .live
                .map_or_else(String::new, |l| format!("{}-{ordinal}", l.name));
            return Some(Wait::Missing { pod: name });
        };
        if pod.terminating {
            return Some(Wait::Terminating {
                pod: pod.name.clone(),
            });
        }
        if pod.revision.as_deref() != Some(update) {
            return Some(Wait::NotRestarted {
                pod: pod.name.clone(),
            });
        }
        let Some(since) = pod.ready_since else {
            return Some(Wait::NotReady {
                pod: pod.name.clone(),
            });
        };
        let ready_for = input.now.duration_since(since);
        let ready_for = Duration::try_from(ready_for).unwrap_or(Duration::ZERO);
        if ready_for < input.min_ready {
            return Some(Wait::Settling {
                pod: pod.name.clone(),
                left: input.min_ready.saturating_sub(ready_for),
            });
        }
    }
    None
}

/// Why `pod` (not the next to restart) holds the roll by its own state: terminating or not Ready.
fn not_serving(pod: &PodView) -> Option<Wait> {
    if pod.terminating {
        return Some(Wait::Terminating {
            pod: pod.name.clone(),
        });
    }
    if pod.ready_since.is_none() {
        return Some(Wait::NotReady {
            pod: pod.name.clone(),
        });
    }
    None
}

/// (b) for one broker: its `/replicas` answer is missing or unreadable, or one of its replicas
/// is neither in sync nor blank.
fn replicas_hold(pod: &str, reports: &[BrokerReplicas]) -> Option<Wait> {
    let Some(report) = reports.iter().find(|r| r.pod == pod) else {
        return Some(Wait::Unreachable {
            pod: pod.to_string(),
            why: "not read".to_string(),
        });
    };
    match &report.answer {
        Err(why) => Some(Wait::Unreachable {
            pod: pod.to_string(),
            why: why.clone(),
        }),
        Ok(replicas) => replicas
            .iter()
            .find(|r| !r.sync.counts())
            .map(|r| Wait::Replica {
                pod: pod.to_string(),
                topic: r.topic.clone(),
                state: r.sync,
            }),
    }
}

#[cfg(test)]
mod tests;
