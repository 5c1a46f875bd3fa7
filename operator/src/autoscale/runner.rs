//! The autoscaler loop (I/O). Once a second it looks at every BrokerCluster in the
//! controller's caches; for each one with `spec.autoscaling.enabled` whose `scrapeInterval` has
//! passed, it runs one round:
//!
//! 1. list the broker pods: those of the cluster's own StatefulSet (controlled by the
//!    BrokerCluster), by controller owner reference and ordinal name, never by labels alone
//!    ([`super::scrape::owned_by`]); and GET each one's `/metrics` at
//!    `podIP:<container port named http>` with a short timeout, all at once;
//! 2. rate the counters ([`Tracker`]) and append the observation to the cluster's in-memory
//!    window (lost on restart: the window refills);
//!
//!    with `--prometheus-url`, steps 1–2 are instead: list the broker pods, and query the five
//!    rates for them from Prometheus ([`super::promql`]); the observation is the same type;
//! 3. [`decide`];
//! 4. apply `status.autoscaling` and `status.effectiveTier` (the new tier on a change, else the
//!    stored one) through the status subresource with server-side apply under its own field
//!    manager ([`AUTOSCALER_FIELD_MANAGER`]), emit a `TierChanged` Event and count the decision.
//!
//! The changed `effectiveTier` triggers a reconcile (the controller's predicate watches it),
//! which renders the new tier. The autoscaler never writes `spec`, nor the reconciler's status
//! fields. When autoscaling is turned off it removes its own fields ([`release`]).
//!
//! It gets only what it uses ([`AutoscaleContext`]), and stops writing when leadership is lost
//! (its [`Fence`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use kube::{Client, Resource, ResourceExt};
use prometheus::IntCounterVec;
use serde_json::Value;
use starling_config::TierTable;
use tokio::sync::watch;
use tracing::Instrument;

use super::fetch::Fetcher;
use super::promql::PromQlSource;
use super::rates::{Observation, Round, Tracker, secs_between};
use super::report::{autoscaler_status_body, holds_autoscaler_fields, status_block};
use super::scrape::{Owner, scrape, targets};
use super::{Input, Policy, decide};
use crate::apply::{apply_status, merge_status, status_body};
use crate::crd::BrokerCluster;
use crate::crd::conditions::{ConditionType, find};
use crate::error::Error;
use crate::events;
use crate::fence::Fence;
use crate::names::{AUTOSCALER_FIELD_MANAGER, Names};
use crate::validate::effective_tier;

/// What the autoscaler uses, and nothing else.
#[derive(Clone)]
pub struct AutoscaleContext {
    /// API client.
    pub client: Client,
    /// Event recorder (the `TierChanged` events).
    pub recorder: Recorder,
    /// `starling_operator_autoscale_decisions_total{outcome}`.
    pub decisions: IntCounterVec,
    /// The tier table with the admin's overrides (capacities).
    pub tiers: TierTable,
    /// Where the signals come from: `None` scrapes the broker pods directly, `Some` queries
    /// Prometheus (`--prometheus-url`).
    pub prometheus: Option<PromQlSource>,
    /// Turns lost when this replica stops leading: no round starts or writes after that.
    pub fence: Fence,
}

/// The autoscaler's memory of one cluster.
struct ClusterState {
    uid: String,
    tracker: Tracker,
    /// The previous Prometheus round's `to` (the next one's `from`).
    prom_last: Option<Timestamp>,
    window: VecDeque<Observation>,
    next_due: tokio::time::Instant,
    last_change: Option<Timestamp>,
}

