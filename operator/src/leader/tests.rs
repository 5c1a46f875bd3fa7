//! Leader election tests. The pure observer is tested with explicit instants; the elector runs
//! against [`FakeLeases`] (an in-memory Lease with resource versions, which can hang every
//! call) on tokio's paused clock, so skew, expiry and hung calls are exercised in virtual time.
//! A last group runs it through the in-process fake API server ([`crate::fake_api`]).

use std::sync::{Arc, Mutex};

use k8s_openapi::jiff::SignedDuration;
use serde_json::{Value, json};

use super::*;
use crate::fence::fence as fence_pair;

const D: Duration = Duration::from_secs(15);

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn held_by(who: &str, renewed: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(who.to_string()),
        lease_duration_seconds: Some(15),
        renew_time: Some(MicroTime(renewed)),
        acquire_time: Some(MicroTime(renewed)),
        lease_transitions: Some(2),
        ..LeaseSpec::default()
    }
}

#[tokio::test(start_paused = true)]
async fn decisions_use_locally_observed_times() {
    let t0 = Instant::now();
    let s = |n: u64| t0 + Duration::from_secs(n);
    let mut o = Observer::default();
    assert_eq!(o.decide("a", s(0), D), Decision::Acquire, "nothing seen");
    o.observe(Some(&held_by("a", at(0))), s(0));
    assert_eq!(o.decide("a", s(100), D), Decision::Renew);

    // Another holder: live until its record has not changed for 15 s of *our* time,
    // whatever its renewTime says.
    let mut o = Observer::default();
    o.observe(Some(&held_by("b", at(-3600))), s(0));
    assert_eq!(
        o.decide("a", s(10), D),
        Decision::Wait { holder: "b".into() },
        "a renewTime an hour old is not expiry: we only just saw it"
    );
    assert_eq!(o.decide("a", s(16), D), Decision::Acquire);
    // The same record read again does not restart the clock; a changed one does.
    o.observe(Some(&held_by("b", at(-3600))), s(16));
    assert_eq!(o.decide("a", s(16), D), Decision::Acquire);
    o.observe(Some(&held_by("b", at(-3598))), s(16));
    assert_eq!(
        o.decide("a", s(30), D),
        Decision::Wait { holder: "b".into() }
    );

    let released = LeaseSpec {
        holder_identity: None,
        ..held_by("b", at(0))
    };
    o.observe(Some(&released), s(31));
    assert_eq!(o.decide("a", s(31), D), Decision::Acquire);
}

#[test]
fn takeover_counts_a_transition_and_renewal_does_not() {
    let taken = next_spec(Some(&held_by("b", at(0))), "a", at(20), D);
    assert_eq!(taken.holder_identity.as_deref(), Some("a"));
    assert_eq!(taken.lease_transitions, Some(3));
    assert_eq!(taken.acquire_time, Some(MicroTime(at(20))));
    let renewed = next_spec(Some(&held_by("a", at(0))), "a", at(5), D);
    assert_eq!(renewed.lease_transitions, Some(2));
    assert_eq!(renewed.acquire_time, Some(MicroTime(at(0))));
    assert_eq!(renewed.renew_time, Some(MicroTime(at(5))));
    assert_eq!(next_spec(None, "a", at(0), D).lease_transitions, Some(0));
}

#[test]
fn the_standard_timings_keep_the_fencing_order() {
    let cfg = LeaseConfig::standard("l".into(), "ns".into(), "a".into());
    assert!(cfg.check().is_ok());
    let bad = LeaseConfig {
        renew_deadline: cfg.lease_duration,
        ..cfg.clone()
    };
    assert!(bad.check().is_err());
    let bad = LeaseConfig {
        api_timeout: cfg.renew_deadline,
        ..cfg
    };
    assert!(bad.check().is_err());
}

/// An in-memory Lease API: optimistic concurrency by resource version, and a switch that
/// makes every call hang (a partitioned or stuck API server).
#[derive(Default)]
struct FakeState {
    lease: Option<Lease>,
    version: u64,
    hang: bool,
    calls: usize,
}

#[derive(Clone, Default)]
struct FakeLeases(Arc<Mutex<FakeState>>);

fn conflict() -> kube::Error {
    kube::Error::Api(Box::new(kube::core::Status {
        code: 409,
        reason: "Conflict".into(),
        ..kube::core::Status::default()
    }))
}

impl FakeLeases {
    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Counts the call; never returns while hanging.
    async fn gate(&self) {
        let hang = {
            let mut s = self.state();
            s.calls += 1;
            s.hang
        };
        if hang {
            std::future::pending::<()>().await;
        }
    }

