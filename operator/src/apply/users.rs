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
use crate::access::{UserRecord, document_yaml, users_document};
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

/// Applies the users Secret of `v`; returns how many users it holds.
pub async fn apply_users(client: &Client, v: &ValidatedCluster) -> Result<usize> {
    let ns = &v.id.namespace;
    let users: Api<BrokerUser> = Api::namespaced(client.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), ns);
    let list = users
        .list(&ListParams::default())
        .await
        .map_err(|e| Error::kube("list", "BrokerUser", ns, e))?;
    let mut records = Vec::new();
    for user in list.items.iter().filter(|u| u.spec.cluster == v.id.name) {
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
    let doc = users_document(&records);
    let text = document_yaml(&doc).map_err(Error::UsersDocument)?;
    apply(client, &users_secret::build(v, &text)).await?;
    Ok(doc.users.len())
}
