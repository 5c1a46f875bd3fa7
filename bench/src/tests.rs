//! End-to-end checks of the harness against an embedded broker: a lossless
//! pub/sub run in closed and open loop, an acked one, and a short cache run.

use std::time::Duration;

use starling_config::Profile;
use starling_config::SlowSubscriberPolicy;

use super::args::{CacheArgs, PubSubArgs, TargetArgs};
use super::cache;
use super::pubsub::{self, PubSubPlan};
use super::target::Target;
use crate::args::Globals;

fn globals() -> Globals {
    Globals {
        server: Some("127.0.0.1:7400".into()),
        identity: crate::args::Identity::default(),
        ca: None,
        insecure: false,
        fingerprint: None,
        profile: Profile::Balanced,
        server_name: None,
        timeout: Duration::from_secs(10),
        output: crate::args::Output::Text,
    }
}

fn embedded(policy: SlowSubscriberPolicy) -> TargetArgs {
    TargetArgs {
        embedded: true,
        policy: Some(policy),
        metrics_addr: None,
        broker_pid: None,
        json: None,
        name: None,
        no_progress: true,
    }
}

fn small(rate: Option<f64>) -> PubSubArgs {
    PubSubArgs {
        producers: 2,
        subscribers: 2,
        topics: 2,
        payload: 64,
        batch: 4,
        pub_conns: Some(1),
        pub_streams_per_conn: Some(2),
        duration: None,
        count: Some(400),
        warmup: Duration::from_millis(50),
        rate,
        shared_sub_client: rate.is_some(),
        shared_pub_client: rate.is_none(),
        drain_timeout: Duration::from_secs(30),
        ack_window: None,
        publish_window: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossless_pubsub_runs_deliver_everything() {
    let target = Target::open(&globals(), &embedded(SlowSubscriberPolicy::Block))
        .await
        .expect("embedded broker");
    for rate in [None, Some(4_000.0)] {
        let plan = PubSubPlan::new(small(rate)).expect("valid plan");
        let r = pubsub::run(&target, &plan, "smoke", false)
            .await
            .expect("run");
        assert_eq!(r.failure, None, "{r:?}");
        assert_eq!((r.lost, r.reordered, r.duplicates), (0, 0, 0));
        // 400 measured messages, each delivered to 2 subscribers (the
        // delivered count may include warm-up messages received later).
        assert_eq!(r.published, 400);
        assert!(r.delivered >= 800 && r.expected >= r.delivered, "{r:?}");
        assert_eq!(r.latency_us.count, 800);
        assert!(r.delivered_msgs_per_s > 0.0 && r.latency_us.p50 > 0.0);
        assert_eq!(r.broker_cpu_source.as_deref(), Some("threads"));
        assert_eq!(r.config.policy.as_deref(), Some("block"));
    }
    target.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acked_runs_report_the_publish_to_ack_latency_of_every_measured_message() {
    let target = Target::open(&globals(), &embedded(SlowSubscriberPolicy::Block))
        .await
        .expect("embedded broker");
    let mut a = small(None);
    a.ack_window = Some(8);
    let plan = PubSubPlan::new(a).expect("valid plan");
    let r = pubsub::run(&target, &plan, "acked", false)
        .await
        .expect("run");
    target.close().await;
    assert_eq!(r.failure, None, "{r:?}");
    assert_eq!((r.lost, r.reordered, r.duplicates), (0, 0, 0));
    assert_eq!(r.published, 400);
    assert_eq!(r.config.ack_window, Some(8));
    let ack = r.ack_latency_us.expect("ack latency");
    assert_eq!(ack.count, 400, "{ack:?}");
    assert!(ack.p50 > 0.0 && ack.p999 >= ack.p50, "{ack:?}");
}

/// A producer that fails ends the run at once, not at the end of its `--duration`: a run
/// against a cluster whose broker restarts must exit so its caller can start another (the
/// autoscaling e2e test's load). The payload here is larger than the broker's largest frame,
/// so the first publish fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_producer_ends_a_long_run_at_once() {
    let target = Target::open(&globals(), &embedded(SlowSubscriberPolicy::Block))
        .await
        .expect("embedded broker");
    let mut a = small(Some(100.0));
    a.count = None;
    a.duration = Some(Duration::from_secs(600));
    a.payload = 64 << 20;
    a.drain_timeout = Duration::from_secs(1);
    let plan = PubSubPlan::new(a).expect("valid plan");
    let run = tokio::time::timeout(
        Duration::from_secs(60),
        pubsub::run(&target, &plan, "fails", false),
    )
    .await;
    target.close().await;
    let r = run
        .expect("the run ended long before its duration")
        .expect("run");
    let failure = r.failure.unwrap_or_default();
    assert!(failure.contains("producer"), "{failure}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_run_reports_three_phases() {
    let target = Target::open(&globals(), &embedded(SlowSubscriberPolicy::DropOld))
        .await
        .expect("embedded broker");
    let a = CacheArgs {
        concurrency: 4,
        value_size: 32,
        keys: 50,
        duration: Duration::from_millis(200),
        warmup: Duration::from_millis(20),
        stream_depth: None,
    };
    let r = cache::run(&target, &a, "cache", false).await.expect("run");
    target.close().await;
    let c = r.cache.expect("cache stats");
    assert_eq!(r.failure, None);
    for s in [&c.put, &c.get_hit, &c.get_miss] {
        assert!(s.ops > 0 && s.errors == 0, "{s:?}");
        assert!(s.latency_us.p99 > 0.0);
    }
}

#[tokio::test]
async fn conflicting_credential_options_are_a_usage_error() {
    let mut g = globals();
    g.insecure = true;
    g.identity.token = Some(starling_client::Credentials::token("t"));
    g.identity.dir = Some("/nonexistent".into());
    let mut external = embedded(SlowSubscriberPolicy::Block);
    external.embedded = false;
    let err = Target::open(&g, &external)
        .await
        .err()
        .map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("choose at most one of --cert")),
        "{err:?}"
    );
}
