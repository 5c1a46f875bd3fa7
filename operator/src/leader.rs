//! Leader election on a `coordination.k8s.io/v1` Lease, so two operator replicas are safe: only
//! the holder reconciles. kube 5 ships no elector, so this is a small one.
//!
//! The holder renews every `retry_period`; a lease not renewed within `lease_duration` may be
//! taken over. Updates use the Lease's `resourceVersion`, so two candidates racing for an expired
//! lease cannot both win. A holder that cannot renew within `renew_deadline` gives up and the
//! process exits, so a partitioned replica never keeps reconciling next to the new leader.
//! [`decide`] and [`next_spec`] are the pure core.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::Client;
use kube::api::{Api, ObjectMeta, PostParams};
use tokio::sync::watch;

use crate::error::{Error, Result};

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
    /// How long the holder keeps trying to renew before it gives up.
    pub renew_deadline: Duration,
    /// Pause between attempts.
    pub retry_period: Duration,
}

/// What to do with the lease as observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds a valid lease: take it.
    Acquire,
    /// We hold it: renew it.
    Renew,
    /// Someone else holds a valid lease.
    Wait {
        /// The holder.
        holder: String,
    },
}

/// Decides from the observed lease.
pub fn decide(
    lease: Option<&LeaseSpec>,
    identity: &str,
    now: Timestamp,
    default_duration: Duration,
) -> Decision {
    let Some(spec) = lease else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder == identity {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::Acquire;
    }
    let secs = spec.lease_duration_seconds.map_or_else(
        || i64::try_from(default_duration.as_secs()).unwrap_or(15),
        i64::from,
    );
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else {
        return Decision::Acquire;
    };
    match renewed.0.checked_add(SignedDuration::from_secs(secs)) {
        Ok(expiry) if expiry > now => Decision::Wait {
            holder: holder.to_string(),
        },
        _ => Decision::Acquire,
    }
}

/// The lease spec to write when acquiring or renewing.
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
#[derive(Clone)]
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaseConfig,
}

