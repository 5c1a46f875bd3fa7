//! The controller: watches BrokerClusters and their children and runs one reconcile per change.
//!
//! A reconcile is: read the observed StatefulSet → [`validate_observed`] (the spec, and its
//! storage against that StatefulSet's volume claim template) → the step of a tier change
//! ([`stage`]) → [`plan_members`] (the next
//! step of a scale change; while the durable topics are replicated, a scale-down's StatefulSet
//! also waits until the leaving brokers' `GET /replicas` list no replica, [`observe_leaving`])
//! → create the generated TLS Secret if absent ([`ensure_tls_secret`])
//! → the cluster CA and peer certificate ([`ensure_pki`]) → the users document
//! ([`apply_users`]) → the topics document of the cluster's BrokerTopics
//! ([`topics::gather`], [`topics::apply_document`]) → [`render_sized`] → [`apply_children`]
//! (skipped when paused or refused) → [`status::compute`] → write status if it changed →
//! the BrokerTopics' status ([`topics::write_statuses`]) → publish events. The logic worth testing
//! lives in those pure steps; this file only wires them to the API server.
//!
//! Reconciles are driven by watches: of the BrokerClusters, of every child kind (metadata only,
//! also kept as caches, see [`crate::live`], so an unchanged child is not applied again), of
//! the BrokerUsers and of the BrokerTopics (but for the operator's own status writes to them,
//! [`topics::TopicWrites`]). A reconcile asks to be run again sooner than [`STEADY_REQUEUE`]
//! only while something waits on the clock ([`Timers`]: a scale-down's hand-off grace or its
//! wait for the leaving brokers' replicas, a staged tier change, a held roll); a cluster that
//! is merely not ready yet waits for its StatefulSet's status to change.
//!
//! Reconciles triggered by the operator's own status writes are filtered out: the BrokerCluster
//! watch passes only generation changes (status writes never bump `metadata.generation`) and
//! changes of `status.effectiveTier` (the autoscaler's choice, see [`crate::autoscale`]), and
//! an unchanged status is never written.
//!
//! Status is written by server-side apply under the reconciler's field manager
//! ([`FIELD_MANAGER`]), with every field it owns; `effectiveTier` and `autoscaling` are the
//! autoscaler's, applied under its own manager (which also removes them when autoscaling is
//! turned off), so neither writer touches the other's fields. Failed reconciles are retried
//! with exponential backoff per object; a refused spec is not a failure (it is reported as
//! `Degraded`). Every reconcile is fenced by leadership ([`crate::fence`]).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::Instrument;

use crate::apply::pki::ensure_pki;
use crate::apply::topics::{self, Gathered, TopicWrites};
use crate::apply::users::apply_users;
use crate::apply::{apply_children, apply_status, ensure_tls_secret};
use crate::autoscale::fetch::Fetcher;
use crate::autoscale::runner::AutoscaleContext;
use crate::autoscale::scrape::targets;
use crate::build::{Sizes, render_sized, unwanted};
use crate::context::Context;
use crate::crd::conditions::Reason;
use crate::crd::topic::BrokerTopic;
use crate::crd::user::BrokerUser;
use crate::crd::{BrokerCluster, BrokerClusterStatus};
use crate::error::{Error, Result};
use crate::events::{self, Planned};
use crate::live::{ChildStores, own_children};
use crate::members::leaving::{self, Leaving};
use crate::members::{MembersPlan, Observed, plan_members};
use crate::names::{FIELD_MANAGER, MANAGED_BY_SELECTOR, Names};
use crate::pods::Owner;
use crate::roll::{self, Roll, RollInput};
use crate::status::replication::{Observation, Placement};
use crate::status::{self, StatusInput, users_table, volumes};
use crate::tier_change::{self, stage::stage};
use crate::validate::{ObjectIdentity, ValidatedCluster, validate_observed};

/// Requeue interval when no timer is in flight: watches trigger every other reconcile, so this
/// only bounds how long a missed event or an expiring certificate can go unnoticed.
pub const STEADY_REQUEUE: Duration = Duration::from_secs(300);

