//! The BrokerUser controller: issues each user's credentials into its Secret and reports it.
//!
//! A reconcile reads the user's BrokerCluster (absent: `ClusterNotFound`), checks its name and
//! patterns with the brokers' rules (refused: `InvalidPermissions`, a Warning event, and no
//! credentials), reads the cluster CA and the server certificate clients must trust (absent:
//! `WaitingForCluster`), then writes the credentials Secret when it is missing or must change:
//!
//! - `token`: a token generated once with `starling_access::generate_token` and kept across
//!   reconciles; only its hash reaches the brokers (see [`crate::apply::users`]);
//! - `tls`: a client certificate signed by the cluster CA, common name = the user's name,
//!   reissued only when [`crate::pki::leaf_needs_renewal`] says so.
//!
//! `ca.crt` is the `ca.crt` of `spec.tls.secretName` when the cluster has one (left out when
//! that Secret has none: clients then use their own roots), else the operator-generated
//! `<cluster>-tls` certificate. The cluster's users document is recomputed by the cluster's
//! own reconcile, which every BrokerUser change triggers.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::access::validate_user;
use crate::apply::{apply, is_controlled_by};
use crate::build::credentials::{self, Credential, CredentialsInput, TOKEN_KEY};
use crate::build::pki_secrets::{CA_CERT, TLS_CERT, TLS_KEY, key_text, read_ca};
use crate::ca_trust;
use crate::context::Context;
use crate::crd::user::{BrokerUser, BrokerUserStatus, UserAuthType, user_reasons};
use crate::crd::{BrokerCluster, GROUP};
use crate::error::{Error, Result};
use crate::events::Planned;
use crate::names::{FIELD_MANAGER, Names};
use crate::pki;
use crate::tls::CertificatePem;

/// Requeue while the cluster or its certificates are missing.
pub const WAIT_REQUEUE: Duration = Duration::from_secs(10);
/// Requeue of a settled user (certificate renewal is checked then).
pub const STEADY_REQUEUE: Duration = Duration::from_secs(300);
/// Retry after a failed reconcile.
pub const ERROR_REQUEUE: Duration = Duration::from_secs(15);

/// Event reasons on BrokerUsers, with their type and meaning (for the docs).
pub const USER_EVENT_REASONS: &[(&str, &str, &str)] = &[
    (
        "CredentialsIssued",
        "Normal",
        "A token or a client certificate was written to the user's Secret (first issue, renewal, or a changed authentication type).",
    ),
    (
        "InvalidPermissions",
        "Warning",
        "A pattern or the user's name was refused; no credentials are issued. Emitted when the refusal changes.",
    ),
    (
        "ClusterNotFound",
        "Warning",
        "spec.cluster names no BrokerCluster in this namespace. Emitted when the user first finds it missing.",
    ),
];

/// What a reconcile concluded.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Outcome {
    ready: bool,
    reason: &'static str,
    message: String,
    event: Option<Planned>,
    requeue: Duration,
}

fn outcome(reason: &'static str, message: String, requeue: Duration) -> Outcome {
    Outcome {
        ready: reason == user_reasons::CREDENTIALS_ISSUED,
        reason,
        message,
        event: None,
        requeue,
    }
}

/// The reason of the stored `Ready` condition.
fn previous_reason(user: &BrokerUser) -> Option<(&str, &str)> {
    user.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| (c.reason.as_str(), c.message.as_str()))
}

/// The credential to store: the existing one when it is still good, else a new one.
/// Returns it and whether it is new.
pub fn credential(
    auth: UserAuthType,
    user: &str,
    existing: Option<&Secret>,
    ca: &CertificatePem,
    now: i64,
) -> Result<(Credential, bool)> {
    match auth {
        UserAuthType::Token => match existing
            .and_then(|s| key_text(s, TOKEN_KEY))
            .filter(|t| !t.is_empty())
        {
            Some(t) => Ok((Credential::Token(t.to_string()), false)),
            None => Ok((Credential::Token(starling_access::generate_token()), true)),
        },
        UserAuthType::Tls => {
            let cert = existing.and_then(|s| key_text(s, TLS_CERT));
            let key = existing.and_then(|s| key_text(s, TLS_KEY));
            match (cert, key) {
                (Some(cert), Some(key))
                    if pki::leaf_needs_renewal(Some(cert), &ca.cert, user, now).is_none() =>
                {
                    Ok((
                        Credential::Certificate(CertificatePem {
                            cert: cert.to_string(),
                            key: key.to_string(),
                        }),
                        false,
                    ))
                }
                _ => Ok((
                    Credential::Certificate(pki::issue_user(ca, user, now)?),
                    true,
                )),
            }
        }
    }
}

