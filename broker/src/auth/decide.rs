//! Who a connection is: its verified client certificate's common name, its `Hello` token and
//! the feature bits it asked for, mapped to a [`Principal`], or the typed reason it is refused.
//! No I/O: the handshake hands the facts in and writes the answer.
//!
//! - A certificate whose common name is [`PEER_IDENTITY`] is a peer (it was verified against
//!   the client CA during the TLS handshake, or the handshake would have failed), provided it
//!   carries the URI SAN `cluster_peer_uri` when that is set: a peer certificate of the same CA
//!   naming another cluster is refused ([`Unauthorized::ForeignPeer`]), and is no user either.
//! - A certificate whose common name names a `tls` user is that user.
//! - Otherwise, with `AUTH_TOKEN` asked for, the token's user ([`Users::by_token`]).
//! - `PEER` asked for by anything but the peer certificate is refused, except under
//!   `auth_mode: none` with no client CA, where anyone may be a peer (development).
//! - Under `auth_mode: none` everyone else is [`Principal::Anonymous`]; under `required`,
//!   no identity is refused.

use starling_access::{PEER_IDENTITY, Users};
use starling_config::AuthMode;
use starling_proto::features;

use super::{Credential, Principal};
use crate::metrics::auth_failure;

/// What the handshake knows of a connection.
pub struct Presented<'a> {
    /// The verified client certificate's subject common name, if a certificate was presented.
    pub common_name: Option<&'a str>,
    /// The verified client certificate's URI subject alternative names.
    pub uris: &'a [String],
    /// The feature bits asked for in `Hello`.
    pub requested: u64,
    /// `Hello.auth_token`.
    pub token: Option<&'a [u8]>,
}

/// Why a connection has no identity. The message never contains the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unauthorized {
    /// Nothing that names a user.
    #[error(
        "no credentials: present a client certificate signed by the broker's client CA or a token (feature AUTH_TOKEN)"
    )]
    NoCredentials,
    /// A token no user has.
    #[error("the token matches no user")]
    UnknownToken,
    /// A verified certificate whose common name is no `tls` user.
    #[error("the client certificate's common name {0:?} names no tls user")]
    UnknownCertificate(String),
    /// `PEER` without the peer certificate.
    #[error(
        "the PEER feature needs a client certificate with common name {PEER_IDENTITY:?} signed by the cluster CA"
    )]
    NotAPeer,
    /// A peer certificate without the URI this cluster's peers carry (`cluster_peer_uri`).
    #[error(
        "the peer certificate does not carry this cluster's URI {0:?}: it was issued for another cluster"
    )]
    ForeignPeer(String),
}

impl Unauthorized {
    /// The `reason` label of `starling_auth_failures_total`.
    pub fn label(&self) -> &'static str {
        match self {
            Unauthorized::NoCredentials => auth_failure::NO_CREDENTIALS,
            Unauthorized::UnknownToken => auth_failure::UNKNOWN_TOKEN,
            Unauthorized::UnknownCertificate(_) => auth_failure::UNKNOWN_CERTIFICATE,
            Unauthorized::ForeignPeer(_) => auth_failure::FOREIGN_PEER,
            Unauthorized::NotAPeer => auth_failure::NOT_A_PEER,
        }
    }
}

