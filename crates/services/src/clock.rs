//! The one source of time for lifecycle logic: [`SystemClock`] in production; [`ManualClock`]
//! (standing still) and [`ShiftedClock`] (flowing, moved forward by hand) in tests that move
//! time instead of sleeping. Times are [`Millis`] since the epoch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::model::Millis;

/// Something that tells the time.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Millis;
}

/// The wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Millis {
        system_now()
    }
}

/// Milliseconds since the Unix epoch by the wall clock (0 if the clock is before 1970).
pub fn system_now() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A clock that stands still until told to move.
#[derive(Debug)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        Self(AtomicU64::new(start))
    }

    /// Moves the clock forward by `ms`.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn set(&self, at: Millis) {
        self.0.store(at, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// The wall clock, moved forward by hand: time flows as usual, and a test jumps over a wait
/// (an expiry, a cooldown, a retention) with [`ShiftedClock::advance`] instead of sleeping.
#[derive(Debug, Default)]
pub struct ShiftedClock(AtomicU64);

impl ShiftedClock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves the clock forward by `ms`, for good.
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ShiftedClock {
    fn now(&self) -> Millis {
        system_now().saturating_add(self.0.load(Ordering::SeqCst))
    }
}