/// What a reconcile left in flight that only the clock moves on: nothing else would trigger
/// the next step at the right time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timers {
    /// The rest of a scale-down's hand-off grace, or the next look at the leaving brokers'
    /// replicas, before the StatefulSet may shrink ([`MembersPlan::wait`]).
    pub members_wait: Option<Duration>,
    /// A tier change rendered an intermediate step ([`tier_change::stage`]): it may be waiting
    /// for the hand-off grace since the last member change.
    pub staged: bool,
    /// The brokers' volumes were read (some topic is durable): read them again within
    /// [`volumes::VOLUME_POLL`], so a full volume, and its end, shows in `DiskFull` soon.
    pub volumes: bool,
    /// The users table's health was read (authentication is on): read it again within
    /// [`users_table::USERS_POLL`], so a stale table, and its end, shows in
    /// `UsersTableHealthy` soon.
    pub users: bool,
    /// A replicated cluster's roll is held by the operator ([`roll::Roll::held`]): look again
    /// within [`roll::ROLL_POLL`], since replicas catching up trigger no watch.
    pub roll: bool,
}

/// Delay before retry number `failures` (1-based): 5 s doubling up to 5 min.
pub fn backoff_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(6);
    Duration::from_secs(5u64 << exp).min(Duration::from_secs(300))
}

/// When to look again at a cluster: when its first timer is due, else after
/// [`STEADY_REQUEUE`]. Not being ready is no reason to look sooner: the StatefulSet's status
/// changes (pods scheduled, ready, available after `minReadySeconds`), the children's edits
/// and deletions and the spec's changes all trigger a reconcile through the watches.
pub fn requeue_after(timers: Timers) -> Duration {
    let mut after = STEADY_REQUEUE;
    if let Some(wait) = timers.members_wait {
        after = after.min(wait);
    }
    if timers.staged {
        after = after.min(tier_change::STAGE_POLL);
    }
    if timers.volumes {
        after = after.min(volumes::VOLUME_POLL);
    }
    if timers.users {
        after = after.min(users_table::USERS_POLL);
    }
    if timers.roll {
        after = after.min(roll::ROLL_POLL);
    }
    after
}

/// The reconcile entry point: runs one reconcile in a `reconcile{namespace, cluster}` span, so
/// every line logged inside it carries the cluster's ids once.
pub async fn reconcile(bc: Arc<BrokerCluster>, ctx: Arc<Context>) -> Result<Action> {
    let span = tracing::info_span!(
        "reconcile",
        namespace = %bc.namespace().unwrap_or_default(),
        cluster = %bc.name_any(),
    );
    reconcile_timed(bc, ctx).instrument(span).await
}

/// Times one reconcile, counts it and reports failures as Warning events.
///
/// Fenced: a reconcile does not start, and one in flight is dropped at its next await, once
/// leadership is lost; nothing more is written, not even the failure event.
async fn reconcile_timed(bc: Arc<BrokerCluster>, ctx: Arc<Context>) -> Result<Action> {
    let timer = ctx.metrics.start();
    let result = ctx.fence.guard(reconcile_cluster(&bc, &ctx)).await;
    match &result {
        Ok(_) => {
            ctx.reset_failures(&bc);
            timer.finish(None);
        }
        Err(e @ Error::Leadership(_)) => {
            timer.finish(Some(e.metric_label()));
            tracing::warn!(error = %e, "reconcile stopped");
        }
        Err(e) => {
            timer.finish(Some(e.metric_label()));
            tracing::warn!(error = %e, "reconcile failed");
            publish(&ctx, &bc, &events::for_error(e)).await;
        }
    }
    result
}

/// Retries a failed reconcile with per-object exponential backoff.
pub fn error_policy(bc: Arc<BrokerCluster>, _err: &Error, ctx: Arc<Context>) -> Action {
    Action::requeue(backoff_delay(ctx.record_failure(&bc)))
}