/// A connection's principal and the feature bits its identity allows (`PEER` only for a peer,
/// `AUTH_TOKEN` only for a token user). `peer_uri`: the URI a peer certificate must carry
/// (`cluster_peer_uri`), or `None` for the common name alone.
pub fn decide(
    mode: AuthMode,
    client_ca: bool,
    peer_uri: Option<&str>,
    users: &Users,
    presented: &Presented<'_>,
) -> Result<(Principal, u64), Unauthorized> {
    let wants_peer = presented.requested & features::PEER != 0;
    let is_peer_cert = presented.common_name == Some(PEER_IDENTITY);
    if let Some(uri) = peer_uri
        && is_peer_cert
        && !presented.uris.iter().any(|u| u == uri)
    {
        return Err(Unauthorized::ForeignPeer(uri.to_string()));
    }
    if is_peer_cert || (wants_peer && mode == AuthMode::None && !client_ca) {
        return Ok((Principal::Peer, features::PEER));
    }
    if wants_peer {
        return Err(Unauthorized::NotAPeer);
    }
    if mode == AuthMode::None {
        return Ok((Principal::Anonymous, 0));
    }
    if let Some(cn) = presented.common_name {
        return match users.by_certificate(cn) {
            Some(user) => Ok((Principal::User(user, Credential::Certificate), 0)),
            None => Err(Unauthorized::UnknownCertificate(cn.to_string())),
        };
    }
    if presented.requested & features::AUTH_TOKEN != 0
        && let Some(token) = presented.token
    {
        let hash = starling_access::hash_token(token);
        return match users.by_token_hash(&hash) {
            Some(user) => Ok((
                Principal::User(user, Credential::Token(hash)),
                features::AUTH_TOKEN,
            )),
            None => Err(Unauthorized::UnknownToken),
        };
    }
    Err(Unauthorized::NoCredentials)
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_access::token_hash_hex;

    fn users() -> Users {
        Users::parse(&format!(
            "version: 1\nusers:\n  - {{name: app, authentication: {{type: token, sha256: \"{}\"}}}}\n  - {{name: billing, authentication: {{type: tls}}}}\n",
            token_hash_hex(b"s3cret")
        ))
        .unwrap()
    }

    fn p<'a>(cn: Option<&'a str>, requested: u64, token: Option<&'a [u8]>) -> Presented<'a> {
        Presented {
            common_name: cn,
            uris: &[],
            requested,
            token,
        }
    }

    fn name(r: Result<(Principal, u64), Unauthorized>) -> Result<String, Unauthorized> {
        r.map(|(p, _)| match p {
            Principal::User(u, _) => u.name().to_string(),
            Principal::Peer => "<peer>".into(),
            Principal::Anonymous => "<anonymous>".into(),
        })
    }

    #[test]
    fn required_maps_certificates_and_tokens_to_users_and_refuses_the_rest() {
        let u = users();
        let req = |pr| name(decide(AuthMode::Required, true, None, &u, &pr));
        let tok = features::BASE | features::AUTH_TOKEN;
        assert_eq!(
            req(p(Some("billing"), features::BASE, None)).unwrap(),
            "billing"
        );
        assert_eq!(req(p(None, tok, Some(b"s3cret"))).unwrap(), "app");
        assert_eq!(
            req(p(None, tok, Some(b"nope"))),
            Err(Unauthorized::UnknownToken)
        );
        assert_eq!(
            req(p(None, features::BASE, Some(b"s3cret"))),
            Err(Unauthorized::NoCredentials),
            "a token counts only with AUTH_TOKEN"
        );
        assert_eq!(
            req(p(Some("app"), features::BASE, None)),
            Err(Unauthorized::UnknownCertificate("app".into())),
            "a token user has no certificate"
        );
        assert_eq!(
            req(p(None, features::BASE, None)),
            Err(Unauthorized::NoCredentials)
        );
        assert_eq!(
            req(p(Some(PEER_IDENTITY), peer_bits(), None)).unwrap(),
            "<peer>"
        );
        assert_eq!(
            req(p(None, peer_bits() | features::AUTH_TOKEN, Some(b"s3cret"))),
            Err(Unauthorized::NotAPeer)
        );
        assert!(!Unauthorized::UnknownToken.to_string().contains("s3cret"));
    }

    fn peer_bits() -> u64 {
        starling_proto::Role::Peer.requested()
    }

    #[test]
    fn none_admits_everyone_and_peers_only_by_certificate_once_a_ca_is_set() {
        let u = users();
        let none = |ca, pr| name(decide(AuthMode::None, ca, None, &u, &pr));
        assert_eq!(
            none(false, p(None, features::BASE, None)).unwrap(),
            "<anonymous>"
        );
        assert_eq!(none(false, p(None, peer_bits(), None)).unwrap(), "<peer>");
        assert_eq!(
            none(true, p(None, peer_bits(), None)),
            Err(Unauthorized::NotAPeer)
        );
        assert_eq!(
            none(true, p(Some(PEER_IDENTITY), peer_bits(), None)).unwrap(),
            "<peer>"
        );
        assert_eq!(
            none(true, p(Some("billing"), features::BASE, None)).unwrap(),
            "<anonymous>"
        );
    }

    #[test]
    fn with_a_peer_uri_the_peer_certificate_must_carry_it() {
        let u = users();
        const URI: &str = "urn:starling:peer:messaging/events";
        let ours = [URI.to_string()];
        let theirs = ["urn:starling:peer:messaging/billing".to_string()];
        let peer = |mode, uris: &[String], bits| {
            let pr = Presented {
                common_name: Some(PEER_IDENTITY),
                uris,
                requested: bits,
                token: None,
            };
            name(decide(mode, true, Some(URI), &u, &pr))
        };
        assert_eq!(
            peer(AuthMode::Required, &ours, peer_bits()).unwrap(),
            "<peer>"
        );
        let foreign = Err(Unauthorized::ForeignPeer(URI.into()));
        assert_eq!(peer(AuthMode::Required, &theirs, peer_bits()), foreign);
        assert_eq!(peer(AuthMode::Required, &[], peer_bits()), foreign);
        assert_eq!(
            peer(AuthMode::Required, &theirs, features::BASE),
            foreign,
            "nor a user, nor anonymous"
        );
        assert_eq!(peer(AuthMode::None, &theirs, peer_bits()), foreign);
        assert_eq!(
            Unauthorized::ForeignPeer(URI.into()).label(),
            "foreign_peer"
        );
        // Users' certificates are not asked for a URI.
        let pr = p(Some("billing"), features::BASE, None);
        assert_eq!(
            name(decide(AuthMode::Required, true, Some(URI), &u, &pr)).unwrap(),
            "billing"
        );
    }
}
