//! `starling bench profiles`: holds each performance profile to what the reference promises
//! for it (`bench/profiles.txt`, read by [`crate::reference`]). Owns the runs: per trial and
//! profile, a fresh embedded broker with that profile (`auth_mode: none`, as every embedded
//! run) and two runs of the profile's workload — one producer, `fanout` subscribers of one
//! topic, `payload`-byte messages:
//!
//! - *peak*: closed loop, `batch` messages per publish call; its delivered msgs/s is held to
//!   the promised throughput;
//! - *paced*: open loop at the promised throughput's lower end (delivered msgs/s, so
//!   `low / fanout` publishes per second), one message per call (in open loop a batched
//!   message would wait for its batch to fill, a delay of the publisher's making); its p50 and
//!   p99 are held to the promised latencies. A closed-loop run's latency measures the buffers
//!   between the ends, not the broker's latency.
//!
//! The verdicts and the table are [`crate::profiles_report`]'s.

use std::time::Duration;

use crate::args::{Globals, ProfilesArgs, PubSubArgs, TargetArgs};
use crate::error::BenchError;
use crate::profiles_report::{Measured, ProfilesReport, Row, SCHEMA};
use crate::pubsub::{self, PubSubPlan};
use crate::reference::{self, Promise};
use crate::result::{Provenance, RunResult};
use crate::table;
use crate::target::Target;

/// How long a subscriber waits for the last deliveries after the producer stops.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

/// The promises to run: those named by `--profiles` (in that order), else every one.
pub(crate) fn select(a: &ProfilesArgs) -> Result<Vec<Promise>, BenchError> {
    let all = reference::promises().map_err(BenchError::Usage)?;
    if a.profiles.is_empty() {
        return Ok(all);
    }
    let mut chosen: Vec<Promise> = Vec::new();
    for p in &a.profiles {
        let promise = all
            .iter()
            .find(|x| x.profile == *p)
            .ok_or_else(|| BenchError::Usage(format!("bench/profiles.txt has no {p} line")))?;
        if !chosen.contains(promise) {
            chosen.push(*promise);
        }
    }
    Ok(chosen)
}

/// The workload of one run: the peak run (`rate: None`) or the paced run.
fn workload(p: &Promise, a: &ProfilesArgs, rate: Option<f64>) -> Result<PubSubPlan, BenchError> {
    PubSubPlan::new(PubSubArgs {
        producers: 1,
        subscribers: p.fanout,
        topics: 1,
        payload: p.payload,
        batch: if rate.is_some() { 1 } else { p.batch },
        shared_pub_client: false,
        pub_conns: None,
        pub_streams_per_conn: None,
        duration: Some(a.duration),
        count: None,
        warmup: a.warmup,
        rate,
        shared_sub_client: false,
        drain_timeout: DRAIN_TIMEOUT,
        ack_window: None,
        publish_window: None,
    })
}

/// A run's failure, or the error that stopped it, as one line.
fn failure(trial: u32, phase: &str, result: &Result<RunResult, BenchError>) -> Option<String> {
    match result {
        Ok(r) => r
            .failure
            .as_ref()
            .map(|f| format!("trial {trial} {phase}: {f}")),
        Err(e) => Some(format!("trial {trial} {phase}: {e}")),
    }
}

/// Runs every chosen profile `--trials` times and judges the medians. Each run's summary is
/// printed as it ends when `print` is set.
pub(crate) async fn run(
    g: &Globals,
    a: &ProfilesArgs,
    progress: bool,
    print: bool,
) -> Result<ProfilesReport, BenchError> {
    if a.trials == 0 || a.duration.is_zero() {
        return Err(BenchError::Usage(
            "--trials and --duration must be greater than zero".into(),
        ));
    }
    let promises = select(a)?;
    let mut provenance = Provenance::start();
    let target_args = TargetArgs {
        embedded: true,
        policy: Some(a.policy),
        metrics_addr: None,
        broker_pid: None,
        json: None,
        name: None,
        no_progress: !progress,
    };
    // Per profile: its peak runs, paced runs and failures.
    let mut measured: Vec<(Vec<RunResult>, Vec<RunResult>, Vec<String>)> =
        vec![Default::default(); promises.len()];
    let mut runs = Vec::new();
    for trial in 1..=a.trials {
        for (i, p) in promises.iter().enumerate() {
            let mut globals = g.clone();
            globals.profile = p.profile;
            let target = Target::open(&globals, &target_args).await?;
            let mut phases = Vec::new();
            let peak = workload(p, a, None)?;
            phases.push(("peak", peak));
            let paced = workload(p, a, Some(p.paced_publish_rate()))?;
            phases.push(("paced", paced));
            for (phase, plan) in phases {
                let name = format!("{} {phase} {}", p.profile, plan.default_name());
                let result = pubsub::run(&target, &plan, &name, progress).await;
                let (peaks, paceds, failures) = &mut measured[i];
                failures.extend(failure(trial, phase, &result));
                let Ok(result) = result else { break };
                if print {
                    print!("{}", table::render(&result));
                }
                if result.failure.is_none() {
                    match phase {
                        "peak" => peaks.push(result.clone()),
                        _ => paceds.push(result.clone()),
                    }
                }
                runs.push(result);
            }
            target.close().await;
        }
    }
    provenance.finish();
    let rows = promises
        .iter()
        .zip(measured)
        .map(|(p, (peaks, paced, failures))| {
            let m = Measured::from_runs(&peaks, &paced, p.paced_publish_rate());
            Row::judge(*p, m, failures)
        })
        .collect();
    Ok(ProfilesReport {
        schema: SCHEMA,
        provenance,
        duration_s: a.duration.as_secs_f64(),
        warmup_s: a.warmup.as_secs_f64(),
        trials: a.trials,
        policy: a.policy.to_string(),
        rows,
        runs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use starling_config::Profile;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        a: ProfilesArgs,
    }

    fn args(argv: &[&str]) -> ProfilesArgs {
        match Wrap::try_parse_from(std::iter::once("x").chain(argv.iter().copied())) {
            Ok(w) => w.a,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn selects_named_profiles_in_order_once() {
        let all = select(&args(&[])).unwrap_or_default();
        assert_eq!(all.len(), Profile::ALL.len());
        let some = select(&args(&["--profiles", "throughput,latency,throughput"]));
        let names: Vec<Profile> = some.unwrap_or_default().iter().map(|p| p.profile).collect();
        assert_eq!(names, [Profile::Throughput, Profile::Latency]);
        assert!(Wrap::try_parse_from(["x", "--profiles", "fast"]).is_err());
    }

    #[test]
    fn peak_batches_and_paced_runs_one_message_per_call_at_the_promised_floor() {
        let a = args(&["--duration", "1s", "--warmup", "200ms"]);
        let balanced = select(&a)
            .unwrap_or_default()
            .into_iter()
            .find(|p| p.profile == Profile::Balanced);
        let Some(b) = balanced else {
            panic!("no balanced promise")
        };
        let peak = workload(&b, &a, None).map(|p| p.args).ok();
        assert_eq!(
            peak.as_ref()
                .map(|x| (x.subscribers, x.batch, x.payload, x.rate)),
            Some((10, 64, 4096, None))
        );
        let paced = workload(&b, &a, Some(b.paced_publish_rate()))
            .map(|p| p.args)
            .ok();
        assert_eq!(
            paced.as_ref().map(|x| (x.batch, x.rate)),
            Some((1, Some(15_000.0)))
        );
        assert_eq!(
            paced.map(|x| (x.duration, x.warmup)),
            Some((Some(Duration::from_secs(1)), Duration::from_millis(200)))
        );
    }
}