    fn holder(&self) -> Option<String> {
        self.state()
            .lease
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.clone())
    }

    /// Another replica writes the lease (as its own clock sees fit).
    fn put(&self, spec: LeaseSpec) {
        let mut s = self.state();
        s.version += 1;
        s.lease = Some(Lease {
            metadata: ObjectMeta {
                name: Some("starling-operator".into()),
                namespace: Some("messaging".into()),
                resource_version: Some(s.version.to_string()),
                ..ObjectMeta::default()
            },
            spec: Some(spec),
        });
    }
}

impl LeaseApi for FakeLeases {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.gate().await;
        Ok(self.state().lease.clone())
    }

    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.gate().await;
        let mut s = self.state();
        if s.lease.is_some() {
            return Err(conflict());
        }
        s.version += 1;
        let mut stored = lease.clone();
        stored.metadata.resource_version = Some(s.version.to_string());
        s.lease = Some(stored.clone());
        Ok(stored)
    }

    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.gate().await;
        let mut s = self.state();
        let current = s
            .lease
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone());
        if current != lease.metadata.resource_version {
            return Err(conflict());
        }
        s.version += 1;
        let mut stored = lease.clone();
        stored.metadata.resource_version = Some(s.version.to_string());
        s.lease = Some(stored.clone());
        Ok(stored)
    }
}

fn config(me: &str) -> LeaseConfig {
    LeaseConfig::standard("starling-operator".into(), "messaging".into(), me.into())
}

fn elector(api: &FakeLeases, me: &str) -> LeaderElector<FakeLeases> {
    LeaderElector::with_api(api.clone(), config(me))
}

fn wall(skew_secs: i64) -> Timestamp {
    Timestamp::now()
        .checked_add(SignedDuration::from_secs(skew_secs))
        .unwrap_or(Timestamp::UNIX_EPOCH)
}

/// Holder `b`, whose clock is `skew_secs` off, renews every 2 s for `secs` seconds.
fn keep_renewing(api: &FakeLeases, skew_secs: i64, secs: u64) -> tokio::task::JoinHandle<()> {
    let api = api.clone();
    api.put(held_by("b", wall(skew_secs)));
    tokio::spawn(async move {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(secs) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            api.put(held_by("b", wall(skew_secs)));
        }
    })
}

async fn candidate_gets_it_within(api: &FakeLeases, secs: u64) -> bool {
    let a = elector(api, "a");
    let (_stop, mut rx) = watch::channel(false);
    matches!(
        tokio::time::timeout(Duration::from_secs(secs), a.acquire(&mut rx)).await,
        Ok(Ok(true))
    )
}

#[tokio::test(start_paused = true)]
async fn a_renewing_holder_with_a_skewed_clock_is_never_taken_over() {
    for skew in [15, -15, -3600] {
        let api = FakeLeases::default();
        let holder = keep_renewing(&api, skew, 120);
        assert!(
            !candidate_gets_it_within(&api, 100).await,
            "skew {skew}s: a live holder kept its lease"
        );
        assert_eq!(api.holder().as_deref(), Some("b"));
        holder.abort();
    }
}

#[tokio::test(start_paused = true)]
async fn a_holder_that_stops_renewing_is_taken_over_after_the_lease_duration() {
    // Even with its renewTime 15 s in the future: expiry is judged by local observation.
    let api = FakeLeases::default();
    api.put(held_by("b", wall(15)));
    let a = elector(&api, "a");
    let started = Instant::now();
    let (_stop, mut rx) = watch::channel(false);
    assert!(matches!(a.acquire(&mut rx).await, Ok(true)));
    let waited = started.elapsed();
    assert!(
        waited >= D && waited <= D + Duration::from_secs(3),
        "took over after {waited:?}"
    );
    assert_eq!(api.holder().as_deref(), Some("a"));
    let transitions = api
        .state()
        .lease
        .as_ref()
        .and_then(|l| l.spec.as_ref())
        .and_then(|s| s.lease_transitions);
    assert_eq!(transitions, Some(3));
}