async fn reconcile_cluster(bc: &BrokerCluster, ctx: &Context) -> Result<Action> {
    let id = ObjectIdentity::of(bc)?;
    let names = Names::new(&id.name);
    let namespace = id.namespace.clone();
    let sts_api: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &namespace);
    let before = sts_api
        .get_opt(&names.statefulset)
        .await
        .map_err(|e| Error::kube("get", "StatefulSet", &names.statefulset, e))?;

    let now = Timestamp::now();
    let mut staging = false;
    let validated = validate_observed(bc, id, &ctx.defaults, before.as_ref()).map(|v| {
        let (v, staged) = stage(bc, v, before.as_ref(), &ctx.defaults, now);
        staging = staged;
        v
    });
    // The cluster's BrokerTopics, judged against the validated spec: they make topics
    // durable and replicated too, without changing the pod template.
    let gathered: Option<Gathered> = match &validated {
        Ok(v) => Some(topics::gather(&ctx.client, v).await?),
        Err(_) => None,
    };
    let topics_replicated = match (&validated, &gathered) {
        (Ok(v), Some(g)) => g.judged.replicated(v.config.durable_replicas),
        _ => false,
    };
    let topic_replicas = match (&validated, &gathered) {
        (Ok(v), Some(g)) => g.judged.most_replicas(v.config.durable_replicas),
        _ => None,
    };
    // The broker pods, listed once for what reads them: the held roll and the placement when
    // the durable topics are replicated, the volumes when any topic is durable, the users
    // table's health when authentication is on.
    let (replicated, durable, authenticated) = match &validated {
        Ok(v) => (
            v.replication().is_some() || topics_replicated,
            !v.config.durable_topics.is_empty()
                || gathered
                    .as_ref()
                    .is_some_and(|g| !g.judged.document.topics.is_empty()),
            v.auth_mode == starling_config::AuthMode::Required,
        ),
        Err(_) => (false, false, false),
    };
    let pods = if replicated || durable || (authenticated && ctx.brokers.is_some()) {
        Some(list_pods(ctx, &namespace, &names).await)
    } else {
        None
    };
    // The brokers' `GET /replicas`, read once: for the BrokerTopics' status when some policy
    // is replicated (and then for the roll too); `Some(empty)` when none is (no topic of theirs
    // is replicated), `None` when they could not be read (the listed topics stay as they were).
    let topic_reports: Option<Vec<roll::BrokerReplicas>> = match (&pods, before.as_ref()) {
        _ if !topics_replicated => Some(Vec::new()),
        (Some(Ok(p)), Some(sts)) => match ctx.brokers.as_ref() {
            Some(fetcher) => Some(read_replicas(fetcher, p, sts).await),
            None => None,
        },
        _ => None,
    };
    let mut planned: Vec<Planned> = Vec::new();
    let mut observed = before.clone();
    let mut apply_error = None;
    let mut members: Option<MembersPlan> = None;
    let mut rolled: Option<Roll> = None;
    match &validated {
        Err(e) => {
            ctx.metrics.spec_rejected(e.reason().as_str());
            planned.extend(events::for_rejection(bc.status.as_ref(), e));
        }
        // Paused: the brokers are left alone, but their credentials are still kept (the peer
        // certificate renewed, deleted users revoked).
        Ok(v) if bc.spec.paused => match maintain_credentials(ctx, v).await {
            Ok(problem) => apply_error = problem,
            Err(e) => apply_error = Some(e),
        },
        Ok(v) => {
            planned.extend(events::for_auth_mode(bc.status.as_ref(), v));
            let mut observed_size = Observed::of(before.as_ref(), bc.status.as_ref(), now);
            if replicated {
                observed_size.leaving = observe_leaving(
                    ctx,
                    &observed_size,
                    v.replicas,
                    pods.as_ref(),
                    before.as_ref(),
                    topic_reports.as_deref().filter(|_| topics_replicated),
                )
                .await;
            }
            let plan = plan_members(v.replicas, &observed_size, ctx.defaults.handoff_grace);
            let read = topic_reports.as_deref().filter(|_| topics_replicated);
            let roll = decide_roll(
                ctx,
                v,
                RollReads {
                    replicated,
                    pods: pods.as_ref(),
                    reports: read,
                },
                &plan,
                before.as_ref(),
                now,
            )
            .await;
            let document = gathered.as_ref().map(|g| &g.judged.document);
            match apply_cluster(ctx, v, &plan, roll.partition, before.as_ref(), document).await {
                Ok((applied, problem)) => {
                    planned.extend(events::for_apply(before.as_ref(), v));
                    planned.extend(events::for_roll(bc.status.as_ref(), &roll));
                    planned.extend(events::for_scale_down(bc.status.as_ref(), &plan));
                    observed = Some(applied);
                    members = Some(plan);
                    rolled = Some(roll);
                    apply_error = problem;
                }
                Err(e) => apply_error = Some(e),
            }
        }
    }

    let placement = pods
        .as_ref()
        .filter(|_| replicated)
        .map(|pods| observe_placement(pods, observed.as_ref()));
    let volumes = match (&pods, &ctx.brokers) {
        (Some(pods), Some(fetcher)) if durable => {
            Some(observe_volumes(fetcher, pods, observed.as_ref()).await)
        }
        _ => None,
    };
    let users = match (&pods, &ctx.brokers) {
        (Some(pods), Some(fetcher)) if authenticated => {
            Some(observe_users(ctx, fetcher, &namespace, &names, pods, observed.as_ref()).await)
        }
        _ => None,
    };
    let new_status = status::compute(&StatusInput {
        names: &names,
        namespace: &namespace,
        generation: bc.metadata.generation,
        paused: bc.spec.paused,
        desired: validated.as_ref(),
        sts: observed.as_ref(),
        previous: bc.status.as_ref(),
        apply_error: apply_error
            .as_ref()
            .map(|e| (degraded_reason(e), e.to_string())),
        members: members.as_ref(),
        placement: placement.as_ref(),
        volumes: volumes.as_ref(),
        users_table: users.as_ref(),
        roll: rolled.as_ref(),
        topic_replicas,
        now: Time(now),
    });
    // The reconciler's fields only: the autoscaler's belong to its own field manager.
    let ours = new_status.reconciler_fields();
    if bc
        .status
        .as_ref()
        .map(BrokerClusterStatus::reconciler_fields)
        != Some(ours.clone())
    {
        let body = status_apply_body(&ours)?;
        apply_status(
            &ctx.client,
            &namespace,
            &names.cluster,
            FIELD_MANAGER,
            &body,
        )
        .await?;
    }
    // The BrokerTopics' status, once the document they are reported in was written (or the
    // cluster is paused, which they report).
    if let Some(g) = &gathered
        && (rolled.is_some() || bc.spec.paused)
    {
        topics::write_statuses(
            &ctx.client,
            &ctx.topic_writes,
            g,
            topic_reports.as_deref(),
            bc.spec.paused,
        )
        .await?;
    }
    for p in &planned {
        publish(ctx, bc, p).await;
    }
    match apply_error {
        Some(e) => Err(e),
        None => {
            let timers = Timers {
                members_wait: members.as_ref().and_then(|m| m.wait),
                staged: staging,
                volumes: volumes.is_some(),
                users: users.is_some(),
                roll: rolled.as_ref().is_some_and(Roll::held),
            };
            Ok(Action::requeue(requeue_after(timers)))
        }
    }
}

