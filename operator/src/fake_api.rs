//! A small in-process fake of the Kubernetes API for tests: it records every request, stores
//! applied and created objects, and answers the calls the operator makes (GET, server-side apply
//! PATCH, status PATCH, POST, PUT, DELETE) the way the API server would. Only compiled for tests.
//!
//! Status writes model field ownership at the level of the status's top-level fields: a
//! server-side apply (a request with `fieldManager`) sets the fields it sends, takes over those
//! whose value it changes, and removes the fields its manager sent last time but no longer
//! does, unless another manager owns them too; fields nobody applied (written by a test, or by
//! a merge patch) are never removed by an apply. A request without `fieldManager` is a JSON
//! merge patch (null removes).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use kube::Client;
use kube::client::Body;
use serde_json::{Value, json};

/// The namespace part of every path in the tests.
pub const NS: &str = "/namespaces/messaging/";

/// One recorded request.
#[derive(Debug, Clone)]
pub struct Call {
    /// HTTP method.
    pub method: String,
    /// URL path.
    pub path: String,
    /// URL query.
    pub query: String,
    /// JSON body (null when none).
    pub body: Value,
}

/// The fake's state.
#[derive(Default)]
pub struct Fake {
    /// Every request, in order.
    pub calls: Vec<Call>,
    /// Stored objects by path.
    pub objects: HashMap<String, Value>,
    /// (method, path suffix, HTTP code) to fail with.
    pub fail: Option<(&'static str, &'static str, u16)>,
    /// When true every request is recorded and then never answered (a hung API server).
    pub hang: bool,
    /// Status field owners by object path: field manager → top-level status fields.
    pub status_owners: HashMap<String, HashMap<String, BTreeSet<String>>>,
}

/// The `fieldManager` query parameter, if any.
fn field_manager(query: &str) -> Option<String> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("fieldManager="))
        .map(str::to_string)
}

/// A `Status` error body.
pub fn status_body(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason,
           "reason": reason, "code": code})
}