/// Runs the loop until `shutdown` turns true or leadership is lost.
pub async fn run(
    ctx: AutoscaleContext,
    stores: Vec<Store<BrokerCluster>>,
    mut shutdown: watch::Receiver<bool>,
) {
    let fetcher = match Fetcher::new(None) {
        Ok(f) => f,
        Err(e) => {
            tracing::error!(error = %e, "the autoscaler's HTTP client cannot be built; autoscaling is off");
            return;
        }
    };
    let mut states: HashMap<(String, String), ClusterState> = HashMap::new();
    let fence = ctx.fence.clone();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
            () = fence.lost() => return,
        }
        let clusters: Vec<Arc<BrokerCluster>> = stores.iter().flat_map(|s| s.state()).collect();
        let mut live = Vec::new();
        for bc in clusters {
            // Every line logged for this cluster carries its ids once, from this span.
            let span = tracing::info_span!(
                "autoscale",
                namespace = %bc.namespace().unwrap_or_default(),
                cluster = %bc.name_any(),
            );
            let Some(spec) = bc.spec.autoscaling.as_ref().filter(|a| a.enabled) else {
                if holds_autoscaler_fields(bc.status.as_ref()) {
                    let released = tokio::select! {
                        biased;
                        () = fence.lost() => return,
                        r = release(&ctx, &bc).instrument(span.clone()) => r,
                    };
                    if let Err(e) = released {
                        span.in_scope(|| tracing::warn!(error = %e, "could not remove the autoscaler's status fields"));
                    }
                }
                continue;
            };
            // A refused policy is reported by the reconcile (Degraded); nothing to do here.
            let Ok(policy) = Policy::from_spec(spec) else {
                continue;
            };
            let key = (bc.namespace().unwrap_or_default(), bc.name_any());
            let uid = bc.uid().unwrap_or_default();
            live.push(key.clone());
            let now = tokio::time::Instant::now();
            let state = states
                .entry(key.clone())
                .and_modify(|s| {
                    if s.uid != uid {
                        *s = ClusterState::new(&uid, now);
                    }
                })
                .or_insert_with(|| ClusterState::new(&uid, now));
            if now < state.next_due {
                continue;
            }
            state.next_due = now + policy.scrape_interval;
            let result = tokio::select! {
                biased;
                () = fence.lost() => return,
                r = round(&ctx, &fetcher, &bc, &policy, state).instrument(span.clone()) => r,
            };
            if let Err(e) = result {
                span.in_scope(|| tracing::warn!(error = %e, "autoscaler round failed"));
            }
        }
        states.retain(|k, _| live.contains(k));
    }
}

impl ClusterState {
    fn new(uid: &str, now: tokio::time::Instant) -> Self {
        ClusterState {
            uid: uid.to_string(),
            tracker: Tracker::default(),
            prom_last: None,
            window: VecDeque::new(),
            next_due: now,
            last_change: None,
        }
    }
}

/// Removes the autoscaler's fields from a cluster whose autoscaling is off: an apply of none of
/// them under the autoscaler's field manager (the API server removes what only it owned),
/// then, if an older operator's merge patch still co-owns them, a merge patch of its own two
/// fields to null. The reconciler's fields are never named.
pub async fn release(ctx: &AutoscaleContext, bc: &BrokerCluster) -> Result<(), Error> {
    let name = bc.name_any();
    let ns = bc
        .namespace()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    let body = status_body(Value::Object(serde_json::Map::new()));
    let stored = apply_status(&ctx.client, &ns, &name, AUTOSCALER_FIELD_MANAGER, &body).await?;
    if holds_autoscaler_fields(stored.as_ref()) {
        let nulls = serde_json::json!({ "effectiveTier": null, "autoscaling": null });
        merge_status(&ctx.client, &ns, &name, nulls).await?;
    }
    tracing::info!("autoscaling is off: removed status.effectiveTier and status.autoscaling");
    Ok(())
}

