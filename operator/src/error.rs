//! The operator's error type. Every variant maps to a short metric label
//! (`starling_operator_reconcile_errors_total{reason}`).
//!
//! A refused spec is not an error: it becomes the `Degraded` condition (see
//! [`crate::validate::SpecError`]). Errors here are failures to talk to the API server or
//! missing server-side metadata, and are retried with backoff.

/// An operator error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{verb} {kind} {name}: {source}")]
    Kube {
        /// What was attempted: `get`, `apply`, `delete`, `patch status`…
        verb: &'static str,
        /// Object kind.
        kind: String,
        /// Object name.
        name: String,
        /// The client error (boxed: it is large and errors travel by value).
        #[source]
        source: Box<kube::Error>,
    },
    /// The API server returned an object without a field it always sets.
    #[error("object is missing {0}")]
    MissingObjectField(&'static str),
    /// An object could not be turned into JSON.
    #[error("serialising {what}: {source}")]
    Serialize {
        /// What was serialised.
        what: &'static str,
        /// The serde error.
        #[source]
        source: serde_json::Error,
    },
    /// Leader election failed or leadership was lost.
    #[error("leader election: {0}")]
    Leadership(String),
    /// The generated TLS certificate could not be made.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// A CA or a certificate it signs could not be made.
    #[error(transparent)]
    Pki(#[from] crate::pki::PkiError),
    /// The users document could not be rendered as YAML.
    #[error("rendering the users document: {0}")]
    UsersDocument(String),
    /// A Secret the operator must write exists, is not the operator's, and does not hold what
    /// the operator needs.
    #[error("Secret {name}: {problem}")]
    ForeignSecret {
        /// Its name.
        name: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The cluster CA Secret was not created by the operator for this cluster and the spec does
    /// not name it (see [`crate::ca_trust`]): refused, never used.
    #[error("{0}")]
    UntrustedCa(String),
    /// The users document was written without some valid users, which would have passed its
    /// size budget: the message names them.
    #[error("{0}")]
    UsersDocumentFull(String),
}

impl Error {
    /// Builds a [`Error::Kube`].
    pub fn kube(verb: &'static str, kind: &str, name: &str, source: kube::Error) -> Self {
        Error::Kube {
            verb,
            kind: kind.to_string(),
            name: name.to_string(),
            source: Box::new(source),
        }
    }

    /// The metric label of this error.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::Kube { source, .. } => match source.as_ref() {
                kube::Error::Api(s) if s.code == 409 => "conflict",
                kube::Error::Api(s) if s.code == 403 => "forbidden",
                kube::Error::Api(s) if s.code == 404 => "not_found",
                kube::Error::Api(s) if s.code == 422 => "invalid_object",
                kube::Error::Api(_) => "api_error",
                _ => "transport",
            },
            Error::MissingObjectField(_) => "missing_field",
            Error::Serialize { .. } => "serialize",
            Error::Leadership(_) => "leadership",
            Error::Tls(_) | Error::Pki(_) => "certificate",
            Error::ForeignSecret { .. } => "foreign_secret",
            Error::UntrustedCa(_) => "untrusted_ca",
            Error::UsersDocumentFull(_) => "users_document_full",
            Error::UsersDocument(_) => "serialize",
        }
    }

    /// Every label [`Error::metric_label`] can return, for docs and tests.
    pub const METRIC_LABELS: &'static [&'static str] = &[
        "conflict",
        "forbidden",
        "not_found",
        "invalid_object",
        "api_error",
        "transport",
        "missing_field",
        "serialize",
        "leadership",
        "certificate",
        "foreign_secret",
        "untrusted_ca",
        "users_document_full",
    ];
}

/// Result alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_short_and_listed() {
        let missing = Error::MissingObjectField("metadata.uid");
        assert_eq!(missing.metric_label(), "missing_field");
        assert!(missing.to_string().contains("metadata.uid"));
        let leader = Error::Leadership("lost".into());
        assert!(Error::METRIC_LABELS.contains(&leader.metric_label()));
        let bad = serde_json::from_str::<i32>("x").err();
        if let Some(source) = bad {
            let e = Error::Serialize {
                what: "status",
                source,
            };
            assert!(Error::METRIC_LABELS.contains(&e.metric_label()));
        }
    }
}
