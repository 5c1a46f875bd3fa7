//! Keeps the cluster's CA and peer certificate Secrets (`<cluster>-ca`, `<cluster>-peer`).
//!
//! - The CA Secret named in `spec.ca.secretName` is used as it is and never written; missing or
//!   unusable, the reconcile fails naming it.
//! - Otherwise `<cluster>-ca` is created when absent. An existing one is used only when it is
//!   the operator's own ([`ca_trust::check`]: this cluster's controller owner reference and
//!   label): then it is kept while usable ([`pki::ca_is_usable`]) and replaced when not. Any
//!   other `<cluster>-ca` is refused ([`Error::UntrustedCa`]), never used nor overwritten.
//! - The peer Secret is (re)written, by server-side apply, only when its certificate must be
//!   renewed ([`pki::leaf_needs_renewal`]) or its `ca.crt` is not the current CA. The brokers
//!   re-read the mounted files, so a renewal restarts nothing.

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, PostParams};

use super::apply;
use crate::build::pki_secrets::{self, CA_CERT, TLS_CERT, key_text, read_ca};
use crate::ca_trust;
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

/// The CA in a Secret the operator found, if [`ca_trust::check`] lets it use it and it is
/// usable; `Err` when it is refused.
fn trusted_ca(v: &ValidatedCluster, secret: &Secret, now: i64) -> Result<Option<CertificatePem>> {
    ca_trust::check(&secret.metadata, &v.id.name, &v.id.owner.uid, v.ca_explicit)
        .map_err(|why| Error::UntrustedCa(why.message(&v.ca_secret, &v.id.name)))?;
    Ok(read_ca(secret).filter(|ca| pki::ca_is_usable(ca, now)))
}

/// The cluster CA: the named one (`spec.ca`), else the operator's own when usable, else a new
/// one written to `<cluster>-ca`. A `<cluster>-ca` the operator did not create is refused
/// ([`Error::UntrustedCa`]) and left alone.
async fn ensure_ca(
    client: &Client,
    v: &ValidatedCluster,
    now: i64,
) -> Result<(CertificatePem, bool)> {
    let name = &v.ca_secret;
    let api: Api<Secret> = Api::namespaced(client.clone(), &v.id.namespace);
    let existing = get(&api, name).await?;
    if v.ca_explicit {
        // An admin's CA: used as it is, never written.
        return match &existing {
            Some(secret) => trusted_ca(v, secret, now)?.map(|ca| (ca, false)).ok_or_else(|| {
                Error::ForeignSecret {
                    name: name.clone(),
                    problem: "is named in spec.ca.secretName but does not hold a usable CA (ca.crt and ca.key, valid now)".to_string(),
                }
            }),
            None => Err(Error::ForeignSecret {
                name: name.clone(),
                problem: "is named in spec.ca.secretName but does not exist".to_string(),
            }),
        };
    }
    if let Some(secret) = &existing
        && let Some(ca) = trusted_ca(v, secret, now)?
    {
        return Ok((ca, false));
    }
    // Absent, or the operator's own but no longer usable: a new CA.
    let ca = pki::generate_ca(&v.id.name, &v.id.namespace, now)?;
    let secret = pki_secrets::ca_secret(v, &ca);
    if existing.is_some() {
        apply(client, &secret).await?;
        return Ok((ca, true));
    }
    match api.create(&PostParams::default(), &secret).await {
        Ok(_) => Ok((ca, true)),
        // Created in between (another reconcile or replica, or a stranger): used only if it
        // passes the same check.
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let stored = get(&api, name).await?;
            let ca = match &stored {
                Some(secret) => trusted_ca(v, secret, now)?,
                None => None,
            };
            ca.map(|ca| (ca, false))
                .ok_or_else(|| Error::ForeignSecret {
                    name: name.clone(),
                    problem: "was created concurrently without a usable CA".to_string(),
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
    let uri = pki::peer_uri(&v.id.namespace, &v.id.name);
    let renewal = match &peer {
        Some(s) if key_text(s, CA_CERT) != Some(ca.cert.as_str()) => {
            pki::peer_needs_renewal(key_text(s, TLS_CERT), &ca.cert, &uri, now)
                .or(Some(Renewal::OtherIssuer))
        }
        Some(s) => pki::peer_needs_renewal(key_text(s, TLS_CERT), &ca.cert, &uri, now),
        None => Some(Renewal::Missing),
    };
    if renewal.is_some() {
        let leaf = pki::issue_peer(&ca, &uri, now)?;
        apply(client, &pki_secrets::peer_secret(v, &leaf, &ca.cert)).await?;
    }
    Ok(PkiOutcome {
        ca,
        ca_created,
        peer_issued: renewal,
    })
}