/// The pods with the cluster's labels, or why they could not be listed (reported as the
/// `Unknown` reason of the conditions that read them, not as a failed reconcile).
async fn list_pods(ctx: &Context, namespace: &str, names: &Names) -> Result<Vec<Pod>, String> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let selector = names.selector_string();
    match pods.list(&ListParams::default().labels(&selector)).await {
        Ok(list) => Ok(list.items),
        Err(e) => Err(Error::kube("list", "Pod", &selector, e).to_string()),
    }
}

/// Where the broker pods run: the listed pods `sts` controls ([`Placement::of`]: labels alone
/// prove nothing). No StatefulSet yet: no pod.
fn observe_placement(pods: &Result<Vec<Pod>, String>, sts: Option<&StatefulSet>) -> Observation {
    let pods = pods.as_ref().map_err(Clone::clone)?;
    Ok(sts.map_or_else(Placement::default, |sts| Placement::of(pods, sts)))
}

/// Every broker pod's `GET /storage` (the pods `sts` controls, not being deleted, at their IP
/// and `http` port), all at once, each within [`volumes::VOLUME_TIMEOUT`]. No StatefulSet yet:
/// no pod.
async fn observe_volumes(
    fetcher: &Fetcher,
    pods: &Result<Vec<Pod>, String>,
    sts: Option<&StatefulSet>,
) -> volumes::Observation {
    let pods = pods.as_ref().map_err(Clone::clone)?;
    let Some(owner) = sts.and_then(Owner::of) else {
        return Ok(Vec::new());
    };
    let reads = targets(pods, &owner).into_iter().map(|t| async move {
        let answer = match t.addr {
            None => Err("no pod IP yet".to_string()),
            Some(addr) => fetcher
                .get(
                    &format!("http://{addr}/storage"),
                    "application/json",
                    None,
                    volumes::VOLUME_TIMEOUT,
                    volumes::MAX_BODY,
                )
                .await
                .map_err(|e| e.to_string())
                .and_then(|a| match a.status {
                    200 => volumes::parse(&a.body),
                    other => Err(format!("GET /storage answered HTTP {other}")),
                }),
        };
        volumes::BrokerVolume { pod: t.pod, answer }
    });
    Ok(futures::future::join_all(reads).await)
}