#[tokio::test(start_paused = true)]
async fn a_hung_api_times_out_loses_the_lease_and_stops_the_controllers() {
    let api = FakeLeases::default();
    let a = elector(&api, "a");
    assert!(matches!(a.try_acquire_or_renew().await, Ok(true)));

    // A stand-in controller: writes while the fence holds, stops when it trips.
    let (fencer, fence) = fence_pair();
    let writes = Arc::new(Mutex::new(0u32));
    let controller = {
        let (fence, writes) = (fence.clone(), writes.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = fence.lost() => return,
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {
                        *writes.lock().unwrap_or_else(|p| p.into_inner()) += 1;
                    }
                }
            }
        })
    };

    // One call hangs: it is timed out, not waited on forever.
    api.state().hang = true;
    let t = Instant::now();
    let attempt = a.try_acquire_or_renew().await;
    assert!(matches!(attempt, Err(Error::Leadership(_))), "{attempt:?}");
    assert_eq!(t.elapsed(), config("a").api_timeout);

    let (_stop, mut rx) = watch::channel(false);
    let t = Instant::now();
    let held = a.hold(&mut rx, &fencer).await;
    let lost_after = t.elapsed();
    assert!(matches!(held, Err(Error::Leadership(_))), "{held:?}");
    assert!(
        lost_after <= config("a").renew_deadline,
        "gave up after {lost_after:?}"
    );
    assert!(
        lost_after < config("a").lease_duration,
        "before anyone else may take it"
    );
    assert!(fence.is_lost());
    let stopped = tokio::time::timeout(Duration::from_secs(1), controller).await;
    assert!(stopped.is_ok(), "the controller stopped with the fence");
    let n = *writes.lock().unwrap_or_else(|p| p.into_inner());
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        *writes.lock().unwrap_or_else(|p| p.into_inner()),
        n,
        "no write after the loss"
    );
}

#[tokio::test(start_paused = true)]
async fn a_holder_keeps_renewing_until_shutdown() {
    let api = FakeLeases::default();
    let a = elector(&api, "a");
    assert!(matches!(a.try_acquire_or_renew().await, Ok(true)));
    let (fencer, fence) = fence_pair();
    let (stop, mut rx) = watch::channel(false);
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(60)).await;
        let _ = stop.send(true);
    });
    assert!(a.hold(&mut rx, &fencer).await.is_ok());
    assert!(!fence.is_lost());
    assert!(api.state().calls >= 2 * 29, "renewed every 2 s");
    let _ = stopper.await;
    assert!(a.release().await.is_ok());
    assert_eq!(api.holder(), None);
}

mod against_the_fake_api {
    use super::*;
    use crate::fake_api::{Fake, NS, fake_client};

    const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/messaging/leases/starling-operator";

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
                api_timeout: Duration::from_millis(40),
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
        let a = elector(&fake, "a");
        assert!(matches!(a.try_acquire_or_renew().await, Ok(false)));
        assert_eq!(stored(&fake)["spec"]["holderIdentity"], json!("b"));
        // A renewTime a minute old is no proof of expiry: `a` has only just seen it.
        let stale = Timestamp::now()
            .checked_sub(SignedDuration::from_secs(60))
            .unwrap_or(Timestamp::UNIX_EPOCH);
        put_lease(&fake, "b", stale);
        assert!(matches!(a.try_acquire_or_renew().await, Ok(false)));
        // Expired once unchanged for the lease duration of `a`'s own time.
        if let Ok(mut o) = a.observer.lock()
            && let Some((_, seen)) = o.last.as_mut()
        {
            *seen = Instant::now().checked_sub(D).unwrap_or_else(Instant::now);
        }
        assert!(matches!(a.try_acquire_or_renew().await, Ok(true)));
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
        let a = elector(&fake, "a");
        if let Ok(mut o) = a.observer.lock() {
            o.observe(
                stored_spec(&fake).as_ref(),
                Instant::now().checked_sub(D).unwrap_or_else(Instant::now),
            );
        }
        assert!(matches!(a.try_acquire_or_renew().await, Ok(false)));
    }

    fn stored_spec(fake: &Arc<Mutex<Fake>>) -> Option<LeaseSpec> {
        serde_json::from_value::<Lease>(stored(fake))
            .ok()
            .and_then(|l| l.spec)
    }

    #[tokio::test]
    async fn a_holder_notices_a_takeover_and_releases_on_shutdown() {
        let fake = Arc::new(Mutex::new(Fake::default()));
        let me = elector(&fake, "a");
        assert!(matches!(me.try_acquire_or_renew().await, Ok(true)));
        put_lease(&fake, "b", Timestamp::now());
        let (_tx, mut rx) = watch::channel(false);
        let (fencer, fence) = fence_pair();
        assert!(matches!(
            me.hold(&mut rx, &fencer).await,
            Err(Error::Leadership(_))
        ));
        assert!(fence.is_lost(), "a takeover trips the fence");

        put_lease(&fake, "a", Timestamp::now());
        assert!(me.release().await.is_ok());
        assert_eq!(stored(&fake)["spec"]["holderIdentity"], Value::Null);
        let (tx, mut rx) = watch::channel(false);
        let _ = tx.send(true);
        let (fencer, fence) = fence_pair();
        assert!(
            me.hold(&mut rx, &fencer).await.is_ok(),
            "shutdown ends holding cleanly"
        );
        assert!(!fence.is_lost());
    }
}