async fn get_secret(api: &Api<Secret>, name: &str) -> Result<Option<Secret>> {
    api.get_opt(name)
        .await
        .map_err(|e| Error::kube("get", "Secret", name, e))
}

/// What clients should trust for the brokers' server certificate (`None` when the user's TLS
/// Secret has no `ca.crt`), or `Ok(Err(message))` while the generated certificate is missing.
async fn server_ca(
    secrets: &Api<Secret>,
    bc: &BrokerCluster,
    names: &Names,
) -> Result<std::result::Result<Option<String>, String>> {
    match &bc.spec.tls {
        Some(tls) => Ok(Ok(get_secret(secrets, &tls.secret_name)
            .await?
            .and_then(|s| key_text(&s, CA_CERT).map(str::to_string)))),
        None => match get_secret(secrets, &names.generated_tls_secret).await? {
            Some(s) => Ok(key_text(&s, TLS_CERT)
                .map(|c| Some(c.to_string()))
                .ok_or_else(|| format!("Secret {} has no tls.crt", names.generated_tls_secret))),
            None => Ok(Err(format!(
                "waiting for the cluster's certificate Secret {}",
                names.generated_tls_secret
            ))),
        },
    }
}

async fn reconcile_inner(user: &BrokerUser, ctx: &Context) -> Result<Outcome> {
    let ns = user
        .namespace()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    let name = user.name_any();
    let owner = user
        .controller_owner_ref(&())
        .ok_or(Error::MissingObjectField("metadata.uid"))?;
    let clusters: Api<BrokerCluster> = Api::namespaced(ctx.client.clone(), &ns);
    let cluster = &user.spec.cluster;
    let Some(bc) = clusters
        .get_opt(cluster)
        .await
        .map_err(|e| Error::kube("get", "BrokerCluster", cluster, e))?
    else {
        let mut o = outcome(
            user_reasons::CLUSTER_NOT_FOUND,
            format!("no BrokerCluster {cluster} in namespace {ns}"),
            WAIT_REQUEUE * 3,
        );
        o.event = Some(Planned {
            warning: true,
            reason: "ClusterNotFound",
            action: "Validate",
            note: o.message.clone(),
        });
        return Ok(o);
    };
    if let Err(message) = validate_user(&name, &user.spec) {
        let mut o = outcome(
            user_reasons::INVALID_PERMISSIONS,
            message.clone(),
            STEADY_REQUEUE,
        );
        o.event = Some(Planned {
            warning: true,
            reason: "InvalidPermissions",
            action: "Validate",
            note: message,
        });
        return Ok(o);
    }
    if let Err(message) = crate::access::check_size(&name, &user.spec) {
        let mut o = outcome(user_reasons::TOO_LARGE, message.clone(), STEADY_REQUEUE);
        o.event = Some(Planned {
            warning: true,
            reason: "TooLarge",
            action: "Validate",
            note: message,
        });
        return Ok(o);
    }
    let names = Names::new(cluster);
    let secrets: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let (ca_name, ca_explicit) = ca_trust::ca_secret_name(&bc.spec, &names);
    let ca_secret = get_secret(&secrets, &ca_name).await?;
    // The same check as the cluster's reconcile: a planted `<cluster>-ca` signs nothing.
    let bc_uid = bc.metadata.uid.as_deref().unwrap_or_default();
    if let Some(s) = &ca_secret
        && let Err(why) = ca_trust::check(&s.metadata, cluster, bc_uid, ca_explicit)
    {
        return Ok(outcome(
            user_reasons::WAITING_FOR_CLUSTER,
            why.message(&ca_name, cluster),
            WAIT_REQUEUE,
        ));
    }
    let Some(ca) = ca_secret.as_ref().and_then(read_ca) else {
        return Ok(outcome(
            user_reasons::WAITING_FOR_CLUSTER,
            format!("waiting for the cluster CA Secret {ca_name}"),
            WAIT_REQUEUE,
        ));
    };
    let trust = match server_ca(&secrets, &bc, &names).await? {
        Ok(t) => t,
        Err(message) => {
            return Ok(outcome(
                user_reasons::WAITING_FOR_CLUSTER,
                message,
                WAIT_REQUEUE,
            ));
        }
    };
    let secret_name = user.secret_name();
    let existing = get_secret(&secrets, &secret_name).await?;
    if let Some(s) = &existing
        && !is_controlled_by(s, &owner.uid)
    {
        return Err(Error::ForeignSecret {
            name: secret_name,
            problem: "exists and is not owned by this BrokerUser; delete it or set spec.secretName"
                .to_string(),
        });
    }
    let now = Timestamp::now().as_second();
    let (cred, new) = credential(
        user.spec.authentication.type_,
        &name,
        existing.as_ref(),
        &ca,
        now,
    )?;
    let input = CredentialsInput {
        name: &secret_name,
        namespace: &ns,
        user: &name,
        cluster,
        owner,
        credential: &cred,
        server_ca: trust.as_deref(),
    };
    let wanted = credentials::build(&input);
    let unchanged = existing
        .as_ref()
        .is_some_and(|s| s.data == wanted.data && s.metadata.labels == wanted.metadata.labels);
    if !unchanged {
        apply(&ctx.client, &wanted).await?;
    }
    let mut message = format!(
        "{} credentials in Secret {secret_name}",
        user.spec.authentication.type_.as_str()
    );
    if trust.is_none() {
        message.push_str(
            "; the server TLS Secret has no ca.crt, so ca.crt is left out (clients use their own trust roots)",
        );
    }
    let mut o = outcome(user_reasons::CREDENTIALS_ISSUED, message, STEADY_REQUEUE);
    if new {
        o.event = Some(Planned {
            warning: false,
            reason: "CredentialsIssued",
            action: "Issue",
            note: format!(
                "wrote a new {} to Secret {secret_name}",
                match cred {
                    Credential::Token(_) => "token",
                    Credential::Certificate(_) => "client certificate",
                }
            ),
        });
    }
    Ok(o)
}

