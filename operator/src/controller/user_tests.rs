//! BrokerUser reconcile tests ([`crate::users`]) against the in-process fake API server,
//! together with the cluster reconcile that renders the users document.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;

use crate::build::pki_secrets::key_text;
use crate::context::Context;
use crate::crd::user::{BrokerUser, UserAuthType};
use crate::crd::user::{BrokerUserSpec, PatternRules, UserAuthentication, UserPermissions};
use crate::crd::{BrokerCluster, BrokerClusterSpec};
use crate::fake_api::{Fake, NS, fake_context};
use crate::pki;
use crate::users::reconcile;
use crate::validate::fixtures::broker_cluster;

const USERS: &str = "/apis/starling.dev/v1alpha1/namespaces/messaging/brokerusers";

struct Harness {
    fake: Arc<Mutex<Fake>>,
    ctx: Arc<Context>,
    bc: BrokerCluster,
}

impl Harness {
    fn new() -> Self {
        let bc = broker_cluster(BrokerClusterSpec::default());
        let (fake, ctx) = fake_context(&bc);
        Harness { fake, ctx, bc }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Fake) -> R) -> R {
        f(&mut self.fake.lock().unwrap_or_else(|p| p.into_inner()))
    }

    async fn reconcile_cluster(&self) {
        let r = super::reconcile(Arc::new(self.bc.clone()), self.ctx.clone()).await;
        assert!(r.is_ok(), "{r:?}");
    }

    fn add_user(&self, name: &str, auth: UserAuthType, publish: &[&str]) -> BrokerUser {
        let mut u = BrokerUser::new(
            name,
            BrokerUserSpec {
                cluster: "events".into(),
                authentication: UserAuthentication { type_: auth },
                permissions: UserPermissions {
                    publish: Some(PatternRules {
                        allow: publish.iter().map(|s| s.to_string()).collect(),
                        deny: Vec::new(),
                    }),
                    ..UserPermissions::default()
                },
                secret_name: None,
            },
        );
        u.metadata.namespace = Some("messaging".into());
        u.metadata.uid = Some(format!("uid-{name}"));
        u.metadata.generation = Some(1);
        self.with(|f| {
            f.objects.insert(
                format!("{USERS}/{name}"),
                serde_json::to_value(&u).unwrap_or_default(),
            )
        });
        u
    }

    /// The user as stored now (with its status).
    fn stored(&self, name: &str) -> BrokerUser {
        self.with(|f| {
            serde_json::from_value(
                f.objects
                    .get(&format!("{USERS}/{name}"))
                    .cloned()
                    .unwrap_or_default(),
            )
            .unwrap_or_else(|e| panic!("{e}"))
        })
    }

    async fn reconcile_user(&self, name: &str) -> BrokerUser {
        let r = reconcile(Arc::new(self.stored(name)), self.ctx.clone()).await;
        assert!(r.is_ok(), "{r:?}");
        self.stored(name)
    }

    fn secret(&self, name: &str) -> Option<Value> {
        self.with(|f| {
            f.objects
                .get(&format!("/api/v1{NS}secrets/{name}"))
                .cloned()
        })
    }

    fn secret_text(&self, name: &str, key: &str) -> Option<String> {
        let s: Secret = serde_json::from_value(self.secret(name)?).ok()?;
        key_text(&s, key).map(str::to_string)
    }
}

fn ready(u: &BrokerUser) -> (String, String) {
    u.status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_default()
}

#[tokio::test]
async fn a_token_user_gets_a_stable_token_and_only_its_hash_reaches_the_brokers() {
    let h = Harness::new();
    h.reconcile_cluster().await;
    h.add_user("orders-app", UserAuthType::Token, &["orders.>"]);
    let u = h.reconcile_user("orders-app").await;
    assert_eq!(ready(&u), ("True".into(), "CredentialsIssued".into()));
    assert_eq!(
        u.status
            .as_ref()
            .and_then(|s| s.secret_name.clone())
            .as_deref(),
        Some("orders-app-credentials")
    );
    let token = h
        .secret_text("orders-app-credentials", "token")
        .unwrap_or_else(|| panic!("no token"));
    assert_eq!(
        h.secret_text("orders-app-credentials", "address")
            .as_deref(),
        Some("events.messaging.svc:7400")
    );
    // Without spec.tls, clients trust the generated server certificate.
    assert_eq!(
        h.secret_text("orders-app-credentials", "ca.crt"),
        h.secret_text("events-tls", "tls.crt")
    );
    assert!(
        h.with(|f| f.event_reasons())
            .contains(&"CredentialsIssued".to_string())
    );

    // Stable across reconciles: no new token, no write, no status write.
    h.with(|f| f.calls.clear());
    h.reconcile_user("orders-app").await;
    assert_eq!(
        h.secret_text("orders-app-credentials", "token"),
        Some(token.clone())
    );
    h.with(|f| {
        assert!(
            !f.paths("PATCH").iter().any(|p| p.contains("secrets")),
            "{:?}",
            f.paths("PATCH")
        );
        assert!(f.event_reasons().is_empty());
    });

    // The cluster's users document names the user by its token's hash only.
    h.reconcile_cluster().await;
    let doc = h
        .secret_text("events-users", "users.yaml")
        .unwrap_or_default();
    assert!(!doc.contains(&token));
    let users = starling_access::Users::parse(&doc).unwrap_or_else(|e| panic!("{e}: {doc}"));
    assert_eq!(
        users
            .by_token(token.as_bytes())
            .map(|u| u.name().to_string())
            .as_deref(),
        Some("orders-app")
    );

    // Deleting the user removes it from the document at the next cluster reconcile.
    h.with(|f| f.objects.remove(&format!("{USERS}/orders-app")));
    h.reconcile_cluster().await;
    let doc = h
        .secret_text("events-users", "users.yaml")
        .unwrap_or_default();
    let users = starling_access::Users::parse(&doc).unwrap_or_else(|e| panic!("{e}"));
    assert!(users.is_empty(), "{doc}");
}

