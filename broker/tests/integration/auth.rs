//! Client identity and access control over real QUIC: a broker with `auth_mode: required`, a
//! users file and a client CA (rcgen); token users and certificate users through the SDK, raw
//! connections where the close code matters.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use starling_access::token_hash_hex;
use starling_broker::{Broker, BrokerError};
use starling_client::{Client, ClientError, Credentials};
use starling_config::{AuthMode, ConfigOverrides, Profile, compose};
use starling_proto::{Frame, Hello, PROTOCOL_VERSION, StartAt, Subscribe, features, write_frame};
use starling_testkit::assert_forbidden;
use starling_testkit::pki::{Ca, write_atomic};

use crate::common::{SOON, TestBroker, read_one, start, wait_metrics};

const APP_TOKEN: &str = "app-token-0123456789";
const NEW_TOKEN: &str = "late-token-0123456789";

/// `app` (token): every pattern form on every operation; `billing` (certificate).
fn users_doc(extra: &str) -> String {
    format!(
        r#"version: 1
users:
  - name: app
    authentication: {{type: token, sha256: "{app}"}}
    permissions:
      publish: {{allow: ["orders.eu", "metrics.*", "tenant-a.>"], deny: ["tenant-a.secret.>"]}}
      subscribe: {{allow: ["orders.eu", "metrics.*", "tenant-a.>"], deny: ["tenant-a.secret.>"]}}
      cache_read: {{allow: ["cfg.*"], deny: ["cfg.hidden"]}}
      cache_write: {{allow: ["cfg.app"]}}
  - name: billing
    authentication: {{type: tls}}
    permissions:
      publish: {{allow: ["billing.>"]}}
      subscribe: {{allow: ["billing.>"]}}
{extra}"#,
        app = token_hash_hex(APP_TOKEN.as_bytes()),
    )
}

fn late_user() -> String {
    format!(
        "  - name: late\n    authentication: {{type: token, sha256: \"{}\"}}\n    permissions:\n      publish: {{allow: [\"late.>\"]}}\n",
        token_hash_hex(NEW_TOKEN.as_bytes())
    )
}

struct Secured {
    broker: TestBroker,
    ca: Ca,
    dir: PathBuf,
}