/// The users Secret as the API server holds it ([`users_table::check_secret`]) and every broker
/// pod's `GET /users` (the pods `sts` controls, not being deleted, at their IP and `http` port),
/// all at once, each within [`users_table::USERS_TIMEOUT`]. No StatefulSet yet: no pod.
async fn observe_users(
    ctx: &Context,
    fetcher: &Fetcher,
    namespace: &str,
    names: &Names,
    pods: &Result<Vec<Pod>, String>,
    sts: Option<&StatefulSet>,
) -> users_table::Observation {
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let secret = match secrets.get_opt(&names.users_secret).await {
        Ok(found) => users_table::check_secret(&names.users_secret, found.as_ref()),
        Err(e) => Err(Error::kube("get", "Secret", &names.users_secret, e).to_string()),
    };
    let brokers = match (pods, sts.and_then(Owner::of)) {
        (Err(why), _) => Err(why.clone()),
        (Ok(_), None) => Ok(Vec::new()),
        (Ok(pods), Some(owner)) => {
            let reads = targets(pods, &owner).into_iter().map(|t| async move {
                let answer = match t.addr {
                    None => Err("no pod IP yet".to_string()),
                    Some(addr) => fetcher
                        .get(
                            &format!("http://{addr}/users"),
                            "application/json",
                            None,
                            users_table::USERS_TIMEOUT,
                            users_table::MAX_BODY,
                        )
                        .await
                        .map_err(|e| e.to_string())
                        .and_then(|a| match a.status {
                            200 => users_table::parse(&a.body),
                            other => Err(format!("GET /users answered HTTP {other}")),
                        }),
                };
                users_table::BrokerUsers { pod: t.pod, answer }
            });
            Ok(futures::future::join_all(reads).await)
        }
    };
    users_table::Observation { secret, brokers }
}

/// What the held roll reads besides the spec.
struct RollReads<'a> {
    /// Some durable topic is replicated, by the knobs or by a BrokerTopic.
    replicated: bool,
    /// The listed broker pods.
    pods: Option<&'a Result<Vec<Pod>, String>>,
    /// The brokers' `GET /replicas`, when this reconcile already read them.
    reports: Option<&'a [roll::BrokerReplicas]>,
}

/// The held roll's decision for `v` ([`roll::decide`]) over the StatefulSet read before the
/// apply and the listed pods. The brokers' `GET /replicas` are read only when the decision
/// gets as far as needing them (a first decision without answers waits for an unread one),
/// unless this reconcile read them already; an unreplicated cluster reads nothing.
async fn decide_roll(
    ctx: &Context,
    v: &ValidatedCluster,
    reads: RollReads<'_>,
    plan: &MembersPlan,
    before: Option<&StatefulSet>,
    now: Timestamp,
) -> Roll {
    let pods = reads.pods;
    let template_hash = crate::build::statefulset::template_hash(&crate::build::pod::template(v));
    let live = before.and_then(roll::observe::live_set);
    let listed: Result<&[Pod], &str> = match pods {
        Some(Ok(p)) => Ok(p.as_slice()),
        Some(Err(why)) => Err(why.as_str()),
        None => Err("the broker pods were not listed"),
    };
    let views = match (listed, before) {
        (Ok(p), Some(sts)) => Ok(roll::observe::pod_views(p, sts)),
        (Ok(_), None) => Ok(Vec::new()),
        (Err(why), _) => Err(why),
    };
    let mut input = RollInput {
        replicated: reads.replicated,
        replicas: plan.statefulset_replicas,
        template_hash: &template_hash,
        live: live.as_ref(),
        pods: views.as_ref().map(Vec::as_slice).map_err(|e| *e),
        reports: reads.reports.unwrap_or(&[]),
        min_ready: Duration::from_secs(u64::try_from(v.min_ready_seconds).unwrap_or(0)),
        now,
    };
    let first = roll::decide(&input);
    if reads.reports.is_some() {
        return first;
    }
    let (Some(roll::Wait::Unreachable { .. }), Ok(p), Some(sts), Some(fetcher)) =
        (first.wait(), listed, before, ctx.brokers.as_ref())
    else {
        return first;
    };
    let reports = read_replicas(fetcher, p, sts).await;
    input.reports = &reports;
    roll::decide(&input)
}