#[tokio::test]
async fn a_tls_user_gets_a_client_certificate_from_the_cluster_ca() {
    let h = Harness::new();
    h.reconcile_cluster().await;
    h.add_user("billing", UserAuthType::Tls, &["billing.*"]);
    let u = h.reconcile_user("billing").await;
    assert_eq!(ready(&u), ("True".into(), "CredentialsIssued".into()));
    let cert = h
        .secret_text("billing-credentials", "tls.crt")
        .unwrap_or_default();
    assert!(h.secret_text("billing-credentials", "tls.key").is_some());
    assert!(h.secret_text("billing-credentials", "token").is_none());
    let ca = h.secret_text("events-ca", "ca.crt").unwrap_or_default();
    assert_eq!(
        pki::leaf_needs_renewal(Some(&cert), &ca, "billing", Timestamp::now().as_second()),
        None,
        "signed by the cluster CA for the user's name"
    );
    h.reconcile_user("billing").await;
    assert_eq!(
        h.secret_text("billing-credentials", "tls.crt").as_deref(),
        Some(cert.as_str()),
        "kept while valid"
    );
    h.reconcile_cluster().await;
    let doc = h
        .secret_text("events-users", "users.yaml")
        .unwrap_or_default();
    let users = starling_access::Users::parse(&doc).unwrap_or_else(|e| panic!("{e}"));
    assert!(users.by_certificate("billing").is_some());
}

#[tokio::test]
async fn a_bad_pattern_or_a_missing_cluster_is_reported_and_issues_nothing() {
    let h = Harness::new();
    h.reconcile_cluster().await;
    h.add_user("sloppy", UserAuthType::Token, &["ord*"]);
    let u = h.reconcile_user("sloppy").await;
    assert_eq!(ready(&u), ("False".into(), "InvalidPermissions".into()));
    assert!(h.secret("sloppy-credentials").is_none());
    assert!(
        h.with(|f| f.event_reasons())
            .contains(&"InvalidPermissions".to_string())
    );
    h.with(|f| f.calls.clear());
    h.reconcile_user("sloppy").await;
    assert!(
        h.with(|f| f.event_reasons()).is_empty(),
        "the same refusal warns once"
    );

    let mut lost = h.add_user("lost", UserAuthType::Token, &["a"]);
    lost.spec.cluster = "nowhere".into();
    h.with(|f| {
        f.objects.insert(
            format!("{USERS}/lost"),
            serde_json::to_value(&lost).unwrap_or_default(),
        )
    });
    let u = h.reconcile_user("lost").await;
    assert_eq!(ready(&u), ("False".into(), "ClusterNotFound".into()));
    assert!(h.secret("lost-credentials").is_none());
}

#[tokio::test]
async fn a_user_before_its_cluster_ca_waits_and_a_foreign_secret_is_not_taken_over() {
    let h = Harness::new();
    h.add_user("early", UserAuthType::Token, &["a"]);
    let u = h.reconcile_user("early").await;
    assert_eq!(ready(&u), ("False".into(), "WaitingForCluster".into()));
    h.reconcile_cluster().await;
    h.with(|f| {
        f.objects.insert(
            format!("/api/v1{NS}secrets/early-credentials"),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "early-credentials", "namespace": "messaging"},
                   "data": {"token": "c2VjcmV0"}}),
        )
    });
    let u = h.reconcile_user("early").await;
    assert_eq!(ready(&u), ("False".into(), "ReconcileFailed".into()));
    assert_eq!(
        h.secret_text("early-credentials", "token").as_deref(),
        Some("secret")
    );
    // And the cluster does not trust a token from a Secret the user does not own.
    h.reconcile_cluster().await;
    let doc = h
        .secret_text("events-users", "users.yaml")
        .unwrap_or_default();
    assert!(!doc.contains("early"), "{doc}");
}

