//! The BrokerTopic controller: reports a BrokerTopic whose cluster does not exist.
//!
//! Everything else about a BrokerTopic is its cluster's reconcile's: it gathers the cluster's
//! BrokerTopics, judges them, writes the topics document and each one's status
//! ([`crate::apply::topics`]), and every BrokerTopic change triggers it through the cluster
//! controller's watch. That reconcile never runs for a cluster that does not exist, so this
//! controller reads the named cluster on each new generation of a BrokerTopic (and every
//! [`WAIT_REQUEUE`] while it is missing, every [`STEADY_REQUEUE`] otherwise, which also
//! catches a cluster deleted under it) and, when it is absent, sets `Ready` to
//! `ClusterNotFound` under the same field manager as the cluster's writes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector;
use kube::runtime::{Controller, PredicateConfig, WatchStreamExt, predicates, watcher};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use crate::apply::topics::write_status;
use crate::context::Context;
use crate::crd::BrokerCluster;
use crate::crd::topic::{BrokerTopic, topic_reasons};
use crate::error::{Error, Result};
use crate::status::topics::status_of;

/// Requeue while the cluster is missing.
pub const WAIT_REQUEUE: Duration = Duration::from_secs(30);
/// Requeue while the cluster exists (its reconcile owns the status).
pub const STEADY_REQUEUE: Duration = Duration::from_secs(300);
/// Retry after a failed reconcile.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(15);

async fn reconcile_inner(topic: &BrokerTopic, ctx: &Context) -> Result<Action> {
    let ns = topic
        .namespace()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    let cluster = &topic.spec.cluster_ref;
    let clusters: Api<BrokerCluster> = Api::namespaced(ctx.client.clone(), &ns);
    let found = clusters
        .get_metadata_opt(cluster)
        .await
        .map_err(|e| Error::kube("get", "BrokerCluster", cluster, e))?;
    if found.is_some() {
        return Ok(Action::requeue(STEADY_REQUEUE));
    }
    let status = status_of(
        topic,
        topic_reasons::CLUSTER_NOT_FOUND,
        &format!("no BrokerCluster {cluster} in namespace {ns}"),
        None,
        Time(Timestamp::now()),
    );
    write_status(&ctx.client, &ctx.topic_writes, topic, &status).await?;
    Ok(Action::requeue(WAIT_REQUEUE))
}

/// One reconcile of a BrokerTopic, fenced by leadership.
pub async fn reconcile(topic: Arc<BrokerTopic>, ctx: Arc<Context>) -> Result<Action> {
    ctx.fence.guard(reconcile_inner(&topic, &ctx)).await
}

/// Retries a failed reconcile.
pub fn error_policy(_topic: Arc<BrokerTopic>, _err: &Error, _ctx: Arc<Context>) -> Action {
    Action::requeue(ERROR_REQUEUE)
}

/// Runs the BrokerTopic controller for one watch scope until `shutdown` turns true or
/// leadership is lost. Only new generations trigger it: the status writes do not.
pub async fn run(ctx: Arc<Context>, ns: Option<String>, shutdown: watch::Receiver<bool>) {
    let client: Client = ctx.client.clone();
    let api: Api<BrokerTopic> = match ns.as_deref() {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    let (reader, writer) = reflector::store();
    let topics = watcher(api, watcher::Config::default())
        .default_backoff()
        .reflect(writer)
        .applied_objects()
        .predicate_filter(predicates::generation, PredicateConfig::default());
    Controller::for_stream(topics, reader)
        .graceful_shutdown_on(ctx.fence.clone().or_shutdown(shutdown))
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => tracing::debug!(topic = %obj.name, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "topic reconcile stream error"),
            }
        })
        .await;
}

// Tested with the cluster reconcile in `controller/topic_tests.rs`.
