//! The `DiskFull` condition: whether a broker's storage volume is full, from each broker's
//! `GET /storage` (the broker's `durable::volume`: the volume's free and total bytes, and how
//! many of its durable logs refuse appends for space). The controller fetches it from every
//! broker pod the StatefulSet controls when topics are durable (`crate::controller`), at each
//! reconcile, which comes at least every [`VOLUME_POLL`] then; this module turns the answers
//! into the condition. Pure.
//!
//! A full volume does not stop a broker: the batches that find no space are refused (their
//! acked publishes answered `Internal`), retention runs at once, and appends resume by themselves when space
//! returns (`docs/durability.md`). The condition is where it shows on the cluster, beside the
//! `StarlingDiskFull` alert.

use std::time::Duration;

use serde::Deserialize;

use crate::crd::conditions::Reason;

/// Longest time between two reads of the volumes while topics are durable.
pub const VOLUME_POLL: Duration = Duration::from_secs(30);
/// Longest wait for one broker's `/storage`.
pub const VOLUME_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest `/storage` body read.
pub const MAX_BODY: usize = 4096;

/// What a broker's `GET /storage` says (fields the operator does not read are ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct VolumeReport {
    /// Bytes still free on the volume, when the broker could measure them.
    #[serde(default)]
    pub free_bytes: Option<u64>,
    /// The volume's size, as `free_bytes`.
    #[serde(default)]
    pub total_bytes: Option<u64>,
    /// Durable logs that refuse appends for space.
    #[serde(default)]
    pub full_logs: u64,
    /// The broker's verdict: a log refuses appends for space, or no byte is free.
    #[serde(default)]
    pub full: bool,
}

/// One broker pod's answer, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerVolume {
    /// The pod's name.
    pub pod: String,
    /// Its report, or why it could not be read.
    pub answer: Result<VolumeReport, String>,
}

/// What the controller saw of the volumes: one answer per broker pod, or why the pods could
/// not be listed.
pub type Observation = Result<Vec<BrokerVolume>, String>;

/// Reads a `/storage` body.
pub fn parse(body: &[u8]) -> Result<VolumeReport, String> {
    serde_json::from_slice(body).map_err(|e| format!("not a /storage answer: {e}"))
}

/// `DiskFull`'s reason and message. `durable`: some topic is durable (else the brokers write
/// nothing to a volume); `observed`: the answers, `None` when they were not read.
pub fn condition(durable: bool, observed: Option<&Observation>) -> (Reason, String) {
    if !durable {
        return (
            Reason::NoDurableTopics,
            "no topic is durable: the brokers keep nothing on a volume".into(),
        );
    }
    let answers = match observed {
        None => {
            return (
                Reason::VolumesUnknown,
                "the brokers' volumes have not been read yet".into(),
            );
        }
        Some(Err(why)) => return (Reason::VolumesUnknown, why.clone()),
        Some(Ok(answers)) => answers,
    };
    let silent: Vec<String> = answers
        .iter()
        .filter_map(|b| b.answer.as_ref().err().map(|e| format!("{}: {e}", b.pod)))
        .collect();
    let read: Vec<(&str, &VolumeReport)> = answers
        .iter()
        .filter_map(|b| b.answer.as_ref().ok().map(|r| (b.pod.as_str(), r)))
        .collect();
    let full: Vec<String> = read
        .iter()
        .filter(|(_, r)| r.full)
        .map(|(pod, r)| {
            let logs = match r.full_logs {
                0 => "no byte free".to_string(),
                1 => "1 durable log refuses appends for space".to_string(),
                n => format!("{n} durable logs refuse appends for space"),
            };
            format!("{pod}: {logs}{}", space(r))
        })
        .collect();
    let unanswered = if silent.is_empty() {
        String::new()
    } else {
        format!("; not read: {}", silent.join(", "))
    };
    if !full.is_empty() {
        return (
            Reason::VolumeFull,
            format!("{}{unanswered}", full.join("; ")),
        );
    }
    if read.is_empty() {
        return (
            Reason::VolumesUnknown,
            if silent.is_empty() {
                "no broker pod to read yet".into()
            } else {
                format!("no broker answered GET /storage: {}", silent.join(", "))
            },
        );
    }
    let least = read
        .iter()
        .filter_map(|(pod, r)| r.free_bytes.map(|f| (f, *pod, *r)))
        .min_by_key(|(f, pod, _)| (*f, *pod));
    let least = least.map_or(String::new(), |(_, pod, r)| {
        format!("; least free: {pod}{}", space(r))
    });
    (
        Reason::VolumesHaveSpace,
        format!(
            "{} of {} brokers read, none full{least}{unanswered}",
            read.len(),
            answers.len()
        ),
    )
}