#[tokio::test]
async fn a_planted_cluster_ca_signs_no_user_certificate() {
    let h = Harness::new();
    // A usable CA under the cluster's CA name, not created by the operator (no owner
    // reference, no CA label): the user waits and gets nothing signed by it.
    let planted = pki::generate_ca("events", "messaging", Timestamp::now().as_second())
        .unwrap_or_else(|e| panic!("{e}"));
    h.with(|f| {
        f.objects.insert(
            format!("/api/v1{NS}secrets/events-ca"),
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"name": "events-ca", "namespace": "messaging"},
                   "data": {"ca.crt": k8s_openapi::ByteString(planted.cert.clone().into_bytes()),
                            "ca.key": k8s_openapi::ByteString(planted.key.clone().into_bytes())}}),
        )
    });
    h.add_user("billing", UserAuthType::Tls, &["billing.*"]);
    let u = h.reconcile_user("billing").await;
    assert_eq!(ready(&u), ("False".into(), "WaitingForCluster".into()));
    let message = u
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("refused"), "{message}");
    assert!(h.secret("billing-credentials").is_none());
}

/// A spec of `n` allow and `n` deny publish patterns of about 210 bytes each.
fn large_permissions(h: &Harness, name: &str, n: usize) {
    let long: Vec<String> = (0..n)
        .map(|i| format!("tenant-{i:04}.{}", "x".repeat(200)))
        .collect();
    let refs: Vec<&str> = long.iter().map(String::as_str).collect();
    let mut u = h.add_user(name, UserAuthType::Tls, &refs);
    if let Some(p) = u.spec.permissions.publish.as_mut() {
        p.deny = long.clone();
    }
    h.with(|f| {
        f.objects.insert(
            format!("{USERS}/{name}"),
            serde_json::to_value(&u).unwrap_or_default(),
        )
    });
}

#[tokio::test]
async fn a_user_too_large_for_the_users_document_is_refused_and_left_out() {
    let h = Harness::new();
    h.reconcile_cluster().await;
    // Within the CRD's limits (128 patterns a list), but over 50 KiB in the document.
    large_permissions(&h, "huge", 128);
    h.add_user("small", UserAuthType::Tls, &["a"]);
    let u = h.reconcile_user("huge").await;
    assert_eq!(ready(&u), ("False".into(), "TooLarge".into()));
    assert!(h.secret("huge-credentials").is_none(), "no credentials");
    h.reconcile_cluster().await;
    let doc = h
        .secret_text("events-users", "users.yaml")
        .unwrap_or_default();
    let users = starling_access::Users::parse(&doc).unwrap_or_else(|e| panic!("{e}"));
    assert!(users.get("huge").is_none() && users.get("small").is_some());
}

#[tokio::test]
async fn a_full_users_document_is_still_written_and_the_cluster_says_who_is_left_out() {
    let h = Harness::new();
    // 36 users of about 28 KiB each: about 1 MiB, past the 960 KiB budget.
    for i in 0..36 {
        large_permissions(&h, &format!("u{i:02}"), 64);
    }
    let r = super::reconcile(Arc::new(h.bc.clone()), h.ctx.clone()).await;
    assert!(
        matches!(&r, Err(crate::error::Error::UsersDocumentFull(m)) if m.contains("u35")),
        "{r:?}"
    );
    let doc = h
        .secret_text("events-users", "users.yaml")
        .unwrap_or_default();
    assert!(
        doc.len() <= crate::access::MAX_DOCUMENT_BYTES,
        "{}",
        doc.len()
    );
    let users = starling_access::Users::parse(&doc).unwrap_or_else(|e| panic!("{e}"));
    assert!(users.get("u00").is_some(), "the oldest users stay");
    assert!(users.get("u35").is_none(), "the newest is left out");
    h.with(|f| {
        let status = f.status_writes().pop().unwrap_or_default();
        let degraded = status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Degraded"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(degraded["reason"], "UsersDocumentFull");
        assert!(
            degraded["message"].as_str().unwrap_or("").contains("u35"),
            "{degraded}"
        );
        // The rest of the cluster was applied all the same.
        assert!(
            f.objects
                .contains_key(&format!("/apis/apps/v1{NS}statefulsets/events"))
        );
    });
    // A deleted user still leaves the full document: revocation never freezes.
    h.with(|f| f.objects.remove(&format!("{USERS}/u00")));
    let _ = super::reconcile(Arc::new(h.bc.clone()), h.ctx.clone()).await;
    let doc = h
        .secret_text("events-users", "users.yaml")
        .unwrap_or_default();
    let users = starling_access::Users::parse(&doc).unwrap_or_else(|e| panic!("{e}"));
    assert!(users.get("u00").is_none());
}
