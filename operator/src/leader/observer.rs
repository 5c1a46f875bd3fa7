//! What a candidate has seen of the lease, on its own monotonic clock, and the decision taken
//! from it ([`Observer`]). Pure: the clock is passed in.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use tokio::time::Instant;

/// The parts of a lease record whose change shows its holder is alive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    acquire_time: Option<MicroTime>,
    transitions: Option<i32>,
    duration_seconds: Option<i32>,
}

impl Record {
    fn of(spec: Option<&LeaseSpec>) -> Self {
        let spec = spec.cloned().unwrap_or_default();
        Record {
            holder: spec.holder_identity.filter(|h| !h.is_empty()),
            renew_time: spec.renew_time,
            acquire_time: spec.acquire_time,
            transitions: spec.lease_transitions,
            duration_seconds: spec.lease_duration_seconds,
        }
    }
}

/// What a candidate has seen of the lease: the last record and the local monotonic time at
/// which it last changed. Pure: the clock is passed in.
#[derive(Debug, Clone, Default)]
pub struct Observer {
    pub(super) last: Option<(Record, Instant)>,
}

/// What to do with the lease as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds a valid lease: take it.
    Acquire,
    /// We hold it: renew it.
    Renew,
    /// Someone else holds a lease that is live by local observation.
    Wait {
        /// The holder.
        holder: String,
    },
}

impl Observer {
    /// Records the lease as read at `now` (local monotonic time): a changed record restarts
    /// its expiry clock.
    pub fn observe(&mut self, spec: Option<&LeaseSpec>, now: Instant) {
        let record = Record::of(spec);
        if self.last.as_ref().is_none_or(|(r, _)| *r != record) {
            self.last = Some((record, now));
        }
    }

    /// Decides from the last observation. Another holder's lease is live until its record
    /// has stayed unchanged for its `leaseDurationSeconds` (else `default_duration`) of local
    /// time; the holder's `renewTime` is never compared with this replica's clock.
    pub fn decide(&self, identity: &str, now: Instant, default_duration: Duration) -> Decision {
        let Some((record, seen)) = &self.last else {
            return Decision::Acquire;
        };
        let Some(holder) = record.holder.as_deref() else {
            return Decision::Acquire;
        };
        if holder == identity {
            return Decision::Renew;
        }
        let duration = record
            .duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(default_duration, Duration::from_secs);
        if now.saturating_duration_since(*seen) < duration {
            Decision::Wait {
                holder: holder.to_string(),
            }
        } else {
            Decision::Acquire
        }
    }
}
