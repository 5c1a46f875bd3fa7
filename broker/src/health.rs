//! The broker's lifecycle state and its readiness, shared by the HTTP probes and the drain
//! logic. Readiness is the phase (`Serving`) and the gates set ([`ReadinessGate`]): the
//! replicas of replicated topics in sync with their leaders
//! (`durable::replicated::sync`), so a rolling restart moves on only once a restarted
//! broker has caught up; and a users table read at least once (`auth::health`), so a broker
//! that admits no user is not ready. The gates never change what the broker serves:
//! connections, peer links and Raft RPCs are served in `Serving` whether they hold or not.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Where the broker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Listeners are coming up; not ready.
    Starting,
    /// Serving; ready (unless the gate holds).
    Serving,
    /// SIGTERM received: refusing new work, flushing queued deliveries; not ready.
    Draining,
    /// Connections closed.
    Stopped,
}

/// Something readiness waits for besides the phase.
pub trait ReadinessGate: Send + Sync {
    /// Why the broker must not report ready yet, or `None`.
    fn blocker(&self) -> Option<String>;
}

/// Why `/readyz` answers 503.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotReady {
    /// Not serving (starting, draining or stopped).
    Phase(Phase),
    /// Serving, but the gate holds, for this reason.
    Gate(String),
}

/// Shared lifecycle state. `/healthz` is OK in every phase but `Stopped`; `/readyz` only in
/// `Serving`, and only while no gate holds.
#[derive(Default)]
pub struct Health {
    phase: AtomicU8,
    gates: parking_lot::RwLock<Vec<Arc<dyn ReadinessGate>>>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("phase", &self.phase())
            .field("gates", &self.gates.read().len())
            .finish()
    }
}

impl Health {
    /// Moves to `phase`.
    pub fn set(&self, phase: Phase) {
        self.phase.store(phase as u8, Ordering::Release);
    }

    /// Makes readiness wait for `gate` too (besides the gates already set).
    pub fn gate_on(&self, gate: Arc<dyn ReadinessGate>) {
        self.gates.write().push(gate);
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.phase.load(Ordering::Acquire) {
            0 => Phase::Starting,
            1 => Phase::Serving,
            2 => Phase::Draining,
            _ => Phase::Stopped,
        }
    }

    /// Whether `/readyz` should answer 200, and why not.
    pub fn readiness(&self) -> Result<(), NotReady> {
        readiness(self.phase(), || {
            self.gates.read().iter().find_map(|g| g.blocker())
        })
    }

    /// Whether `/readyz` should answer 200.
    pub fn is_ready(&self) -> bool {
        self.readiness().is_ok()
    }

    /// Whether `/healthz` should answer 200.
    pub fn is_live(&self) -> bool {
        self.phase() != Phase::Stopped
    }
}

/// The readiness decision: ready when serving and the gate (asked only then) does not hold.
pub fn readiness(phase: Phase, gate: impl FnOnce() -> Option<String>) -> Result<(), NotReady> {
    if phase != Phase::Serving {
        return Err(NotReady::Phase(phase));
    }
    match gate() {
        Some(why) => Err(NotReady::Gate(why)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Holds(Option<&'static str>);

    impl ReadinessGate for Holds {
        fn blocker(&self) -> Option<String> {
            self.0.map(str::to_string)
        }
    }

    #[test]
    fn ready_only_while_serving_and_the_gate_does_not_hold() {
        let h = Health::default();
        assert_eq!(h.readiness(), Err(NotReady::Phase(Phase::Starting)));
        h.set(Phase::Serving);
        assert!(h.is_ready(), "no gate");
        let h = Health::default();
        h.gate_on(Arc::new(Holds(Some("catching up"))));
        h.set(Phase::Serving);
        assert_eq!(h.readiness(), Err(NotReady::Gate("catching up".into())));
        h.set(Phase::Draining);
        assert_eq!(h.readiness(), Err(NotReady::Phase(Phase::Draining)));
        assert!(h.is_live());
        let h = Health::default();
        h.gate_on(Arc::new(Holds(None)));
        h.set(Phase::Serving);
        assert!(h.is_ready());
        h.gate_on(Arc::new(Holds(Some("no users table"))));
        assert_eq!(h.readiness(), Err(NotReady::Gate("no users table".into())));
    }

    #[test]
    fn the_gate_is_not_asked_outside_serving() {
        let asked = std::cell::Cell::new(false);
        let r = readiness(Phase::Starting, || {
            asked.set(true);
            None
        });
        assert_eq!(r, Err(NotReady::Phase(Phase::Starting)));
        assert!(!asked.get());
    }
}
