//! Request/reply over real QUIC (the `REQUEST` feature) with token users: a request is
//! answered by a responder whose `publish` rules do not cover the reply inbox (the delivered
//! request grants it); a request to a topic nobody subscribes to fails at once with
//! `NoResponders`; an unanswered one times out; a responder may not publish to an inbox no
//! request named; another user cannot subscribe to a requester's inbox, and a `>`
//! subscription never receives replies.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use starling_access::token_hash_hex;
use starling_client::{Client, ClientError, Credentials, Event, Subscription};
use starling_config::{AuthMode, ConfigOverrides, Profile};
use starling_proto::{REPLY_TO, features};
use starling_testkit::pki::write_atomic;

use crate::common::{SOON, TestBroker, start, wait_metrics};

const ASKER: &str = "asker-token-0123456789";
const SERVER: &str = "server-token-0123456789";
const SNOOP: &str = "snoop-token-0123456789";

fn users() -> String {
    let user = |name: &str, token: &str, publish: &str, subscribe: &str| {
        format!(
            "  - name: {name}\n    authentication: {{type: token, sha256: \"{}\"}}\n    \
             permissions:\n      publish: {{allow: [{publish}]}}\n      subscribe: {{allow: [{subscribe}]}}\n",
            token_hash_hex(token.as_bytes())
        )
    };
    format!(
        "version: 1\nusers:\n{}{}{}",
        user("asker", ASKER, "\"svc.>\"", "\"none\""),
        user("server", SERVER, "\"svc.>\"", "\"svc.>\""),
        user("snoop", SNOOP, "\">\"", "\">\""),
    )
}

struct Secured {
    broker: TestBroker,
    dir: PathBuf,
}