async fn round(
    ctx: &AutoscaleContext,
    fetcher: &Fetcher,
    bc: &BrokerCluster,
    policy: &Policy,
    state: &mut ClusterState,
) -> Result<(), Error> {
    let name = bc.name_any();
    let ns = bc
        .namespace()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    let names = Names::new(&name);
    // Only the pods of the cluster's own StatefulSet are read: the selector narrows the list,
    // ownership (not labels, which any pod may carry) decides.
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &ns);
    let set = sets
        .get_opt(&names.statefulset)
        .await
        .map_err(|e| Error::kube("get", "StatefulSet", &names.statefulset, e))?
        .filter(|s| {
            bc.metadata
                .uid
                .as_deref()
                .is_some_and(|uid| crate::apply::is_controlled_by(s, uid))
        });
    let set_replicas = set
        .as_ref()
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.replicas)
        .and_then(|r| u32::try_from(r).ok())
        .unwrap_or(0);
    let set_uid = set.and_then(|s| s.metadata.uid).unwrap_or_default();
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    let listed = if set_uid.is_empty() {
        Vec::new()
    } else {
        pods.list(&ListParams::default().labels(&names.selector_string()))
            .await
            .map_err(|e| Error::kube("list", "Pod", &names.selector_string(), e))?
            .items
    };
    let targets = targets(
        &listed,
        &Owner {
            name: &names.statefulset,
            uid: &set_uid,
            replicas: set_replicas,
        },
    );
    let status = bc.status.as_ref();
    let expected = targets
        .len()
        .max(status.map_or(0, |s| usize::try_from(s.replicas).unwrap_or(0)));
    let obs = match &ctx.prometheus {
        Some(source) => {
            let pods: Vec<String> = targets.into_iter().map(|t| t.pod).collect();
            let at = Timestamp::now();
            let obs = source
                .observe(
                    &ns,
                    &name,
                    &pods,
                    expected,
                    policy.scrape_interval,
                    state.prom_last,
                    at,
                )
                .await;
            state.prom_last = Some(at);
            obs
        }
        None => {
            let results =
                futures::future::join_all(targets.into_iter().map(|t| scrape(fetcher, t))).await;
            let (mut scraped, mut failed) = (Vec::new(), Vec::new());
            for r in results {
                match r {
                    Ok(s) => scraped.push(s),
                    Err(f) => failed.push(f),
                }
            }
            state.tracker.observe(Round {
                at: Timestamp::now(),
                expected,
                scraped,
                failed,
            })
        }
    };
    let now = obs.to;
    state.window.push_back(obs.clone());
    let keep = (policy.longest_window() + policy.scrape_interval * 4).as_secs_f64();
    while state
        .window
        .front()
        .is_some_and(|o| secs_between(o.to, now) > keep)
    {
        state.window.pop_front();
    }

    let current = effective_tier(&bc.spec, status);
    let ready = find(status, ConditionType::Ready).is_some_and(|c| c.status == "True");
    let progressing = find(status, ConditionType::Progressing).is_some_and(|c| c.status == "True");
    let rolling_out = progressing
        || status.and_then(|s| s.tier) != Some(current)
        || status.and_then(|s| s.observed_generation) != bc.metadata.generation;
    let last_change = status
        .and_then(|s| s.autoscaling.as_ref())
        .and_then(|a| a.last_change_time.as_ref())
        .map(|t| t.0)
        .max(state.last_change);
    let window: Vec<Observation> = state.window.iter().cloned().collect();
    let decision = decide(&Input {
        window: &window,
        current,
        policy,
        tiers: &ctx.tiers,
        last_change,
        ready,
        rolling_out,
        paused: bc.spec.paused,
        now,
    });
    ctx.decisions.with_label_values(&[decision.outcome()]).inc();
    let capacity = ctx.tiers.sizing(current).capacity_msgs_per_sec;
    let block = status_block(
        &obs,
        &decision,
        capacity,
        status.and_then(|s| s.autoscaling.as_ref()),
        now,
    );
    let body = autoscaler_status_body(&block, decision.target(), status);
    apply_status(&ctx.client, &ns, &name, AUTOSCALER_FIELD_MANAGER, &body).await?;
    tracing::debug!(
        outcome = decision.outcome(),
        reason = decision.reason(),
        "autoscaler decision"
    );
    if let Some(to) = decision.target() {
        state.last_change = Some(now);
        tracing::info!(from = %current, %to, reason = decision.reason(), "autoscaler changes the tier");
        let planned = events::for_tier_change(to, decision.reason());
        if let Err(e) = ctx
            .recorder
            .publish(&planned.to_event(), &bc.object_ref(&()))
            .await
        {
            tracing::debug!(error = %e, "could not publish the TierChanged event");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kube::runtime::events::Reporter;
    use kube::runtime::reflector;

    use super::*;
    use crate::fake_api::{Fake, fake_client};
    use crate::metrics::Metrics;

    #[tokio::test]
    async fn the_loop_stops_when_the_lease_is_lost() {
        let client = fake_client(std::sync::Arc::new(std::sync::Mutex::new(Fake::default())));
        let metrics = Metrics::new().unwrap_or_else(|e| panic!("{e}"));
        let (fencer, fence) = crate::fence::fence();
        let ctx = AutoscaleContext {
            client: client.clone(),
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: "starling-operator".into(),
                    instance: None,
                },
            ),
            decisions: metrics.autoscale_decisions(),
            tiers: TierTable::default(),
            prometheus: None,
            fence,
        };
        let (store, _writer) = reflector::store::<BrokerCluster>();
        let (_stop, shutdown) = watch::channel(false);
        let running = tokio::spawn(run(ctx, vec![store], shutdown));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!running.is_finished());
        fencer.trip();
        let ended = tokio::time::timeout(Duration::from_secs(5), running).await;
        assert!(ended.is_ok(), "the autoscaler stopped with the fence");
    }
}