impl Secured {
    async fn start(tag: &str) -> Secured {
        let dir = std::env::temp_dir().join(format!("starling-auth-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = Ca::new("users CA");
        std::fs::write(dir.join("ca.crt"), &ca.pem).unwrap();
        write_atomic(&dir.join("users.yaml"), &users_doc(""));
        let broker = start(
            Profile::Balanced,
            ConfigOverrides {
                auth_mode: Some(AuthMode::Required),
                auth_users_file: Some(Some(dir.join("users.yaml"))),
                auth_client_ca_file: Some(Some(dir.join("ca.crt"))),
                auth_reload_interval_ms: Some(200),
                ..ConfigOverrides::default()
            },
        )
        .await;
        Secured { broker, ca, dir }
    }

    async fn token_client(&self, token: &str) -> Result<Client, ClientError> {
        let cfg = self
            .broker
            .client_config()
            .with_credentials(Credentials::Token(token.to_string()));
        Client::connect(cfg).await
    }

    async fn cert_client(&self, ca: &Ca, cn: &str) -> Result<Client, ClientError> {
        let leaf = ca.client(cn);
        let cfg = self
            .broker
            .client_config()
            .with_credentials(Credentials::Certificate {
                cert_pem: leaf.cert.into_bytes(),
                key_pem: leaf.key.into_bytes(),
            });
        Client::connect(cfg).await
    }

    fn write_users(&self, text: &str) {
        write_atomic(&self.dir.join("users.yaml"), text);
    }
}

impl Drop for Secured {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credentials_are_refused_while_a_bystander_keeps_working() {
    let s = Secured::start("anon").await;
    let app = s.token_client(APP_TOKEN).await.expect("app connects");
    let mut sub = app.subscribe("orders.eu").await.expect("subscribe");

    let anonymous = Client::connect(s.broker.client_config()).await;
    assert!(
        matches!(&anonymous, Err(ClientError::Unauthorized(m)) if m.contains("no credentials")),
        "{:?}",
        anonymous.err()
    );
    let wrong = s.token_client("not-a-token").await;
    match wrong {
        Err(ClientError::Unauthorized(m)) => {
            assert!(m.contains("matches no user"), "{m}");
            assert!(!m.contains("not-a-token"), "the token is never echoed: {m}");
        }
        other => panic!("expected Unauthorized, got {:?}", other.err()),
    }
    let unknown_cn = s.cert_client(&s.ca, "nobody").await;
    assert!(
        matches!(&unknown_cn, Err(ClientError::Unauthorized(m)) if m.contains("nobody")),
        "{:?}",
        unknown_cn.err()
    );

    // The bystander's connection and subscription are untouched.
    app.publish_acked("orders.eu", "still here")
        .await
        .expect("publish");
    let ev = tokio::time::timeout(SOON, sub.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(&ev.payload[..], b"still here");
    let m = s.broker.metrics().await;
    assert_eq!(
        m.get("starling_auth_failures_total{reason=no_credentials}"),
        1.0
    );
    assert_eq!(
        m.get("starling_auth_failures_total{reason=unknown_token}"),
        1.0
    );
    assert_eq!(
        m.get("starling_auth_failures_total{reason=unknown_certificate}"),
        1.0
    );
    assert_eq!(m.get("starling_auth_users"), 2.0);
    app.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_another_ca_fails_the_tls_handshake() {
    let s = Secured::start("otherca").await;
    let rogue = Ca::new("rogue CA");
    let err = s
        .cert_client(&rogue, "billing")
        .await
        .expect_err("another CA's certificate is refused");
    assert!(
        !matches!(
            err,
            ClientError::Unauthorized(_) | ClientError::Server { .. }
        ),
        "refused in TLS, before any Starling frame: {err}"
    );
    // The same name from the right CA is billing.
    let billing = s
        .cert_client(&s.ca, "billing")
        .await
        .expect("billing connects");
    billing
        .publish_acked("billing.invoices", "1")
        .await
        .expect("allowed");
    assert_forbidden(
        billing.publish_acked("orders.eu", "x").await,
        "publish",
        "orders.eu",
        "billing",
    );
    billing.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_pattern_form_allows_and_forbids_each_operation() {
    let s = Secured::start("patterns").await;
    let app = s.token_client(APP_TOKEN).await.expect("app connects");

    // Publish: exact, `*` (exactly one token), `>` (one or more), deny.
    for allowed in ["orders.eu", "metrics.cpu", "tenant-a.x", "tenant-a.x.y.z"] {
        app.publish_acked(allowed, "ok")
            .await
            .unwrap_or_else(|e| panic!("publish {allowed}: {e}"));
    }
    for refused in [
        "orders.us",
        "orders.eu.x",
        "metrics",
        "metrics.cpu.0",
        "tenant-a",
        "tenant-a.secret.k",
        "other",
    ] {
        assert_forbidden(
            app.publish_acked(refused, "no").await,
            "publish",
            refused,
            "app",
        );
    }
    // A batch is checked by its topic too.
    assert_forbidden(
        app.publish_batch("orders.us", vec!["a".into(), "b".into()], true)
            .await,
        "publish",
        "orders.us",
        "app",
    );

    // Subscribe: the same forms; a refusal leaves the connection's other streams working.
    let mut ok = app
        .subscribe("metrics.cpu")
        .await
        .expect("subscribe metrics.*");
    for refused in ["metrics.cpu.0", "tenant-a.secret.x", "orders.us"] {
        assert_forbidden(
            app.subscribe(refused).await.map(|_| ()),
            "subscribe",
            refused,
            "app",
        );
    }
    app.publish_acked("metrics.cpu", "after refusals")
        .await
        .expect("publish");
    let ev = tokio::time::timeout(SOON, ok.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(&ev.payload[..], b"after refusals");

    // Cache: read by `*` minus a deny, write by exact name.
    app.cache_put("cfg.app", "v1", None)
        .await
        .expect("write cfg.app");
    assert_eq!(
        app.cache_get("cfg.app").await.expect("read").as_deref(),
        Some(&b"v1"[..])
    );
    assert_forbidden(
        app.cache_put("cfg.other", "x", None).await,
        "cache_write",
        "cfg.other",
        "app",
    );
    assert_forbidden(
        app.cache_delete("cfg.other").await,
        "cache_write",
        "cfg.other",
        "app",
    );
    assert_forbidden(
        app.cache_get("cfg.hidden").await,
        "cache_read",
        "cfg.hidden",
        "app",
    );
    assert_forbidden(
        app.cache_get("secrets.db").await,
        "cache_read",
        "secrets.db",
        "app",
    );
    assert!(app.cache_delete("cfg.app").await.expect("delete cfg.app"));

    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_forbidden_total{operation=publish}"), 8.0);
    assert_eq!(m.get("starling_forbidden_total{operation=subscribe}"), 3.0);
    assert_eq!(
        m.get("starling_forbidden_total{operation=cache_write}"),
        2.0
    );
    assert_eq!(m.get("starling_forbidden_total{operation=cache_read}"), 2.0);
    app.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_subscription_must_stay_inside_allow_and_outside_deny() {
    let s = Secured::start("wildcards").await;
    let app = s.token_client(APP_TOKEN).await.expect("app connects");
    // Inside `tenant-a.>` and outside `tenant-a.secret.>` (two tokens never reach three).
    let mut ok = app.subscribe("tenant-a.*").await.expect("tenant-a.*");
    let _metrics = app.subscribe("metrics.*").await.expect("metrics.*");
    for refused in [
        "tenant-a.>",        // reaches tenant-a.secret.x
        "tenant-a.secret.*", // all denied
        "metrics.>",         // metrics.cpu.0 is not allowed
        "*.eu",              // billing.eu is not allowed
        ">",
    ] {
        assert_forbidden(
            app.subscribe(refused).await.map(|_| ()),
            "subscribe",
            refused,
            "app",
        );
    }
    app.publish_acked("tenant-a.x", "allowed")
        .await
        .expect("publish");
    let ev = tokio::time::timeout(SOON, ok.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(
        (&*ev.topic, &ev.payload[..]),
        ("tenant-a.x", &b"allowed"[..])
    );
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_forbidden_total{operation=subscribe}"), 5.0);
    app.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_group_needs_the_same_subscribe_permission_as_a_plain_subscription() {
    let s = Secured::start("groups").await;
    let app = s.token_client(APP_TOKEN).await.expect("app connects");
    let mut member = app
        .subscribe_group("orders.eu", "workers")
        .await
        .expect("allowed topic");
    let _pattern = app
        .subscribe_group("tenant-a.*", "workers")
        .await
        .expect("allowed pattern");
    for refused in ["billing.eu", "tenant-a.>"] {
        assert_forbidden(
            app.subscribe_group(refused, "workers").await.map(|_| ()),
            "subscribe",
            refused,
            "app",
        );
    }
    app.publish_acked("orders.eu", "job")
        .await
        .expect("publish");
    let ev = tokio::time::timeout(SOON, member.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(&ev.payload[..], b"job");
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_forbidden_total{operation=subscribe}"), 2.0);
    app.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_adds_a_user_and_a_removed_users_subscription_is_closed_within_10s() {
    let s = Secured::start("reload").await;
    assert!(matches!(
        s.token_client(NEW_TOKEN).await,
        Err(ClientError::Unauthorized(_))
    ));
    s.write_users(&users_doc(&late_user()));
    wait_metrics(&s.broker, "the new user loaded", |m| {
        m.get("starling_auth_users") == 3.0
    })
    .await;
    let late = s
        .token_client(NEW_TOKEN)
        .await
        .expect("added without a restart");
    late.publish_acked("late.x", "hi").await.expect("allowed");
    late.close().await;

    // `app` holds a live subscription on a raw connection (to see the close code).
    let conn = s.broker.raw(None).await;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let hello = Frame::Hello(Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features: features::BASE | features::AUTH_TOKEN,
        client_name: "revocation test".into(),
        auth_token: Some(APP_TOKEN.as_bytes().to_vec().into()),
    });
    write_frame(&mut send, &hello).await.unwrap();
    assert!(matches!(read_one(&mut recv).await, Some(Frame::HelloOk(_))));
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let sub = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 1,
        topic: "orders.eu".into(),
        start: StartAt::Live,
    });
    write_frame(&mut send, &sub).await.unwrap();
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::SubscribeOk(_))
    ));

    // `app` leaves the document: its connection is closed, the others' users stay.
    let removed = Instant::now();
    let without_app: String = users_doc(&late_user())
        .replace("  - name: app\n", "  - name: gone-app\n")
        .replace(&token_hash_hex(APP_TOKEN.as_bytes()), &"0".repeat(64));
    s.write_users(&without_app);
    let closed = tokio::time::timeout(Duration::from_secs(10), conn.closed())
        .await
        .expect("closed within 10 s of the change");
    match closed {
        quinn::ConnectionError::ApplicationClosed(close) => {
            assert_eq!(close.error_code, quinn::VarInt::from_u32(2));
            assert_eq!(&close.reason[..], b"user revoked");
        }
        other => panic!("expected an application close, got {other}"),
    }
    assert!(removed.elapsed() < Duration::from_secs(10));
    assert!(matches!(
        s.token_client(APP_TOKEN).await,
        Err(ClientError::Unauthorized(_))
    ));
    let late = s.token_client(NEW_TOKEN).await.expect("late stays");
    late.close().await;
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_auth_revoked_connections_total"), 1.0);

    // A broken document is refused and counted; the table in force stays.
    s.write_users("version: 1\nusers: [{name: BAD}]\n");
    wait_metrics(&s.broker, "the reload error counted", |m| {
        m.get("starling_auth_reload_errors_total{reason=invalid}") >= 1.0
    })
    .await;
    let late = s
        .token_client(NEW_TOKEN)
        .await
        .expect("last good table in force");
    late.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_connections_follow_the_reloaded_permissions() {
    let s = Secured::start("narrow").await;
    let app = s.token_client(APP_TOKEN).await.expect("app connects");
    app.publish_acked("metrics.cpu", "1")
        .await
        .expect("allowed");
    // `metrics.*` leaves app's publish rules (and a user is added, so the reload is visible).
    let narrowed = users_doc(&late_user()).replacen(
        r#"publish: {allow: ["orders.eu", "metrics.*", "tenant-a.>"]"#,
        r#"publish: {allow: ["orders.eu", "tenant-a.>"]"#,
        1,
    );
    assert_ne!(narrowed, users_doc(&late_user()));
    s.write_users(&narrowed);
    wait_metrics(&s.broker, "the narrowed document", |m| {
        m.get("starling_auth_users") == 3.0
    })
    .await;
    assert_forbidden(
        app.publish_acked("metrics.cpu", "2").await,
        "publish",
        "metrics.cpu",
        "app",
    );
    app.publish_acked("orders.eu", "3")
        .await
        .expect("the same connection keeps its other permissions");
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_auth_revoked_connections_total"), 0.0);
    app.close().await;
}

#[tokio::test]
async fn required_without_a_users_document_refuses_to_start() {
    let o = ConfigOverrides {
        auth_mode: Some(AuthMode::Required),
        ..crate::common::base_overrides()
    };
    let err = Broker::new(compose(Profile::Balanced, None, &o))
        .err()
        .expect("refused");
    assert!(matches!(err, BrokerError::NoUsersSource(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("auth_users_file") && msg.contains("auth_mode: none"),
        "{msg}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replaced_client_ca_applies_to_new_connections_without_a_restart() {
    let s = Secured::start("newca").await;
    let before = s
        .cert_client(&s.ca, "billing")
        .await
        .expect("old CA accepted");
    // Opens the SDK's publish connection now, under the old CA.
    before
        .publish_acked("billing.x", "before")
        .await
        .expect("publish");
    let next = Ca::new("next users CA");
    // A bundle with both CAs during a change-over, as a renewal would mount it.
    write_atomic(&s.dir.join("ca.crt"), &format!("{}{}", s.ca.pem, next.pem));
    wait_metrics(&s.broker, "the bundle reloaded", |m| {
        m.get("starling_tls_reloads_total{outcome=applied}") >= 1.0
    })
    .await;
    s.cert_client(&next, "billing")
        .await
        .expect("the new CA is accepted")
        .close()
        .await;
    // Then the new CA alone: the old one's certificates fail the TLS handshake.
    write_atomic(&s.dir.join("ca.crt"), &next.pem);
    wait_metrics(&s.broker, "the new CA alone", |m| {
        m.get("starling_tls_reloads_total{outcome=applied}") >= 2.0
    })
    .await;
    let err = s
        .cert_client(&s.ca, "billing")
        .await
        .expect_err("old CA refused");
    assert!(!matches!(err, ClientError::Unauthorized(_)), "{err}");
    // The connections made before the change go on (a new one would need the new CA).
    before
        .publish_acked("billing.x", "still")
        .await
        .expect("established connection unaffected");
    before.close().await;
}

/// Issue 33, item 6: a reload that narrows a user's `subscribe` rules ends the open
/// subscriptions they no longer allow (plain and wildcard) with `Forbidden`, and leaves the
/// ones still allowed, and the connection, running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn narrowed_permissions_end_the_open_subscriptions_they_no_longer_allow() {
    let s = Secured::start("narrowed").await;
    let app = s.token_client(APP_TOKEN).await.expect("app connects");
    let mut kept = app.subscribe("metrics.*").await.expect("metrics.*");
    let mut plain = app.subscribe("tenant-a.x").await.expect("tenant-a.x");
    let mut wildcard = app.subscribe("tenant-a.*").await.expect("tenant-a.*");

    let wide = r#"subscribe: {allow: ["orders.eu", "metrics.*", "tenant-a.>"], deny: ["tenant-a.secret.>"]}"#;
    let narrow = r#"subscribe: {allow: ["orders.eu", "metrics.*"]}"#;
    let doc = users_doc("");
    assert!(doc.contains(wide), "the document names the rules replaced");
    s.write_users(&doc.replacen(wide, narrow, 1));

    for (what, sub) in [("tenant-a.x", &mut plain), ("tenant-a.*", &mut wildcard)] {
        let ended = tokio::time::timeout(SOON, sub.next_event())
            .await
            .unwrap_or_else(|_| panic!("{what}: not ended within {SOON:?}"));
        match ended {
            Some(Err(ClientError::Forbidden { op, name, message })) => {
                assert_eq!((op.as_str(), name.as_str()), ("subscribe", what));
                // "permission withdrawn: user …" from the open subscription, or the same refusal
                // without the prefix if the SDK's resubscription reached the broker first.
                assert!(message.contains("may not subscribe"), "{what}: {message}");
            }
            other => panic!("{what}: expected Forbidden, got {other:?}"),
        }
    }
    // The connection, its publishes and the subscription still allowed keep working.
    app.publish_acked("metrics.cpu", "still")
        .await
        .expect("publish");
    let ev = tokio::time::timeout(SOON, kept.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(
        (&*ev.topic, &ev.payload[..]),
        ("metrics.cpu", &b"still"[..])
    );
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_auth_subscriptions_withdrawn_total"), 2.0);
    assert_eq!(m.get("starling_auth_revoked_connections_total"), 0.0);
    app.close().await;
}

/// `GET /users` as JSON.
async fn users_health(s: &Secured) -> serde_json::Value {
    let (status, body) = s.broker.http_get("/users").await;
    assert_eq!(status, 200, "/users: {body}");
    serde_json::from_str(&body).expect("/users is JSON")
}

/// Waits until `GET /users` says `state`, and returns the answer.
async fn wait_users_state(s: &Secured, state: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let answer = users_health(s).await;
        if answer["state"] == state {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "no {state} table within 10 s: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_or_missing_users_document_is_reported_while_the_last_good_table_serves() {
    let s = Secured::start("stale").await;
    let current = wait_users_state(&s, "current").await;
    assert_eq!(current["users"], 2, "{current}");
    assert_eq!(current["reason"], serde_json::Value::Null);
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_auth_users_stale"), 0.0);
    assert!(m.get("starling_auth_users_age_seconds") < 5.0);

    // A corrupt document: reported stale (invalid), counted, the broker stays ready and its
    // users are served with the last good table.
    s.write_users("version: 1\nusers: [{name: BAD}]\n");
    let stale = wait_users_state(&s, "stale").await;
    assert_eq!(stale["reason"], "invalid", "{stale}");
    assert_eq!(stale["users"], 2, "the last good table stays: {stale}");
    assert!(
        stale["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{stale}"
    );
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_auth_users_stale"), 1.0);
    assert!(m.get("starling_auth_reload_errors_total{reason=invalid}") >= 1.0);
    assert_eq!(
        m.get("starling_auth_reload_errors_total{reason=missing}"),
        0.0
    );
    assert_eq!(
        s.broker.http_get("/readyz").await.0,
        200,
        "a stale table keeps it ready"
    );
    let app = s
        .token_client(APP_TOKEN)
        .await
        .expect("last good table in force");
    app.close().await;

    // A deleted document: reported as missing.
    std::fs::remove_file(s.dir.join("users.yaml")).unwrap();
    wait_metrics(&s.broker, "the missing document counted", |m| {
        m.get("starling_auth_reload_errors_total{reason=missing}") >= 1.0
    })
    .await;
    let missing = users_health(&s).await;
    assert_eq!(missing["state"], "stale", "{missing}");
    assert_eq!(missing["reason"], "missing", "{missing}");

    // A good document again: current, the gauge back at 0.
    s.write_users(&users_doc(&late_user()));
    let back = wait_users_state(&s, "current").await;
    assert_eq!(back["users"], 3, "{back}");
    assert_eq!(back["error"], serde_json::Value::Null);
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_auth_users_stale"), 0.0);
}