/// ` (free F of T)` in binary units, or nothing when unmeasured.
fn space(r: &VolumeReport) -> String {
    match (r.free_bytes, r.total_bytes) {
        (Some(free), Some(total)) => format!(" (free {} of {})", bytes(free), bytes(total)),
        (Some(free), None) => format!(" (free {})", bytes(free)),
        _ => String::new(),
    }
}

fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(pod: &str, free: u64, full_logs: u64) -> BrokerVolume {
        BrokerVolume {
            pod: pod.into(),
            answer: Ok(VolumeReport {
                free_bytes: Some(free),
                total_bytes: Some(1 << 30),
                full_logs,
                full: full_logs > 0 || free == 0,
            }),
        }
    }

    fn silent(pod: &str) -> BrokerVolume {
        BrokerVolume {
            pod: pod.into(),
            answer: Err("timed out".into()),
        }
    }

    #[test]
    fn a_full_broker_makes_the_condition_true_and_is_named() {
        let obs = Ok(vec![ok("b-0", 5 << 20, 0), ok("b-1", 0, 2), silent("b-2")]);
        let (reason, msg) = condition(true, Some(&obs));
        assert_eq!(reason, Reason::VolumeFull);
        assert_eq!(reason.status(), "True");
        assert_eq!(
            msg,
            "b-1: 2 durable logs refuse appends for space (free 0 B of 1.0 GiB); not read: b-2: timed out"
        );
        let (_, msg) = condition(true, Some(&Ok(vec![ok("b-0", 0, 0)])));
        assert_eq!(msg, "b-0: no byte free (free 0 B of 1.0 GiB)");
    }

    #[test]
    fn space_everywhere_is_false_and_names_the_least_free() {
        let obs = Ok(vec![ok("b-0", 5 << 20, 0), ok("b-1", 3 << 20, 0)]);
        let (reason, msg) = condition(true, Some(&obs));
        assert_eq!(reason, Reason::VolumesHaveSpace);
        assert_eq!(reason.status(), "False");
        assert_eq!(
            msg,
            "2 of 2 brokers read, none full; least free: b-1 (free 3.0 MiB of 1.0 GiB)"
        );
    }

    #[test]
    fn nothing_read_is_unknown_and_nothing_durable_is_false() {
        assert_eq!(condition(true, None).0, Reason::VolumesUnknown);
        assert_eq!(
            condition(true, Some(&Err("pods: forbidden".into()))),
            (Reason::VolumesUnknown, "pods: forbidden".into())
        );
        let (reason, msg) = condition(true, Some(&Ok(vec![silent("b-0")])));
        assert_eq!(reason, Reason::VolumesUnknown);
        assert_eq!(reason.status(), "Unknown");
        assert_eq!(msg, "no broker answered GET /storage: b-0: timed out");
        assert_eq!(
            condition(true, Some(&Ok(vec![]))).1,
            "no broker pod to read yet"
        );
        let (reason, _) = condition(false, Some(&Ok(vec![ok("b-0", 0, 3)])));
        assert_eq!(reason, Reason::NoDurableTopics);
        assert_eq!(reason.status(), "False");
    }

    #[test]
    fn the_broker_answer_parses_and_bad_bodies_are_refused() {
        let body = br#"{"storage_dir":"/data","free_bytes":10,"total_bytes":20,"full_logs":1,"full":true}"#;
        assert_eq!(
            parse(body),
            Ok(VolumeReport {
                free_bytes: Some(10),
                total_bytes: Some(20),
                full_logs: 1,
                full: true,
            })
        );
        let none = br#"{"storage_dir":null,"free_bytes":null,"total_bytes":null,"full_logs":0,"full":false}"#;
        assert_eq!(parse(none), Ok(VolumeReport::default()));
        assert!(parse(b"not json").is_err());
        assert!(parse(br#"{"full":"yes"}"#).is_err());
    }
}
