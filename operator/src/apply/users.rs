//! The cluster's users Secret (`<cluster>-users`): lists the namespace's BrokerUsers of the
//! cluster, reads each token user's hash from its own credentials Secret (only a Secret that
//! user controls counts), and applies the document ([`crate::access::users_document`]).
//!
//! Run on every reconcile of the cluster; the controller maps every BrokerUser change and
//! deletion to its cluster's reconcile, so a deleted user leaves the document at once and the
//! brokers drop it at their next read.

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};

use super::{apply, is_controlled_by};
use crate::access::{MAX_DOCUMENT_BYTES, UserRecord, document_yaml, users_document_within};
use crate::build::credentials::TOKEN_KEY;
use crate::build::pki_secrets::key_text;
use crate::build::users_secret;
use crate::crd::user::{BrokerUser, UserAuthType};
use crate::error::{Error, Result};
use crate::validate::ValidatedCluster;

/// The hash of a token user's token, from its credentials Secret.
async fn token_hash(secrets: &Api<Secret>, user: &BrokerUser) -> Result<Option<String>> {
    let name = user.secret_name();
    let Some(secret) = secrets
        .get_opt(&name)
        .await
        .map_err(|e| Error::kube("get", "Secret", &name, e))?
    else {
        return Ok(None);
    };
    let uid = user.metadata.uid.as_deref().unwrap_or_default();
    if !is_controlled_by(&secret, uid) {
        return Ok(None);
    }
    Ok(key_text(&secret, TOKEN_KEY)
        .filter(|t| !t.is_empty())
        .map(|t| starling_access::token_hash_hex(t.as_bytes())))
}

/// What [`apply_users`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsersOutcome {
    /// How many users the document holds.
    pub users: usize,
    /// Valid users left out because the document would pass its budget (newest first out).
    pub left_out: Vec<String>,
}

/// Applies the users Secret of `v`: the valid users, oldest first, within
/// [`crate::access::MAX_DOCUMENT_BYTES`], so the Secret is always writable and a deleted user
/// always leaves it.
pub async fn apply_users(client: &Client, v: &ValidatedCluster) -> Result<UsersOutcome> {
    let ns = &v.id.namespace;
    let users: Api<BrokerUser> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let list = users
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube("list", "BrokerUser", ns, e))?;
    let mut mine: Vec<&BrokerUser> = list
        .items
        .iter()
        .filter(|u| u.spec.cluster == v.id.name)
        .collect();
    // Oldest first: a new user never pushes an admitted one out of a full document.
    mine.sort_by(|a, b| {
        let at = |u: &BrokerUser| u.metadata.creation_timestamp.as_ref().map(|t| t.0);
        at(a)
            .cmp(&at(b))
            .then_with(|| a.name_any().cmp(&b.name_any()))
    });
    let mut records = Vec::new();
    for user in mine {
        if user.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let token_sha256 = match user.spec.authentication.type_ {
            UserAuthType::Token => token_hash(&secrets, user).await?,
            UserAuthType::Tls => None,
        };
        records.push(UserRecord {
            name: user.name_any(),
            spec: user.spec.clone(),
            token_sha256,
        });
    }
    let (doc, left_out) = users_document_within(&records, MAX_DOCUMENT_BYTES);
    let text = document_yaml(&doc).map_err(Error::UsersDocument)?;
    apply(client, &users_secret::build(v, &text)).await?;
    Ok(UsersOutcome {
        users: doc.users.len(),
        left_out,
    })
}
