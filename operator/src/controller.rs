//! The controller: watches BrokerClusters and their children and runs one reconcile per change.
//!
//! A reconcile is: read the observed StatefulSet → [`validate`] → the step of a tier change
//! ([`crate::tier_change`]) → [`plan_members`] (the next
//! step of a scale change) → create the generated TLS Secret if absent ([`ensure_tls_secret`])
//! → [`render_sized`] → [`apply_children`] (skipped when paused or refused) →
//! [`status::compute`] → write status if it changed → publish events. The logic worth testing
//! lives in those pure steps; this file only wires them to the API server.
//!
//! While a membership step waits (new brokers getting ready, or the hand-off grace of a scale
//! down), the reconcile asks to be run again when the wait is over.
//!
//! Reconciles triggered by the operator's own status writes are filtered out: the BrokerCluster
//! watch passes only generation changes (status writes never bump `metadata.generation`) and
//! changes of `status.effectiveTier` (the autoscaler's choice, see [`crate::autoscale`]), and
//! an unchanged status is never written. The reconcile never writes `effectiveTier` or
//! `autoscaling` itself (they belong to the autoscaler), except to clear them when autoscaling
//! is turned off. Failed reconciles are retried with exponential backoff
//! per object; a refused spec is not a failure (it is reported as `Degraded`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, predicates, watcher};
use kube::{Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::apply::{apply_children, ensure_tls_secret};
use crate::build::{Sizes, render_sized, unwanted};
use crate::crd::{BrokerCluster, BrokerClusterStatus};
use crate::error::{Error, Result};
use crate::events::{self, Planned};
use crate::members::{MembersPlan, Observed, plan_members};
use crate::metrics::Metrics;
use crate::names::{MANAGED_BY_SELECTOR, Names};
use crate::status::{self, ConditionType, StatusInput};
use crate::tier_change::{self, Stage, TierChangeInput};
use crate::validate::{ObjectIdentity, OperatorDefaults, ValidatedCluster, validate};

/// Requeue interval of a cluster that is ready or refused (nothing will change by itself).
pub const STEADY_REQUEUE: Duration = Duration::from_secs(300);
/// Requeue interval while a rollout is in flight (watches usually trigger sooner).
pub const PROGRESS_REQUEUE: Duration = Duration::from_secs(15);

/// Shared state of every reconcile.
pub struct Context {
    /// API client.
    pub client: Client,
    /// Event recorder.
    pub recorder: Recorder,
    /// Metrics.
    pub metrics: Metrics,
    /// Operator-wide defaults.
    pub defaults: OperatorDefaults,
    /// Where the tier autoscaler reads its signals: `None` scrapes the broker pods directly,
    /// `Some` queries Prometheus (`--prometheus-url`).
    pub prometheus: Option<crate::autoscale::promql::PromQlSource>,
    failures: Mutex<HashMap<(String, String), u32>>,
}

impl Context {
    /// Creates a context.
    pub fn new(
        client: Client,
        recorder: Recorder,
        metrics: Metrics,
        defaults: OperatorDefaults,
    ) -> Self {
        Context {
            client,
            recorder,
            metrics,
            defaults,
            prometheus: None,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// The same context with the autoscaler reading from Prometheus.
    pub fn with_prometheus(
        mut self,
        source: Option<crate::autoscale::promql::PromQlSource>,
    ) -> Self {
        self.prometheus = source;
        self
    }

    fn key(bc: &BrokerCluster) -> (String, String) {
        (bc.namespace().unwrap_or_default(), bc.name_any())
    }

    fn record_failure(&self, bc: &BrokerCluster) -> u32 {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(Self::key(bc)).or_insert(0);
        *n = n.saturating_add(1);
        *n
    }

    fn reset_failures(&self, bc: &BrokerCluster) {
        let mut map = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&Self::key(bc));
    }
}

/// Delay before retry number `failures` (1-based): 5 s doubling up to 5 min.
pub fn backoff_delay(failures: u32) -> Duration {
    let exp = failures.saturating_sub(1).min(6);
    Duration::from_secs(5u64 << exp).min(Duration::from_secs(300))
}

/// When to look again at a cluster whose status is `status`.
pub fn requeue_after(status: &BrokerClusterStatus) -> Duration {
    let ready =
        status::find(Some(status), ConditionType::Ready).is_some_and(|c| c.status == "True");
    let degraded =
        status::find(Some(status), ConditionType::Degraded).is_some_and(|c| c.status == "True");
    if ready || degraded {
        STEADY_REQUEUE
    } else {
        PROGRESS_REQUEUE
    }
}

/// The reconcile entry point: times it, counts it and reports failures as Warning events.
pub async fn reconcile(bc: Arc<BrokerCluster>, ctx: Arc<Context>) -> Result<Action> {
    let timer = ctx.metrics.start();
    let result = reconcile_cluster(&bc, &ctx).await;
    match &result {
        Ok(_) => {
            ctx.reset_failures(&bc);
            timer.finish(None);
        }
        Err(e) => {
            timer.finish(Some(e.metric_label()));
            tracing::warn!(cluster = %bc.name_any(), error = %e, "reconcile failed");
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
    let validated = validate(bc, id.clone(), &ctx.defaults).map(|v| {
        let (v, staged) = stage_tier_change(bc, v, &id, before.as_ref(), &ctx.defaults, now);
        staging = staged;
        v
    });
    let mut planned: Vec<Planned> = Vec::new();
    let mut observed = before.clone();
    let mut apply_error = None;
    let mut members: Option<MembersPlan> = None;
    match &validated {
        Err(e) => {
            ctx.metrics.spec_rejected(e.reason().as_str());
            planned.extend(events::for_rejection(bc.status.as_ref(), e));
        }
        Ok(_) if bc.spec.paused => {}
        Ok(v) => {
            let plan = plan_members(
                v.replicas,
                &observe(before.as_ref(), bc.status.as_ref(), now),
                ctx.defaults.handoff_grace,
            );
            match apply_cluster(ctx, v, plan).await {
                Ok(applied) => {
                    planned.extend(events::for_apply(before.as_ref(), v));
                    observed = Some(applied);
                    members = Some(plan);
                }
                Err(e) => apply_error = Some(e),
            }
        }
    }

    let mut new_status = status::compute(&StatusInput {
        names: &names,
        namespace: &namespace,
        generation: bc.metadata.generation,
        paused: bc.spec.paused,
        desired: validated.as_ref(),
        sts: observed.as_ref(),
        previous: bc.status.as_ref(),
        apply_error: apply_error.as_ref().map(ToString::to_string),
        members: members.as_ref(),
        now: Time(now),
    });
    let autoscaling = bc.spec.autoscaling.as_ref().is_some_and(|a| a.enabled);
    if !autoscaling {
        new_status.effective_tier = None;
        new_status.autoscaling = None;
    }
    if bc.status.as_ref() != Some(&new_status) {
        let body = status_patch(&new_status, bc.status.as_ref(), autoscaling)?;
        write_status(ctx, &namespace, &names.cluster, &body).await?;
    }
    for p in &planned {
        publish(ctx, bc, p).await;
    }
    match apply_error {
        Some(e) => Err(e),
        None => {
            let after = requeue_after(&new_status);
            let after = members.and_then(|m| m.wait).map_or(after, |w| w.min(after));
            let after = if staging {
                after.min(crate::tier_change::STAGE_POLL)
            } else {
                after
            };
            Ok(Action::requeue(after))
        }
    }
}

/// Applies the sequencing of a tier change ([`crate::tier_change`]) to the validated target:
/// returns what to render now, and whether that is an intermediate step.
fn stage_tier_change(
    bc: &BrokerCluster,
    v: ValidatedCluster,
    id: &ObjectIdentity,
    before: Option<&StatefulSet>,
    defaults: &OperatorDefaults,
    now: Timestamp,
) -> (ValidatedCluster, bool) {
    let observed = observe(before, bc.status.as_ref(), now);
    let members = observed.members.or(observed.statefulset_replicas);
    let settled = observed.members_changed_at.is_none_or(|t| {
        Duration::try_from(now.duration_since(t)).unwrap_or(Duration::ZERO)
            >= defaults.handoff_grace
    });
    let input = TierChangeInput {
        target: v.tier,
        target_replicas: v.replicas,
        rendered: bc.status.as_ref().and_then(|s| s.tier),
        members,
        // Brokers still run an older config, or the last replaced one is not ready yet (the
        // StatefulSet reports the roll finished as soon as the last pod is recreated). A
        // cluster without any ready broker has nothing to hand off: its scale-down is not
        // held (e.g. brokers Pending on a too small node).
        rolling_to_target: template_hash(before) == Some(v.config_hash.as_str())
            && members.is_some_and(|m| match status::rollout(before, m, Some(&v.config_hash)) {
                status::Rollout::RollingOut | status::Rollout::Pending => true,
                status::Rollout::NotReady => observed.ready_replicas > 0,
                // Ready, but the last restarted broker has not been available for
                // `minReadySeconds` yet (its entries are still coming back).
                status::Rollout::Ready => available_replicas(before) < m,
                _ => false,
            }),
        members_settled: settled,
    };
    match tier_change::plan(&input) {
        Stage::Direct => (v, false),
        Stage::RollFirst { keep_replicas } => (
            ValidatedCluster {
                replicas: keep_replicas,
                ..v
            },
            true,
        ),
        Stage::GrowFirst { keep_tier } => {
            let mut old = bc.clone();
            old.spec.tier = keep_tier;
            old.spec.autoscaling = None;
            match validate(&old, id.clone(), defaults) {
                Ok(kept) => (
                    ValidatedCluster {
                        replicas: v.replicas,
                        ..kept
                    },
                    true,
                ),
                // The old tier no longer validates (e.g. the admin changed the tier table):
                // go straight to the target.
                Err(_) => (v, false),
            }
        }
    }
}

/// `status.availableReplicas` of the StatefulSet (ready for `minReadySeconds`); without it,
/// the ready count.
fn available_replicas(sts: Option<&StatefulSet>) -> i32 {
    sts.and_then(|s| s.status.as_ref()).map_or(0, |st| {
        st.available_replicas.or(st.ready_replicas).unwrap_or(0)
    })
}

/// The config hash on the StatefulSet's pod template.
fn template_hash(sts: Option<&StatefulSet>) -> Option<&str> {
    sts?.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(crate::names::CONFIG_HASH_ANNOTATION)
        .map(String::as_str)
}

/// What [`plan_members`] needs, from the StatefulSet and the stored status.
fn observe(
    sts: Option<&StatefulSet>,
    status: Option<&BrokerClusterStatus>,
    now: Timestamp,
) -> Observed {
    Observed {
        statefulset_replicas: sts.and_then(|s| s.spec.as_ref()).and_then(|s| s.replicas),
        ready_replicas: sts
            .and_then(|s| s.status.as_ref())
            .and_then(|s| s.ready_replicas)
            .unwrap_or(0),
        members: status.and_then(|s| s.members),
        members_changed_at: status
            .and_then(|s| s.members_changed_at.as_ref())
            .map(|t| t.0),
        now,
    }
}

/// Creates the generated TLS Secret if needed, then applies every child at the planned sizes.
async fn apply_cluster(
    ctx: &Context,
    v: &crate::validate::ValidatedCluster,
    plan: MembersPlan,
) -> Result<StatefulSet> {
    if ensure_tls_secret(&ctx.client, v).await? {
        tracing::info!(cluster = %v.id.name, secret = %v.tls_secret, "created the cluster's TLS secret");
    }
    let children = render_sized(
        v,
        Sizes {
            statefulset_replicas: plan.statefulset_replicas,
            members: plan.members,
        },
    );
    let stale = unwanted(v, &children);
    apply_children(&ctx.client, &children, &stale, &v.id.owner.uid).await
}

/// The merge patch of a reconcile's status write. The autoscaler's fields (`effectiveTier`,
/// `autoscaling`) are left out so a reconcile working from a slightly stale cache never undoes
/// an autoscaler write; with autoscaling off they are cleared (set to null) when present.
pub fn status_patch(
    new: &BrokerClusterStatus,
    previous: Option<&BrokerClusterStatus>,
    autoscaling: bool,
) -> Result<serde_json::Value> {
    let mut status = serde_json::to_value(new).map_err(|source| Error::Serialize {
        what: "status",
        source,
    })?;
    if let Some(obj) = status.as_object_mut() {
        obj.remove("effectiveTier");
        obj.remove("autoscaling");
        if !autoscaling {
            if previous.is_some_and(|p| p.effective_tier.is_some()) {
                obj.insert("effectiveTier".into(), serde_json::Value::Null);
            }
            if previous.is_some_and(|p| p.autoscaling.is_some()) {
                obj.insert("autoscaling".into(), serde_json::Value::Null);
            }
        }
    }
    Ok(serde_json::json!({ "status": status }))
}

async fn write_status(ctx: &Context, ns: &str, name: &str, body: &serde_json::Value) -> Result<()> {
    let api: Api<BrokerCluster> = Api::namespaced(ctx.client.clone(), ns);
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .map(|_| ())
        .map_err(|e| Error::kube("patch status", "BrokerCluster", name, e))
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

/// A controller for one watch scope (a namespace, or all namespaces) and its cache.
pub fn controller_for(
    client: &Client,
    ns: Option<&str>,
) -> (Controller<BrokerCluster>, Store<BrokerCluster>) {
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
    let controller = Controller::for_stream(clusters, reader.clone())
        .owns(scoped::<StatefulSet>(client, ns), children.clone())
        .owns(scoped::<ConfigMap>(client, ns), children.clone())
        .owns(scoped::<Service>(client, ns), children.clone())
        .owns(scoped::<ServiceAccount>(client, ns), children.clone())
        .owns(scoped::<Role>(client, ns), children.clone())
        .owns(scoped::<RoleBinding>(client, ns), children.clone())
        .owns(scoped::<PodDisruptionBudget>(client, ns), children);
    (controller, reader)
}

async fn stopped(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Runs one controller per watch scope (every namespace when `namespaces` is empty) until
/// `shutdown` turns true, keeping the managed-clusters gauge current.
pub async fn run(ctx: Arc<Context>, namespaces: Vec<String>, shutdown: watch::Receiver<bool>) {
    let scopes: Vec<Option<String>> = if namespaces.is_empty() {
        vec![None]
    } else {
        namespaces.into_iter().map(Some).collect()
    };
    let mut stores = Vec::new();
    let mut runs = Vec::new();
    for scope in scopes {
        let (controller, store) = controller_for(&ctx.client, scope.as_deref());
        stores.push(store);
        let run = controller
            .graceful_shutdown_on(stopped(shutdown.clone()))
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|res| async move {
                match res {
                    Ok((obj, _)) => tracing::debug!(cluster = %obj.name, "reconciled"),
                    Err(e) => tracing::debug!(error = %e, "reconcile stream error"),
                }
            });
        runs.push(run);
    }
    let autoscaler = crate::autoscale::runner::run(ctx.clone(), stores.clone(), shutdown.clone());
    let metrics = ctx.metrics.clone();
    let mut gauge_stop = shutdown.clone();
    let gauge = async move {
        loop {
            let count: usize = stores.iter().map(|s| s.state().len()).sum();
            metrics
                .managed_clusters
                .set(i64::try_from(count).unwrap_or(i64::MAX));
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_secs(10)) => {}
                _ = gauge_stop.wait_for(|stop| *stop) => return,
            }
        }
    };
    futures::join!(futures::future::join_all(runs), gauge, autoscaler);
}

#[cfg(test)]
mod tests;
