//! The pub/sub workload: subscribe, start the producers (closed or open
//! loop), wait for every delivery, and turn the producers' and subscribers'
//! reports into a [`RunResult`].

use std::sync::Arc;
use std::time::Duration;

use starling_client::{Client, DEFAULT_PUBLISH_WINDOW, MAX_PUBLISH_WINDOW, MIN_PUBLISH_WINDOW};
use tokio::sync::watch;

use super::args::PubSubArgs;
use super::clock::{Clock, Schedule};
use super::error::BenchError;
use super::payload::{HEADER_LEN, PayloadFactory};
use super::producer::{self, ProducerPlan, ProducerReport, Stop};
use super::progress::{Counters, Progress};
use super::result::{RunConfig, RunResult};
use super::subscriber::{self, SentCounts, SubscriberPlan, SubscriberReport};
use super::summary::{judge, summarise};
use super::target::Target;
use super::tracker::{Tracker, Window};

/// Measured duration when neither `--duration` nor `--count` is given.
const DEFAULT_DURATION: Duration = Duration::from_secs(5);
/// How long an acked run waits for each topic to take its first acked publish (a replicated
/// durable topic refuses publishes with `Unavailable` until its Raft group has a leader).
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A validated pub/sub workload.
#[derive(Debug, Clone)]
pub(crate) struct PubSubPlan {
    /// The options it came from.
    pub(crate) args: PubSubArgs,
}

impl PubSubPlan {
    /// Checks the options.
    pub(crate) fn new(args: PubSubArgs) -> Result<Self, BenchError> {
        let bad = |m: &str| Err(BenchError::Usage(m.to_string()));
        if args.producers == 0 || args.subscribers == 0 || args.topics == 0 || args.batch == 0 {
            return bad("--producers, --subscribers, --topics and --batch must be at least 1");
        }
        if args.topics > args.producers {
            return bad(
                "--topics must not exceed --producers (producer i publishes to topic i mod --topics)",
            );
        }
        if args.payload < HEADER_LEN {
            return Err(BenchError::Usage(format!(
                "--payload must be at least {HEADER_LEN} bytes (the timestamp/sequence header)"
            )));
        }
        if args.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return bad("--rate must be a positive number of messages per second");
        }
        if args.count == Some(0) || args.duration.is_some_and(|d| d.is_zero()) {
            return bad("--count and --duration must be greater than zero");
        }
        if args.pub_conns == Some(0) || args.pub_streams_per_conn == Some(0) {
            return bad("--pub-conns and --pub-streams-per-conn must be at least 1");
        }
        if args.ack_window == Some(0) {
            return bad("--ack-window must be at least 1");
        }
        if args.ack_window.is_some() && args.rate.is_some() {
            return bad("--ack-window is for closed-loop runs (without --rate)");
        }
        if let Some(bytes) = args.publish_window
            && bytes != 0
            && !(MIN_PUBLISH_WINDOW..=MAX_PUBLISH_WINDOW).contains(&bytes)
        {
            return Err(BenchError::Usage(format!(
                "--publish-window must be 0 (none) or between {MIN_PUBLISH_WINDOW} and \
                 {MAX_PUBLISH_WINDOW} bytes"
            )));
        }
        Ok(PubSubPlan { args })
    }

    /// A name such as `p1-s10-t1-4096B` or `p1-s1-t1-256B@50000/s`.
    pub(crate) fn default_name(&self) -> String {
        let a = &self.args;
        let mut name = format!(
            "p{}-s{}-t{}-{}B",
            a.producers, a.subscribers, a.topics, a.payload
        );
        if a.batch > 1 {
            name += &format!("-b{}", a.batch);
        }
        if let Some(rate) = a.rate {
            name += &format!("@{rate:.0}/s");
        }
        name
    }

    fn duration(&self) -> Option<Duration> {
        match self.args.count {
            Some(_) => None,
            None => Some(self.args.duration.unwrap_or(DEFAULT_DURATION)),
        }
    }

    /// The parameters as recorded in the results.
    pub(crate) fn config(&self, target: &Target) -> RunConfig {
        let a = &self.args;
        let tuning = target.client_config().tuning;
        RunConfig {
            producers: Some(a.producers),
            subscribers: Some(a.subscribers),
            topics: Some(a.topics),
            payload: Some(a.payload),
            batch: Some(a.batch),
            pub_conns: Some(a.pub_conns.unwrap_or(tuning.pub_conn_pool)),
            pub_streams_per_conn: Some(
                a.pub_streams_per_conn
                    .unwrap_or(tuning.pub_streams_per_conn),
            ),
            duration_s: self.duration().map(|d| d.as_secs_f64()),
            count: a.count,
            warmup_s: Some(a.warmup.as_secs_f64()),
            rate: a.rate,
            profile: Some(target.profile.to_string()),
            policy: target.policy.map(|p| p.to_string()),
            ack_window: a.ack_window,
            // Acked publishes are bounded by --ack-window; the window covers the others.
            publish_window: match (a.ack_window, a.publish_window) {
                (Some(_), _) | (None, Some(0)) => None,
                (None, Some(bytes)) => Some(bytes),
                (None, None) => Some(DEFAULT_PUBLISH_WINDOW),
            },
            ..RunConfig::default()
        }
    }
}

