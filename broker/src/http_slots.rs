//! The HTTP listener's connection slots: a general pool for every endpoint and a smaller pool
//! kept for the probes (`/livez`, `/healthz`, `/readyz`), each with a cap per source address,
//! so clients that hold every general slot cannot keep the kubelet's probes out (a failed
//! liveness probe restarts the pod).
//!
//! A connection takes a general slot while the pool and its source's share of it have room,
//! else a probe slot (served the probes only, briefly: see `http`), else it is refused. Holding
//! both pools takes at least `GENERAL / GENERAL_PER_SOURCE` source addresses for the general
//! pool and `PROBE / PROBE_PER_SOURCE` more for the probes' one, each connection re-opened as
//! fast as the listener closes it. The decision is a pure function ([`decide`]); [`HttpSlots`]
//! keeps the counts.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

/// The sizes of both pools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotLimits {
    /// Connections served at once for any endpoint.
    pub general: usize,
    /// Of those, from one source address.
    pub general_per_source: usize,
    /// Connections served at once for the probes only, once the general pool has no room.
    pub probe: usize,
    /// Of those, from one source address.
    pub probe_per_source: usize,
}

/// Which pool a connection was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// Any endpoint.
    General,
    /// `/livez`, `/healthz` and `/readyz` only.
    Probe,
}

/// Why a connection was refused: the label of `starling_http_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotRefusal {
    /// Both pools are full.
    ConnectionCap,
    /// The source's share of both pools is full.
    PerSourceCap,
}

/// How many connections each pool holds, overall and from the attempt's source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// General slots held.
    pub general: usize,
    /// General slots held by the source.
    pub general_from_source: usize,
    /// Probe slots held.
    pub probe: usize,
    /// Probe slots held by the source.
    pub probe_from_source: usize,
}

/// The pool for the next connection, or why it is refused.
pub fn decide(held: Held, limits: SlotLimits) -> Result<Pool, SlotRefusal> {
    if held.general < limits.general && held.general_from_source < limits.general_per_source {
        return Ok(Pool::General);
    }
    if held.probe < limits.probe && held.probe_from_source < limits.probe_per_source {
        return Ok(Pool::Probe);
    }
    let pools_have_room = held.general < limits.general || held.probe < limits.probe;
    Err(match pools_have_room {
        true => SlotRefusal::PerSourceCap,
        false => SlotRefusal::ConnectionCap,
    })
}

#[derive(Debug, Default)]
struct Counts {
    general: usize,
    probe: usize,
    /// Per source: (general, probe).
    by_source: HashMap<IpAddr, (usize, usize)>,
}

/// The listener's slots.
#[derive(Debug)]
pub struct HttpSlots {
    counts: Arc<parking_lot::Mutex<Counts>>,
    limits: SlotLimits,
}

impl HttpSlots {
    /// Empty pools of `limits`.
    pub fn new(limits: SlotLimits) -> HttpSlots {
        HttpSlots {
            counts: Arc::default(),
            limits,
        }
    }

    /// A slot for a connection from `source`, held until the returned value drops.
    pub fn take(&self, source: IpAddr) -> Result<HttpSlot, SlotRefusal> {
        let mut counts = self.counts.lock();
        let (general_from_source, probe_from_source) =
            counts.by_source.get(&source).copied().unwrap_or((0, 0));
        let held = Held {
            general: counts.general,
            general_from_source,
            probe: counts.probe,
            probe_from_source,
        };
        let pool = decide(held, self.limits)?;
        let entry = counts.by_source.entry(source).or_insert((0, 0));
        match pool {
            Pool::General => entry.0 += 1,
            Pool::Probe => entry.1 += 1,
        }
        match pool {
            Pool::General => counts.general += 1,
            Pool::Probe => counts.probe += 1,
        }
        Ok(HttpSlot {
            counts: Arc::clone(&self.counts),
            source,
            pool,
        })
    }
}

/// One connection's slot; dropping it frees it.
#[derive(Debug)]
pub struct HttpSlot {
    counts: Arc<parking_lot::Mutex<Counts>>,
    source: IpAddr,
    pool: Pool,
}

impl HttpSlot {
    /// The pool the slot is from.
    pub fn pool(&self) -> Pool {
        self.pool
    }
}

impl Drop for HttpSlot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock();
        match self.pool {
            Pool::General => counts.general = counts.general.saturating_sub(1),
            Pool::Probe => counts.probe = counts.probe.saturating_sub(1),
        }
        if let Some(entry) = counts.by_source.get_mut(&self.source) {
            match self.pool {
                Pool::General => entry.0 = entry.0.saturating_sub(1),
                Pool::Probe => entry.1 = entry.1.saturating_sub(1),
            }
            if *entry == (0, 0) {
                counts.by_source.remove(&self.source);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: SlotLimits = SlotLimits {
        general: 4,
        general_per_source: 2,
        probe: 2,
        probe_per_source: 1,
    };

    fn held(g: usize, gs: usize, p: usize, ps: usize) -> Held {
        Held {
            general: g,
            general_from_source: gs,
            probe: p,
            probe_from_source: ps,
        }
    }

    #[test]
    fn general_then_probe_then_refused() {
        assert_eq!(decide(held(0, 0, 0, 0), LIMITS), Ok(Pool::General));
        assert_eq!(decide(held(3, 1, 0, 0), LIMITS), Ok(Pool::General));
        // The general pool is full: a probe slot.
        assert_eq!(decide(held(4, 0, 0, 0), LIMITS), Ok(Pool::Probe));
        // The source's general share is full: a probe slot too.
        assert_eq!(decide(held(2, 2, 0, 0), LIMITS), Ok(Pool::Probe));
        assert_eq!(
            decide(held(4, 0, 2, 0), LIMITS),
            Err(SlotRefusal::ConnectionCap)
        );
        assert_eq!(
            decide(held(2, 2, 1, 1), LIMITS),
            Err(SlotRefusal::PerSourceCap)
        );
    }

    #[test]
    fn slots_are_counted_per_source_until_dropped() {
        let slots = HttpSlots::new(LIMITS);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = slots.take(a).unwrap();
        let a2 = slots.take(a).unwrap();
        let a3 = slots.take(a).unwrap();
        assert_eq!(
            (a1.pool(), a2.pool(), a3.pool()),
            (Pool::General, Pool::General, Pool::Probe)
        );
        assert_eq!(slots.take(a).err(), Some(SlotRefusal::PerSourceCap));
        let b1 = slots.take(b).unwrap();
        let b2 = slots.take(b).unwrap();
        assert_eq!((b1.pool(), b2.pool()), (Pool::General, Pool::General));
        // Every general slot is held: a stranger still gets a probe slot.
        let c: IpAddr = "10.0.0.3".parse().unwrap();
        let c1 = slots.take(c).unwrap();
        assert_eq!(c1.pool(), Pool::Probe);
        assert_eq!(slots.take(c).err(), Some(SlotRefusal::ConnectionCap));
        drop((a1, a2, a3, b1, b2, c1));
        let counts = slots.counts.lock();
        assert_eq!((counts.general, counts.probe), (0, 0));
        assert!(counts.by_source.is_empty());
    }
}
