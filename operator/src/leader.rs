//! Leader election on a `coordination.k8s.io/v1` Lease, so two operator replicas are safe: only
//! the holder reconciles, and a holder that loses the lease stops writing before anyone else can
//! take it.
//!
//! Hand-written, deliberately. Of the maintained crates, `kube-leader-election` 0.44 needs kube
//! 4, and `kube-lease-manager` 0.13 (kube 5) judges expiry from the holder's `renewTime` against
//! the local wall clock and puts no timeout on its API calls: the two flaws this module exists
//! to avoid.
//!
//! How it works, as client-go's elector does:
//! - **Locally observed times.** A candidate never compares the holder's `renewTime` with its
//!   own wall clock. It remembers the last lease record it saw and *when it saw it change*, on
//!   its own monotonic clock ([`tokio::time::Instant`]); the lease has expired when the record
//!   has not changed for `leaseDurationSeconds` of *local* time. Clock skew between replicas
//!   therefore cannot make a live lease look expired (or a dead one look live). See
//!   [`Observer`].
//! - **Timed-out calls.** Every API call is bounded by `api_timeout`, below `renew_deadline`,
//!   and a renewal attempt never runs past the renew deadline: a hung API server cannot keep a
//!   holder believing it still leads.
//! - **Fencing.** The holder renews every `retry_period`. When it cannot renew within
//!   `renew_deadline` of its last successful renewal (measured from when that attempt
//!   *started*), or sees another holder, it trips its [`Fencer`]: the reconciler and the
//!   autoscaler select on the [`crate::fence::Fence`] and stop, and the process exits. Because
//!   `renew_deadline` < `lease_duration`, that happens before any candidate can see the lease
//!   expire.
//! - Updates carry the Lease's `resourceVersion`, so two candidates racing for an expired lease
//!   cannot both win.
//!
//! The API calls go through [`LeaseApi`] (the real one is [`KubeLeases`]), so the tests drive
//! the elector with a fake API and tokio's paused clock.

mod api;
mod observer;

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::ObjectMeta;
use tokio::sync::watch;
use tokio::time::Instant;

pub use api::{KubeLeases, LeaseApi};
pub use observer::{Decision, Observer};

use crate::error::{Error, Result};
use crate::fence::Fencer;

/// Lease settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// Lease name.
    pub name: String,
    /// Lease namespace.
    pub namespace: String,
    /// This replica's identity (the pod name).
    pub identity: String,
    /// How long a lease stays valid without renewal.
    pub lease_duration: Duration,
    /// How long the holder keeps trying to renew before it gives up (below `lease_duration`).
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
    /// Longest wait for one API call (below `renew_deadline`).
    pub api_timeout: Duration,
}

impl LeaseConfig {
    /// The operator's timings: a 15 s lease, renewed every 2 s, given up after 10 s without a
    /// renewal, each API call at most 4 s.
    pub fn standard(name: String, namespace: String, identity: String) -> Self {
        LeaseConfig {
            name,
            namespace,
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            api_timeout: Duration::from_secs(4),
        }
    }

    /// Checks the ordering the fencing relies on: `api_timeout` < `renew_deadline` <
    /// `lease_duration`, and `retry_period` < `renew_deadline`.
    pub fn check(&self) -> Result<()> {
        if self.api_timeout >= self.renew_deadline
            || self.renew_deadline >= self.lease_duration
            || self.retry_period >= self.renew_deadline
        {
            return Err(Error::Leadership(format!(
                "lease timings must satisfy api timeout ({:?}) < renew deadline ({:?}) < lease duration ({:?}) and retry period ({:?}) < renew deadline",
                self.api_timeout, self.renew_deadline, self.lease_duration, self.retry_period
            )));
        }
        Ok(())
    }
}

/// The lease spec to write when acquiring or renewing (`now` is written for humans and
/// other tools; electors compare only their own observations).
pub fn next_spec(
    previous: Option<&LeaseSpec>,
    identity: &str,
    now: Timestamp,
    duration: Duration,
) -> LeaseSpec {
    let prev = previous.cloned().unwrap_or_default();
    let ours = prev.holder_identity.as_deref() == Some(identity);
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(i32::try_from(duration.as_secs()).unwrap_or(15)),
        acquire_time: if ours {
            prev.acquire_time.clone()
        } else {
            Some(MicroTime(now))
        },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(match (ours, prev.lease_transitions, previous.is_some()) {
            (true, t, _) => t.unwrap_or(0),
            (false, t, true) => t.unwrap_or(0).saturating_add(1),
            (false, _, false) => 0,
        }),
        ..prev
    }
}

/// A leader elector for one lease.
pub struct LeaderElector<A: LeaseApi = KubeLeases> {
    api: A,
    cfg: LeaseConfig,
    observer: Mutex<Observer>,
    /// When the last successful acquire or renew *started* (the lease is ours for at most
    /// `lease_duration` from about then, as others see it).
    renewed: Mutex<Option<Instant>>,
}

impl LeaderElector<KubeLeases> {
    /// An elector on the API server.
    pub fn new(client: Client, cfg: LeaseConfig) -> Self {
        let api = KubeLeases::new(client, &cfg.namespace, &cfg.name);
        Self::with_api(api, cfg)
    }
}