/// Runs the workload once against `target`.
pub(crate) async fn run(
    target: &Target,
    plan: &PubSubPlan,
    name: &str,
    progress: bool,
) -> Result<RunResult, BenchError> {
    let a = &plan.args;
    let mut result = RunResult::new("starling", true, name, "pubsub", plan.config(target));
    let prefix = run_prefix();
    let topic = |t: u32| format!("{prefix}.{t}");

    // One client per subscriber by default (each its own QUIC endpoint, like
    // separate processes and like the NATS load program's connections).
    let shared_sub_client = if a.shared_sub_client {
        Some(Client::connect(target.client_config()).await?)
    } else {
        None
    };
    let mut sub_clients = Vec::new();
    let mut pub_cfg = target.client_config();
    if let Some(n) = a.pub_conns {
        pub_cfg.tuning.pub_conn_pool = n;
    }
    if let Some(n) = a.pub_streams_per_conn {
        pub_cfg.tuning.pub_streams_per_conn = n;
    }
    if let Some(bytes) = a.publish_window {
        pub_cfg.publish_window_bytes = (bytes > 0).then_some(bytes);
    }
    // One client per producer by default (like separate publishing apps, and
    // like the NATS load program's connections); `--shared-pub-client` puts
    // every producer on one client whose pool spreads topics over streams.
    let shared_pub_client = if a.shared_pub_client {
        Some(Client::connect(pub_cfg.clone()).await?)
    } else {
        None
    };
    let mut pub_clients = Vec::new();
    for _ in 0..a.producers {
        pub_clients.push(match &shared_pub_client {
            Some(c) => c.clone(),
            None => Client::connect(pub_cfg.clone()).await?,
        });
    }

    // Acked runs: each topic first takes one acked publish, retried until it is accepted,
    // before anything subscribes or is measured (a replicated durable topic has no leader
    // until its first use). The live subscriptions opened below start after it.
    if a.ack_window.is_some()
        && let Some(client) = pub_clients.first()
    {
        let deadline = std::time::Instant::now() + TOPIC_READY_TIMEOUT;
        for t in 0..a.topics {
            while let Err(e) = client.publish_acked(&topic(t), &b"ready?"[..]).await {
                if std::time::Instant::now() >= deadline {
                    return Err(e.into());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }

    let clock = Clock::start();
    let measure_start_ns = nanos(a.warmup);
    let stop = match (a.count, plan.duration()) {
        (Some(count), _) => Stop::Count(count.div_ceil(u64::from(a.producers))),
        (None, d) => Stop::At(measure_start_ns + nanos(d.unwrap_or(DEFAULT_DURATION))),
    };
    let window = Window {
        start: measure_start_ns,
        end: match stop {
            Stop::At(end) => end,
            Stop::Count(_) => u64::MAX,
        },
    };
    let (sent_tx, sent_rx) = watch::channel::<SentCounts>(None);
    let mut counters = Counters::default();
    let mut subscribers = Vec::new();
    for t in 0..a.topics {
        let producers: Vec<usize> = (0..a.producers)
            .filter(|p| p % a.topics == t)
            .map(|p| p as usize)
            .collect();
        for _ in 0..a.subscribers {
            let client = match &shared_sub_client {
                Some(c) => c.clone(),
                None => Client::connect(target.client_config()).await?,
            };
            let subscription = client.subscribe(&topic(t)).await?;
            sub_clients.push(client);
            let received_counter = Arc::default();
            counters.received.push(Arc::clone(&received_counter));
            subscribers.push(tokio::spawn(subscriber::run(SubscriberPlan {
                subscription,
                producers: producers.clone(),
                tracker: Tracker::new(a.producers as usize, window),
                clock,
                sent: sent_rx.clone(),
                received_counter,
                drain_timeout: a.drain_timeout,
            })));
        }
    }

    let payloads = PayloadFactory::new(a.payload);
    let mut producers = Vec::new();
    for id in 0..a.producers {
        let sent_counter = Arc::default();
        counters.sent.push(Arc::clone(&sent_counter));
        let p = ProducerPlan {
            id,
            topic: topic(id % a.topics),
            payloads: payloads.clone(),
            batch: a.batch,
            clock,
            measure_start_ns,
            stop,
            sent_counter,
            ack_window: a.ack_window,
        };
        let client = pub_clients[id as usize].clone();
        producers.push(match a.rate {
            None => tokio::spawn(producer::closed_loop(client, p)),
            Some(rate) => {
                let schedule = Schedule::new(0, rate, a.producers);
                let handle = tokio::runtime::Handle::current();
                tokio::task::spawn_blocking(move || {
                    producer::open_loop(handle, client, p, schedule)
                })
            }
        });
    }
    let bar = Progress::start(
        progress,
        name,
        plan.duration().map(|d| d + a.warmup),
        counters,
    );

    // The broker's CPU clock at the window's start and, in duration mode, end, or when every
    // producer has stopped if that is sooner: a producer that failed (its broker restarted,
    // say) ends the run at once instead of at the end of a long `--duration`.
    let (producers_done, mut done) = watch::channel(false);
    let producers = async move {
        let reports = futures::future::join_all(producers).await;
        let _ = producers_done.send(true);
        reports
    };
    let cpu_marks = async {
        let stopped = done.wait_for(|d| *d);
        tokio::pin!(stopped);
        tokio::select! {
            _ = tokio::time::sleep_until(clock.instant(window.start).into()) => {}
            _ = &mut stopped => {}
        }
        let before = target.cpu().await;
        if window.end == u64::MAX {
            return (before, None);
        }
        tokio::select! {
            _ = tokio::time::sleep_until(clock.instant(window.end).into()) => {}
            _ = &mut stopped => {}
        }
        (before, Some(target.cpu().await))
    };
    let (reports, (cpu_before, cpu_end)) = futures::join!(producers, cpu_marks);
    let reports = reports
        .into_iter()
        .map(|r| r.map_err(|e| BenchError::Task(e.to_string())))
        .collect::<Result<Vec<ProducerReport>, _>>()?;
    let sent: Vec<u64> = reports.iter().map(|r| r.sent).collect();
    let _ = sent_tx.send(Some(Arc::new(sent.clone())));
    let subs = futures::future::join_all(subscribers)
        .await
        .into_iter()
        .map(|r| r.map_err(|e| BenchError::Task(e.to_string())))
        .collect::<Result<Vec<SubscriberReport>, _>>()?;
    let cpu_after = match cpu_end {
        Some(mark) => mark,
        None => target.cpu().await,
    };
    bar.finish();
    futures::future::join_all(pub_clients.iter().map(Client::close)).await;
    futures::future::join_all(sub_clients.iter().map(Client::close)).await;

    let (cpu, source) = Target::cpu_used(cpu_before, cpu_after);
    result.broker_cpu_s = cpu;
    result.broker_cpu_source = source;
    result.client_cpu_s = Target::client_cpu_used(cpu_before, cpu_after);
    summarise(&mut result, a, window, &reports, &sent, &subs);
    judge(&mut result, target.policy);
    Ok(result)
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// A topic prefix no other run uses: `bench.<pid>.<unix ns>`.
fn run_prefix() -> String {
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("bench.{}.{ns}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        a: PubSubArgs,
    }

    fn args(argv: &[&str]) -> PubSubArgs {
        let w = Wrap::try_parse_from(std::iter::once("x").chain(argv.iter().copied()));
        match w {
            Ok(w) => w.a,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn validates_options() {
        assert!(PubSubPlan::new(args(&[])).is_ok());
        for bad in [
            &["--payload", "8"][..],
            &["--topics", "2"],
            &["--rate", "0"],
            &["--count", "0"],
            &["--producers", "0"],
            &["--pub-conns", "0"],
            &["--ack-window", "0"],
            &["--ack-window", "8", "--rate", "1000"],
            &["--publish-window", "1000"],
        ] {
            assert!(PubSubPlan::new(args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn names_describe_the_workload() {
        let p = PubSubPlan::new(args(&["--subscribers", "10", "--payload", "4096"]));
        assert_eq!(
            p.map(|p| p.default_name()).ok().as_deref(),
            Some("p1-s10-t1-4096B")
        );
        let p = PubSubPlan::new(args(&["--rate", "50000", "--batch", "8"]));
        assert_eq!(
            p.map(|p| p.default_name()).ok().as_deref(),
            Some("p1-s1-t1-256B-b8@50000/s")
        );
    }
}