/// What the brokers a scale-down to `desired` removes still hold ([`leaving::judge`]), for a
/// cluster whose durable topics are replicated: nothing is read when no broker is leaving;
/// `reports` are this reconcile's reads of every broker when it made them, else the leaving
/// brokers' `GET /replicas` are read now. Without the broker HTTP client nothing can be read,
/// and the scale-down waits.
async fn observe_leaving(
    ctx: &Context,
    observed: &Observed,
    desired: i32,
    pods: Option<&Result<Vec<Pod>, String>>,
    sts: Option<&StatefulSet>,
    reports: Option<&[roll::BrokerReplicas]>,
) -> Leaving {
    let (Some(sts), Some(names)) = (sts, sts.and_then(|s| s.metadata.name.clone())) else {
        return Leaving::NotReplicated;
    };
    let leaving: Vec<String> = observed
        .leaving_ordinals(desired)
        .map(|o| format!("{names}-{o}"))
        .collect();
    if leaving.is_empty() {
        return Leaving::NotReplicated;
    }
    let listed: Result<&[Pod], &str> = match pods {
        Some(Ok(p)) => Ok(p.as_slice()),
        Some(Err(why)) => Err(why.as_str()),
        None => Err("the broker pods were not listed"),
    };
    let views = listed.map(|p| roll::observe::pod_views(p, sts));
    let read;
    let reports = match (reports, listed, ctx.brokers.as_ref()) {
        (Some(r), _, _) => r,
        (None, Ok(p), Some(fetcher)) => {
            let theirs: Vec<Pod> = p
                .iter()
                .filter(|pod| leaving.contains(&pod.name_any()))
                .cloned()
                .collect();
            read = read_replicas(fetcher, &theirs, sts).await;
            &read
        }
        _ => &[],
    };
    leaving::judge(
        &leaving,
        views.as_ref().map(Vec::as_slice).map_err(|e| *e),
        reports,
    )
}

/// Every broker pod's `GET /replicas` (the pods `sts` controls, not being deleted, at their
/// IP and `http` port), all at once, each within [`roll::report::TIMEOUT`]. No pod IP, a
/// refused connection, a status other than 200 or a body that does not parse is an `Err`
/// answer, on which the roll waits.
async fn read_replicas(
    fetcher: &Fetcher,
    pods: &[Pod],
    sts: &StatefulSet,
) -> Vec<roll::BrokerReplicas> {
    let Some(owner) = Owner::of(sts) else {
        return Vec::new();
    };
    let reads = targets(pods, &owner).into_iter().map(|t| async move {
        let answer = match t.addr {
            None => Err("no pod IP yet".to_string()),
            Some(addr) => fetcher
                .get(
                    &format!("http://{addr}/replicas"),
                    "application/json",
                    None,
                    roll::report::TIMEOUT,
                    roll::report::MAX_BODY,
                )
                .await
                .map_err(|e| e.to_string())
                .and_then(|a| match a.status {
                    200 => roll::report::parse(&a.body),
                    other => Err(format!("GET /replicas answered HTTP {other}")),
                }),
        };
        roll::BrokerReplicas { pod: t.pod, answer }
    });
    futures::future::join_all(reads).await
}

/// The `Degraded` reason a failed apply is reported under.
fn degraded_reason(e: &Error) -> Reason {
    match e {
        Error::UntrustedCa(_) => Reason::UntrustedCa,
        Error::UsersDocumentFull(_) => Reason::UsersDocumentFull,
        _ => Reason::ApplyFailed,
    }
}