impl<A: LeaseApi> LeaderElector<A> {
    /// An elector over any [`LeaseApi`].
    pub fn with_api(api: A, cfg: LeaseConfig) -> Self {
        LeaderElector {
            api,
            cfg,
            observer: Mutex::new(Observer::default()),
            renewed: Mutex::new(None),
        }
    }

    /// The settings.
    pub fn config(&self) -> &LeaseConfig {
        &self.cfg
    }

    fn err(&self, verb: &'static str, e: kube::Error) -> Error {
        Error::kube(verb, "Lease", &self.cfg.name, e)
    }

    /// Runs one API call for at most `api_timeout`.
    async fn call<T>(
        &self,
        verb: &'static str,
        fut: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<Result<T, kube::Error>> {
        tokio::time::timeout(self.cfg.api_timeout, fut)
            .await
            .map_err(|_| {
                Error::Leadership(format!(
                    "{verb} lease {}: no answer within {:?}",
                    self.cfg.name, self.cfg.api_timeout
                ))
            })
    }

    fn observe(&self, spec: Option<&LeaseSpec>, now: Instant) {
        let mut o = self.observer.lock().unwrap_or_else(|p| p.into_inner());
        o.observe(spec, now);
    }

    fn decide(&self, now: Instant) -> Decision {
        let o = self.observer.lock().unwrap_or_else(|p| p.into_inner());
        o.decide(&self.cfg.identity, now, self.cfg.lease_duration)
    }

    /// One attempt to acquire or renew, every call timed out. `Ok(true)` when this replica
    /// holds the lease afterwards.
    pub async fn try_acquire_or_renew(&self) -> Result<bool> {
        let started = Instant::now();
        let won = self.attempt().await;
        if matches!(won, Ok(true)) {
            *self.renewed.lock().unwrap_or_else(|p| p.into_inner()) = Some(started);
        }
        won
    }

    async fn attempt(&self) -> Result<bool> {
        let existing = self
            .call("get", self.api.get())
            .await?
            .map_err(|e| self.err("get", e))?;
        let now = Instant::now();
        let Some(lease) = existing else {
            let spec = next_spec(
                None,
                &self.cfg.identity,
                Timestamp::now(),
                self.cfg.lease_duration,
            );
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(spec.clone()),
            };
            return match self.call("create", self.api.create(&lease)).await? {
                Ok(_) => {
                    self.observe(Some(&spec), now);
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(self.err("create", e)),
            };
        };
        self.observe(lease.spec.as_ref(), now);
        match self.decide(now) {
            Decision::Wait { .. } => Ok(false),
            Decision::Acquire | Decision::Renew => {
                let spec = next_spec(
                    lease.spec.as_ref(),
                    &self.cfg.identity,
                    Timestamp::now(),
                    self.cfg.lease_duration,
                );
                let updated = Lease {
                    spec: Some(spec.clone()),
                    metadata: lease.metadata,
                };
                match self.call("replace", self.api.replace(&updated)).await? {
                    Ok(_) => {
                        self.observe(Some(&spec), now);
                        Ok(true)
                    }
                    Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                    Err(e) => Err(self.err("replace", e)),
                }
            }
        }
    }

    /// Waits until this replica holds the lease, or `shutdown` turns true (`Ok(false)`).
    pub async fn acquire(&self, shutdown: &mut watch::Receiver<bool>) -> Result<bool> {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return Ok(true),
                Ok(false) => tracing::debug!(lease = %self.cfg.name, "lease held elsewhere"),
                Err(e) => tracing::warn!(error = %e, "leader election attempt failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Ok(false),
            }
        }
    }

    /// Renews the lease every `retry_period` until `shutdown` turns true (`Ok`), or until
    /// leadership is lost (`Err`): another holder is seen, or no renewal succeeded within
    /// `renew_deadline` of the start of the last successful one (a hung call counts as failed
    /// at its timeout, and no attempt runs past the deadline). On loss `fencer` is tripped
    /// before returning.
    pub async fn hold(&self, shutdown: &mut watch::Receiver<bool>, fencer: &Fencer) -> Result<()> {
        let lost = |why: String| {
            fencer.trip();
            Err(Error::Leadership(why))
        };
        let last_renewed = || {
            self.renewed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or_else(Instant::now)
        };
        let mut deadline = last_renewed() + self.cfg.renew_deadline;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            }
            let started = Instant::now();
            if started >= deadline {
                return lost(format!(
                    "could not renew the lease within {:?}",
                    self.cfg.renew_deadline
                ));
            }
            match tokio::time::timeout_at(deadline, self.try_acquire_or_renew()).await {
                Ok(Ok(true)) => deadline = last_renewed() + self.cfg.renew_deadline,
                Ok(Ok(false)) => return lost("another replica holds the lease".into()),
                Ok(Err(e)) => tracing::warn!(error = %e, "lease renewal failed"),
                Err(_) => tracing::warn!("lease renewal ran into the renew deadline"),
            }
            if Instant::now() >= deadline {
                return lost(format!(
                    "could not renew the lease within {:?}",
                    self.cfg.renew_deadline
                ));
            }
        }
    }

    /// Gives the lease up on shutdown so a standby takes over at once.
    pub async fn release(&self) -> Result<()> {
        let Some(mut lease) = self
            .call("get", self.api.get())
            .await?
            .map_err(|e| self.err("get", e))?
        else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        self.call("replace", self.api.replace(&lease))
            .await?
            .map(|_| ())
            .map_err(|e| self.err("replace", e))
    }
}

#[cfg(test)]
mod tests;
