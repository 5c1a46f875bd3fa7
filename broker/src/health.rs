//! The broker's lifecycle state, shared by the HTTP probes and the drain logic.

use std::sync::atomic::{AtomicU8, Ordering};

/// Where the broker is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Listeners are coming up; not ready.
    Starting,
    /// Serving; ready.
    Serving,
    /// SIGTERM received: refusing new work, flushing queued deliveries; not ready.
    Draining,
    /// Connections closed.
    Stopped,
}

/// Shared lifecycle state. `/healthz` is OK in every phase but `Stopped`; `/readyz` only in
/// `Serving`.
#[derive(Debug)]
pub struct Health(AtomicU8);

impl Default for Health {
    fn default() -> Self {
        Health(AtomicU8::new(Phase::Starting as u8))
    }
}

impl Health {
    /// Moves to `phase`.
    pub fn set(&self, phase: Phase) {
        self.0.store(phase as u8, Ordering::Release);
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        match self.0.load(Ordering::Acquire) {
            0 => Phase::Starting,
            1 => Phase::Serving,
            2 => Phase::Draining,
            _ => Phase::Stopped,
        }
    }

    /// Whether `/readyz` should answer 200.
    pub fn is_ready(&self) -> bool {
        self.phase() == Phase::Serving
    }

    /// Whether `/healthz` should answer 200.
    pub fn is_live(&self) -> bool {
        self.phase() != Phase::Stopped
    }
}