impl Secured {
    async fn start() -> Secured {
        let dir = std::env::temp_dir().join(format!("starling-rr-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        write_atomic(&dir.join("users.yaml"), &users());
        let broker = start(
            Profile::Balanced,
            ConfigOverrides {
                auth_mode: Some(AuthMode::Required),
                auth_users_file: Some(Some(dir.join("users.yaml"))),
                ..ConfigOverrides::default()
            },
        )
        .await;
        Secured { broker, dir }
    }

    async fn client(&self, token: &str) -> Client {
        let cfg = self
            .broker
            .client_config()
            .with_credentials(Credentials::Token(token.to_string()));
        Client::connect(cfg).await.expect("connect")
    }
}

impl Drop for Secured {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn next(sub: &mut Subscription) -> Event {
    match tokio::time::timeout(SOON, sub.next_event()).await {
        Ok(Some(Ok(ev))) => ev,
        other => panic!("expected an event, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_answered_refused_timed_out_and_inboxes_are_private() {
    let s = Secured::start().await;
    let asker = s.client(ASKER).await;
    let server = s.client(SERVER).await;
    let snoop = s.client(SNOOP).await;
    assert!(asker.server_info().has_feature(features::REQUEST));
    // No responders: at once, not after the timeout (before anything subscribes to `>`).
    let started = Instant::now();
    let err = asker
        .request("svc.nobody", "ping", Duration::from_secs(30))
        .await
        .expect_err("no responders");
    assert!(
        matches!(err, ClientError::NoResponders(ref t) if t == "svc.nobody"),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    let mut everything = snoop.subscribe(">").await.expect("snoop subscribes to >");

    // Answered: the server's `publish` rules (svc.>) do not cover the inbox; the request
    // delivered to it does.
    let mut requests = server.subscribe("svc.echo").await.expect("subscribe");
    let responder = {
        let server = server.clone();
        tokio::spawn(async move {
            let request = next(&mut requests).await;
            server.reply(&request, "pong").await.expect("reply");
            request
        })
    };
    let reply = asker
        .request("svc.echo", "ping", SOON)
        .await
        .expect("answered");
    assert_eq!(&reply.payload[..], b"pong");
    let request = responder.await.expect("responder");
    assert_eq!(&request.payload[..], b"ping");
    let inbox = starling_proto::request::reply_to(&request.headers)
        .expect("reply-to")
        .to_string();
    let token = starling_proto::request::inbox_token(&inbox)
        .expect("token")
        .to_string();

    // Subscribed, never answered: the timeout.
    let _silent = server.subscribe("svc.silent").await.expect("subscribe");
    let err = asker
        .request("svc.silent", "ping", Duration::from_millis(300))
        .await
        .expect_err("timeout");
    assert!(matches!(err, ClientError::Timeout), "{err}");

    // A responder may not publish to an inbox no request named (another token, or another
    // request number of the asker's).
    let foreign = format!("_INBOX.{}.1", "f".repeat(32));
    let other = format!("_INBOX.{token}.999");
    for topic in [&foreign, &other] {
        let err = server
            .publish_acked(topic, "forged")
            .await
            .expect_err("a reply nobody asked for");
        assert!(
            matches!(err, ClientError::Forbidden { .. }),
            "{topic}: {err}"
        );
    }

    // Another user's connection cannot subscribe to the asker's inbox, even allowed `>`.
    let err = snoop
        .subscribe(&format!("_INBOX.{token}.>"))
        .await
        .expect_err("another connection's inbox");
    assert!(
        matches!(
            err,
            ClientError::Forbidden { .. }
                | ClientError::Server {
                    code: starling_proto::ErrorCode::Forbidden,
                    ..
                }
        ),
        "{err}"
    );
    // The `>` subscription saw the requests, never the reply.
    let mut seen = Vec::new();
    while let Ok(Some(Ok(ev))) =
        tokio::time::timeout(Duration::from_millis(300), everything.next_event()).await
    {
        assert!(
            !ev.topic.starts_with("_INBOX"),
            "a reply reached `>`: {}",
            ev.topic
        );
        seen.push(ev.topic.to_string());
    }
    assert!(seen.iter().any(|t| t == "svc.echo"), "{seen:?}");
    assert!(
        !seen.iter().any(|t| t == REPLY_TO),
        "headers are not topics: {seen:?}"
    );

    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_no_responders_total"), 1.0);
    assert!(m.get("starling_requests_total") >= 3.0);
    assert!(m.get("starling_inbox_subscriptions_refused_total") >= 1.0);
}

/// `max_reply_inboxes_per_user` bounds a user's grants: past it the oldest is evicted
/// (counted) and a reply to it is refused with `Forbidden`; the newest is still answered; its
/// inbox topic retires soon after. (One
/// inbox per connection is a unit test of `pubsub::inboxes`: the SDK spreads subscriptions
/// over several connections.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_grants_are_bounded_per_user() {
    let dir = std::env::temp_dir().join(format!("starling-rr-bound-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    write_atomic(&dir.join("users.yaml"), &users());
    let broker = start(
        Profile::Balanced,
        ConfigOverrides {
            auth_mode: Some(AuthMode::Required),
            auth_users_file: Some(Some(dir.join("users.yaml"))),
            max_reply_inboxes_per_user: Some(1),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let s = Secured { broker, dir };
    let asker = s.client(ASKER).await;
    let server = s.client(SERVER).await;
    let mut requests = server.subscribe("svc.work").await.expect("subscribe");
    let (a, b) = {
        let asker = asker.clone();
        let first = tokio::spawn({
            let asker = asker.clone();
            async move { asker.request("svc.work", "1", Duration::from_secs(5)).await }
        });
        let one = next(&mut requests).await;
        let second =
            tokio::spawn(
                async move { asker.request("svc.work", "2", Duration::from_secs(5)).await },
            );
        let two = next(&mut requests).await;
        // The second request evicted the first one's grant.
        let err = server.reply(&one, "late").await.expect_err("evicted grant");
        assert!(matches!(err, ClientError::Forbidden { .. }), "{err}");
        server.reply(&two, "two").await.expect("newest grant");
        (first, second)
    };
    let answered = b.await.expect("join").expect("second answered");
    assert_eq!(&answered.payload[..], b"two");
    a.abort();
    let m = s.broker.metrics().await;
    assert_eq!(m.get("starling_reply_grants_evicted_total"), 1.0);
    // The answered request's inbox topic retires about a second after its reply; `svc.work`
    // (subscribed) stays.
    let before = m.get("starling_topics");
    assert!(before >= 2.0, "svc.work and the inbox: {before}");
    wait_metrics(&s.broker, "the inbox topic retired", |m| {
        m.get("starling_topics") == before - 1.0
    })
    .await;
}