impl LeaderElector {
    /// Creates an elector.
    pub fn new(client: Client, cfg: LeaseConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &cfg.namespace),
            cfg,
        }
    }

    fn err(&self, verb: &'static str, e: kube::Error) -> Error {
        Error::kube(verb, "Lease", &self.cfg.name, e)
    }

    /// One attempt to acquire or renew. `Ok(true)` when this replica holds the lease afterwards.
    pub async fn try_acquire_or_renew(&self) -> Result<bool> {
        let now = Timestamp::now();
        let existing = self
            .api
            .get_opt(&self.cfg.name)
            .await
            .map_err(|e| self.err("get", e))?;
        let Some(lease) = existing else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(next_spec(
                    None,
                    &self.cfg.identity,
                    now,
                    self.cfg.lease_duration,
                )),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(self.err("create", e)),
            };
        };
        match decide(
            lease.spec.as_ref(),
            &self.cfg.identity,
            now,
            self.cfg.lease_duration,
        ) {
            Decision::Wait { .. } => Ok(false),
            Decision::Acquire | Decision::Renew => {
                let updated = Lease {
                    spec: Some(next_spec(
                        lease.spec.as_ref(),
                        &self.cfg.identity,
                        now,
                        self.cfg.lease_duration,
                    )),
                    metadata: lease.metadata,
                };
                match self
                    .api
                    .replace(&self.cfg.name, &PostParams::default(), &updated)
                    .await
                {
                    Ok(_) => Ok(true),
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

    /// Renews the lease until `shutdown` turns true (`Ok`) or renewal fails for longer than
    /// `renew_deadline` (`Err`: leadership lost).
    pub async fn hold(&self, shutdown: &mut watch::Receiver<bool>) -> Result<()> {
        let mut last_renewed = tokio::time::Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.cfg.retry_period) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            }
            match self.try_acquire_or_renew().await {
                Ok(true) => last_renewed = tokio::time::Instant::now(),
                Ok(false) => {
                    return Err(Error::Leadership("another replica took the lease".into()));
                }
                Err(e) => tracing::warn!(error = %e, "lease renewal failed"),
            }
            if last_renewed.elapsed() > self.cfg.renew_deadline {
                return Err(Error::Leadership(format!(
                    "could not renew the lease for {:?}",
                    self.cfg.renew_deadline
                )));
            }
        }
    }

    /// Gives the lease up on shutdown so a standby takes over at once.
    pub async fn release(&self) -> Result<()> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.cfg.name)
            .await
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
        self.api
            .replace(&self.cfg.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
            .map_err(|e| self.err("replace", e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Duration = Duration::from_secs(15);

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn held_by(who: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(who.to_string()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(at(renewed))),
            acquire_time: Some(MicroTime(at(renewed))),
            lease_transitions: Some(2),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn decisions() {
        assert_eq!(decide(None, "a", at(0), D), Decision::Acquire);
        assert_eq!(
            decide(Some(&held_by("a", 0)), "a", at(100), D),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&held_by("b", 0)), "a", at(10), D),
            Decision::Wait { holder: "b".into() }
        );
        assert_eq!(
            decide(Some(&held_by("b", 0)), "a", at(16), D),
            Decision::Acquire
        );
        let released = LeaseSpec {
            holder_identity: None,
            ..held_by("b", 0)
        };
        assert_eq!(decide(Some(&released), "a", at(1), D), Decision::Acquire);
    }

    #[test]
    fn takeover_counts_a_transition_and_renewal_does_not() {
        let taken = next_spec(Some(&held_by("b", 0)), "a", at(20), D);
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.lease_transitions, Some(3));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(20))));
        let renewed = next_spec(Some(&held_by("a", 0)), "a", at(5), D);
        assert_eq!(renewed.lease_transitions, Some(2));
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(5))));
        assert_eq!(next_spec(None, "a", at(0), D).lease_transitions, Some(0));
    }

    mod against_the_fake_api {
        use std::sync::{Arc, Mutex};

        use serde_json::{Value, json};

        use super::*;
        use crate::fake_api::{Fake, NS, fake_client};

        const PATH: &str =
            "/apis/coordination.k8s.io/v1/namespaces/messaging/leases/starling-operator";

        fn elector(fake: &Arc<Mutex<Fake>>, me: &str) -> LeaderElector {
            LeaderElector::new(
                fake_client(fake.clone()),
                LeaseConfig {
                    name: "starling-operator".into(),
                    namespace: "messaging".into(),
                    identity: me.into(),
                    lease_duration: D,
                    renew_deadline: Duration::from_millis(50),
                    retry_period: Duration::from_millis(5),
                },
            )
        }

        fn stored(fake: &Arc<Mutex<Fake>>) -> Value {
            let f = fake.lock().unwrap_or_else(|p| p.into_inner());
            f.objects.get(PATH).cloned().unwrap_or_default()
        }

        fn put_lease(fake: &Arc<Mutex<Fake>>, holder: &str, renewed: Timestamp) {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some("starling-operator".into()),
                    namespace: Some("messaging".into()),
                    resource_version: Some("7".into()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(holder.into()),
                    lease_duration_seconds: Some(15),
                    renew_time: Some(MicroTime(renewed)),
                    lease_transitions: Some(4),
                    ..LeaseSpec::default()
                }),
            };
            let mut f = fake.lock().unwrap_or_else(|p| p.into_inner());
            f.objects
                .insert(PATH.into(), serde_json::to_value(lease).unwrap_or_default());
        }

        #[tokio::test]
        async fn creates_a_missing_lease() {
            let fake = Arc::new(Mutex::new(Fake::default()));
            assert!(matches!(
                elector(&fake, "a").try_acquire_or_renew().await,
                Ok(true)
            ));
            assert_eq!(stored(&fake)["spec"]["holderIdentity"], json!("a"));
            let posts = fake.lock().map(|f| f.paths("POST")).unwrap_or_default();
            assert_eq!(posts, vec!["leases"]);
            assert!(NS.contains("messaging"));
        }

        #[tokio::test]
        async fn waits_for_a_live_holder_and_takes_over_an_expired_one() {
            let fake = Arc::new(Mutex::new(Fake::default()));
            put_lease(&fake, "b", Timestamp::now());
            assert!(matches!(
                elector(&fake, "a").try_acquire_or_renew().await,
                Ok(false)
            ));
            assert_eq!(stored(&fake)["spec"]["holderIdentity"], json!("b"));
            let stale = Timestamp::now()
                .checked_sub(SignedDuration::from_secs(60))
                .unwrap_or(Timestamp::UNIX_EPOCH);
            put_lease(&fake, "b", stale);
            assert!(matches!(
                elector(&fake, "a").try_acquire_or_renew().await,
                Ok(true)
            ));
            let lease = stored(&fake);
            assert_eq!(lease["spec"]["holderIdentity"], json!("a"));
            assert_eq!(lease["spec"]["leaseTransitions"], json!(5));
            assert_eq!(
                lease["metadata"]["resourceVersion"],
                json!("7"),
                "optimistic update"
            );
        }

        #[tokio::test]
        async fn losing_a_race_is_not_an_error() {
            let fake = Arc::new(Mutex::new(Fake::default()));
            put_lease(&fake, "b", Timestamp::UNIX_EPOCH);
            if let Ok(mut f) = fake.lock() {
                f.fail = Some(("PUT", "leases/starling-operator", 409));
            }
            assert!(matches!(
                elector(&fake, "a").try_acquire_or_renew().await,
                Ok(false)
            ));
        }

        #[tokio::test]
        async fn a_holder_notices_a_takeover_and_releases_on_shutdown() {
            let fake = Arc::new(Mutex::new(Fake::default()));
            let me = elector(&fake, "a");
            assert!(matches!(me.try_acquire_or_renew().await, Ok(true)));
            put_lease(&fake, "b", Timestamp::now());
            let (_tx, mut rx) = watch::channel(false);
            assert!(matches!(me.hold(&mut rx).await, Err(Error::Leadership(_))));

            put_lease(&fake, "a", Timestamp::now());
            assert!(me.release().await.is_ok());
            assert_eq!(stored(&fake)["spec"]["holderIdentity"], Value::Null);
            let (tx, mut rx) = watch::channel(false);
            let _ = tx.send(true);
            assert!(
                me.hold(&mut rx).await.is_ok(),
                "shutdown ends holding cleanly"
            );
        }
    }
}
