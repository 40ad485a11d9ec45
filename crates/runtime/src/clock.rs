//! The engine's clock: monotonic time since the engine started, in the
//! stack's units.

use stack::Instant;

#[derive(Debug, Clone, Copy)]
pub struct Clock {
    /// The monotonic clock at the start, in microseconds.
    start_us: u64,
    /// The same moment for the standard library's sleeps ([`Clock::to_std`]),
    /// read just after: the two differ by far less than the clock's
    /// microsecond.
    start: std::time::Instant,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start_us: monotonic_micros(),
            start: std::time::Instant::now(),
        }
    }

    /// Read at least once per turn, so read directly: `Instant::elapsed`
    /// and `Duration::as_micros` cost some 80 instructions more a read in
    /// checked timespec arithmetic and a 128-bit division.
    pub fn now(&self) -> Instant {
        self.at(monotonic_micros())
    }

    /// The instant of a reading of [`monotonic_micros`] taken by the
    /// caller: what [`now`](Self::now) would have said then (a loop that
    /// reads the clock for itself hands its reading to the engine's turn
    /// that follows, instead of a second read).
    pub fn at(&self, monotonic_us: u64) -> Instant {
        Instant::from_micros(monotonic_us.saturating_sub(self.start_us))
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

/// CLOCK_MONOTONIC (the clock of `std::time::Instant` on Linux) in
/// microseconds.
pub fn monotonic_micros() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into `ts`, a live local it
    // borrows only for the call.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if r != 0 {
        // Not on Linux with CLOCK_MONOTONIC (always there); a clock stuck
        // at the start would stop the timers, not crash.
        return 0;
    }
    (ts.tv_sec as u64) * 1_000_000 + (ts.tv_nsec as u64) / 1_000
}
