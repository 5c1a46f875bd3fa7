//! The operator's Kubernetes API client, with every request it sends counted by verb in
//! `starling_operator_api_requests_total{verb}`.
//!
//! The count is how an operator's cost to the API server is seen (`bench/operator-scale`
//! holds it at rest: no status writes, only the leader lease's renewals): the API server's own
//! `apiserver_request_total` cannot tell one client from another. [`verb`] is the pure part;
//! [`client`] wraps kube's default client stack with a `tower` map layer that calls it, so
//! nothing of the request path is hand-written.

use http::{Method, Request};
use kube::client::{Body, ClientBuilder};
use kube::{Client, Config};
use prometheus::IntCounterVec;
use tower::util::MapRequestLayer;

/// Every `verb` label value ([`crate::metrics::Metrics`] creates each, so the counter shows
/// zeros before the first request).
pub const VERBS: &[&str] = &[
    "get",
    "watch",
    "create",
    "patch",
    "update",
    "delete",
    "status_write",
    "other",
];

/// The verb label of one request: `watch` for a GET with `watch=true` (or `1`), `get` for any
/// other GET (a get or a list), `status_write` for a PATCH or PUT of a `/status` subresource,
/// else the method's Kubernetes verb.
pub fn verb(method: &Method, path: &str, query: Option<&str>) -> &'static str {
    let watching =
        query.is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"));
    match *method {
        Method::GET if watching => "watch",
        Method::GET => "get",
        Method::POST => "create",
        Method::PATCH | Method::PUT if path.ends_with("/status") => "status_write",
        Method::PATCH => "patch",
        Method::PUT => "update",
        Method::DELETE => "delete",
        _ => "other",
    }
}

/// A client for `config` whose requests are counted in `counter` (label `verb`).
pub fn client(config: Config, counter: IntCounterVec) -> Result<Client, kube::Error> {
    let count = MapRequestLayer::new(move |req: Request<Body>| {
        let uri = req.uri();
        counter
            .with_label_values(&[verb(req.method(), uri.path(), uri.query())])
            .inc();
        req
    });
    Ok(ClientBuilder::try_from(config)?.with_layer(&count).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_labelled_by_verb() {
        let sts = "/apis/apps/v1/namespaces/ns/statefulsets/a";
        let bc = "/apis/starling.io/v1alpha1/namespaces/ns/brokerclusters/a";
        assert_eq!(verb(&Method::GET, sts, None), "get");
        assert_eq!(verb(&Method::GET, sts, Some("labelSelector=x")), "get");
        assert_eq!(
            verb(&Method::GET, sts, Some("resourceVersion=1&watch=true")),
            "watch"
        );
        assert_eq!(verb(&Method::GET, sts, Some("watch=1")), "watch");
        assert_eq!(verb(&Method::GET, sts, Some("nowatch=true")), "get");
        assert_eq!(verb(&Method::POST, sts, None), "create");
        assert_eq!(verb(&Method::PATCH, sts, Some("fieldManager=x")), "patch");
        assert_eq!(verb(&Method::PUT, sts, None), "update");
        assert_eq!(verb(&Method::DELETE, sts, None), "delete");
        let status = format!("{bc}/status");
        assert_eq!(verb(&Method::PATCH, &status, None), "status_write");
        assert_eq!(verb(&Method::PUT, &status, None), "status_write");
        assert_eq!(verb(&Method::GET, &status, None), "get");
        assert_eq!(verb(&Method::OPTIONS, bc, None), "other");
        for v in [
            verb(&Method::GET, sts, None),
            verb(&Method::HEAD, sts, None),
            verb(&Method::PUT, &status, None),
        ] {
            assert!(VERBS.contains(&v), "{v} is not in VERBS");
        }
    }
}