/// The status a reconcile stores.
pub fn status_of(
    user: &BrokerUser,
    ready: bool,
    reason: &str,
    message: &str,
    now: Time,
) -> BrokerUserStatus {
    let status = if ready { "True" } else { "False" };
    let previous = user
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
    let last_transition_time = previous
        .filter(|c| c.status == status)
        .map_or(now, |c| c.last_transition_time.clone());
    BrokerUserStatus {
        observed_generation: user.metadata.generation,
        conditions: vec![Condition {
            type_: "Ready".to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            observed_generation: user.metadata.generation,
            last_transition_time,
        }],
        secret_name: ready.then(|| user.secret_name()),
    }
}

async fn write_status(ctx: &Context, user: &BrokerUser, status: &BrokerUserStatus) -> Result<()> {
    let ns = user
        .namespace()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    let name = user.name_any();
    let api: Api<BrokerUser> = Api::namespaced(ctx.client.clone(), &ns);
    let body = json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "BrokerUser",
        "status": status,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map(|_| ())
    .map_err(|e| Error::kube("apply status", "BrokerUser", &name, e))
}

async fn publish(ctx: &Context, user: &BrokerUser, planned: &Planned) {
    let reference = user.object_ref(&());
    if let Err(e) = ctx.recorder.publish(&planned.to_event(), &reference).await {
        tracing::debug!(error = %e, reason = planned.reason, "could not publish event");
    }
}

/// One reconcile of a BrokerUser.
pub async fn reconcile(user: Arc<BrokerUser>, ctx: Arc<Context>) -> Result<Action> {
    let o = match ctx.fence.guard(reconcile_inner(&user, &ctx)).await {
        Ok(o) => o,
        Err(e @ Error::Leadership(_)) => return Err(e),
        Err(e) => Outcome {
            ready: false,
            reason: user_reasons::RECONCILE_FAILED,
            message: e.to_string(),
            event: None,
            requeue: ERROR_REQUEUE,
        },
    };
    let previous = previous_reason(&user).map(|(r, m)| (r.to_string(), m.to_string()));
    let status = status_of(&user, o.ready, o.reason, &o.message, Time(Timestamp::now()));
    if user.status.as_ref() != Some(&status) {
        write_status(&ctx, &user, &status).await?;
    }
    let repeated = previous
        .as_ref()
        .is_some_and(|(r, m)| r == o.reason && *m == o.message);
    if let Some(event) = &o.event
        && !(event.warning && repeated)
    {
        publish(&ctx, &user, event).await;
    }
    Ok(Action::requeue(o.requeue))
}

/// Retries a failed reconcile.
pub fn error_policy(_user: Arc<BrokerUser>, _err: &Error, _ctx: Arc<Context>) -> Action {
    Action::requeue(ERROR_REQUEUE)
}

/// Runs the BrokerUser controller for one watch scope until `shutdown` turns true or
/// leadership is lost.
pub async fn run(ctx: Arc<Context>, ns: Option<String>, shutdown: watch::Receiver<bool>) {
    let client: Client = ctx.client.clone();
    let api: Api<BrokerUser> = match ns.as_deref() {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    };
    Controller::new(api, watcher::Config::default())
        .graceful_shutdown_on(ctx.fence.clone().or_shutdown(shutdown))
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            match res {
                Ok((obj, _)) => tracing::debug!(user = %obj.name, "reconciled"),
                Err(e) => tracing::debug!(error = %e, "user reconcile stream error"),
            }
        })
        .await;
}

// Tested with the cluster reconcile in `controller/user_tests.rs`.
