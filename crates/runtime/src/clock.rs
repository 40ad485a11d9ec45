//! The engine's clock: monotonic time since the engine started, in the
//! stack's units.
//!
//! Read after every socket call that may send (a few times per request
//! under `ustack run`), so it reads CLOCK_MONOTONIC itself and subtracts
//! in whole microseconds: `std::time::Instant::elapsed` normalises a
//! `Duration` and `as_micros` divides a u128, about twice the cost.

use stack::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// The start as `std` sees it (for [`Clock::to_std`]).
    start: std::time::Instant,
    /// The start on CLOCK_MONOTONIC (std's `Instant` clock on Linux), in
    /// microseconds, read right after `start`.
    start_us: u64,
}

/// CLOCK_MONOTONIC in microseconds.
fn monotonic_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes one timespec to a live local; CLOCK_MONOTONIC always
    // exists on Linux (the vDSO answers without a syscall).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1_000
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start: std::time::Instant::now(),
            start_us: monotonic_us(),
        }
    }

    pub fn now(&self) -> Instant {
        Instant::from_micros(monotonic_us().saturating_sub(self.start_us))
    }

    /// The wall-clock instant of a stack instant.
    pub fn to_std(&self, t: Instant) -> std::time::Instant {
        self.start + std::time::Duration::from_micros(t.total_micros())
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