/// Keeps the cluster CA and peer certificate ([`ensure_pki`]) and the users document
/// ([`apply_users`]). Also done while the cluster is paused. `Ok(Some(problem))`: everything
/// was written, but the users document left users out ([`Error::UsersDocumentFull`]), to be
/// reported once the rest of the reconcile is done.
async fn maintain_credentials(ctx: &Context, v: &ValidatedCluster) -> Result<Option<Error>> {
    let pki = ensure_pki(&ctx.client, v, Timestamp::now().as_second()).await?;
    if pki.ca_created {
        tracing::info!(secret = %v.ca_secret, "created the cluster CA");
    }
    if let Some(why) = &pki.peer_issued {
        tracing::info!(secret = %v.names.peer_secret, reason = why.as_str(), "issued the peer certificate");
    }
    let users = apply_users(&ctx.client, v).await?;
    tracing::debug!(secret = %v.names.users_secret, users = users.users, "applied the users document");
    if users.left_out.is_empty() {
        return Ok(None);
    }
    Ok(Some(Error::UsersDocumentFull(format!(
        "the users document {} is full: {} valid BrokerUser(s) left out and unable to connect: {}",
        v.names.users_secret,
        users.left_out.len(),
        users.left_out.join(", ")
    ))))
}

/// Creates the generated TLS Secret if needed, keeps the credentials, applies the topics
/// `document` (before the StatefulSet, whose pods mount it), then applies every child at the
/// planned sizes and the held roll's `partition` that the API server does not already hold as
/// rendered. Also returns the users-document problem of [`maintain_credentials`], if any.
async fn apply_cluster(
    ctx: &Context,
    v: &ValidatedCluster,
    plan: &MembersPlan,
    partition: Option<i32>,
    before: Option<&StatefulSet>,
    document: Option<&starling_config::topics::TopicsDocument>,
) -> Result<(StatefulSet, Option<Error>)> {
    if ensure_tls_secret(&ctx.client, v).await? {
        tracing::info!(secret = %v.tls_secret, "created the cluster's TLS secret");
    }
    let problem = maintain_credentials(ctx, v).await?;
    if let Some(document) = document {
        topics::apply_document(&ctx.client, &ctx.live, v, document).await?;
    }
    let children = render_sized(
        v,
        Sizes {
            statefulset_replicas: plan.statefulset_replicas,
            members: plan.members,
            partition,
        },
    );
    let stale = unwanted(v, &children);
    apply_children(
        &ctx.client,
        &ctx.live,
        before,
        &children,
        &stale,
        &v.id.owner.uid,
    )
    .await
    .map(|sts| (sts, problem))
}

/// The server-side apply body of the reconciler's status write: every status field the
/// reconciler owns, sent whole (a field left out would be removed), and none of the
/// autoscaler's (`effectiveTier`, `autoscaling`), which its own field manager applies.
pub fn status_apply_body(ours: &BrokerClusterStatus) -> Result<serde_json::Value> {
    let status =
        serde_json::to_value(ours.reconciler_fields()).map_err(|source| Error::Serialize {
            what: "status",
            source,
        })?;
    Ok(crate::apply::status_body(status))
}

async fn publish(ctx: &Context, bc: &BrokerCluster, planned: &Planned) {
    let reference = bc.object_ref(&());
    if let Err(e) = ctx.recorder.publish(&planned.to_event(), &reference).await {
        tracing::debug!(error = %e, reason = planned.reason, "could not publish event");
    }
}

