//! Reading the broker's state from outside: `/metrics` (process CPU time),
//! `/config` (the slow-subscriber policy) over plain HTTP/1.1 on its HTTP
//! port (hyper-util's client, as the operator uses), and per-thread CPU time
//! of this process from `/proc`.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use starling_config::{BrokerConfig, ConfigFile, SlowSubscriberPolicy};

/// Limit on one HTTP request to the broker.
const HTTP_TIMEOUT: Duration = Duration::from_secs(3);
/// Largest HTTP response read.
const MAX_RESPONSE: usize = 8 << 20;

/// The body of `GET path` on `addr` (`host:port`) when it answers 200.
pub(crate) async fn http_get(addr: &str, path: &str) -> Option<String> {
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let uri: hyper::Uri = format!("http://{addr}{path}").parse().ok()?;
    let fetch = async {
        let response = client.get(uri).await.ok()?;
        if response.status() != hyper::StatusCode::OK {
            return None;
        }
        let body = Limited::new(response.into_body(), MAX_RESPONSE)
            .collect()
            .await
            .ok()?
            .to_bytes();
        Some(String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(HTTP_TIMEOUT, fetch).await.ok()?
}

/// `process_cpu_seconds_total` from a Prometheus text exposition.
pub(crate) fn parse_cpu(metrics: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix("process_cpu_seconds_total")?;
        let value = rest.split_whitespace().next()?;
        value.parse().ok()
    })
}

/// `slow_subscriber_policy` from the broker's `/config` YAML.
pub(crate) fn parse_policy(config_yaml: &str) -> Option<SlowSubscriberPolicy> {
    config_yaml.lines().find_map(|line| {
        let value = line.trim().strip_prefix("slow_subscriber_policy:")?;
        value.trim().trim_matches(['"', '\'']).parse().ok()
    })
}

/// The broker's resolved config from the YAML its `/config` serves (`BrokerConfig::to_yaml`,
/// which parses back as a config file resolving to the same config); `None` when it does not
/// parse or resolve (an older broker, or not a Starling broker).
pub(crate) fn parse_config(config_yaml: &str) -> Option<BrokerConfig> {
    let file = ConfigFile::from_yaml(config_yaml, "the broker's /config").ok()?;
    let (profile, tier, knobs) = file.into_parts();
    starling_config::resolve(profile?, tier, &knobs).ok()
}

/// User plus system CPU seconds of process `pid` from `/proc/PID/stat` (the broker's parser).
pub(crate) fn process_cpu_s(pid: u32) -> Option<f64> {
    starling_broker::process::cpu_seconds_of(pid)
}

/// CPU seconds used so far by this process's threads whose name starts with
/// one of `prefixes` (from `/proc/self/task/*/schedstat`, in nanoseconds;
/// `None` where `/proc` is unavailable).
pub(crate) fn threads_cpu_s(prefixes: &[&str]) -> Option<f64> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut total_ns = 0u128;
    let (mut matched, mut read) = (0usize, 0usize);
    for task in tasks.flatten() {
        let dir = task.path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else {
            continue;
        };
        if !prefixes.iter().any(|p| comm.trim_end().starts_with(p)) {
            continue;
        }
        matched += 1;
        // A thread that exited since the directory was listed has no schedstat any more:
        // skipped (its time is gone either way), not a reason to report nothing.
        let run_ns = std::fs::read_to_string(dir.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u128>().ok());
        if let Some(ns) = run_ns {
            total_ns += ns;
            read += 1;
        }
    }
    // Matching threads but no schedstat for any: the kernel does not keep it.
    if matched > 0 && read == 0 {
        return None;
    }
    Some(total_ns as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_brokers_config_back_with_its_path_settings() {
        let overrides = starling_config::ConfigOverrides {
            quic_max_mtu_discovery: Some(6550),
            quic_initial_mtu: Some(6550),
            udp_recv_buffer_bytes: Some(4 << 20),
            slow_subscriber_policy: Some(SlowSubscriberPolicy::Block),
            ..Default::default()
        };
        let cfg = starling_config::compose(starling_config::Profile::Latency, None, &overrides);
        let back = parse_config(&cfg.to_yaml()).expect("the broker's /config parses back");
        assert_eq!(back, cfg);
        assert_eq!(back.quic_max_mtu_discovery, 6550);
        assert_eq!(parse_config("not: [a, config"), None);
        let refused = "profile: balanced\nmax_topics: 0\n";
        assert_eq!(parse_config(refused), None, "refused by validation");
    }

    #[test]
    fn finds_process_cpu_in_metrics() {
        let text = "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n\
                    # TYPE process_cpu_seconds_total counter\n\
                    process_cpu_seconds_total 12.34\n\
                    process_max_fds 1024\n";
        assert_eq!(parse_cpu(text), Some(12.34));
        assert_eq!(parse_cpu("other 1\n"), None);
    }

    #[test]
    fn finds_the_policy_in_config() {
        let yaml = "profile: balanced\nslow_subscriber_policy: block\nack_on_commit: false\n";
        assert_eq!(parse_policy(yaml), Some(SlowSubscriberPolicy::Block));
        assert_eq!(
            parse_policy("slow_subscriber_policy: drop_old"),
            Some(SlowSubscriberPolicy::DropOld)
        );
        assert_eq!(parse_policy("nothing: here"), None);
    }

    #[test]
    fn reads_process_cpu_from_proc_stat() {
        if std::path::Path::new("/proc/self/stat").exists() {
            assert!(process_cpu_s(std::process::id()).is_some());
        }
    }

    #[test]
    fn measures_named_threads_of_this_process() {
        let cpu = threads_cpu_s(&[""]);
        if std::path::Path::new("/proc/self/task").exists() {
            assert!(cpu.is_some_and(|s| s > 0.0), "{cpu:?}");
        }
        assert_eq!(threads_cpu_s(&["no-such-thread-name"]).unwrap_or(0.0), 0.0);
    }
}