impl Fake {
    /// Records a request and answers it.
    pub fn respond(&mut self, method: &str, path: &str, query: &str, body: Value) -> (u16, Value) {
        self.calls.push(Call {
            method: method.into(),
            path: path.into(),
            query: query.into(),
            body: body.clone(),
        });
        if let Some((m, suffix, code)) = self.fail
            && m == method
            && path.ends_with(suffix)
        {
            return (code, status_body(code, "Forbidden"));
        }
        match method {
            "GET" => match self.objects.get(path) {
                Some(obj) => (200, obj.clone()),
                // A collection: every stored object right below it.
                None if path.ends_with("/brokerusers")
                    || path.ends_with("/brokertopics")
                    || path.ends_with("/pods") =>
                {
                    let prefix = format!("{path}/");
                    let mut items: Vec<(&String, &Value)> = self
                        .objects
                        .iter()
                        .filter(|(k, _)| k.strip_prefix(&prefix).is_some_and(|n| !n.contains('/')))
                        .collect();
                    items.sort_by_key(|(k, _)| *k);
                    let items: Vec<Value> = items.into_iter().map(|(_, v)| v.clone()).collect();
                    (
                        200,
                        json!({"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}),
                    )
                }
                None => (404, status_body(404, "NotFound")),
            },
            "PATCH" if path.ends_with("/status") => {
                let owner = path.trim_end_matches("/status").to_string();
                let mut obj = self.objects.get(&owner).cloned().unwrap_or_default();
                let mut status = obj
                    .get("status")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                let sent = body["status"].as_object().cloned().unwrap_or_default();
                match field_manager(query) {
                    Some(manager) => {
                        let owners = self.status_owners.entry(owner.clone()).or_default();
                        let before = owners.remove(&manager).unwrap_or_default();
                        for k in before {
                            if !sent.contains_key(&k) && !owners.values().any(|o| o.contains(&k)) {
                                status.remove(&k);
                            }
                        }
                        for (k, v) in &sent {
                            if status.get(k) != Some(v) {
                                for o in owners.values_mut() {
                                    o.remove(k);
                                }
                            }
                            status.insert(k.clone(), v.clone());
                        }
                        owners.insert(manager, sent.keys().cloned().collect());
                    }
                    None => {
                        for (k, v) in sent {
                            if v.is_null() {
                                status.remove(&k);
                            } else {
                                status.insert(k, v);
                            }
                        }
                    }
                }
                obj["status"] = Value::Object(status);
                self.objects.insert(owner, obj.clone());
                (200, obj)
            }
            "PATCH" => {
                // The API server keeps an object's UID across applies.
                let mut body = body;
                let uid = self
                    .objects
                    .get(path)
                    .and_then(|o| o.pointer("/metadata/uid"))
                    .cloned();
                if let (Some(uid), Some(meta)) = (uid, body.get_mut("metadata")) {
                    meta["uid"] = uid;
                }
                self.objects.insert(path.to_string(), body.clone());
                (200, body)
            }
            "PUT" => {
                self.objects.insert(path.to_string(), body.clone());
                (200, body)
            }
            "POST" if !path.ends_with("/events") => {
                let name = body["metadata"]["name"].as_str().unwrap_or("").to_string();
                self.objects.insert(format!("{path}/{name}"), body.clone());
                (201, body)
            }
            "DELETE" => {
                self.objects.remove(path);
                (200, status_body(200, "Success"))
            }
            _ => (201, body),
        }
    }

    /// Paths (below the namespace) of the requests with `method`.
    pub fn paths(&self, method: &str) -> Vec<String> {
        self.calls
            .iter()
            .filter(|c| c.method == method)
            .map(|c| c.path.rsplit(NS).next().unwrap_or("").to_string())
            .collect()
    }

    /// Reasons of the Events created.
    pub fn event_reasons(&self) -> Vec<String> {
        self.calls
            .iter()
            .filter(|c| c.method == "POST" && c.path.ends_with("/events"))
            .map(|c| c.body["reason"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// The stored status of the BrokerCluster at `path`.
    pub fn stored_status(&self, path: &str) -> Value {
        self.objects
            .get(path)
            .map(|o| o["status"].clone())
            .unwrap_or_default()
    }

    /// Bodies of the status patches.
    pub fn status_writes(&self) -> Vec<Value> {
        self.calls
            .iter()
            .filter(|c| c.method == "PATCH" && c.path.ends_with("/status"))
            .map(|c| c.body["status"].clone())
            .collect()
    }
}

/// A kube client whose every request goes to `fake`.
pub fn fake_client(fake: Arc<Mutex<Fake>>) -> Client {
    let service = tower::service_fn(move |req: Request<Body>| {
        let fake = fake.clone();
        async move {
            let (parts, body) = req.into_parts();
            let bytes = body
                .collect()
                .await
                .ok()
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let hang = fake.lock().unwrap_or_else(|p| p.into_inner()).hang;
            if hang {
                if let Ok(mut f) = fake.lock() {
                    f.calls.push(Call {
                        method: parts.method.to_string(),
                        path: parts.uri.path().into(),
                        query: parts.uri.query().unwrap_or("").into(),
                        body: json.clone(),
                    });
                }
                std::future::pending::<()>().await;
            }
            let (code, out) = fake.lock().unwrap_or_else(|p| p.into_inner()).respond(
                parts.method.as_str(),
                parts.uri.path(),
                parts.uri.query().unwrap_or(""),
                json,
            );
            let mut resp = Response::new(Full::new(Bytes::from(out.to_string())));
            *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::OK);
            Ok::<_, std::convert::Infallible>(resp)
        }
    });
    Client::new(service, "messaging")
}

/// A fake API server holding `bc` as the `events` BrokerCluster of namespace `messaging`, and
/// an operator context (client, event recorder, metrics, default settings) talking to it: the
/// setup every controller test starts from.
pub fn fake_context(
    bc: &crate::crd::BrokerCluster,
) -> (Arc<Mutex<Fake>>, Arc<crate::context::Context>) {
    use kube::runtime::events::{Recorder, Reporter};
    let mut fake = Fake::default();
    fake.objects.insert(
        format!("/apis/starling.dev/v1alpha1{NS}brokerclusters/events"),
        serde_json::to_value(bc).unwrap_or_default(),
    );
    let fake = Arc::new(Mutex::new(fake));
    let client = fake_client(fake.clone());
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "starling-operator".into(),
            instance: Some("test".into()),
        },
    );
    let metrics = crate::metrics::Metrics::new().unwrap_or_else(|e| panic!("{e}"));
    let ctx = crate::context::Context::new(
        client,
        recorder,
        metrics,
        crate::validate::fixtures::defaults(),
    );
    (fake, Arc::new(ctx))
}