fn scoped<K>(client: &Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The BrokerCluster watch's filter: a new generation (a spec change) or a new
/// `status.effectiveTier` (an autoscaler decision) triggers a reconcile; other status writes
/// do not.
pub fn generation_or_effective_tier(bc: &BrokerCluster) -> Option<u64> {
    use std::hash::{Hash, Hasher};
    let generation = predicates::generation(bc)?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    generation.hash(&mut h);
    bc.status
        .as_ref()
        .and_then(|s| s.effective_tier)
        .map(|t| t.as_str())
        .hash(&mut h);
    Some(h.finish())
}

/// A controller for one watch scope (a namespace, or all namespaces), its BrokerCluster cache
/// and its children's caches.
pub fn controller_for(
    client: &Client,
    ns: Option<&str>,
    writes: &TopicWrites,
) -> (Controller<BrokerCluster>, Store<BrokerCluster>, ChildStores) {
    let (reader, writer) = reflector::store();
    let clusters = watcher(
        scoped::<BrokerCluster>(client, ns),
        watcher::Config::default(),
    )
    .default_backoff()
    .reflect(writer)
    .applied_objects()
    .predicate_filter(generation_or_effective_tier, PredicateConfig::default());
    let children = watcher::Config::default().labels(MANAGED_BY_SELECTOR);
    let (controller, live) = own_children(
        Controller::for_stream(clusters, reader.clone()),
        client,
        ns,
        &children,
    );
    let controller = controller
        // Any change or deletion of a BrokerUser recomputes its cluster's users document.
        .watches(
            scoped::<BrokerUser>(client, ns),
            watcher::Config::default(),
            |user: BrokerUser| {
                let ns = user.namespace()?;
                Some(ObjectRef::<BrokerCluster>::new(&user.spec.cluster).within(&ns))
            },
        );
    // Any change or deletion of a BrokerTopic recomputes its cluster's topics document, except
    // the operator's own status writes (their status may change at every reconcile: a lag).
    let writes = writes.clone();
    let controller = controller.watches(
        scoped::<BrokerTopic>(client, ns),
        watcher::Config::default(),
        move |topic: BrokerTopic| {
            if writes.is_own_write(&topic) {
                return None;
            }
            let ns = topic.namespace()?;
            Some(ObjectRef::<BrokerCluster>::new(&topic.spec.cluster_ref).within(&ns))
        },
    );
    (controller, reader, live)
}

/// Runs one BrokerCluster, one BrokerUser and one BrokerTopic controller per watch scope (every namespace
/// when `namespaces` is empty) and the autoscaler until `shutdown` turns true or leadership is lost (`ctx.fence`), keeping the
/// managed-clusters gauge current.
pub async fn run(
    ctx: Arc<Context>,
    autoscaler: AutoscaleContext,
    namespaces: Vec<String>,
    shutdown: watch::Receiver<bool>,
) {
    let scopes: Vec<Option<String>> = if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.into_iter().map(Some).collect()
    };
    let mut stores = Vec::new();
    let mut runs = Vec::new();
    let mut user_runs = Vec::new();
    let mut topic_runs = Vec::new();
    for scope in scopes {
        user_runs.push(crate::users::run(
            ctx.clone(),
            scope.clone(),
            shutdown.clone(),
        ));
        topic_runs.push(crate::topics::run(
            ctx.clone(),
            scope.clone(),
            shutdown.clone(),
        ));
        let (controller, store, children) =
            controller_for(&ctx.client, scope.as_deref(), &ctx.topic_writes);
        ctx.live.set(scope.clone(), children);
        stores.push(store);
        let run = controller
            .graceful_shutdown_on(ctx.fence.clone().or_shutdown(shutdown.clone()))
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|res| async move {
                match res {
                    Ok((obj, _)) => tracing::debug!(cluster = %obj.name, "reconciled"),
                    Err(e) => tracing::debug!(error = %e, "reconcile stream error"),
                }
            });
        runs.push(run);
    }
    let autoscaler = crate::autoscale::runner::run(autoscaler, stores.clone(), shutdown.clone());
    let metrics = ctx.metrics.clone();
    let mut gauge_stop = shutdown.clone();
    let fence = ctx.fence.clone();
    let gauge = async move {
        loop {
            let count: usize = stores.iter().map(|s| s.state().len()).sum();
            metrics
                .managed_clusters
                .set(i64::try_from(count).unwrap_or(i64::MAX));
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(10)) => {}
                _ = gauge_stop.wait_for(|stop| *stop) => return,
                () = fence.lost() => return,
            }
        }
    };
    futures::join!(
        futures::future::join_all(runs),
        futures::future::join_all(user_runs),
        futures::future::join_all(topic_runs),
        gauge,
        autoscaler
    );
}

#[cfg(test)]
mod scale_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod topic_tests;
#[cfg(test)]
mod user_tests;
