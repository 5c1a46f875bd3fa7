//! Keeps the cluster's CA and peer certificate Secrets (`<cluster>-ca`, `<cluster>-peer`).
//!
//! - The CA Secret is created when absent. An existing one whose CA is usable
//!   ([`pki::ca_is_usable`]) is kept as it is, whoever created it (so an admin may supply the
//!   cluster CA). One that is not usable is replaced only when this cluster owns it; otherwise
//!   the reconcile fails, naming the Secret.
//! - The peer Secret is (re)written, by server-side apply, only when its certificate must be
//!   renewed ([`pki::leaf_needs_renewal`]) or its `ca.crt` is not the current CA. The brokers
//!   re-read the mounted files, so a renewal restarts nothing.

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};

use super::{apply, is_controlled_by};
use crate::build::pki_secrets::{self, CA_CERT, TLS_CERT, key_text, read_ca};
use crate::error::{Error, Result};
use crate::pki::{self, Renewal};
use crate::tls::CertificatePem;
use crate::validate::ValidatedCluster;

/// What [`ensure_pki`] did.
#[derive(Debug)]
pub struct PkiOutcome {
    /// The cluster CA now in force.
    pub ca: CertificatePem,
    /// Whether a CA was created (or an unusable one of the cluster's replaced).
    pub ca_created: bool,
    /// Why the peer certificate was (re)issued, if it was.
    pub peer_issued: Option<Renewal>,
}

async fn get(api: &Api<Secret>, name: &str) -> Result<Option<Secret>> {
    api.get_opt(name)
        .await
        .map_err(|e| Error::kube("get", "Secret", name, e))
}

/// The cluster CA: the stored one when usable, else a new one written to `<cluster>-ca`.
async fn ensure_ca(
    client: &Client,
    v: &ValidatedCluster,
    now: i64,
) -> Result<(CertificatePem, bool)> {
    let name = &v.names.ca_secret;
    let api: Api<Secret> = Api::namespaced(client.clone(), &v.id.namespace);
    let existing = get(&api, name).await?;
    if let Some(secret) = &existing {
        if let Some(ca) = read_ca(secret).filter(|ca| pki::ca_is_usable(ca, now)) {
            return Ok((ca, false));
        }
        if !is_controlled_by(secret, &v.id.owner.uid) {
            return Err(Error::ForeignSecret {
                name: name.clone(),
                problem: "exists, is not owned by the BrokerCluster, and does not hold a usable CA (ca.crt and ca.key)".to_string(),
            });
        }
    }
    let ca = pki::generate_ca(&v.id.name, &v.id.namespace, now)?;
    let secret = pki_secrets::ca_secret(v, &ca);
    if existing.is_some() {
        apply(client, &secret).await?;
        return Ok((ca, true));
    }
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok((ca, true)),
        // Created in between (another reconcile or replica): use that one.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let stored = get(&api, name).await?;
            stored
                .as_ref()
                .and_then(read_ca)
                .map(|ca| (ca, false))
                .ok_or_else(|| Error::ForeignSecret {
                    name: name.clone(),
                    problem: "was created concurrently without a CA".to_string(),
                })
        }
        Err(e) => Err(Error::kube("create", "Secret", name, e)),
    }
}

/// Ensures the CA and the peer certificate at the Unix time `now`.
pub async fn ensure_pki(client: &Client, v: &ValidatedCluster, now: i64) -> Result<PkiOutcome> {
    let (ca, ca_created) = ensure_ca(client, v, now).await?;
    let api: Api<Secret> = Api::namespaced(client.clone(), &v.id.namespace);
    let peer = get(&api, &v.names.peer_secret).await?;
    let renewal = match &peer {
        Some(s) if key_text(s, CA_CERT) != Some(ca.cert.as_str()) => pki::leaf_needs_renewal(
            key_text(s, TLS_CERT),
            &ca.cert,
            starling_access::PEER_IDENTITY,
            now,
        )
        .or(Some(Renewal::OtherIssuer)),
        Some(s) => pki::leaf_needs_renewal(
            key_text(s, TLS_CERT),
            &ca.cert,
            starling_access::PEER_IDENTITY,
            now,
        ),
        None => Some(Renewal::Missing),
    };
    if renewal.is_some() {
        let leaf = pki::issue_peer(&ca, now)?;
        apply(client, &pki_secrets::peer_secret(v, &leaf, &ca.cert)).await?;
    }
    Ok(PkiOutcome {
        ca,
        ca_created,
        peer_issued: renewal,
    })
}
